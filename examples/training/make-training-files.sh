#!/usr/bin/env bash
# Turn traj's trajectories into the files dataset_info.json and axolotl.yaml name.
# Usage: examples/training/make-training-files.sh IN.jsonl TOOLS.json OUT_DIR
set -euo pipefail
in=$1 tools=$2 out=$3
mkdir -p "$out"
# Hermes ShareGPT rows that alternate (traj_hermes, axolotl); the rest go to the rejects.
traj-normalize --merge-consecutive --columns core --tools "$tools" "$in" \
  | traj-filter --alternating --rejects "$out/not_alternating.jsonl" -o "$out/trajectories.jsonl"
# LLaMA-Factory's own turns, sharegpt and openai formatting (traj_llamafactory*).
traj-normalize --to llamafactory --columns core --tools "$tools" \
  "$out/trajectories.jsonl" -o "$out/trajectories_llamafactory.jsonl"
traj-normalize --to llamafactory-openai --columns core --tools "$tools" \
  "$out/trajectories.jsonl" -o "$out/trajectories_llamafactory_openai.jsonl"
# OpenAI messages with object arguments (datasets, transformers' apply_chat_template).
traj-normalize --to openai --arguments object --tools-as string --columns core \
  --tools "$tools" "$out/trajectories.jsonl" -o "$out/trajectories_openai.jsonl"
