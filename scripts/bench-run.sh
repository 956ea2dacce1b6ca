#!/usr/bin/env bash
# Benchmark of traj-run against the stand-in endpoint (tests/standin), which answers
# every request after a fixed latency. The ideal rate is workers / latency (256 / 0.2 s =
# 1,280 calls/s); the figure of merit is the share of it reached. Also reports peak RSS
# and memory per in-flight agent (RSS at 256 workers minus RSS at 16, over 240).
#
# Also issue #18's row: 2 calls of 100 ms per prompt, the first a real terminal call, in
# bwrap and in local, and the reference's batch_runner.py on the same stand-in.
#
# Usage: scripts/bench-run.sh [WORKERS] [LATENCY_MS] [SECONDS]
# Prints a markdown section on stdout. Needs release builds:
#   cargo build --release --bin traj-run --example standin --example sandbox-ceiling
set -euo pipefail

WORKERS=${1:-256}
LATENCY_MS=${2:-200}
SECONDS_TARGET=${3:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TRAJ_RUN_BIN:-$ROOT/target/release/traj-run}
STANDIN=${TRAJ_STANDIN_BIN:-$ROOT/target/release/examples/standin}
# The reference (hermes-agent 0.19.0's batch_runner.py) runs from this venv (made when
# missing), offline against the same stand-in, as REF_WORKERS processes.
REF_VENV="$ROOT/target/venvs/hermes-agent"
REF_WORKERS=${REF_WORKERS:-4}
[[ -x $BIN && -x $STANDIN ]] || (cd "$ROOT" && cargo build --release --locked --bin traj-run --example standin >&2)

# shellcheck source=scripts/lib-bench.sh
source "$ROOT/scripts/lib-bench.sh"
standin_workdir run
need_tree_cpu

IDEAL=$((WORKERS * 1000 / LATENCY_MS))
N1=$((IDEAL * SECONDS_TARGET))           # one call per prompt
N4=$((IDEAL * SECONDS_TARGET / 4))       # four calls per prompt (three tool turns)

# Scripts: a plain answer; and an agent doing write_file, read_file, terminal, answer.
echo '{"default": {"content": "Answer to: {prompt}", "reasoning": "short thought"}}' > "$WORK/answer.json"
cat > "$WORK/agent.json" <<'EOF'
{"rules": [{"match": "", "turns": [
  {"reasoning": "Write it down.", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "{prompt}"}}]},
  {"reasoning": "Read it back.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
  {"reasoning": "Count it.", "tool_calls": [{"name": "terminal", "arguments": {"command": "wc -c a.txt"}}]},
  {"reasoning": "Done.", "content": "It said: {tool_output}"}
]}]}
EOF
python3 - "$N1" "$WORK/prompts1.jsonl" <<'EOF'
import json, sys
n = int(sys.argv[1])
with open(sys.argv[2], "w") as f:
    for i in range(n):
        f.write(json.dumps({"prompt": f"Benchmark prompt number {i}: summarise the plan in one line."}) + "\n")
EOF
python3 - "$N4" "$WORK/prompts4.jsonl" <<'EOF'
import json, sys
n = int(sys.argv[1])
with open(sys.argv[2], "w") as f:
    for i in range(n):
        f.write(json.dumps({"prompt": f"Agent task {i}", "toolsets": ["terminal", "file"]}) + "\n")
EOF


# run NAME PROMPTS WORKERS [traj-run flags...] -> sets SECS, RSS_KB, CPU (% of one core,
# every process of the run: traj-run, its sandboxes and tools; tree_cpu),
# CALLS, RECORDS
run() {
    local name=$1 prompts=$2 workers=$3
    shift 3
    local t0 t1
    settle
    t0=$(date +%s.%N)
    tree_cpu "$WORK/$name.cpu" /usr/bin/time -f "%M" -o "$WORK/$name.rss" \
        "$BIN" --model standin --base-url "$URL" --run-dir "$WORK/$name" \
        --num-workers "$workers" --batch-size 1000 -q --workspace-root "$WORK/ws" \
        "$@" "$prompts" > "$WORK/$name.out"
    t1=$(date +%s.%N)
    SECS=$(echo "$t1 - $t0" | bc -l)
    RSS_KB=$(tail -n1 "$WORK/$name.rss")
    CPU=$(echo "$(cat "$WORK/$name.cpu") / $SECS * 100" | bc -l)
    CALLS=$(jq '.api_calls' "$WORK/$name/statistics.json")
    RECORDS=$(wc -l < "$WORK/$name.out")
}
mkdir -p "$WORK/ws"

