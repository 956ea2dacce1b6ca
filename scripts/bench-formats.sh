#!/usr/bin/env bash
# Benchmark the file formats: Parquet, zstd and gzip beside plain JSONL, read and written
# by traj-filter and traj-compress; Parquet's row-group and compression choices; and the
# Spark job (scripts/spark_pipeline.py, 2 local cores) against the binaries alone.
#
# Usage: scripts/bench-formats.sh [MB] [RUNS]   (defaults: $TRAJ_BENCH_MB or 200 MB, 3 runs, best;
#        SPARK_RUNS=N for the Spark runs, default 1; TRAJ_BIN_DIR for other binaries)
#
# MB/s is always of the JSONL bytes (the rows), whatever the file holds, so that formats
# compare by rows per second. Everything is measured in the same run. The corpus lives
# under target/bench (never in the repo). Prints a markdown section on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

MB="${1:-${TRAJ_BENCH_MB:-200}}"
RUNS="${2:-3}"
BIN=${TRAJ_BIN_DIR:-target/release}
CORPUS=${TRAJ_BENCH_SHAREGPT:-target/bench/sharegpt-${MB}mb.jsonl}
mkdir -p target/bench
[ -x "$BIN/traj-filter" ] || cargo build --release --locked --bins >&2
[ -s "$CORPUS" ] || python3 scripts/gen_corpus.py --shape sharegpt --mb "$MB" --seed 1 > "$CORPUS"
work=$(mktemp -d "$PWD/target/bench/formats.XXXXXX")
trap 'rm -rf "$work"' EXIT
BYTES=$(stat -L -c %s "$CORPUS")
ROWS=$(wc -l < "$CORPUS")
LOAD=$(cut -d" " -f1-3 /proc/loadavg)

# best CMD...: wall seconds of the fastest of $RUNS runs (stdout to /dev/null unless the
# command writes a file itself).
best() {
  local b="" t
  for _ in $(seq "$RUNS"); do
    t=$( { TIMEFORMAT=%R; time "$@" > /dev/null 2>> "$work/stderr"; } 2>&1 ) || {
      echo "bench-formats: failed: $*" >&2; tail -5 "$work/stderr" >&2; exit 1
    }
    if [ -z "$b" ] || awk -v t="$t" -v b="$b" 'BEGIN { exit !(t < b) }'; then b=$t; fi
  done
  echo "$b"
}
mbs() { awk -v b="$BYTES" -v t="$1" 'BEGIN { printf "%.0f", b / 1e6 / t }'; }
size() { awk -v s="$(stat -L -c %s "$1")" 'BEGIN { printf "%.1f", s / 1e6 }'; }

# The inputs: the same rows in each format.
cp "$CORPUS" "$work/in.jsonl"
gzip -c -6 "$work/in.jsonl" > "$work/in.jsonl.gz"
zstd -q -3 -c "$work/in.jsonl" > "$work/in.jsonl.zst"
"$BIN/traj-filter" -q "$work/in.jsonl" -o "$work/in.parquet"
cat "$work"/in.* > /dev/null

