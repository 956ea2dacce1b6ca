#!/usr/bin/env bash
# Benchmark traj-normalize beside `cat` and `jq -c .` on the same files, in the same run.
#
# Usage: scripts/bench-normalize.sh [--mb N] [--runs K] [--real-mb M] [--against DIR]
#   --mb N        corpus size in MB when generating (default $TRAJ_BENCH_MB or 500; 0
#                 leaves the generated corpora out)
#   --runs K      runs per command; the median time is reported (default 3; jq runs once)
#   --real-mb M   size of the real-rows corpus (default 300; 0 leaves it out)
#   --against DIR also time DIR/traj-normalize (another build) on the real rows, in turn
#                 with this one, K rounds, and print the best of each beside the other
#
# Corpora: $TRAJ_BENCH_OPENAI and $TRAJ_BENCH_SHAREGPT when set (scripts/bench.sh sets
# them), else generated with scripts/gen_corpus.py under target/bench/ (never in the repo).
# The real-rows corpus: the public hermes-agent and SWE-agent rows of tests/fixtures (the
# SWE-agent runs first turned into Hermes rows by traj-normalize --messages-field
# history), repeated to M MB: long rows of up to several hundred KB, the issue-18 case.
# Uses the release binary in target/release (build it first: `make build`).
# Prints a markdown section on stdout; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

mb="${TRAJ_BENCH_MB:-500}"
runs=3
real_mb=300
against=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --real-mb) real_mb="$2"; shift 2 ;;
    --against) against="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-normalize: unknown argument $1" >&2; exit 2 ;;
  esac
done

