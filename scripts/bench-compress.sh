#!/usr/bin/env bash
# Benchmark traj-compress (offline extractive summarizer) against token counting alone
# (`traj-compress --count-only`: the same parsing and tokenizer, nothing else) on the same
# corpora, in the same run, beside `cat` and `jq -c .`. Prints a markdown section.
#
# Corpora (generated once under target/bench/, never in the repo):
#   over   sharegpt rows made long (gen_corpus --long-frac 1): nearly all over 15250 tokens
#   mixed  the shared sharegpt corpus at the default budget 15250 (about half over)
#   under  the shared sharegpt corpus at a 100000-token budget: nearly every row is
#          proven under the budget by its byte length; the few longest are counted
#   under-all  the same at 131072 tokens (a 128k-context model): every row is proven
#          under by its byte length, none is tokenized
#   openai the shared OpenAI-shape corpus at 15250
#   hermes real rows: the SWE-agent runs of tests/fixtures normalised to Hermes ShareGPT
#          (traj-normalize), repeated to TRAJ_BENCH_LLM_MB (default 80) MB; for the LLM
#          path (against the stand-in endpoint, tests/standin) and the reference
#
# The reference (hermes-agent 0.19.0's trajectory_compressor.py) runs from a venv under
# target/venvs/hermes-agent (created when missing, with transformers and tiktoken for its
# HF tokenizer), with o200k as a tokenizer.json made by transformers' tiktoken converter
# from tiktoken-rs's o200k_base.tiktoken, and the same YAML config as traj-compress.
#
# Environment: TRAJ_BENCH_MB (default 100), TRAJ_BENCH_LLM_MB (default 80), TRAJ_BENCH_SHAREGPT / TRAJ_BENCH_OPENAI (set by
# scripts/bench.sh), TRAJ_BENCH_REPEAT (best of N, default 3), TRAJ_GEN_CORPUS (generator).
set -euo pipefail
cd "$(dirname "$0")/.."

mb=${TRAJ_BENCH_MB:-100}
repeat=${TRAJ_BENCH_REPEAT:-3}
gen=${TRAJ_GEN_CORPUS:-scripts/gen_corpus.py}
bin=target/release/traj-compress
standin=target/release/examples/standin
[ -x "$bin" ] && [ -x "$standin" ] && [ -x target/release/traj-normalize ] \
  || cargo build --release --locked --bin traj-compress --bin traj-normalize --example standin >&2
mkdir -p target/bench
work=$(mktemp -d target/bench/compress.XXXXXX)
trap 'rm -rf "$work"' EXIT

long=target/bench/compress-long-${mb}mb.jsonl
sg=${TRAJ_BENCH_SHAREGPT:-target/bench/sharegpt-${mb}mb.jsonl}
oa=${TRAJ_BENCH_OPENAI:-target/bench/openai-${mb}mb.jsonl}
[ -s "$long" ] || python3 "$gen" --shape sharegpt --mb "$mb" --seed 3 --long-frac 1 > "$long"
[ -s "$sg" ] || python3 "$gen" --shape sharegpt --mb "$mb" --seed 1 > "$sg"
[ -s "$oa" ] || python3 "$gen" --shape openai --mb "$mb" --seed 1 > "$oa"

# best_of CMD...: "wall cpu" seconds of the fastest of $repeat runs (cpu = user + sys);
# the run's stdout is kept in $work/last.out.
best_of() {
  local best=""
  for _ in $(seq "$repeat"); do best=$(min_of "$best" "$(timeit "$@")"); done
  echo "$best"
}
# timeit CMD...: "wall cpu" seconds of one run; its stdout goes to $work/last.out.
timeit() {
  local line r u s
  line=$( { TIMEFORMAT='%R %U %S'; time "$@" > "$work/last.out" 2>> "$work/stderr"; } 2>&1 )
  read -r r u s <<< "$line"
  echo "$r $(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')"
}
# min_of "WALL CPU" "WALL CPU": the pair with the smaller wall time.
min_of() {
  if [ -z "$1" ] || awk -v t="${2%% *}" -v b="${1%% *}" 'BEGIN { exit !(t < b) }'; then echo "$2"; else echo "$1"; fi
}
mbs() { awk -v b="$1" -v t="$2" 'BEGIN { printf "%.1f", b / 1e6 / t }'; }
mtoks() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.2f", n / 1e6 / t }'; }
# median_pct R...: the median of the ratios R, as a percentage.
median_pct() { printf '%s\n' "$@" | sort -g | awk '{ r[NR] = $1 } END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2; printf "%.0f%%", 100 * m }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * b / a }'; }
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
metric() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]][sys.argv[3]])' "$1" "$2" "$3"; }

