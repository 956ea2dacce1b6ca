#!/usr/bin/env bash
# How cost grows: every data stage on real rows at 10 MB, 100 MB and 1 GB of input, with
# one worker thread and with two, its throughput (MB/s of input) and peak RSS.
#
# Usage: scripts/bench-scale.sh [SIZES] [RUNS]
#   SIZES  input sizes in MB, quoted (default "10 100 1000")
#   RUNS   runs per command (default 3; 2 at 1 GB; the best time is kept, with the
#          largest RSS of its runs)
#
# Corpus: `scripts/gen_corpus.py --shape real` (hermes-agent Hermes rows and long
# mini-swe-agent OpenAI runs from tests/fixtures, half the bytes each), normalized once to
# Hermes ShareGPT (the rows filter, merge, compress and report read); the prompts of
# tests/fixtures/prompts_glaive.jsonl repeated to the same size for traj-sample-tools.
# Everything lives under target/bench (never in the repo). TRAJ_BENCH_BIN_DIR=DIR runs
# DIR's binaries. Prints a markdown section on stdout; progress goes to stderr.
set -euo pipefail

SIZES=${1:-"10 100 1000"}
RUNS_SMALL=${2:-3}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib-bench.sh
source "$ROOT/scripts/lib-bench.sh"
mkdir -p "$BENCH"
if [[ -z ${TRAJ_BENCH_BIN_DIR:-} ]]; then
    cargo build --release --quiet --locked --bins --manifest-path "$ROOT/Cargo.toml" >&2
fi
# The floor of a stage that rewrites rows (parse each line, write it back), always this tree's.
FLOOR="$ROOT/target/release/examples/json-floor"
cargo build --release --quiet --locked --example json-floor --manifest-path "$ROOT/Cargo.toml" >&2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/traj-bench-scale.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# corpora MB: raw, normalized and prompt files of MB megabytes (made once).
corpora() {
    local mb=$1
    RAW="$BENCH/scale-real-${mb}mb.jsonl"
    NORM="$BENCH/scale-hermes-${mb}mb.jsonl"
    PROMPTS="$BENCH/scale-prompts-${mb}mb.jsonl"
    if [[ ! -s $RAW ]]; then
        echo "bench-scale: generating $RAW" >&2
        python3 "$ROOT/scripts/gen_corpus.py" --shape real --mb "$mb" --seed 1 >"$RAW.tmp"
        mv "$RAW.tmp" "$RAW"
    fi
    if [[ ! -s $NORM ]]; then
        "$DIR/traj-normalize" -q --on-error skip --rejects "$WORK/rejects.jsonl" "$RAW" -o "$NORM"
    fi
    if [[ ! -s $PROMPTS ]]; then
        python3 - "$ROOT/tests/fixtures/prompts_glaive.jsonl" "$mb" >"$PROMPTS.tmp" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
limit, n, i = float(sys.argv[2]) * 1e6, 0, 0
while n < limit:
    r = dict(rows[i % len(rows)]); r["id"] = f"p-{i}"
    line = json.dumps(r, ensure_ascii=False) + "\n"
    sys.stdout.write(line); n += len(line.encode()); i += 1
PY
        mv "$PROMPTS.tmp" "$PROMPTS"
    fi
}

# run MB CMD: "seconds rss_kb" of CMD (the best of the runs, the largest RSS).
run() {
    local mb=$1 cmd=$2 t="" rss=0 w m n t0
    n=$RUNS_SMALL
    ((mb >= 1000)) && n=2
    for ((r = 0; r < n; r++)); do
        t0=$(date +%s.%N)
        $TIME -f "%M" -o "$WORK/time" bash -c "$cmd" >/dev/null 2>"$WORK/err" ||
            { echo "bench-scale: failed: $cmd" >&2; cat "$WORK/err" >&2; exit 1; }
        w=$(echo "$(date +%s.%N) - $t0" | bc -l)
        read -r m <"$WORK/time"
        if [[ -z $t ]] || awk -v a="$w" -v b="$t" 'BEGIN { exit !(a < b) }'; then t=$w; fi
        ((m > rss)) && rss=$m
    done
    echo "$t $rss"
}

# The stages: NAME|JOBS|INPUT (raw, norm or prompts)|ARGS (the input file follows).
STAGES=(
    "traj-normalize|1|raw|-q -j 1 --on-error skip --rejects $WORK/r.jsonl"
    "traj-normalize|2|raw|-q -j 2 --on-error skip --rejects $WORK/r.jsonl"
    "traj-filter --well-formed --valid-tools|1|norm|-q -j 1 --well-formed --valid-tools"
    "traj-filter --well-formed --valid-tools|2|norm|-q -j 2 --well-formed --valid-tools"
    "jq -c .|-|raw|-c ."
    "json-floor (serde_json parse + write)|1|raw|1"
    "json-floor (serde_json parse + write)|2|raw|2"
    "traj-compress --count-only (8,000 tokens)|1|norm|-q -j 1 --count-only --target-max-tokens 8000"
    "traj-compress --count-only (8,000 tokens)|2|norm|-q -j 2 --count-only --target-max-tokens 8000"
    "traj-compress --offline (8,000 tokens)|1|norm|-q -j 1 --offline --target-max-tokens 8000 -o $WORK/c.jsonl"
    "traj-compress --offline (8,000 tokens)|2|norm|-q -j 2 --offline --target-max-tokens 8000 -o $WORK/c.jsonl"
    "traj-merge --key id|-|norm|-q --key id"
    "traj-report|1|norm|-q -j 1 -o $WORK/page.html"
    "traj-report|2|norm|-q -j 2 -o $WORK/page.html"
    "traj-sample-tools|-|prompts|-q --seed 1"
)

