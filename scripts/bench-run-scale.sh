#!/usr/bin/env bash
# traj-run as the workers grow, at a real model's pace, and beside its floor.
#
#   1. 64, 256 and 1,024 workers on one scenario (a terminal call in bwrap and an answer,
#      100 ms a reply): prompts/s, % of the ideal (workers / 0.2 s), peak RSS, and the CPU
#      per prompt of traj-run itself (statistics.json `this_run.cpu_seconds`) apart from
#      its children's (its tools, the sandboxes).
#   2. A real model's pace: 1 s a reply, 256 workers, 2,000 prompts, against the ideal of
#      ceil(2000 / 256) = 8 waves of 2 s.
#   3. The floor: the exact command line traj's bwrap sandbox spawns for the call, spawned
#      by a bare loop (examples/sandbox_ceiling.rs `loop-bwrap`) by 256 threads, and the
#      command alone (`bare`); CPU per call, beside traj-run's CPU per prompt.
#
# CPU is counted by cgroup (lib-bench.sh tree_cpu): it needs a writable cgroup, as root.
#
# Usage: scripts/bench-run-scale.sh [PROMPTS]   (default 4000 prompts for part 1)
# Prints a markdown section on stdout. Builds what it needs in release.
set -euo pipefail

PROMPTS=${1:-4000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TRAJ_RUN_BIN:-$ROOT/target/release/traj-run}
STANDIN=${TRAJ_STANDIN_BIN:-$ROOT/target/release/examples/standin}
CEIL="$ROOT/target/release/examples/sandbox-ceiling"
(cd "$ROOT" && cargo build --release --quiet --locked --bin traj-run --example standin --example sandbox-ceiling >&2)
# shellcheck source=scripts/lib-bench.sh
source "$ROOT/scripts/lib-bench.sh"
standin_workdir run-scale
need_tree_cpu
mkdir -p "$WORK/ws"