echo "## traj-compress"
echo
echo "\`scripts/bench-compress.sh\` on $(nproc) cores, corpora of about ${mb} MB each, best of"
echo "$repeat runs (counting alone and compressing run in turn, so that a drift of the shared"
echo "machine's speed slows both); every figure in a table comes from the same run. \"count only\" is"
echo "\`traj-compress --count-only\`: the same reading, parsing and tokenizer over every turn,"
echo "nothing else: the tokenizer's own throughput on this data. traj-compress runs with the"
echo "offline extractive summarizer (no API key) and writes to a file."
echo

# 1. Tokenizer back-ends: counts must agree exactly; throughput of each.
echo "### Tokenizer back-ends (count only, over-budget corpus)"
echo
echo "| tokenizer | tokens | wall s | MB/s | Mtokens/s | CPU s | MB per CPU-s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
bytes=$(stat -L -c %s "$long")
declare -A tokens_of
for t in o200k_base tiktoken-rs:o200k_base cl100k_base tiktoken-rs:cl100k_base; do
  read -r s c <<< "$(best_of "$bin" --count-only --tokenizer "$t" "$long")"
  n=$(field "$work/last.out" tokens)
  tokens_of[$t]=$n
  echo "| $t | $n | $s | $(mbs "$bytes" "$s") | $(mtoks "$n" "$s") | $c | $(mbs "$bytes" "$c") |"
done
echo
for e in o200k_base cl100k_base; do
  if [ "${tokens_of[$e]}" = "${tokens_of[tiktoken-rs:$e]}" ]; then
    echo "- $e: bpe-openai and tiktoken-rs counts agree exactly (${tokens_of[$e]} tokens)."
  else
    echo "- $e: **counts differ**: bpe-openai ${tokens_of[$e]}, tiktoken-rs ${tokens_of[tiktoken-rs:$e]}."
  fi
done
echo

# 2. traj-compress against count only, per corpus.
echo "### traj-compress vs counting alone (o200k_base)"
echo
echo "| corpus | budget | rows | over budget | MB | cat MB/s | jq -c . MB/s | count only MB/s | traj-compress MB/s | Mtokens/s | of count only | count only MB/CPU-s | traj-compress MB/CPU-s |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
run_corpus() {
  local name=$1 file=$2 budget=$3
  local bytes s_cat s_jq s_count c_count s_comp c_comp n rows over
  bytes=$(stat -L -c %s "$file")
  read -r s_cat _ <<< "$(best_of cat "$file")"
  if command -v jq > /dev/null; then
    read -r s_jq _ <<< "$(best_of jq -c . "$file")"; s_jq=$(mbs "$bytes" "$s_jq")
  else
    s_jq="n/a"
  fi
  # Counting alone and compressing, in turn (count, compress, count, ...), the best of
  # each kept: a machine whose speed drifts slows both alike.
  # The share of count only is the median of the pairs' own ratios, so that one run
  # caught by a busy moment moves neither side alone.
  local count="" comp="" one two ratios=""
  for _ in $(seq "$repeat"); do
    one=$(timeit "$bin" --count-only "$file")
    cp "$work/last.out" "$work/count.out"
    two=$(timeit "$bin" -q "$file" --target-max-tokens "$budget" \
      -o "$work/out.jsonl" --stats "$work/m.json")
    count=$(min_of "$count" "$one")
    comp=$(min_of "$comp" "$two")
    ratios="$ratios $(awk -v a="${one%% *}" -v b="${two%% *}" 'BEGIN { printf "%.4f", a / b }')"
  done
  read -r s_count c_count <<< "$count"
  read -r s_comp c_comp <<< "$comp"
  n=$(field "$work/count.out" tokens)
  rows=$(field "$work/count.out" rows)
  over=$(( $(metric "$work/m.json" summary total_trajectories) - $(metric "$work/m.json" summary trajectories_skipped_under_target) ))
  echo "| $name | $budget | $rows | $over | $(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }') | $(mbs "$bytes" "$s_cat") | $s_jq | $(mbs "$bytes" "$s_count") | $(mbs "$bytes" "$s_comp") | $(mtoks "$n" "$s_comp") | $(median_pct $ratios) | $(mbs "$bytes" "$c_count") | $(mbs "$bytes" "$c_comp") |"
}
run_corpus over "$long" 15250
run_corpus mixed "$sg" 15250
run_corpus under "$sg" 100000
run_corpus under-all "$sg" 131072
run_corpus openai "$oa" 15250
echo
echo "\"over budget\": rows over the budget (the metrics' total minus skipped under target)."
echo "\"of count only\": traj-compress's throughput as a share of counting alone on the same"
echo "corpus, the median of the $repeat pairs' own ratios (wall time of count only over that of"
echo "the traj-compress run right after it); the MB/s columns are each side's best run."
echo "Mtokens/s: the corpus's o200k tokens over traj-compress's wall time. MB/CPU-s:"
echo "input MB per second of CPU (user + sys), which a busy shared machine disturbs less"
echo "than wall time."

