#!/usr/bin/env bash
# Load traj's training files with LLaMA-Factory's own loader (its dataset_info parser and
# converters, data/converter.py) and its qwen template's formatters: 0 rows dropped, no
# tool response wrapped twice, tool-call arguments rendered as objects.
# LLaMA-Factory pulls torch (several GB), so this is `make check-consumers`, not CI.
#   usage: scripts/check-consumers.sh [BIN_DIR]   (default target/release)
#   env:   TRAJ_VENVS (default target/venvs), LLAMAFACTORY (default llamafactory==0.9.5)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release}
venvs=${TRAJ_VENVS:-$here/target/venvs}
spec=${LLAMAFACTORY:-llamafactory==0.9.5}
py="$venvs/llamafactory/bin/python"
if ! "$py" -c 'import llamafactory' >/dev/null 2>&1; then
  mkdir -p "$venvs"
  python3 -m venv "$venvs/llamafactory"
  "$py" -m pip install --quiet --disable-pip-version-check "$spec"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every real source: fixtures and shared data, mixed in one file.
data="$here/tests/fixtures"
shared="$here/../shared/data"
{
  for f in "$data"/llamafactory_glaive_toolcall_en.jsonl "$data"/llamafactory_reason_tool_use_50.jsonl \
    "$data"/hermes_reason_tool_use_50.jsonl "$data"/openai_legacy_shapes.jsonl \
    "$data"/traj_run_records.jsonl "$shared"/llamafactory_*.jsonl; do
    "$bin/traj-normalize" -q --columns core "$f"
  done
  for f in "$data"/swe_agent_demo_trajs.jsonl "$shared"/swe_agent_demo_trajs.jsonl; do
    "$bin/traj-normalize" -q --columns core --messages-field history "$f"
  done
} > "$work/first.jsonl"
jq -sc '[.[].tool_stats | keys[]] | unique' "$work/first.jsonl" > "$work/tools.json"
"$bin/traj-normalize" -q --merge-consecutive --columns core --tools "$work/tools.json" "$work/first.jsonl" \
  | "$bin/traj-filter" -q --alternating --rejects "$work/not_alternating.jsonl" -o "$work/trajectories.jsonl"
"$bin/traj-normalize" -q --to openai --arguments object --tools-as string --columns core \
  --tools "$work/tools.json" "$work/trajectories.jsonl" -o "$work/trajectories_openai.jsonl"
cp "$here/examples/training/dataset_info.json" "$work/"
echo "check-consumers: $(wc -l < "$work/first.jsonl") rows in, $(wc -l < "$work/trajectories.jsonl") alternate, $(wc -l < "$work/not_alternating.jsonl") rejected by --alternating" >&2
HF_DATASETS_OFFLINE=1 HF_HOME="$work/hf" "$py" "$here/scripts/check_llamafactory.py" "$work"
