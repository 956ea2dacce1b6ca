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
#
# Environment: TRAJ_BENCH_MB (default 100), TRAJ_BENCH_SHAREGPT / TRAJ_BENCH_OPENAI (set by
# scripts/bench.sh), TRAJ_BENCH_REPEAT (best of N, default 2), TRAJ_GEN_CORPUS (generator).
set -euo pipefail
cd "$(dirname "$0")/.."

mb=${TRAJ_BENCH_MB:-100}
repeat=${TRAJ_BENCH_REPEAT:-2}
gen=${TRAJ_GEN_CORPUS:-scripts/gen_corpus.py}
bin=target/release/traj-compress
[ -x "$bin" ] || cargo build --release --locked --bin traj-compress >&2
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
  local best="" cpu="" line r u s
  for _ in $(seq "$repeat"); do
    line=$( { TIMEFORMAT='%R %U %S'; time "$@" > "$work/last.out" 2>> "$work/stderr"; } 2>&1 )
    read -r r u s <<< "$line"
    if [ -z "$best" ] || awk -v t="$r" -v b="$best" 'BEGIN { exit !(t < b) }'; then
      best=$r; cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
    fi
  done
  echo "$best $cpu"
}
mbs() { awk -v b="$1" -v t="$2" 'BEGIN { printf "%.1f", b / 1e6 / t }'; }
mtoks() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.2f", n / 1e6 / t }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * b / a }'; }
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
metric() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]][sys.argv[3]])' "$1" "$2" "$3"; }

echo "## traj-compress"
echo
echo "\`scripts/bench-compress.sh\` on $(nproc) cores, corpora of about ${mb} MB each, best of"
echo "$repeat runs; every figure in a table comes from the same run. \"count only\" is"
echo "\`traj-compress --count-only\`: the same reading, parsing and tokenizer over every turn,"
echo "nothing else: the tokenizer's own throughput on this data. traj-compress runs with the"
echo "offline extractive summarizer (no API key) and writes to a file."
echo

# 1. Tokenizer back-ends: counts must agree exactly; throughput of each.
echo "### Tokenizer back-ends (count only, over-budget corpus)"
echo
echo "| tokenizer | tokens | wall s | MB/s | Mtokens/s | CPU s | MB per CPU-s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
bytes=$(stat -c %s "$long")
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
  bytes=$(stat -c %s "$file")
  read -r s_cat _ <<< "$(best_of cat "$file")"
  if command -v jq > /dev/null; then
    read -r s_jq _ <<< "$(best_of jq -c . "$file")"; s_jq=$(mbs "$bytes" "$s_jq")
  else
    s_jq="n/a"
  fi
  read -r s_count c_count <<< "$(best_of "$bin" --count-only "$file")"
  n=$(field "$work/last.out" tokens)
  rows=$(field "$work/last.out" rows)
  read -r s_comp c_comp <<< "$(best_of "$bin" -q "$file" --target-max-tokens "$budget" \
    -o "$work/out.jsonl" --stats "$work/m.json")"
  over=$(( $(metric "$work/m.json" summary total_trajectories) - $(metric "$work/m.json" summary trajectories_skipped_under_target) ))
  echo "| $name | $budget | $rows | $over | $(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }') | $(mbs "$bytes" "$s_cat") | $s_jq | $(mbs "$bytes" "$s_count") | $(mbs "$bytes" "$s_comp") | $(mtoks "$n" "$s_comp") | $(pct "$s_comp" "$s_count") | $(mbs "$bytes" "$c_count") | $(mbs "$bytes" "$c_comp") |"
}
run_corpus over "$long" 15250
run_corpus mixed "$sg" 15250
run_corpus under "$sg" 100000
run_corpus under-all "$sg" 131072
run_corpus openai "$oa" 15250
echo
echo "\"over budget\": rows over the budget (the metrics' total minus skipped under target)."
echo "\"of count only\": traj-compress's throughput as a share of counting alone on the same"
echo "corpus. Mtokens/s: the corpus's o200k tokens over traj-compress's wall time. MB/CPU-s:"
echo "input MB per second of CPU (user + sys), which a busy shared machine disturbs less"
echo "than wall time."
