#!/usr/bin/env bash
# traj-run as the workers grow, at a real model's pace, and beside its floor.
#
#   1. 64, 256 and 1,024 workers on one scenario (a terminal call in bwrap and an answer,
#      100 ms a reply): prompts/s, % of the ideal (workers / 0.2 s), peak RSS, and the CPU
#      per prompt of traj-run itself (statistics.json `this_run.cpu_seconds`) apart from
#      its children's (its tools, the sandboxes).
#   2. A real model's pace: 1 s a reply, 256 workers, 2,000 prompts, against the ideal of
#      ceil(2000 / 256) = 8 waves of 2 s, and against the floor of that scenario on this
#      machine: 256 threads that wait 1 s, run the same command, wait 1 s, with no agent,
#      model or HTTP (examples/sandbox_ceiling.rs with WAIT_MS: the waits alone, the
#      command as a plain child, the command in traj's kept bwrap sandbox). Three rounds,
#      each traj-run then its floors; the median is reported, and where the run's time
#      goes, from its records' own timings.
#   3. The floor: the exact command line traj's bwrap sandbox spawns for the call, spawned
#      by a bare loop (examples/sandbox_ceiling.rs `loop-bwrap`) by 256 threads, and the
#      command alone (`bare`); CPU per call, beside traj-run's CPU per prompt. traj-run
#      `--no-sandbox-reuse` (that command line once per call) against it in three rounds,
#      each a run then its floor, and the median round reported.
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
# floor MODE CALLS: CPU ms per call of sandbox-ceiling MODE, every process of the call
# counted (tree_cpu).
floor() {
    settle
    tree_cpu "$WORK/floor.cpu" "$CEIL" "$1" "$2" 256 >/dev/null
    echo "$(cat "$WORK/floor.cpu") * 1000 / $2" | bc -l
}
# --no-sandbox-reuse against its floor, three rounds in turn (one CPU ratio is noisy on a
# shared machine: each round pairs a run with a floor measured right after it).
F_SELF=() F_CHILD=() F_LOOP=() F_RATIO=()
for round in 1 2 3; do
    run "fresh$round" "$WORK/prompts2000.jsonl" 256 --no-sandbox-reuse
    F_SELF+=("$SELF_MS") F_CHILD+=("$CHILD_MS")
    F_LOOP+=("$(floor loop-bwrap 2000)")
    F_RATIO+=("$(echo "($SELF_MS + $CHILD_MS) / ${F_LOOP[-1]}" | bc -l)")
done
stop_standin

start_standin "$WORK/term.json" 1000
# pace_floor MODE: seconds taken by the scenario at a model's pace with no agent.
pace_floor() {
    settle
    "$CEIL" "$1" 2000 256 1000 2>&1 >/dev/null | awk '/ s$/ { print $1 }'
}
PACE=() NONE=() BARE=() POD=()
for round in 1 2 3; do
    run "pace$round" "$WORK/prompts2000.jsonl" 256
    PACE+=("$SECS")
    NONE+=("$(pace_floor none)")
    BARE+=("$(pace_floor bare)")
    POD+=("$(pace_floor bwrap-pod)")
done
stop_standin
# median A B C: the middle one of three figures.
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
waves=$(((2000 + 255) / 256))
ideal=$((waves * 2))
pct() { echo "100 * $ideal / $1" | bc -l; }
echo
echo "A real model's pace: 1 s a reply, 256 workers, 2,000 prompts, two replies each, against"
echo "the ideal of $waves waves of 2 s = $ideal s, and against the floor of the same scenario on"
echo "this machine: 256 threads that wait 1 s, run the same command, wait 1 s, with no agent,"
echo "model or HTTP (\`sandbox-ceiling MODE 2000 256 1000\`). Three rounds in turn:"
echo
echo "| round | traj-run s | % of ideal | waits alone (\`none\`) s | the command, a plain child (\`bare\`) s | in a kept bwrap sandbox (\`bwrap-pod\`) s | traj-run / \`bwrap-pod\` |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for i in 0 1 2; do
    printf '| %d | %.2f | %.1f%% | %.2f | %.2f | %.2f | %.3f |\n' "$((i + 1))" "${PACE[i]}" "$(pct "${PACE[i]}")" \
        "${NONE[i]}" "${BARE[i]}" "${POD[i]}" "$(echo "${PACE[i]} / ${POD[i]}" | bc -l)"
done
M_PACE=$(median "${PACE[@]}") M_BARE=$(median "${BARE[@]}") M_POD=$(median "${POD[@]}")
echo
printf 'Median: traj-run %.2f s, **%.1f%% of ideal**. The floor without traj: the command as a plain\n' \
    "$M_PACE" "$(pct "$M_PACE")"
