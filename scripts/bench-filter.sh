#!/usr/bin/env bash
# Benchmark traj-filter against cat and jq on a synthetic Hermes ShareGPT corpus.
#
# Usage: scripts/bench-filter.sh [MB] [RUNS]      (defaults: 500 MB, 3 runs, median)
#
# Everything is measured in the same run, so the ratios hold even on a noisy machine.
# The corpus is generated under target/bench (never in the repo) by scripts/gen_corpus.py
# and kept for the next run. Prints a markdown section on stdout.
set -euo pipefail

MB="${1:-500}"
RUNS="${2:-3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="$ROOT/target/bench"
CORPUS="$BENCH/sharegpt-${MB}mb-seed1.jsonl"
SMALL="$BENCH/sharegpt-50mb-slice.jsonl"
FILTER="$ROOT/target/release/traj-filter"
TIME=/usr/bin/time

mkdir -p "$BENCH"
cargo build --release --quiet --bin traj-filter --manifest-path "$ROOT/Cargo.toml" >&2
if [[ ! -s "$CORPUS" ]]; then
    echo "generating $CORPUS ..." >&2
    python3 "$ROOT/scripts/gen_corpus.py" --shape sharegpt --mb "$MB" --seed 1 >"$CORPUS"
fi
head -c 50000000 "$CORPUS" | head -n -1 >"$SMALL" # whole lines only
BYTES=$(stat -L -c %s "$CORPUS")
SMALL_BYTES=$(stat -L -c %s "$SMALL")
cat "$CORPUS" >/dev/null # warm the page cache

# measure LABEL BYTES CMD: runs CMD (a shell string) RUNS times; prints
# "median_seconds max_rss_kb" (RSS of the biggest process in the pipeline).
measure() {
    local bytes="$1" cmd="$2" times=() rss=0 out
    for ((r = 0; r < RUNS; r++)); do
        out=$({ $TIME -f "%e %M" bash -c "$cmd" >/dev/null; } 2>&1 | tail -n 1)
        times+=("${out% *}")
        ((${out#* } > rss)) && rss=${out#* }
    done
    local med
    med=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "$med $rss"
}

declare -A SECS RSS
run() {
    local key="$1" bytes="$2" cmd="$3" res
    res=$(measure "$bytes" "$cmd")
    SECS[$key]=${res% *}
    RSS[$key]=${res#* }
    echo "  $key: ${SECS[$key]} s" >&2
}

P3="--require-reasoning --valid-tools --well-formed"
run cat "$BYTES" "cat '$CORPUS' | cat"
run nopred "$BYTES" "'$FILTER' -q '$CORPUS' | cat"
run nopred_stdin "$BYTES" "cat '$CORPUS' | '$FILTER' -q | cat"
run p3 "$BYTES" "'$FILTER' -q -j 2 $P3 '$CORPUS' | cat"
run p3_j1 "$BYTES" "'$FILTER' -q -j 1 $P3 '$CORPUS' | cat"
run cat_small "$SMALL_BYTES" "cat '$SMALL' | cat"
if command -v jq >/dev/null; then
    run jq "$SMALL_BYTES" "jq -c . '$SMALL'"
fi
# RSS of the filter alone (the figures above include the pipeline's largest process)
RSS[p3_alone]=$($TIME -f "%M" "$FILTER" -q -j 2 $P3 "$CORPUS" 2>&1 >/dev/null | tail -n 1)
RSS[nopred_alone]=$($TIME -f "%M" "$FILTER" -q "$CORPUS" 2>&1 >/dev/null | tail -n 1)

mbs() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1e6 / s }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * b / a }'; }

cat <<EOF
## traj-filter benchmark

Corpus: \`scripts/gen_corpus.py --shape sharegpt --mb $MB --seed 1\` ($((BYTES / 1000000)) MB,
$(wc -l <"$CORPUS") rows), page cache warm, median of $RUNS runs, $(nproc) cores
($(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)).

| command | seconds | MB/s | vs \`cat file \| cat\` | max RSS |
|---|---:|---:|---:|---:|
| \`cat file \| cat\` | ${SECS[cat]} | $(mbs "$BYTES" "${SECS[cat]}") | 100% | ${RSS[cat]} KB |
| \`traj-filter file \| cat\` (no predicate) | ${SECS[nopred]} | $(mbs "$BYTES" "${SECS[nopred]}") | $(pct "${SECS[nopred]}" "${SECS[cat]}") | ${RSS[nopred_alone]} KB |
| \`cat file \| traj-filter \| cat\` (no predicate) | ${SECS[nopred_stdin]} | $(mbs "$BYTES" "${SECS[nopred_stdin]}") | $(pct "${SECS[nopred_stdin]}" "${SECS[cat]}") | |
| \`traj-filter -j 2 $P3 file \| cat\` | ${SECS[p3]} | $(mbs "$BYTES" "${SECS[p3]}") | $(pct "${SECS[p3]}" "${SECS[cat]}") | ${RSS[p3_alone]} KB |
| same, \`-j 1\` | ${SECS[p3_j1]} | $(mbs "$BYTES" "${SECS[p3_j1]}") | $(pct "${SECS[p3_j1]}" "${SECS[cat]}") | |
EOF
if [[ -n "${SECS[jq]:-}" ]]; then
    echo "| \`jq -c .\` (50 MB slice; \`cat \| cat\` on it: $(mbs "$SMALL_BYTES" "${SECS[cat_small]}") MB/s) | ${SECS[jq]} | $(mbs "$SMALL_BYTES" "${SECS[jq]}") | | ${RSS[jq]} KB |"
fi
echo
echo "Max RSS: the filter process alone (\`/usr/bin/time\`), not the pipeline."
