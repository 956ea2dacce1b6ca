#!/usr/bin/env bash
# Benchmark traj-report: a page of ROWS real-shaped rows (the fixtures' rows in turn,
# each with its own id) built in a time measured against traj-filter reading the same
# rows and against traj-report with one worker (-j 1, which must give the same page),
# peak RSS at a quarter of the rows and at all of them (memory is bounded by the
# embedded rows and distinct values, not by rows), and the time the page takes to draw
# in headless Chromium (tests/cli/report.rs, the page-load test at ROWS rows).
#
# Usage: scripts/bench-report.sh [ROWS] [RUNS]   (defaults: 100000 rows, best of 3)
# (TRAJ_BENCH_BIN_DIR=DIR uses DIR/traj-report and DIR/traj-filter, not a release build.)
# Prints a markdown section on stdout. Needs python3, /usr/bin/time and (for the page
# load) Chromium (make setup).
set -euo pipefail

ROWS=${1:-100000}
RUNS=${2:-3}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib-bench.sh
source "$ROOT/scripts/lib-bench.sh"
REPORT="$DIR/traj-report"
FILTER="$DIR/traj-filter"
mkdir -p "$BENCH"
if [[ -z ${TRAJ_BENCH_BIN_DIR:-} ]]; then
    cargo build --release --quiet --locked --bin traj-report --bin traj-filter --manifest-path "$ROOT/Cargo.toml" >&2
fi

# gen N FILE: the fixtures' rows in turn, row i with "id": "gen-i" (as the test does).
gen() {
    python3 - "$1" "$ROOT/tests/fixtures" >"$2" <<'PY'
import json, sys
n, fx = int(sys.argv[1]), sys.argv[2]
rows = []
for f in ["hermes_reason_tool_use_50.jsonl", "hermes_agent_repairs.jsonl",
          "llamafactory_reason_tool_use_50.jsonl", "toolbench_answers.jsonl",
          "traj_run_records.jsonl"]:
    rows += [json.loads(l) for l in open(f"{fx}/{f}", encoding="utf-8") if l.strip()]
out = sys.stdout
for i in range(n):
    r = dict(rows[i % len(rows)])
    r["id"] = f"gen-{i}"
    out.write(json.dumps(r, ensure_ascii=False) + "\n")
PY
}
CORPUS="$BENCH/report-${ROWS}.jsonl"
QUARTER="$BENCH/report-$((ROWS / 4)).jsonl"
[[ -s $CORPUS ]] || gen "$ROWS" "$CORPUS"
[[ -s $QUARTER ]] || gen "$((ROWS / 4))" "$QUARTER"
BYTES=$(stat -L -c %s "$CORPUS")
cat "$CORPUS" "$QUARTER" >/dev/null # warm the page cache

PAGE="$BENCH/report-${ROWS}.html"
read -r t_filter rss_filter < <(best "'$FILTER' -q '$CORPUS'")
read -r t_ftok rss_ftok < <(best "'$FILTER' -q --max-row-tokens 1000000000 '$CORPUS'")
read -r t_report rss_report < <(best "'$REPORT' -q '$CORPUS' -o '$PAGE'")
read -r t_one rss_one < <(best "'$REPORT' -q -j 1 '$CORPUS' -o '$PAGE.j1.html'")
cmp -s "$PAGE" "$PAGE.j1.html" || { echo "bench-report: the page with -j 1 differs from the page with -j 0" >&2; exit 1; }
read -r t_chars rss_chars < <(best "'$REPORT' -q --tokenizer chars4 '$CORPUS' -o '$PAGE.chars4.html'")
read -r t_quarter rss_quarter < <(best "'$REPORT' -q '$QUARTER' -o '$BENCH/report-quarter.html'")
PAGE_MB=$(awk -v b="$(stat -c %s "$PAGE")" 'BEGIN { printf "%.1f", b / 1e6 }')
EMBEDDED=$(grep -o '"embedded":[0-9]*' "$PAGE" | head -n 1 | cut -d: -f2)
rm -f "$PAGE.chars4.html" "$PAGE.j1.html" "$BENCH/report-quarter.html"

# The page load, in Chromium, by the test at ROWS rows.
LOAD_OUT=$(cd "$ROOT" && TRAJ_REPORT_ROWS=$ROWS TRAJ_REPORT_MAX_MS=2000 cargo test --locked --quiet --test cli -- \
    report::a_page_of_many_rows_loads --nocapture 2>&1) && LOAD_OK=1 || LOAD_OK=0
LOAD=$(grep -o 'drawn in [0-9]* ms (opened again: [0-9]* ms)' <<<"$LOAD_OUT" || echo "not measured")
((LOAD_OK)) || LOAD="$LOAD, and the test FAILED (its 2 s bound, or see cargo test)"

echo "## traj-report"
echo
echo "$ROWS real-shaped rows (the rows of five fixtures in turn, each with its own \`id\`: Hermes"
echo "ShareGPT with \`<think>\` and \`<tool_call>\`, hermes-agent repairs, LLaMA-Factory OpenAI messages,"
echo "ToolBench, traj-run records),"
echo "$((BYTES / 1000000)) MB; \`scripts/bench-report.sh $ROWS\`, best of $RUNS, $(nproc) cores, load average"
echo "$(cut -d' ' -f1-3 /proc/loadavg). traj-report reads every row (turns, tool calls and results,"
echo "tokens with o200k_base) with one worker per core (\`-j 0\`, as traj-filter) and writes one page;"
echo "traj-filter with no predicate only validates."
echo "Binaries: \`${DIR#"$ROOT"/}\`."
echo
echo "| command | seconds | MB/s | peak RSS MB |"
echo "|---|---:|---:|---:|"
echo "| traj-filter (no predicate) | $t_filter | $(mbs "$t_filter") | $(mb "$rss_filter") |"
echo "| traj-filter --max-row-tokens (counts every row's tokens, o200k_base) | $t_ftok | $(mbs "$t_ftok") | $(mb "$rss_ftok") |"
echo "| traj-report -o page.html (o200k_base) | $t_report | $(mbs "$t_report") | $(mb "$rss_report") |"
echo "| traj-report -j 1 (one worker; the same page, byte for byte) | $t_one | $(mbs "$t_one") | $(mb "$rss_one") |"
echo "| traj-report --tokenizer chars4 | $t_chars | $(mbs "$t_chars") | $(mb "$rss_chars") |"
echo "| traj-report, a quarter of the rows ($((ROWS / 4))) | $t_quarter | | $(mb "$rss_quarter") |"
echo
echo "With one worker per core traj-report is $(awk -v a="$t_one" -v b="$t_report" 'BEGIN { printf "%.1f", a / b }')x as fast as with \`-j 1\`."
echo "traj-report takes $(awk -v a="$t_report" -v b="$t_filter" 'BEGIN { printf "%.1f", a / b }')x the time of traj-filter validating the rows and"
echo "$(awk -v a="$t_report" -v b="$t_ftok" 'BEGIN { printf "%.1f", a / b }')x the time of traj-filter counting their tokens; its peak RSS is"
echo "$(mb "$rss_quarter") MB at $((ROWS / 4)) rows and $(mb "$rss_report") MB at $ROWS (bounded by the $EMBEDDED embedded rows,"
echo "not by the rows read). The page is $PAGE_MB MB; in headless Chromium it is $LOAD"
echo "(\`tests/cli/report.rs\`: from navigation start to the first frame after the document is"
echo "ready, in a fresh browser). The pages of \`-j 1\` and \`-j 0\` are identical, byte for byte (the script"
echo "stops if they are not)."