printf 'child %.2f s (%.1f%% of ideal), in the kept sandbox %.2f s (%.1f%%); traj-run reaches %.1f%%\n' \
    "$M_BARE" "$(pct "$M_BARE")" "$M_POD" "$(pct "$M_POD")" "$(echo "100 * $M_POD / $M_PACE" | bc -l)"
M_NONE=$(median "${NONE[@]}")
printf 'of the sandboxed floor. The waits alone take %.2f s (%.1f%%): what separates the floor from\n' \
    "$M_NONE" "$(pct "$M_NONE")"
echo "the ideal is the commands themselves, 256 at once on 2 cores, each wave's last waiting for the rest."
echo
echo "Where round 1's time goes, from its records (\`timings\`):"
echo
python3 - "$WORK/pace1" <<'PY'
import datetime, glob, json, statistics, sys
rows = []
for path in sorted(glob.glob(sys.argv[1] + "/batch_*.jsonl")):
    for line in open(path):
        t = json.loads(line)["timings"]
        start = datetime.datetime.fromisoformat(t["started_at"].replace("Z", "+00:00")).timestamp()
        rows.append((start, t["duration_ms"], t["llm_ms"], t["tool_ms"]))
rows.sort()
t0 = rows[0][0]
tool = sorted(r[3] for r in rows)
last_end = max(r[0] + r[1] / 1000 for r in rows) - t0
print(f"- a task: {statistics.mean(r[1] for r in rows):.0f} ms on average; its two replies "
      f"{statistics.mean(r[2] for r in rows):.0f} ms (the stand-in waits 2 x 1,000), its terminal call "
      f"{statistics.mean(tool):.0f} ms (median {tool[len(tool) // 2]}, p90 {tool[len(tool) * 9 // 10]}, "
      f"max {tool[-1]})")
print(f"- the 256th task started {rows[255][0] - t0:.2f} s after the first; the last started at "
      f"{rows[-1][0] - t0:.2f} s and the last ended at {last_end:.2f} s")
PY
POD_MS=$(floor bwrap-pod 4000)
BARE_MS=$(floor bare 4000)
KEPT=$(echo "$KEPT_SELF + $KEPT_CHILD" | bc -l)
# The round whose ratio is the median stands for the three.
mid=$(for i in 0 1 2; do echo "${F_RATIO[i]} $i"; done | sort -g | sed -n 2p | cut -d' ' -f2)
LOOP_MS=${F_LOOP[mid]}
FRESH_SELF=${F_SELF[mid]} FRESH_CHILD=${F_CHILD[mid]}
FRESH=$(echo "$FRESH_SELF + $FRESH_CHILD" | bc -l)
echo
echo "CPU per prompt of traj-run \`--no-sandbox-reuse\` (the floor's command line once per call)"
echo "against the floor, the exact bwrap command line of a call spawned by a bare loop of 256"
echo "threads (\`loop-bwrap\`), three rounds in turn, each a run then its floor:"
echo
echo "| round | traj-run ms | children ms | traj-run + children ms | floor ms | ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
for i in 0 1 2; do
    printf '| %d | %.2f | %.2f | %.2f | %.2f | %.2fx |\n' "$((i + 1))" "${F_SELF[i]}" "${F_CHILD[i]}" \
        "$(echo "${F_SELF[i]} + ${F_CHILD[i]}" | bc -l)" "${F_LOOP[i]}" "${F_RATIO[i]}"
done
echo
echo "| CPU per prompt (one terminal call; the stand-in's CPU not counted) | ms | traj-run / floor |"
echo "|---|---:|---:|"
printf '| floor: the exact bwrap command line of a call, spawned by a bare loop (`loop-bwrap`), median round | %.2f | |\n' "$LOOP_MS"
printf '| traj-run `--no-sandbox-reuse` (that command line once per call), median round: traj-run %.2f + children %.2f | %.2f | **%.2fx** |\n' \
    "$FRESH_SELF" "$FRESH_CHILD" "$FRESH" "$(echo "$FRESH / $LOOP_MS" | bc -l)"
printf '| the command in a kept bwrap sandbox by traj'"'"'s pod, no agent (`bwrap-pod`) | %.2f | |\n' "$POD_MS"
printf '| traj-run default (kept sandboxes): traj-run %.2f + children %.2f | %.2f | %.2fx of loop-bwrap, %.2fx of bwrap-pod |\n' \
    "$KEPT_SELF" "$KEPT_CHILD" "$KEPT" "$(echo "$KEPT / $LOOP_MS" | bc -l)" "$(echo "$KEPT / $POD_MS" | bc -l)"
printf '| the command alone, a plain child (`bare`) | %.2f | |\n' "$BARE_MS"
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
