#!/usr/bin/env bash
# Benchmark the scored-rollout paths: traj-filter's group predicates (two reads, the
# verdicts written serially) against its one-read pass-through, and traj-normalize
# --to groups / --to dpo (converted rows spooled, indexed and gathered) against
# --to openai (the same conversion, one row out per row in), on TASKS tasks of four
# rollouts each: the rollouts of tests/fixtures/atropos_scored_groups.jsonl (token ids,
# masks and logprobs per rollout, as Atropos dumps carry them), each task its own uid.
#
# Usage: scripts/bench-rl.sh [TASKS] [RUNS]   (defaults: 6000 tasks, best of 3)
# (TRAJ_BENCH_BIN_DIR=DIR uses DIR's binaries, not a release build.)
# Prints a markdown section on stdout. Needs python3 and /usr/bin/time.
set -euo pipefail

TASKS=${1:-6000}
RUNS=${2:-3}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib-bench.sh
source "$ROOT/scripts/lib-bench.sh"
mkdir -p "$BENCH"
if [[ -z ${TRAJ_BENCH_BIN_DIR:-} ]]; then
    cargo build --release --quiet --locked --bin traj-normalize --bin traj-filter --manifest-path "$ROOT/Cargo.toml" >&2
fi

CORPUS="$BENCH/rl-${TASKS}.jsonl"
if [[ ! -s $CORPUS ]]; then
    "$DIR/traj-normalize" -q --to openai "$ROOT/tests/fixtures/atropos_scored_groups.jsonl" -o "$BENCH/rl-rows.jsonl"
    python3 - "$TASKS" "$BENCH/rl-rows.jsonl" >"$CORPUS" <<'PY'
import json, sys
n, rows = int(sys.argv[1]), [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
for t in range(n):
    for i, r in enumerate(rows[(t % 3) * 4:(t % 3) * 4 + 4]):
        r = dict(r)
        r["task_uid"] = f"{t:08x}:0:{i}"
        sys.stdout.write(json.dumps(r, ensure_ascii=False) + "\n")
PY
fi
BYTES=$(stat -L -c %s "$CORPUS")
cat "$CORPUS" >/dev/null # warm the page cache

F="$DIR/traj-filter"
N="$DIR/traj-normalize"
read -r t_pass rss_pass < <(best "'$F' -q '$CORPUS' -o /dev/null")
read -r t_best rss_best < <(best "'$F' -q --best-of '$CORPUS' -o /dev/null")
read -r t_sig rss_sig < <(best "'$F' -q --group-has-signal '$CORPUS' -o /dev/null")
read -r t_stats rss_stats < <(best "'$F' -q '$CORPUS' -o /dev/null --stats /dev/null")
read -r t_open rss_open < <(best "'$N' -q --to openai '$CORPUS' -o /dev/null")
read -r t_groups rss_groups < <(best "'$N' -q --to groups '$CORPUS' -o /dev/null")
read -r t_dpo rss_dpo < <(best "'$N' -q --to dpo '$CORPUS' -o /dev/null")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
echo "## Scored rollouts: group predicates, --to groups, --to dpo"
echo
echo "$TASKS tasks of 4 rollouts ($((TASKS * 4)) rows, $((BYTES / 1000000)) MB: the rollouts of"
echo "\`tests/fixtures/atropos_scored_groups.jsonl\` with their token ids, masks and logprobs),"
echo "\`scripts/bench-rl.sh $TASKS\`, best of $RUNS, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)."
echo "The group predicates read the input twice and write the verdicts serially; --to"
echo "groups and --to dpo convert in parallel into a spool, index it, and write each"
echo "task's row from its rollouts' member texts (no value parsed again)."
echo
echo "| command | seconds | MB/s | peak RSS MB | x its baseline |"
echo "|---|---:|---:|---:|---:|"
echo "| traj-filter (no predicate: the baseline of the three below) | $t_pass | $(mbs "$t_pass") | $(mb "$rss_pass") | 1.0 |"
echo "| traj-filter --best-of | $t_best | $(mbs "$t_best") | $(mb "$rss_best") | $(ratio "$t_best" "$t_pass") |"
echo "| traj-filter --group-has-signal | $t_sig | $(mbs "$t_sig") | $(mb "$rss_sig") | $(ratio "$t_sig" "$t_pass") |"
echo "| traj-filter --stats (reward figures per task) | $t_stats | $(mbs "$t_stats") | $(mb "$rss_stats") | $(ratio "$t_stats" "$t_pass") |"
echo "| traj-normalize --to openai (the baseline of the two below) | $t_open | $(mbs "$t_open") | $(mb "$rss_open") | 1.0 |"
echo "| traj-normalize --to groups | $t_groups | $(mbs "$t_groups") | $(mb "$rss_groups") | $(ratio "$t_groups" "$t_open") |"
echo "| traj-normalize --to dpo | $t_dpo | $(mbs "$t_dpo") | $(mb "$rss_dpo") | $(ratio "$t_dpo" "$t_open") |"
