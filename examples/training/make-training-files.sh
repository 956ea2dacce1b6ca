#!/usr/bin/env bash
# Turn traj's trajectories into the two files dataset_info.json and axolotl.yaml name.
# Usage: examples/training/make-training-files.sh IN.jsonl TOOLS.json OUT_DIR
set -euo pipefail
in=$1 tools=$2 out=$3
mkdir -p "$out"
traj-normalize --merge-consecutive --columns core --tools "$tools" "$in" \
  | traj-filter --alternating --rejects "$out/not_alternating.jsonl" -o "$out/trajectories.jsonl"
traj-normalize --to openai --arguments object --tools-as string --columns core \
  --tools "$tools" "$out/trajectories.jsonl" -o "$out/trajectories_openai.jsonl"
