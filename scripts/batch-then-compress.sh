#!/usr/bin/env bash
# The batch-then-compress pipeline for people who do not use make.
#
# Usage: scripts/batch-then-compress.sh --dataset FILE --run NAME --model MODEL [options]
#   --dataset FILE        prompt rows ({"prompt": ...} per line)
#   --run NAME            run directory data/NAME (re-running resumes it)
#   --model MODEL         model name at the endpoint
#   --base-url URL        OpenAI-compatible endpoint (default OpenRouter)
#   --api-key-env NAME    variable holding the key (default OPENROUTER_API_KEY)
#   --distribution NAME   toolset distribution (default terminal_only; see
#                         traj-sample-tools --list-distributions)
#   --workers N           agents at once (default 8)
#   --batch-size N        prompts per batch file (default 10)
#   --max-turns N         model calls per prompt (default 10)
#   --target-tokens N     compression budget (default 15250)
#   --bin DIR             where the traj binaries are (default: target/release, or
#                         $CARGO_TARGET_DIR/release, else PATH)
#
# Writes data/NAME/{tasks,batch_N,trajectories,trajectories_compressed}.jsonl, rejects
# files beside them, checkpoint.json, statistics.json and compression_metrics.json.
set -euo pipefail

dataset=""; run=""; model=""; base_url="https://openrouter.ai/api/v1"
key_env=OPENROUTER_API_KEY; distribution=terminal_only; workers=8; batch_size=10
max_turns=10; target=15250; bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) dataset="$2"; shift 2 ;;
    --run) run="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --base-url) base_url="$2"; shift 2 ;;
    --api-key-env) key_env="$2"; shift 2 ;;
    --distribution) distribution="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --batch-size) batch_size="$2"; shift 2 ;;
    --max-turns) max_turns="$2"; shift 2 ;;
    --target-tokens) target="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "batch-then-compress: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$dataset" ] || [ -z "$run" ] || [ -z "$model" ]; then
  echo "batch-then-compress: --dataset, --run and --model are required (see --help)" >&2
  exit 2
fi
# shellcheck source=lib-bins.sh
source "$(dirname "$0")/lib-bins.sh"
find_bins traj-run

dir="data/$run"
mkdir -p "$dir"
t traj-sample-tools --distribution "$distribution" "$dataset" -o "$dir/tasks.jsonl"
# Failed prompts (failures.jsonl) do not stop the batch; a stopped run does (run-ended.sh).
rc=0
t traj-run --resume --run-dir "$dir" --model "$model" --base-url "$base_url" \
  --api-key-env "$key_env" --num-workers "$workers" --batch-size "$batch_size" \
  --max-turns "$max_turns" "$dir/tasks.jsonl" > /dev/null || rc=$?
if [ "$rc" -eq 1 ] && bash "$(dirname "$0")/run-ended.sh" "$dir"; then
  echo "batch-then-compress: some prompts failed ($dir/failures.jsonl): going on with the others; run again to run them again" >&2
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi
t traj-merge "$dir" --rejects "$dir/merge_rejects.jsonl" \
  | t traj-normalize --on-error skip --rejects "$dir/normalize_rejects.jsonl" \
      --tools <(t traj-sample-tools --list-toolsets --json | jq -c '[.[].tools[].name] | unique') \
  | t traj-filter --well-formed --valid-tools --rejects "$dir/rejects.jsonl" \
      --stats "$dir/filter_stats.json" -o "$dir/trajectories.jsonl"
t traj-compress --target-max-tokens "$target" --metrics "$dir/compression_metrics.json" \
  "$dir/trajectories.jsonl" -o "$dir/trajectories_compressed.jsonl"
echo "batch-then-compress: $(wc -l < "$dir/trajectories_compressed.jsonl") trajectories in $dir/trajectories_compressed.jsonl" >&2
