#!/usr/bin/env bash
# Benchmark traj-merge: a corpus cut into shards (rows shuffled between them, 10% of
# rows duplicated) merged back, in memory and with a small buffer that forces spilling.
#
# Usage: scripts/bench-merge.sh [MB] [RUNS]      (defaults: $TRAJ_BENCH_MB or 500 MB, 3 runs, median)
#
# Corpus and shards live under target/bench (never in the repo). Prints a markdown
# section on stdout, beside `cat shards | cat` and `sort` of the same bytes.
set -euo pipefail

MB="${1:-${TRAJ_BENCH_MB:-500}}"
RUNS="${2:-3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="$ROOT/target/bench"
CORPUS="$BENCH/sharegpt-${MB}mb-seed2.jsonl"
SHARDS="$BENCH/merge-shards-${MB}mb"
MERGE="$ROOT/target/release/traj-merge"
TIME=/usr/bin/time

mkdir -p "$BENCH"
cargo build --release --quiet --bin traj-merge --manifest-path "$ROOT/Cargo.toml" >&2
if [[ ! -s "$CORPUS" ]]; then
    echo "generating $CORPUS ..." >&2
    python3 "$ROOT/scripts/gen_corpus.py" --shape sharegpt --mb "$MB" --seed 2 >"$CORPUS"
fi
if [[ ! -d "$SHARDS" ]]; then
    mkdir -p "$SHARDS"
    # 4 shards; row i goes to shard (i * 7) % 4; every 10th row is written twice
    awk -v dir="$SHARDS" '{ f = dir "/batch_" ((NR * 7) % 4) ".jsonl"; print > f;
        if (NR % 10 == 0) print > (dir "/batch_" ((NR + 1) % 4) ".jsonl") }' "$CORPUS"
fi
BYTES=$(du -cb "$SHARDS"/batch_*.jsonl | tail -n 1 | cut -f1)
ROWS=$(wc -l <"$CORPUS")
cat "$SHARDS"/batch_*.jsonl >/dev/null
LOAD=$(cut -d" " -f1-3 /proc/loadavg)

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A SECS RSS
run() {
    local key="$1" cmd="$2" times=() rss=0 out w m
    for ((r = 0; r < RUNS; r++)); do
        out=$({ $TIME -f "%e %M" bash -c "$cmd" >/dev/null; } 2>&1 | tail -n 1)
        read -r w m <<<"$out"
        times+=("$w")
        if ((m > rss)); then rss=$m; fi
    done
    SECS[$key]=$(median "${times[@]}")
    RSS[$key]=$rss
    echo "  $key: ${SECS[$key]} s" >&2
}

OUT="$BENCH/merged.jsonl"
run cat "cat '$SHARDS'/batch_*.jsonl | cat"
run sort "LC_ALL=C sort -S 64M -T '$BENCH' '$SHARDS'/batch_*.jsonl"
run mem "'$MERGE' -q '$SHARDS' --buffer-size 1G -o '$OUT'"
run spill "'$MERGE' -q '$SHARDS' --buffer-size 16M --tmp-dir '$BENCH' -o '$OUT'"
# correctness: every row once, in order
got=$(wc -l <"$OUT")
[[ "$got" == "$ROWS" ]] || { echo "merged $got rows, want $ROWS" >&2; exit 1; }
cmp -s "$OUT" "$CORPUS" || { echo "merged output differs from the corpus" >&2; exit 1; }

mbs() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", b / 1e6 / s; else print "-" }'; }
echo "## traj-merge benchmark"
echo
echo "Corpus: \`scripts/gen_corpus.py --shape sharegpt --mb $MB --seed 2\` cut into 4 batch files"
echo "with 10% of rows duplicated ($((BYTES / 1000000)) MB, $ROWS distinct rows); median of $RUNS runs,"
echo "$(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load average before the run: $LOAD."
echo "The merged output is checked to equal the corpus byte for byte."
echo
echo "| command | wall s | MB/s | max RSS |"
echo "|---|---:|---:|---:|"
echo "| \`cat batch_* \| cat\` | ${SECS[cat]} | $(mbs "$BYTES" "${SECS[cat]}") | ${RSS[cat]} KB |"
echo "| \`sort -S 64M batch_*\` | ${SECS[sort]} | $(mbs "$BYTES" "${SECS[sort]}") | ${RSS[sort]} KB |"
echo "| \`traj-merge dir --buffer-size 1G\` (in memory) | ${SECS[mem]} | $(mbs "$BYTES" "${SECS[mem]}") | ${RSS[mem]} KB |"
echo "| \`traj-merge dir --buffer-size 16M\` (spills) | ${SECS[spill]} | $(mbs "$BYTES" "${SECS[spill]}") | ${RSS[spill]} KB |"