bin=target/release/traj-normalize
[ -x "$bin" ] || { echo "bench-normalize: $bin missing; run make build" >&2; exit 1; }
command -v jq >/dev/null || { echo "bench-normalize: jq missing (scripts/setup.sh)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-normalize: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }

mkdir -p target/bench
openai="${TRAJ_BENCH_OPENAI:-target/bench/openai-${mb}mb.jsonl}"
sharegpt="${TRAJ_BENCH_SHAREGPT:-target/bench/sharegpt-${mb}mb.jsonl}"
corpora=()
if [ "$mb" -gt 0 ]; then
  [ -s "$openai" ] || python3 scripts/gen_corpus.py --shape openai --mb "$mb" --seed 1 > "$openai"
  [ -s "$sharegpt" ] || python3 scripts/gen_corpus.py --shape sharegpt --mb "$mb" --seed 1 > "$sharegpt"
  corpora=("$openai" "$sharegpt")
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$real_mb" -gt 0 ]; then
  real=target/bench/real-${real_mb}mb.jsonl
  if [ ! -s "$real" ]; then
    unit="$tmp/unit.jsonl"
    "$bin" -q --messages-field history tests/fixtures/swe_agent_demo_trajs.jsonl > "$unit"
    cat tests/fixtures/hermes_reason_tool_use_50.jsonl tests/fixtures/hermes_agent_repairs.jsonl >> "$unit"
    : > "$real"
    while [ "$(stat -L -c %s "$real")" -lt $((real_mb * 1000000)) ]; do cat "$unit" >> "$real"; done
  fi
  corpora+=("$real")
fi

# measure LABEL RUNS CMD... -> prints "seconds cpu_seconds max_rss_kb" (the run with the
# median wall time, and the largest RSS of all runs)
measure() {
  local label="$1" n="$2"; shift 2
  local rows=() rss=0
  for _ in $(seq "$n"); do
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$@" > /dev/null
    read -r t u s r < "$tmp/time"
    rows+=("$t $(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')")
    [ "$r" -gt "$rss" ] && rss=$r
    echo "bench-normalize: $label: ${t}s wall, ${u}s user, ${s}s sys, ${r} KB" >&2
  done
  local med
  med=$(printf '%s\n' "${rows[@]}" | sort -g | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}')
  echo "$med $rss"
}

mbs() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", b / 1e6 / s; else printf "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", a / b; else printf "-" }'; }

echo "## traj-normalize"
echo
echo "\`scripts/bench-normalize.sh\` on $(date -u +%Y-%m-%d): $(nproc) cores, load average"
echo "$(cut -d' ' -f1-3 /proc/loadavg) at the start. Median of $runs runs (jq: 1 run); RSS is"
echo "the maximum resident set size (\`/usr/bin/time\` %M, the figure \`-v\` prints). CPU s"
echo "is user + system time; MB/CPU-s is what one core does when it is not shared. Output"
echo "goes to /dev/null."
echo
echo "| corpus | command | seconds | MB/s | vs \`jq -c .\` | CPU s | MB/CPU-s | max RSS |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for corpus in "${corpora[@]}"; do
  bytes=$(stat -L -c %s "$corpus")
  name=$(basename "$corpus")
  read -r t_cat c_cat r_cat < <(measure "cat $name" "$runs" cat "$corpus")
  read -r t_jq c_jq r_jq < <(measure "jq $name" 1 jq -c . "$corpus")
  # --on-error skip: the real rows include some rejected for tags that cannot be repaired
  read -r t_n c_n r_n < <(measure "traj-normalize $name" "$runs" "$bin" -q --on-error skip --rejects "$tmp/rej.jsonl" "$corpus")
  read -r t_n1 c_n1 r_n1 < <(measure "traj-normalize -j1 $name" "$runs" "$bin" -q -j1 --on-error skip --rejects "$tmp/rej.jsonl" "$corpus")
  size="$name ($((bytes / 1000000)) MB)"
  row() { echo "| $size | $1 | $2 | $(mbs "$bytes" "$2") | $(ratio "$t_jq" "$2") | $3 | $(mbs "$bytes" "$3") | $(($4 / 1024)) MB |"; }
  row "\`cat\`" "$t_cat" "$c_cat" "$r_cat"
  row "\`jq -c .\`" "$t_jq" "$c_jq" "$r_jq"
  row "\`traj-normalize\` (all cores)" "$t_n" "$c_n" "$r_n"
  row "\`traj-normalize -j1\`" "$t_n1" "$c_n1" "$r_n1"
done
if [ -n "$against" ] && [ "$real_mb" -gt 0 ]; then
  old_bin="$against/traj-normalize"
  [ -x "$old_bin" ] || { echo "bench-normalize: $old_bin missing" >&2; exit 1; }
  bytes=$(stat -L -c %s "$real")
  echo
  echo "$(basename "$real"), \`$old_bin\` (before) and \`$bin\` (after) in turn, $runs"
  echo "rounds, best of each (wall and CPU s separately); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "before the rounds. \`-q --on-error skip --rejects R\`, output to /dev/null."
  echo
  echo "| build | jobs | best wall s | MB/s | vs \`jq -c .\` | best CPU s | MB/CPU-s | max RSS |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|"
  declare -A best_t best_c max_r
  for _ in $(seq "$runs"); do
    for which in before after; do
      b=$bin; [ "$which" = before ] && b=$old_bin
      for j in 0 1; do
        /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$b" -q -j "$j" --on-error skip --rejects "$tmp/rej.jsonl" "$real" > /dev/null
        read -r t u s r < "$tmp/time"
        c=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
        echo "bench-normalize: $which -j$j: ${t}s wall, ${c} CPU s, ${r} KB" >&2
        k="$which $j"
        if [ -z "${best_t[$k]:-}" ] || awk -v a="$t" -v b="${best_t[$k]}" 'BEGIN { exit !(a < b) }'; then best_t[$k]=$t; fi
        if [ -z "${best_c[$k]:-}" ] || awk -v a="$c" -v b="${best_c[$k]}" 'BEGIN { exit !(a < b) }'; then best_c[$k]=$c; fi
        [ "$r" -gt "${max_r[$k]:-0}" ] && max_r[$k]=$r
      done
    done
  done
  for which in before after; do
    for j in 0 1; do
      k="$which $j"; jobs="-j$j"; [ "$j" = 0 ] && jobs="all cores"
      echo "| $which | $jobs | ${best_t[$k]} | $(mbs "$bytes" "${best_t[$k]}") | $(ratio "$t_jq" "${best_t[$k]}") | ${best_c[$k]} | $(mbs "$bytes" "${best_c[$k]}") | $((max_r[$k] / 1024)) MB |"
    done
  done
  echo
  echo "\`jq -c .\` on the same file (one run, above): ${t_jq} s wall, ${c_jq} CPU s."
fi
echo
echo "Targets (issue 2): >= 300 MB/s on 2 cores, >= 10x \`jq -c .\`, RSS < 100 MB whatever the input size;"
echo "on the real long rows (issue 18): >= 500 MB/s, >= 15x \`jq -c .\`, < 100 MB RSS."