echo "## traj-run: $WORKERS agents against a stand-in answering after ${LATENCY_MS} ms"
echo
echo "Machine: $(nproc) cores; ideal rate = workers / latency = $IDEAL calls/s."
echo
echo "| scenario | prompts | calls | wall s | calls/s | % of ideal | peak RSS MB | CPU % (run + tools) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"

start_standin "$WORK/answer.json" "$LATENCY_MS"
run one-call "$WORK/prompts1.jsonl" "$WORKERS"
RATE=$(echo "$CALLS / $SECS" | bc -l)
printf '| 1 call per prompt (no tools) | %d | %d | %.2f | %.0f | %.1f%% | %.1f | %.0f |\n' \
    "$RECORDS" "$CALLS" "$SECS" "$RATE" "$(echo "100 * $RATE / $IDEAL" | bc -l)" "$(echo "$RSS_KB / 1024" | bc -l)" "$CPU"
RSS_BIG=$RSS_KB

# Memory per in-flight agent: the same run with 16 workers (fewer prompts, same shape).
head -n $((16 * 1000 / LATENCY_MS * 3)) "$WORK/prompts1.jsonl" > "$WORK/prompts_small.jsonl"
run small "$WORK/prompts_small.jsonl" 16
RSS_SMALL=$RSS_KB
stop_standin

start_standin "$WORK/agent.json" "$LATENCY_MS"
run agent "$WORK/prompts4.jsonl" "$WORKERS"
RATE4=$(echo "$CALLS / $SECS" | bc -l)
printf '| 4 calls per prompt (write_file, read_file, terminal, answer) | %d | %d | %.2f | %.0f | %.1f%% | %.1f | %.0f |\n' \
    "$RECORDS" "$CALLS" "$SECS" "$RATE4" "$(echo "100 * $RATE4 / $IDEAL" | bc -l)" "$(echo "$RSS_KB / 1024" | bc -l)" "$CPU"
TIMES=$(jq -s '[.[] | .timings] | "\(map(.llm_ms) | add / length | floor) ms waiting for the model, \(map(.tool_ms) | add / length | floor) ms in tools"' -r "$WORK/agent.out")
stop_standin

# Issue #18's row: a terminal call and an answer per prompt, 100 ms per call.
cat > "$WORK/term.json" <<'JSON'
{"rules": [{"match": "", "turns": [
  {"reasoning": "Count it.", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo {prompt} | wc -c"}}]},
  {"reasoning": "Done.", "content": "It said: {tool_output}"}
]}]}
JSON
IDEAL2=$((WORKERS * 1000 / 200))
N2=$((IDEAL2 * SECONDS_TARGET))
python3 - "$N2" "$WORK/prompts2.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for i in range(int(sys.argv[1])):
        f.write(json.dumps({"prompt": f"Terminal task {i}", "toolsets": ["terminal"]}) + "\n")
PY
start_standin "$WORK/term.json" 100
ROW2=()
# The default (each worker keeps its sandbox between tasks) in both backends, and bwrap
# with a new sandbox for every command (--no-sandbox-reuse), as earlier versions ran.
for sb in bwrap local bwrap-fresh; do
    case $sb in
        bwrap-fresh) run "term-$sb" "$WORK/prompts2.jsonl" "$WORKERS" --sandbox bwrap --no-sandbox-reuse
            LABEL="--sandbox bwrap --no-sandbox-reuse" ;;
        *) run "term-$sb" "$WORK/prompts2.jsonl" "$WORKERS" --sandbox "$sb"
            LABEL="--sandbox $sb" ;;
    esac
    R=$(echo "$RECORDS / $SECS" | bc -l)
    [[ $sb == bwrap ]] && RATE_TRAJ=$R
    [[ $sb == local ]] && RATE_LOCAL=$R
    [[ $sb == bwrap-fresh ]] && RATE_FRESH=$R
    ROW2+=("$(printf '| traj-run, %s, %d workers | %d | %d | %.2f | %.0f | %.1f%% | %.1f | %.0f |' \
        "$LABEL" "$WORKERS" "$RECORDS" "$CALLS" "$SECS" "$R" "$(echo "100 * $R / $IDEAL2" | bc -l)" "$(echo "$RSS_KB / 1024" | bc -l)" "$CPU")")