# 3. The LLM path against the stand-in, beside the reference.
llm_mb=${TRAJ_BENCH_LLM_MB:-80}
venv=target/venvs/hermes-agent
py=$venv/bin/python
if ! "$py" -c 'import trajectory_compressor, transformers, tiktoken, yaml' > /dev/null 2>&1; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check hermes-agent==0.19.0 \
    transformers tokenizers tiktoken pyyaml >&2
fi
hf=target/bench/o200k-hf
if [ ! -s "$hf/tokenizer.json" ]; then
  assets=$(dirname "$(find ~/.cargo/registry/src -path '*tiktoken-rs-0.12*/assets/o200k_base.tiktoken' | head -n1)")
  "$py" - "$assets" "$hf" >&2 <<'PY'
import hashlib, os, shutil, sys
assets, out = sys.argv[1], sys.argv[2]
cache = os.path.join(out, ".tiktoken-cache")
os.makedirs(cache, exist_ok=True)
url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
shutil.copy(os.path.join(assets, "o200k_base.tiktoken"),
            os.path.join(cache, hashlib.sha1(url.encode()).hexdigest()))
os.environ["TIKTOKEN_CACHE_DIR"] = cache
import tiktoken
from transformers import PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import TikTokenConverter
enc = tiktoken.get_encoding("o200k_base")
conv = TikTokenConverter(vocab_file=os.path.join(assets, "o200k_base.tiktoken"),
                         pattern=enc._pat_str, additional_special_tokens=list(enc._special_tokens))
PreTrainedTokenizerFast(tokenizer_object=conv.converted(), eos_token="<|endoftext|>").save_pretrained(out)
PY
fi
hermes=target/bench/hermes-real-${llm_mb}mb.jsonl
if [ ! -s "$hermes" ]; then
  target/release/traj-normalize -q --messages-field history tests/fixtures/swe_agent_demo_trajs.jsonl \
    -o "$work/one.jsonl"
  one=$(stat -L -c %s "$work/one.jsonl")
  for _ in $(seq $(( llm_mb * 1000000 / one + 1 ))); do cat "$work/one.jsonl"; done > "$hermes"
fi
hbytes=$(stat -L -c %s "$hermes")
budget=4000

