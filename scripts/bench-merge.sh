#!/usr/bin/env bash
# Benchmark traj-merge: a corpus cut into shards (rows shuffled between them, 10% of
# rows duplicated) merged back, in memory and with a small buffer that forces spilling,
# and the whole corpus as one file with the default buffer (the before/after shape).
#
# Usage: scripts/bench-merge.sh [MB] [RUNS] [NAME=DIR]...
#   MB        corpus size (default $TRAJ_BENCH_MB or 500)
#   RUNS      rounds (default 3); each round runs every command once, one after the
#             other (interleaved: a change of load hits all of them), the best is kept
#   NAME=DIR  another build's traj-merge (DIR/traj-merge) measured beside this tree's in
#             the same rounds, e.g. round1=../old/target/release main=../main/target/release
#
# Corpus and shards live under target/bench (never in the repo). Prints a markdown
# section on stdout, beside `cat shards | cat` and `sort` of the same bytes. Every
# build's merged output is checked to equal the corpus byte for byte.
set -euo pipefail

MB="${1:-${TRAJ_BENCH_MB:-500}}"
RUNS="${2:-3}"
shift $(( $# < 2 ? $# : 2 ))
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="$ROOT/target/bench"
CORPUS="$BENCH/sharegpt-${MB}mb-seed2.jsonl"
SHARDS="$BENCH/merge-shards-${MB}mb"
TIME=/usr/bin/time

builds=("this tree=$ROOT/target/release")
for b in "$@"; do
    [[ "$b" == *=* && -x "${b#*=}/traj-merge" ]] || { echo "bench-merge.sh: $b: want NAME=DIR with DIR/traj-merge" >&2; exit 2; }
    builds+=("$b")
done

mkdir -p "$BENCH"
cargo build --release --quiet --locked --bin traj-merge --manifest-path "$ROOT/Cargo.toml" >&2
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
CBYTES=$(stat -L -c %s "$CORPUS")
ROWS=$(wc -l <"$CORPUS")
cat "$SHARDS"/batch_*.jsonl "$CORPUS" >/dev/null
LOAD=$(cut -d" " -f1-3 /proc/loadavg)
OUT="$BENCH/merged.jsonl"

# key | label | input bytes | command
specs=(
    "cat|\`cat batch_* \\| cat\`|$BYTES|cat '$SHARDS'/batch_*.jsonl | cat"
    "sort|\`sort -S 64M batch_*\`|$BYTES|LC_ALL=C sort -S 64M -T '$BENCH' '$SHARDS'/batch_*.jsonl"
)
for i in "${!builds[@]}"; do
    bin="${builds[$i]#*=}/traj-merge"
    specs+=(
        "mem$i|\`traj-merge dir --buffer-size 1G -o FILE\` (in memory)|$BYTES|'$bin' -q '$SHARDS' --buffer-size 1G -o '$OUT.$i'"
        "spill$i|\`traj-merge dir --buffer-size 16M -o FILE\` (spills)|$BYTES|'$bin' -q '$SHARDS' --buffer-size 16M --tmp-dir '$BENCH' -o '$OUT.$i'"
        "one$i|\`traj-merge -q corpus > /dev/null\` (default 64M buffer)|$CBYTES|'$bin' -q '$CORPUS'"
    )
done

declare -A SECS RSS
for ((r = 0; r < RUNS; r++)); do
    for spec in "${specs[@]}"; do
        IFS='|' read -r key label bytes cmd <<<"${spec//\\|/$'\x1f'}"
        cmd=${cmd//$'\x1f'/|}
        read -r w m < <({ $TIME -f "%e %M" bash -c "$cmd" >/dev/null; } 2>&1 | tail -n 1)
        if [[ -z "${SECS[$key]:-}" ]] || awk -v a="$w" -v b="${SECS[$key]}" 'BEGIN { exit !(a < b) }'; then
            SECS[$key]=$w
        fi
        if ((m > ${RSS[$key]:-0})); then RSS[$key]=$m; fi
        echo "  round $r $key: $w s" >&2
        if [[ $key == mem* || $key == spill* ]]; then
            # correctness: every row once, in order
            cmp -s "$OUT.${key//[a-z]/}" "$CORPUS" \
                || { echo "$key: merged output differs from the corpus" >&2; exit 1; }
        fi
    done
done
rm -f "$OUT".*

mbs() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", b / 1e6 / s; else print "-" }'; }
echo "## traj-merge benchmark"
echo
echo "Corpus: \`scripts/gen_corpus.py --shape sharegpt --mb $MB --seed 2\` ($((CBYTES / 1000000)) MB), and the"
echo "same cut into 4 batch files with 10% of rows duplicated ($((BYTES / 1000000)) MB, $ROWS distinct rows);"
echo "\`scripts/bench-merge.sh $MB $RUNS${*:+ $*}\`: $RUNS rounds, every command once per round"
echo "(interleaved), best round kept; $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load average before the run: $LOAD."
echo "Every build's merged output is checked to equal the corpus byte for byte."
echo
echo "| command | wall s | MB/s | max RSS | vs this tree |"
echo "|---|---:|---:|---:|---:|"
for spec in "${specs[@]}"; do
    IFS='|' read -r key label bytes cmd <<<"${spec//\\|/$'\x1f'}"
    label=${label//$'\x1f'/\\|}
    ratio=""
    if [[ $key =~ ^(mem|spill|one)([0-9]+)$ ]]; then
        label="${builds[${BASH_REMATCH[2]}]%%=*}: $label"
        ratio=$(awk -v a="${SECS[${BASH_REMATCH[1]}0]}" -v b="${SECS[$key]}" 'BEGIN { printf "%.2f", a / b }')
    fi
    echo "| $label | ${SECS[$key]} | $(mbs "$bytes" "${SECS[$key]}") | ${RSS[$key]} KB | $ratio |"
done
echo
echo "\"vs this tree\": the build's throughput as a share of this tree's on the same command"
echo "(below 1: slower)."