done
# The reference: REF_WORKERS batches of 8 prompts (a batch is its unit of parallelism;
# its wall time includes starting its worker processes, as a user's run does).
REF_N=$((REF_WORKERS * 8))
REF_LINE=""
REF_RATE=""
if [[ ! -x $REF_VENV/bin/python ]]; then
    python3 -m venv "$REF_VENV" >&2
    "$REF_VENV/bin/pip" install -q hermes-agent==0.19.0 >&2
fi
REF_PY=$(find "$REF_VENV" -path '*site-packages/batch_runner.py' | head -n1)
[[ -n $REF_PY ]] || { echo "bench-run: no batch_runner.py in $REF_VENV" >&2; exit 1; }
mkdir -p "$WORK/ref"
head -n "$REF_N" "$WORK/prompts2.jsonl" > "$WORK/ref/prompts.jsonl"
t0=$(date +%s.%N)
(cd "$WORK/ref" && env -i PATH="$PATH" HOME="$WORK/ref" TERMINAL_ENV=local \
    "$REF_VENV/bin/python" "$REF_PY" --dataset_file prompts.jsonl --batch_size 8 \
    --run_name ref --distribution terminal_only --base_url "$URL" --api_key sk-standin \
    --model standin --num_workers "$REF_WORKERS" --max_turns 10 > "$WORK/ref/log" 2>&1) || true
t1=$(date +%s.%N)
# Rows without reasoning are discarded by the reference, hence the scripted reasoning.
REF_DONE=$(cat "$WORK/ref/data/ref/trajectories.jsonl" 2>/dev/null | wc -l)
if [[ $REF_DONE -gt 0 ]]; then
    REF_RATE=$(echo "$REF_DONE / ($t1 - $t0)" | bc -l)
    REF_IDEAL=$((REF_WORKERS * 1000 / 200))
    REF_LINE=$(printf '| reference batch_runner.py (hermes-agent 0.19.0), %d processes | %d | | %.2f | %.1f | %.1f%% of its %d | | |' \
        "$REF_WORKERS" "$REF_DONE" "$(echo "$t1 - $t0" | bc -l)" "$REF_RATE" "$(echo "100 * $REF_RATE / $REF_IDEAL" | bc -l)" "$REF_IDEAL")
else
    REF_LINE="| reference batch_runner.py: no record written | | | | | | | |"
    tail -n 20 "$WORK/ref/log" >&2
fi
stop_standin

echo
echo "Issue #18's row: 2 calls of 100 ms per prompt, the first a real terminal call; ideal ="
echo "$WORKERS workers / 0.2 s = $IDEAL2 prompts/s. Rates in this table are prompts/s."
echo
echo "| run | prompts | calls | wall s | prompts/s | % of ideal | peak RSS MB | CPU % (run + tools) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${ROW2[@]}"
echo "$REF_LINE"
if [[ -n $REF_RATE ]]; then
    printf '\ntraj-run (bwrap, %d workers) / reference (%d processes): %.0fx the prompts per second.\n' \
        "$WORKERS" "$REF_WORKERS" "$(echo "$RATE_TRAJ / $REF_RATE" | bc -l)"
fi