cat >"$WORK/term.json" <<'JSON'
{"rules": [{"match": "", "turns": [
  {"reasoning": "Count it.", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo {prompt} | wc -c"}}]},
  {"reasoning": "Done.", "content": "It said: {tool_output}"}
]}]}
JSON
prompts() { # N FILE
    python3 - "$1" "$2" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for i in range(int(sys.argv[1])):
        f.write(json.dumps({"prompt": f"Terminal task {i}", "toolsets": ["terminal"]}) + "\n")
PY
}
prompts "$PROMPTS" "$WORK/prompts.jsonl"
prompts 2000 "$WORK/prompts2000.jsonl"

# run NAME PROMPTS WORKERS [flags...]: sets SECS, RSS_MB, RECORDS, FAILED, SELF_MS and CHILD_MS
# (CPU ms per prompt of traj-run itself and of its children: the whole tree's CPU, from
# its cgroup, less traj-run's own).
run() {
    local name=$1 prompts=$2 workers=$3 t0 t1 rss tree
    shift 3
    settle
    t0=$(date +%s.%N)
    tree_cpu "$WORK/$name.cpu" $TIME -f "%M" -o "$WORK/$name.t" \
        "$BIN" --model standin --base-url "$URL" --run-dir "$WORK/$name" \
        --num-workers "$workers" --batch-size 1000 -q --workspace-root "$WORK/ws" \
        --sandbox bwrap "$@" "$prompts" >"$WORK/$name.out" || true # failures are counted
    t1=$(date +%s.%N)
    SECS=$(echo "$t1 - $t0" | bc -l)
    rss=$(tail -n1 "$WORK/$name.t")
    RSS_MB=$(echo "$rss / 1024" | bc -l)
    RECORDS=$(wc -l <"$WORK/$name.out")
    FAILED=$(jq '.this_run.failures' "$WORK/$name/statistics.json")
    local self
    self=$(jq '.this_run.cpu_seconds' "$WORK/$name/statistics.json")
    SELF_MS=$(echo "$self * 1000 / $RECORDS" | bc -l)
    tree=$(cat "$WORK/$name.cpu")
    CHILD_MS=$(echo "($tree - $self) * 1000 / $RECORDS" | bc -l)
}

echo "## traj-run as workers grow, at a real model's pace, and beside its floor"
echo
echo "\`scripts/bench-run-scale.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores. Scenario: a terminal"
echo "call (\`echo ... | wc -c\`, \`--sandbox bwrap\`, each worker's sandbox kept between its tasks"
echo "unless said) and an answer; the stand-in endpoint answers after the latency given."
echo "CPU per prompt: traj-run's own (\`this_run.cpu_seconds\` of statistics.json: request"
echo "building, parsing, records, the pods' supervision) apart from its children's (the"
echo "sandboxes and the commands): the CPU of the run's cgroup, every process it started,"
echo "less traj-run's own. (\`/usr/bin/time\` misses most of a bwrap call: bwrap's sandboxed"
echo "processes are reaped inside their PID namespace, not by a parent that waits for them.)"
echo
echo "| workers | records | failures | wall s | prompts/s | % of ideal | peak RSS MB | traj-run CPU ms/prompt | children CPU ms/prompt |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
start_standin "$WORK/term.json" 100
for w in 64 256 1024; do
    run "w$w" "$WORK/prompts.jsonl" "$w"
    ideal=$(echo "$w / 0.2" | bc -l)
    rate=$(echo "$RECORDS / $SECS" | bc -l)
    printf '| %d | %d | %d | %.2f | %.0f | %.1f%% | %.1f | %.2f | %.2f |\n' "$w" "$RECORDS" "$FAILED" "$SECS" "$rate" \
        "$(echo "100 * $rate / $ideal" | bc -l)" "$RSS_MB" "$SELF_MS" "$CHILD_MS"
    [[ $w == 256 ]] && { KEPT_SELF=$SELF_MS; KEPT_CHILD=$CHILD_MS; }
done
run fresh "$WORK/prompts2000.jsonl" 256 --no-sandbox-reuse
FRESH_SELF=$SELF_MS
FRESH_CHILD=$CHILD_MS
stop_standin

start_standin "$WORK/term.json" 1000
run pace "$WORK/prompts2000.jsonl" 256
stop_standin
waves=$(((2000 + 255) / 256))
echo
printf 'A real model'"'"'s pace (1 s a reply, 256 workers, 2,000 prompts, two replies each): %.2f s\n' "$SECS"
printf 'against the ideal of %d waves of 2 s = %d s: **%.1f%% of ideal**.\n' "$waves" "$((waves * 2))" \
    "$(echo "100 * $waves * 2 / $SECS" | bc -l)"

# The floor: CPU per call of the exact bwrap command line, and of the command alone, every
# process of the call counted (tree_cpu).
floor() { # MODE CALLS -> CPU ms per call
    settle
    tree_cpu "$WORK/floor.cpu" "$CEIL" "$1" "$2" 256 >/dev/null
    echo "$(cat "$WORK/floor.cpu") * 1000 / $2" | bc -l
}
LOOP_MS=$(floor loop-bwrap 2000)
POD_MS=$(floor bwrap-pod 4000)
BARE_MS=$(floor bare 4000)
KEPT=$(echo "$KEPT_SELF + $KEPT_CHILD" | bc -l)
FRESH=$(echo "$FRESH_SELF + $FRESH_CHILD" | bc -l)
echo
echo "| CPU per prompt (one terminal call; the stand-in's CPU not counted) | ms | traj-run / floor |"
echo "|---|---:|---:|"
printf '| floor: the exact bwrap command line of a call, spawned by a bare loop (`loop-bwrap`) | %.2f | |\n' "$LOOP_MS"
printf '| traj-run `--no-sandbox-reuse` (that command line once per call): traj-run %.2f + children %.2f | %.2f | **%.2fx** |\n' \
    "$FRESH_SELF" "$FRESH_CHILD" "$FRESH" "$(echo "$FRESH / $LOOP_MS" | bc -l)"
printf '| the command in a kept bwrap sandbox by traj'"'"'s pod, no agent (`bwrap-pod`) | %.2f | |\n' "$POD_MS"
printf '| traj-run default (kept sandboxes): traj-run %.2f + children %.2f | %.2f | %.2fx of loop-bwrap, %.2fx of bwrap-pod |\n' \
    "$KEPT_SELF" "$KEPT_CHILD" "$KEPT" "$(echo "$KEPT / $LOOP_MS" | bc -l)" "$(echo "$KEPT / $POD_MS" | bc -l)"
printf '| the command alone, a plain child (`bare`) | %.2f | |\n' "$BARE_MS"
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