standin_pid=""
start_standin() { # ARGS...
  echo '{"default": {"content": "The agent inspected the repository, edited the code and ran the tests."}}' \
    > "$work/script.json"
  "$standin" --port 0 --script "$work/script.json" "$@" > "$work/addr" &
  standin_pid=$!
  for _ in $(seq 200); do [ -s "$work/addr" ] && break; sleep 0.05; done
  url=$(head -n1 "$work/addr")
}
stop_standin() { kill "$standin_pid" 2> /dev/null || true; wait "$standin_pid" 2> /dev/null || true; : > "$work/addr"; }
trap 'stop_standin; rm -rf "$work"' EXIT
config() { # URL -> the YAML config both compressors read
  cat > "$work/config.yaml" <<YAML
tokenizer:
  name: "$hf"
  trust_remote_code: false
compression:
  target_max_tokens: $budget
  summary_target_tokens: 750
summarization:
  model: "stand-in"
  base_url: "$1"
  api_key_env: "STANDIN_KEY"
  max_retries: 3
  retry_delay: 2
processing:
  num_workers: 2
  max_concurrent_requests: 50
metrics:
  enabled: true
YAML
}
export STANDIN_KEY=bench
# timed NAME CMD...: wall seconds and peak RSS (MB) of one run -> "$work/NAME.t"
timed() {
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$work/$name.rss" "$@" > "$work/$name.out" 2>> "$work/stderr"
  t1=$(date +%s.%N)
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') $(awk '{ printf "%.0f", $1 / 1024 }' "$work/$name.rss")" > "$work/$name.t"
}
traj_llm() { # NAME EXTRA...
  local name=$1; shift
  timed "$name" "$bin" -q "$hermes" -o "$work/$name.jsonl" --stats "$work/$name.m.json" \
    --config "$work/config.yaml" --tokenizer o200k_base --api-key-env STANDIN_KEY "$@"
}
calls() { metric "$1" summarization total_api_calls 2> /dev/null || echo 0; }

echo
echo "### LLM summaries: traj-compress vs the reference (hermes-agent 0.19.0)"
echo
echo "Real rows: the SWE-agent runs of \`tests/fixtures\` in Hermes ShareGPT form, repeated"
echo "to $(awk -v b="$hbytes" 'BEGIN { printf "%.0f", b / 1e6 }') MB ($(wc -l < "$hermes") rows), budget $budget tokens of o200k (traj: built-in"
echo "o200k_base; the reference: the same vocabulary as \`$hf\`), one YAML config for both"
echo "(\`max_concurrent_requests: 50\`). The stand-in (\`tests/standin\`) answers a one-line summary at 0 ms and"
echo "every 17th request with 429 + \`Retry-After: 1\`. traj-compress: the median of three runs; the reference: one run (a minute)."
echo
start_standin --rate-limit-every 17
config "$url"
# Three runs of traj-compress (a few seconds each, most of it the wait on the retries of
# the last refused summaries), the median kept; the stand-in is restarted for each, so
# each sees the same 429s.
for k in 1 2 3; do
  [ "$k" = 1 ] || { stop_standin; start_standin --rate-limit-every 17; config "$url"; }
  traj_llm "llm$k"
done
sort -n -k1,1 "$work"/llm[123].t | sed -n 2p > "$work/llm.t"
for k in 1 2 3; do
  if [ "$(cut -d' ' -f1 "$work/llm$k.t")" = "$(cut -d' ' -f1 "$work/llm.t")" ]; then
    cp "$work/llm$k.jsonl" "$work/llm.jsonl"; cp "$work/llm$k.m.json" "$work/llm.m.json"; break
  fi
done
stop_standin
start_standin --rate-limit-every 17
config "$url"
# The same rows offline (extractive summaries): what the CPU alone takes.
timed offline "$bin" -q "$hermes" -o "$work/offline.jsonl" --stats "$work/offline.m.json" \
  --config "$work/config.yaml" --tokenizer o200k_base --api-key-env NO_SUCH_KEY_SET
mkdir -p "$work/ref"
cp "$hermes" "$work/ref/rows.jsonl"
timed ref env -u HF_HUB_OFFLINE HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HERMES_HOME="$work/hh" \
  "$py" "$venv/lib/python3.11/site-packages/trajectory_compressor.py" \
  --input="$work/ref/rows.jsonl" --output="$work/ref/out.jsonl" --config="$work/config.yaml"