# The ceiling of that row on this machine: the same command run as fast as it can be,
# with no agent and no model (examples/sandbox_ceiling.rs), by WORKERS threads, one task
# per call: as a plain child (fork/exec alone), in the sandbox each worker keeps (as
# traj-run does by default: the call, then the task-end reset), and in a new sandbox per
# call (workspace, namespaces, limits, clean-up). Kept sandboxes run as many tasks as
# traj-run's row, so that each is reused as often; new ones run 2000.
CEIL="$ROOT/target/release/examples/sandbox-ceiling"
[[ -x $CEIL ]] || (cd "$ROOT" && cargo build --release --locked --example sandbox-ceiling >&2)
echo
echo "The ceiling: \`echo ... | wc -c\` run by $WORKERS threads with no agent and no model"
echo "(\`target/release/examples/sandbox-ceiling MODE CALLS $WORKERS\`); CPU ms per call includes"
echo "every process of the call (counted by cgroup); the CPU % above counts the same way:"
echo "traj-run, its sandboxes and its tools. traj-run's row above needs one such call per prompt, plus"
echo "the stand-in's CPU for two requests, on the same $(nproc) cores."
echo
echo "| how the command runs | calls | calls/s | CPU ms per call | traj-run's prompts/s of it |"
echo "|---|---:|---:|---:|---:|"
for mode in bare local-pod bwrap-pod local bwrap; do
    case $mode in
        local|bwrap) NC=2000 ;;
        *) NC=$N2 ;;
    esac
    tree_cpu "$WORK/ceil.cpu" "$CEIL" "$mode" "$NC" "$WORKERS" > "$WORK/ceil.out"
    C=$(cat "$WORK/ceil.out")
    MS=$(echo "$(cat "$WORK/ceil.cpu") * 1000 / $NC" | bc -l)
    case $mode in
        bare) OF=$(printf '%.0f%% (bwrap, kept)' "$(echo "100 * $RATE_TRAJ / $C" | bc -l)") ;;
        local-pod) OF=$(printf '%.0f%%' "$(echo "100 * $RATE_LOCAL / $C" | bc -l)") ;;
        bwrap-pod) OF=$(printf '%.0f%%' "$(echo "100 * $RATE_TRAJ / $C" | bc -l)") ;;
        bwrap) OF=$(printf '%.0f%% (--no-sandbox-reuse)' "$(echo "100 * $RATE_FRESH / $C" | bc -l)") ;;
        *) OF="" ;;
    esac
    printf '| %s | %d | %.0f | %.2f | %s |\n' "$mode" "$NC" "$C" "$MS" "$OF"
    [[ $mode == bare ]] && { BARE=$C; BARE_MS=$MS; }
done
echo
printf 'The physical limit of this row: the command alone (%.2f ms of CPU for `sh` and `wc`)\n' "$BARE_MS"
printf 'runs %.0f times a second on these %d cores, %.0f%% of the ideal %d, before any model\n' \
    "$BARE" "$(nproc)" "$(echo "100 * $BARE / $IDEAL2" | bc -l)" "$IDEAL2"
printf 'request, agent or sandbox; traj-run (bwrap, kept sandboxes) reaches %.0f%% of that rate.\n' \
    "$(echo "100 * $RATE_TRAJ / $BARE" | bc -l)"

echo
echo "Agent scenario, per prompt (ideal: 4 x ${LATENCY_MS} ms of model time): $TIMES."
echo "Its tools run in traj-run's default sandbox (\`--sandbox auto\`: bwrap where it works, as"
echo "here), kept by each worker between its tasks (docs/tools.md); its one terminal call"
echo "per prompt is bounded by the bwrap-pod ceiling above."
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
PER=$(echo "($RSS_BIG - $RSS_SMALL) / ($WORKERS - 16)" | bc -l)
printf 'Memory: peak RSS %.1f MB with %d workers, %.1f MB with 16: about %.0f KB per in-flight agent.\n' \
    "$(echo "$RSS_BIG / 1024" | bc -l)" "$WORKERS" "$(echo "$RSS_SMALL / 1024" | bc -l)" "$PER"