declare -A SECS RSS BYTES
for mb in $SIZES; do
    corpora "$mb"
    cat "$RAW" "$NORM" "$PROMPTS" >/dev/null # warm the page cache
    for s in "${STAGES[@]}"; do
        IFS='|' read -r label jobs input args <<<"$s"
        case $input in raw) f=$RAW ;; norm) f=$NORM ;; prompts) f=$PROMPTS ;; esac
        bin=${label%% *}
        case $bin in jq) ;; json-floor) bin=$FLOOR ;; *) bin="$DIR/$bin" ;; esac
        echo "bench-scale: $label -j $jobs, $mb MB" >&2
        read -r t rss < <(run "$mb" "'$bin' $args '$f'")
        SECS[$s/$mb]=$t
        RSS[$s/$mb]=$(mb "$rss")
        BYTES[$s/$mb]=$(stat -L -c %s "$f")
    done
done

read -r -a SZ <<<"$SIZES"
# rate STAGE MB [DIGITS]: the stage's MB/s at MB megabytes of input (DIGITS decimals, 0).
rate() { awk -v b="${BYTES[$1/$2]}" -v t="${SECS[$1/$2]}" -v d="${3:-0}" 'BEGIN { printf "%.*f", d, b / 1e6 / (t < 0.01 ? 0.01 : t) }'; }
label_mb() { if (($1 >= 1000)); then echo "$(($1 / 1000)) GB"; else echo "$1 MB"; fi; }
echo "## How cost grows: each stage at $(for m in "${SZ[@]}"; do printf '%s, ' "$(label_mb "$m")"; done | sed 's/, $//')"
echo
echo "\`scripts/bench-scale.sh\` on $(date -u +%Y-%m-%d): $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "at the end. Real rows (\`gen_corpus.py --shape real\`: hermes-agent Hermes rows and long"
echo "mini-swe-agent OpenAI runs, half the bytes each); traj-normalize reads them as they are"
echo "(\`--on-error skip --rejects\`: the rows whose tool call is a Python dict go to the rejects),"
echo "the other data stages read them normalized (Hermes ShareGPT); traj-sample-tools reads"
echo "the glaive prompts. MB/s is of the input (wall time of the whole process); the best of"
echo "$RUNS_SMALL runs below 1 GB, of 2 at 1 GB;"
echo "RSS is the peak resident set. \`-j -\`: the stage has one worker thread by design."
echo
last=${SZ[${#SZ[@]} - 1]}
prev=${SZ[${#SZ[@]} - 2]:-$last}
header="| stage | -j |"
rule="|---|---:|"
for m in "${SZ[@]}"; do header+=" $(label_mb "$m") MB/s |"; rule+="---:|"; done
for m in "${SZ[@]}"; do header+=" RSS MB at $(label_mb "$m") |"; rule+="---:|"; done
header+=" MB/s, $(label_mb "$last") / $(label_mb "$prev") | RSS, $(label_mb "$last") / $(label_mb "$prev") |"
rule+="---:|---:|"
echo "$header"
echo "$rule"
for s in "${STAGES[@]}"; do
    IFS='|' read -r label jobs _ _ <<<"$s"
    row="| \`$label\` | $jobs |"
    for m in "${SZ[@]}"; do
        row+=" $(rate "$s" "$m") |"
    done
    for m in "${SZ[@]}"; do row+=" ${RSS[$s/$m]} |"; done
    row+=" $(awk -v a="$(rate "$s" "$prev" 6)" -v b="$(rate "$s" "$last" 6)" 'BEGIN { printf "%.2f", b / (a < 1 ? 1 : a) }') |"
    row+=" $(awk -v a="${RSS[$s/$prev]}" -v b="${RSS[$s/$last]}" 'BEGIN { printf "%.1f", b / (a < 1 ? 1 : a) }') |"
    echo "$row"
done
echo
echo "Linear time shows as a throughput ratio near 1 between the two largest inputs (the"
echo "smallest pays a fixed start-up cost: the BPE tables, the page's template); flat memory"
echo "as an RSS ratio near 1. \`jq -c .\` on the raw rows is the baseline of traj-normalize;"
echo "\`json-floor\` (\`examples/json_floor.rs\`: traj-normalize's pipeline, each line parsed into"
echo "a serde_json value and written back, nothing checked or converted) the least any stage"
echo "that rewrites rows pays;"
echo "\`--count-only\` (counting the tokens of every turn, no output) the baseline of \`--offline\`."
echo "The one stage whose memory grows with its input is \`traj-merge --key\`, by design: to drop"
echo "duplicates it keeps every distinct key seen (about 64 bytes a key, docs/merge.md), so it"
echo "grows with the number of rows, not their bytes; the rest of its memory, the sort buffer"
echo "(about 100 bytes a row), stops at \`--buffer-size\` (64 MiB by default) and spills to disk."
