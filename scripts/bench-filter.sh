#!/usr/bin/env bash
# Benchmark traj-filter against cat and jq on a synthetic Hermes ShareGPT corpus.
#
# Usage: scripts/bench-filter.sh [MB] [RUNS]      (defaults: $TRAJ_BENCH_MB or 500 MB,
#        $TRAJ_BENCH_RUNS or 5 runs, median; the corpus: $TRAJ_BENCH_SHAREGPT if set)
#
# Everything is measured in the same run, so the ratios hold even on a noisy machine;
# CPU seconds (user + system of the whole pipeline) are reported too, since they do not
# depend on what else the machine runs. The corpus is generated under target/bench
# (never in the repo) by scripts/gen_corpus.py and kept for the next run. Prints a
# markdown section on stdout.
set -euo pipefail

MB="${1:-${TRAJ_BENCH_MB:-500}}"
RUNS="${2:-${TRAJ_BENCH_RUNS:-5}}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="$ROOT/target/bench"
CORPUS="${TRAJ_BENCH_SHAREGPT:-$BENCH/sharegpt-${MB}mb-seed1.jsonl}"
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
LOAD=$(cut -d" " -f1-3 /proc/loadavg)

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run KEY CMD: runs CMD (a shell string) RUNS times; records the median wall seconds,
# the median CPU seconds and the max RSS (of the pipeline's biggest process).
declare -A SECS RSS CPU
run() {
    local key="$1" cmd="$2" times=() cpus=() rss=0 out w m u s
    for ((r = 0; r < RUNS; r++)); do
        out=$({ $TIME -f "%e %M %U %S" bash -c "$cmd" >/dev/null; } 2>&1 | tail -n 1)
        read -r w m u s <<<"$out"
        times+=("$w")
        cpus+=("$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')")
        if ((m > rss)); then rss=$m; fi
    done
    SECS[$key]=$(median "${times[@]}")
    CPU[$key]=$(median "${cpus[@]}")
    RSS[$key]=$rss
    echo "  $key: ${SECS[$key]} s wall, ${CPU[$key]} s CPU" >&2
}

P3="--require-reasoning --valid-tools --well-formed"
run cat "cat '$CORPUS' | cat"
run nopred "'$FILTER' -q '$CORPUS' | cat"
run nopred_stdin "cat '$CORPUS' | '$FILTER' -q | cat"
run cat3 "cat '$CORPUS' | cat | cat"
run p3 "'$FILTER' -q -j 2 $P3 '$CORPUS' | cat"
run p3_j1 "'$FILTER' -q -j 1 $P3 '$CORPUS' | cat"
run cat_small "cat '$SMALL' | cat"
# Durable output: the same bytes to a file on the same disk, synced or not.
OUT="$BENCH/filter-out.jsonl"
run o_durable "'$FILTER' -q '$CORPUS' -o '$OUT'"
run o_shell "'$FILTER' -q '$CORPUS' > '$OUT'"
run dd_fsync "dd if='$CORPUS' of='$OUT' bs=1M conv=fsync status=none"
run dd_plain "dd if='$CORPUS' of='$OUT' bs=1M status=none"
rm -f "$OUT"
if command -v jq >/dev/null; then
    run jq "jq -c . '$SMALL'"
fi
# RSS of the filter alone
RSS[p3_alone]=$($TIME -f "%M" "$FILTER" -q -j 2 $P3 "$CORPUS" 2>&1 >/dev/null | tail -n 1)
RSS[nopred_alone]=$($TIME -f "%M" "$FILTER" -q "$CORPUS" 2>&1 >/dev/null | tail -n 1)

mbs() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", b / 1e6 / s; else print "-" }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * b / a }'; }
row() { # row LABEL KEY BYTES RSS_KEY
    local k="$2" b="$3"
    echo "| $1 | ${SECS[$k]} | $(mbs "$b" "${SECS[$k]}") | $(pct "${SECS[$k]}" "${SECS[cat]}") | ${CPU[$k]} | $(mbs "$b" "${CPU[$k]}") | ${4:+${RSS[$4]} KB} |"
}

echo "## traj-filter benchmark"
echo
echo "Corpus: \`scripts/gen_corpus.py --shape sharegpt --mb $MB --seed 1\` ($((BYTES / 1000000)) MB,"
echo "$(wc -l <"$CORPUS") rows), page cache warm, median of $RUNS runs, $(nproc) cores,"
echo "$(date -u +%Y-%m-%dT%H:%MZ), load average before the run: $LOAD."
echo
echo "| command | wall s | MB/s | vs \`cat file \| cat\` (wall) | CPU s | MB per CPU-s | max RSS |"
echo "|---|---:|---:|---:|---:|---:|---:|"
row "\`cat file \| cat\`" cat "$BYTES" cat
row "\`traj-filter file \| cat\` (no predicate)" nopred "$BYTES" nopred_alone
row "\`cat file \| traj-filter \| cat\` (no predicate)" nopred_stdin "$BYTES"
row "\`cat file \| cat \| cat\`" cat3 "$BYTES"
row "\`traj-filter -j 2 $P3 file \| cat\`" p3 "$BYTES" p3_alone
row "same, \`-j 1\`" p3_j1 "$BYTES"
if [[ -n "${SECS[jq]:-}" ]]; then
    echo "| \`jq -c .\` (50 MB slice) | ${SECS[jq]} | $(mbs "$SMALL_BYTES" "${SECS[jq]}") | | ${CPU[jq]} | $(mbs "$SMALL_BYTES" "${CPU[jq]}") | ${RSS[jq]} KB |"
fi
echo
echo "Pass-through from a pipe to a pipe: \`cat file | traj-filter | cat\` runs at $(awk -v a="${SECS[cat3]}" -v b="${SECS[nopred_stdin]}" 'BEGIN { printf "%.2f", a / b }')x the"
echo "throughput of \`cat file | cat | cat\` (median wall times), every row validated on the way."
echo
echo "### Durable output (\`-o FILE\`: written behind, fsync, rename)"
echo
echo "The same bytes to a file in \`target/bench\`. \`dd ... conv=fsync\` is the physical floor: the"
echo "bytes copied and on the disk, nothing else. \`-o\` flushes every 16 MiB in the background while"
echo "it writes (docs/pipeline.md, *Durable output*), then fsyncs, renames and fsyncs the folder."
echo
echo "| command | wall s | MB/s | vs \`dd conv=fsync\` (wall) |"
echo "|---|---:|---:|---:|"
for k in o_durable o_shell dd_fsync dd_plain; do
  case $k in
    o_durable) label="\`traj-filter file -o out\` (durable)" ;;
    o_shell) label="\`traj-filter file > out\` (not synced)" ;;
    dd_fsync) label="\`dd if=file of=out bs=1M conv=fsync\`" ;;
    dd_plain) label="\`dd if=file of=out bs=1M\` (not synced)" ;;
  esac
  echo "| $label | ${SECS[$k]} | $(mbs "$BYTES" "${SECS[$k]}") | $(pct "${SECS[$k]}" "${SECS[dd_fsync]}") |"
done
echo
echo "Max RSS: the filter process alone (\`/usr/bin/time -f %M\`). CPU s: user + system time"
echo "of the whole pipeline (both \`cat\`s included); MB per CPU-s does not depend on load."