stop_standin
read -r s_llm r_llm < "$work/llm.t"
read -r s_off r_off < "$work/offline.t"
read -r s_ref r_ref < "$work/ref.t"
ref_rows=$(wc -l < "$work/ref/out.jsonl" 2> /dev/null || echo 0)
echo "| run | wall s | peak RSS MB | rows out | summaries (API calls) | MB/s | vs reference |"
echo "|---|---:|---:|---:|---:|---:|---:|"
echo "| reference trajectory_compressor.py | $s_ref | $r_ref | $ref_rows | n/a | $(mbs "$hbytes" "$s_ref") | 1.0× |"
echo "| traj-compress, LLM summaries | $s_llm | $r_llm | $(wc -l < "$work/llm.jsonl") | $(calls "$work/llm.m.json") | $(mbs "$hbytes" "$s_llm") | $(awk -v a="$s_ref" -v b="$s_llm" 'BEGIN { printf "%.1f×", a / b }') |"
echo "| traj-compress, offline extractive | $s_off | $r_off | $(wc -l < "$work/offline.jsonl") | 0 | $(mbs "$hbytes" "$s_off") | $(awk -v a="$s_ref" -v b="$s_off" 'BEGIN { printf "%.1f×", a / b }') |"
echo
echo "traj-compress with LLM summaries takes $(awk -v a="$s_llm" -v b="$s_off" 'BEGIN { printf "%.0f%%", 100 * a / b }') of the offline run's wall time on the same rows."
echo

# 4. Summaries at 1 s latency, 50 in flight.
lat_mb=${TRAJ_BENCH_LATENCY_MB:-40}
head -c $(( lat_mb * 1000000 )) "$hermes" | sed '$d' > "$work/lat.jsonl"
start_standin --latency-ms 1000
config "$url"
timed lat "$bin" -q "$work/lat.jsonl" -o "$work/lat.out.jsonl" --stats "$work/lat.m.json" \
  --config "$work/config.yaml" --tokenizer o200k_base --api-key-env STANDIN_KEY \
  --max-concurrent-requests 50
stop_standin
read -r s_lat r_lat < "$work/lat.t"
n_lat=$(calls "$work/lat.m.json")
rate=$(awk -v n="$n_lat" -v t="$s_lat" 'BEGIN { printf "%.1f", n / t }')
echo "### LLM summaries at 1 s latency, 50 in flight"
echo
echo "The first $lat_mb MB of the same rows; the stand-in answers every request after 1 s."
echo
echo "| summaries | wall s | summaries/s | of 50/s | peak RSS MB |"
echo "|---:|---:|---:|---:|---:|"
echo "| $n_lat | $s_lat | $rate | $(awk -v r="$rate" 'BEGIN { printf "%.0f%%", 100 * r / 50 }') | $r_lat |"
echo

# 5. An HF tokenizer.json of the o200k vocabulary against the built-in o200k.
echo "### Token counting: an o200k tokenizer.json vs the built-in o200k_base"
echo
echo "\`traj-compress --count-only\` on the over-budget corpus; \`$hf/tokenizer.json\` is o200k"
echo "converted by transformers (byte-level BPE, same vocabulary, merges and pattern)."
echo
echo "| tokenizer | tokens | wall s | MB/s | peak RSS MB | of built-in |"
echo "|---|---:|---:|---:|---:|---:|"
timed tok_builtin "$bin" --count-only --tokenizer o200k_base "$long"
timed tok_hf "$bin" --count-only --tokenizer "$hf/tokenizer.json" "$long"
read -r s_b r_b < "$work/tok_builtin.t"
read -r s_h r_h < "$work/tok_hf.t"
n_b=$(field "$work/tok_builtin.out" tokens)
n_h=$(field "$work/tok_hf.out" tokens)
echo "| o200k_base | $n_b | $s_b | $(mbs "$bytes" "$s_b") | $r_b | 100% |"
echo "| $hf/tokenizer.json | $n_h | $s_h | $(mbs "$bytes" "$s_h") | $r_h | $(pct "$s_h" "$s_b") |"
echo
