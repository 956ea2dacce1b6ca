#!/usr/bin/env bash
# Benchmark of the browser toolset: what a browser task costs in traj-run (Chromium
# start-up, per action) and how many browser tasks run at once on this machine.
#
# traj-run drives tasks scripted by the stand-in endpoint (no model latency) against the
# pages of tests/fixtures/web served on 127.0.0.1. Per-task tool time comes from each
# record's timings.tool_ms; wall times and ratios are measured in the same run.
#
# Usage: scripts/bench-browser.sh [TASKS] [ACTIONS]
# Prints a markdown section on stdout. Needs Chromium (make setup) and the binaries:
#   cargo build --release --bin traj-run --example standin
# (TRAJ_BENCH_BIN_DIR=DIR uses DIR/traj-run and DIR/examples/standin instead.)
set -euo pipefail

TASKS=${1:-8}
ACTIONS=${2:-20}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${TRAJ_BENCH_BIN_DIR:-$ROOT/target/release}
BIN="$DIR/traj-run"
STANDIN="$DIR/examples/standin"
if [[ -z ${TRAJ_BENCH_BIN_DIR:-} ]] && [[ ! -x $BIN || ! -x $STANDIN ]]; then
    (cd "$ROOT" && cargo build --release --locked --bin traj-run --example standin >&2)
fi
command -v chromium >/dev/null || { echo "bench-browser: no chromium (run make setup)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/traj-bench-browser.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# The fixture pages on a local port.
python3 -m http.server 0 --bind 127.0.0.1 --directory "$ROOT/tests/fixtures/web" > "$WORK/http.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q "port" "$WORK/http.log" 2>/dev/null && break; sleep 0.05; done
PORT=$(grep -o 'port [0-9]*' "$WORK/http.log" | head -n1 | cut -d' ' -f2)
PAGE="http://127.0.0.1:$PORT/index.html"

# Scripts: one navigation; one navigation then ACTIONS actions (snapshot and a console
# expression, alternately).
python3 - "$PAGE" "$ACTIONS" "$WORK" <<'PY'
import json, sys
page, n, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
nav = {"tool_calls": [{"name": "browser_navigate", "arguments": {"url": page}}]}
acts = [{"tool_calls": [{"name": "browser_snapshot", "arguments": {}}]} if i % 2 == 0 else
        {"tool_calls": [{"name": "browser_console", "arguments": {"expression": "document.title"}}]}
        for i in range(n)]
done = {"content": "Final: done"}
for name, turns in [("nav", [nav, done]), ("acts", [nav] + acts + [done])]:
    json.dump({"rules": [{"match": "", "turns": turns}]}, open(f"{work}/{name}.json", "w"))
PY

start_standin() { # script
    : > "$WORK/addr"
    "$STANDIN" --latency-ms 0 --script "$1" > "$WORK/addr" &
    STANDIN_PID=$!
    PIDS+=("$STANDIN_PID")
    for _ in $(seq 100); do [[ -s $WORK/addr ]] && break; sleep 0.05; done
    URL=$(head -n1 "$WORK/addr")
}
stop_standin() { kill "$STANDIN_PID" 2>/dev/null || true; wait "$STANDIN_PID" 2>/dev/null || true; }

prompts() { # N -> file
    local f="$WORK/prompts$1.jsonl"
    for i in $(seq "$1"); do echo "{\"prompt\": \"browse $i\", \"toolsets\": [\"browser\"]}"; done > "$f"
    echo "$f"
}

# run NAME PROMPTS WORKERS -> SECS, TOOL_MS (mean per task), RECORDS
run() {
    local name=$1 p=$2 workers=$3 t0 t1
    t0=$(date +%s.%N)
    "$BIN" --model standin --base-url "$URL" --run-dir "$WORK/$name" --num-workers "$workers" \
        --max-turns $((ACTIONS + 5)) --sandbox local --allow-private-addresses -q \
        --workspace-root "$WORK" "$p" > "$WORK/$name.out"
    t1=$(date +%s.%N)
    SECS=$(echo "$t1 - $t0" | bc -l)
    RECORDS=$(wc -l < "$WORK/$name.out")
    TOOL_MS=$(jq -s 'map(.timings.tool_ms) | add / length' "$WORK/$name.out")
    local left
    left=$(grep -l "traj-browse[r]-" /proc/[0-9]*/cmdline 2>/dev/null | wc -l || true)
    [[ $left -eq 0 ]] || echo "bench-browser: $left chromium processes left after $name" >&2
    LEFT_MAX=$(( left > LEFT_MAX ? left : LEFT_MAX ))
}
LEFT_MAX=0

echo "## Browser tasks: Chromium start-up, per-action cost, tasks at once"
echo
echo "Machine: $(nproc) cores, $(chromium --version 2>/dev/null | head -n1). Each task runs in"
echo "traj-run against the stand-in (no model latency) on the local fixture pages;"
echo "\`scripts/bench-browser.sh $TASKS $ACTIONS\`. Tool time per task is the records' \`timings.tool_ms\`."
echo

P1=$(prompts "$TASKS")
start_standin "$WORK/nav.json"
run nav "$P1" 1
NAV_MS=$TOOL_MS
NAV_SECS=$SECS
stop_standin
start_standin "$WORK/acts.json"
run acts1 "$P1" 1
ACTS_MS=$TOOL_MS
ACTS1_SECS=$SECS
PER_ACTION=$(echo "($ACTS_MS - $NAV_MS) / $ACTIONS" | bc -l)

echo "| measure | value |"
echo "|---|---:|"
printf '| start-up + first navigation (one task, one worker) | %.0f ms |\n' "$NAV_MS"
printf '| one action after that (snapshot or console, mean of %d) | %.1f ms |\n' "$ACTIONS" "$PER_ACTION"
printf '| whole task of 1 + %d actions, wall, one worker | %.2f s |\n' "$ACTIONS" "$(echo "$ACTS1_SECS / $TASKS" | bc -l)"
echo
echo "$TASKS tasks of 1 navigation + $ACTIONS actions each, by number of workers (browsers at once):"
echo
echo "| workers | wall s | tasks/s | speed-up vs 1 worker | tool ms per task | load avg |"
echo "|---:|---:|---:|---:|---:|---:|"
printf '| 1 | %.2f | %.2f | 1.00 | %.0f | %s |\n' "$ACTS1_SECS" "$(echo "$TASKS / $ACTS1_SECS" | bc -l)" "$ACTS_MS" "$(cut -d' ' -f1 /proc/loadavg)"
for w in 2 4 8; do
    [[ $w -le $TASKS ]] || break
    run "acts$w" "$P1" "$w"
    printf '| %d | %.2f | %.2f | %.2f | %.0f | %s |\n' "$w" "$SECS" "$(echo "$TASKS / $SECS" | bc -l)" \
        "$(echo "$ACTS1_SECS / $SECS" | bc -l)" "$TOOL_MS" "$(cut -d' ' -f1 /proc/loadavg)"
done
stop_standin
echo
echo "Chromium processes alive after a run (any traj browser profile on the machine, so a"
echo "concurrent test run counts too): at most $LEFT_MAX. Start-up dominates a short task; past"
echo "the speed-up's plateau, more browsers at once only lengthen each task."