echo "## File formats"
echo
echo "Corpus: \`scripts/gen_corpus.py --shape sharegpt --mb $MB --seed 1\` ($((BYTES / 1000000)) MB of"
echo "JSONL, $ROWS rows), the same rows in each format; page cache warm; best of $RUNS runs;"
echo "$(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load average before: $LOAD. MB/s: JSONL MB"
echo "(the rows' bytes) per second, whatever the file holds. Reading: \`traj-filter IN > /dev/null\`"
echo "(no predicate: every row validated) and \`traj-compress --count-only IN\` (every turn"
echo "tokenized). Writing: \`traj-filter in.jsonl -o OUT\` (the durable write included: docs/pipeline.md)."
echo
echo "| format | file MB | traj-filter read MB/s | traj-compress --count-only read MB/s | traj-filter write MB/s |"
echo "|---|---:|---:|---:|---:|"
for f in in.jsonl in.jsonl.zst in.jsonl.gz in.parquet; do
  ext=${f#in.}
  r=$(best "$BIN/traj-filter" -q "$work/$f")
  c=$(best "$BIN/traj-compress" --count-only "$work/$f")
  w=$(best "$BIN/traj-filter" -q "$work/in.jsonl" -o "$work/out.$ext")
  echo "| $ext | $(size "$work/$f") | $(mbs "$r") | $(mbs "$c") | $(mbs "$w") |"
  rm -f "$work/out.$ext"
done
echo

# Parquet choices: traj writes zstd level 3, a row group per 8192 rows or 64 MiB of rows.
# The same table rewritten by pyarrow with other choices, read back by traj. Row groups
# are given in rows of this corpus (long rows: a few hundred make tens of MB).
if python3 -c 'import pyarrow' 2>/dev/null; then
  rg_traj=$(python3 -c 'import sys, pyarrow.parquet as pq; m = pq.ParquetFile(sys.argv[1]).metadata; print(f"{m.num_row_groups} row groups of up to {max(m.row_group(i).num_rows for i in range(m.num_row_groups))} rows")' "$work/in.parquet")
  echo "### Parquet row groups and compression"
  echo
  echo "traj writes zstd (level 3), closing a row group at 8,192 rows or 64 MiB of rows"
  echo "(\`src/io/parquet.rs\`); on this corpus that gives $rg_traj. The same table"
  echo "rewritten by pyarrow with other choices, then read by \`traj-filter\` (it decodes 256"
  echo "rows per batch; max RSS also holds the column chunks of the row group being read):"
  echo
  echo "| compression | rows per row group | file MB | pyarrow write s | traj-filter read MB/s | traj-filter max RSS MB |"
  echo "|---|---:|---:|---:|---:|---:|"
  for spec in "zstd 64" "zstd 256" "zstd 1024" "zstd 8192" "snappy 256" "none 256"; do
    read -r comp rg <<< "$spec"
    t=$(python3 - "$work/in.parquet" "$work/alt.parquet" "$comp" "$rg" <<'PY'
import sys, time, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
start = time.perf_counter()
pq.write_table(t, sys.argv[2], compression=sys.argv[3], row_group_size=int(sys.argv[4]),
               **({"compression_level": 3} if sys.argv[3] == "zstd" else {}))
print(f"{time.perf_counter() - start:.2f}")
PY
)
    r=$(best "$BIN/traj-filter" -q "$work/alt.parquet")
    rss=$(/usr/bin/time -f %M "$BIN/traj-filter" -q "$work/alt.parquet" 2>&1 > /dev/null | tail -1)
    echo "| $comp | $rg | $(size "$work/alt.parquet") | $t | $(mbs "$r") | $((rss / 1024)) |"
    rm -f "$work/alt.parquet"
  done
  echo
fi

# Spark on 2 local cores against the binaries alone, same rows, same stages.
if python3 -c 'import pyspark' 2>/dev/null && command -v java > /dev/null; then
  stages=("traj-normalize" "traj-filter --well-formed --on-error skip")
  direct() { "$BIN/traj-normalize" -q "$work/in.jsonl" | "$BIN/traj-filter" -q --well-formed --on-error skip > "$work/direct.jsonl"; }
  t_direct=$(best direct)
  spark() {
    rm -rf "$work/spark"
    python3 scripts/spark_pipeline.py --bin-dir "$BIN" --master 'local[2]' "$1" "$work/spark" "${stages[@]}"
  }
  # Spark runs are long (JVM start-up): SPARK_RUNS of them (default 1).
  t_spark=$(RUNS=${SPARK_RUNS:-1} best spark "$work/in.jsonl")
  n_spark=$(cat "$work"/spark/data/part-* | wc -l)
  # Parquet as the Hub writes it (the rows' own columns, by pyarrow), not traj's schema.
  python3 -c 'import sys, pyarrow.json as pj, pyarrow.parquet as pq; pq.write_table(pj.read_json(sys.argv[1]), sys.argv[2])' \
    "$work/in.jsonl" "$work/hub.parquet"
  t_spark_pq=$(RUNS=${SPARK_RUNS:-1} best spark "$work/hub.parquet")
  n_spark_pq=$(cat "$work"/spark/data/part-* | wc -l)
  n_direct=$(wc -l < "$work/direct.jsonl")
  echo "### Spark (local[2]) against the binaries alone"
  echo
  echo "Stages: \`traj-normalize\` then \`traj-filter --well-formed --on-error skip\`. Binaries alone:"
  echo "the two piped, \`-o\`-less, on the JSONL file. Spark: \`scripts/spark_pipeline.py --master"
  echo "'local[2]'\` (JVM start-up and Python workers included), output rows: $n_spark from JSONL, $n_spark_pq from Parquet (binaries: $n_direct)."
  echo
  echo "| how | input | wall s | MB/s | vs binaries alone |"
  echo "|---|---|---:|---:|---:|"
  echo "| binaries alone | JSONL | $t_direct | $(mbs "$t_direct") | 1.00 |"
  echo "| Spark local[2] | JSONL | $t_spark | $(mbs "$t_spark") | $(awk -v a="$t_direct" -v b="$t_spark" 'BEGIN { printf "%.2f", a / b }') |"
  echo "| Spark local[2] | Parquet | $t_spark_pq | $(mbs "$t_spark_pq") | $(awk -v a="$t_direct" -v b="$t_spark_pq" 'BEGIN { printf "%.2f", a / b }') |"
  echo
  echo "Spark's cost is its own (JVM, Python workers, each partition's lines copied through a"
  echo "Python process into each stage and back): it pays when the rows do not fit one machine."
else
  echo "(Spark not measured: \`pyspark\` or a JRE missing; \`make setup\` installs both.)"
fi
