#!/usr/bin/env bash
# Per-call cost of the sandbox: traj-run against the stand-in endpoint at 0 ms latency,
# each prompt making 10 terminal calls (`true`) and a final answer, run with
#   local (own user + PID namespace, limits), local without limits, bwrap (limits),
#   bwrap without limits, and a file-tool-only agent (read_file, no process: the cost of
#   a turn without a sandbox).
# The variants run in turn, ROUNDS times (interleaved, so load changes hit them alike);
# the table shows each one's median tool calls per second and the ratio to local.
#
# Usage: scripts/bench-sandbox.sh [PROMPTS] [WORKERS] [ROUNDS]
# Prints a markdown section on stdout. Needs release builds:
#   cargo build --release --bin traj-run --example standin
set -euo pipefail

PROMPTS=${1:-40}
WORKERS=${2:-4}
ROUNDS=${3:-3}
CALLS=10
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TRAJ_RUN_BIN:-$ROOT/target/release/traj-run}
STANDIN=${TRAJ_STANDIN_BIN:-$ROOT/target/release/examples/standin}
[[ -x $BIN && -x $STANDIN ]] || (cd "$ROOT" && cargo build --release --locked --bin traj-run --example standin >&2)

# shellcheck source=scripts/lib-bench.sh
source "$ROOT/scripts/lib-bench.sh"
standin_workdir sandbox

python3 - "$CALLS" "$WORK" <<'EOF'
import json, sys
n, work = int(sys.argv[1]), sys.argv[2]
term = [{"tool_calls": [{"name": "terminal", "arguments": {"command": "true"}}]}] * n
read = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]}] * n
for name, turns in (("term", term), ("read", read)):
    with open(f"{work}/{name}.json", "w") as f:
        json.dump({"rules": [{"match": "", "turns": turns + [{"content": "done"}]}]}, f)
EOF
python3 - "$PROMPTS" "$WORK/prompts.jsonl" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as f:
    for i in range(int(sys.argv[1])):
        f.write(json.dumps({"prompt": f"call the tools {i}", "toolsets": ["terminal", "file"]}) + "\n")
EOF

start_standin() { # script
    : > "$WORK/addr"
    "$STANDIN" --latency-ms 0 --script "$1" > "$WORK/addr" &
    STANDIN_PID=$!
    for _ in $(seq 100); do [[ -s $WORK/addr ]] && break; sleep 0.05; done
    URL=$(head -n1 "$WORK/addr")
}
stop_standin() { kill "$STANDIN_PID" 2>/dev/null || true; wait "$STANDIN_PID" 2>/dev/null || true; STANDIN_PID=""; }

NOLIMITS=(--tool-memory-mb 0 --tool-processes 0 --tool-file-size-mb 0 --tool-cpu-secs 0)
# name|traj-run flags|label in the table, in the order they run and are shown
VARIANTS=(
    "local|--sandbox local|local: own user + PID namespace (\`unshare\`), limits (\`prlimit\`)"
    "local-nolimits|--sandbox local ${NOLIMITS[*]}|local, no limits"
    "bwrap|--sandbox bwrap|bwrap, limits"
    "bwrap-nolimits|--sandbox bwrap ${NOLIMITS[*]}|bwrap, no limits"
    "read_file|--sandbox local|no process (read_file: HTTP turn + file tool only)"
)
declare -A ARGS LABEL
ORDER=()
for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name args label <<<"$v"
    ORDER+=("$name") ARGS[$name]=$args LABEL[$name]=$label
done
declare -A RATES

# one NAME ROUND -> appends calls/s to RATES[NAME]
one() {
    local name=$1 round=$2 script=term t0 t1 calls
    [[ $name == read_file ]] && script=read
    start_standin "$WORK/$script.json"
    rm -rf "$WORK/run"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$BIN" --model standin --base-url "$URL" --run-dir "$WORK/run" --num-workers "$WORKERS" \
        -q --workspace-root "$WORK/ws" ${ARGS[$name]} "$WORK/prompts.jsonl" > "$WORK/out.jsonl"
    t1=$(date +%s.%N)
    stop_standin
    calls=$(jq -r '[.tool_statistics[] | .count] | add' "$WORK/run/statistics.json")
    [[ $calls -eq $((PROMPTS * CALLS)) ]] || { echo "bench-sandbox: $name made $calls tool calls, expected $((PROMPTS * CALLS))" >&2; exit 1; }
    RATES[$name]+="$(echo "$calls / ($t1 - $t0)" | bc -l) "
}
mkdir -p "$WORK/ws"
for round in $(seq "$ROUNDS"); do
    for name in "${ORDER[@]}"; do one "$name" "$round"; done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
LOCAL=$(echo "${RATES[local]}" | median)

echo "## Sandbox: cost of one tool call"
echo
echo "\`scripts/bench-sandbox.sh $PROMPTS $WORKERS $ROUNDS\`: traj-run, $WORKERS workers, $PROMPTS prompts of"
echo "$CALLS terminal calls (\`true\`) each, against the stand-in at 0 ms; the variants run in"
echo "turn, $ROUNDS rounds (median shown). Machine: $(nproc) cores, load average at the end"
echo "$(cut -d' ' -f1 /proc/loadavg)."
[[ -n ${TRAJ_RUN_BIN:-} ]] && echo "traj-run: \`$(basename "$BIN")\` given by TRAJ_RUN_BIN, $(grep -q release <<<"$BIN" && echo "a release build" || echo "NOT a release build (test profile, opt-level 1)")."
echo
echo "| variant | tool calls/s | ms per call | vs local |"
echo "|---|---:|---:|---:|"
for name in "${ORDER[@]}"; do
    r=$(echo "${RATES[$name]}" | median)
    printf '| %s | %.0f | %.2f | %.2fx |\n' "${LABEL[$name]}" "$r" "$(echo "1000 * $WORKERS / $r" | bc -l)" "$(echo "$r / $LOCAL" | bc -l)"
done
echo
echo "ms per call = workers / rate: the wall time one worker spends per call, model turn included."
