#!/usr/bin/env bash
# Sample long trajectories from dataset files on disk and compress them: traj's version
# of the reference's sample_and_compress.py, reproducible with --seed.
#
# Usage: scripts/sample-and-compress.sh [options] INPUT.jsonl[.gz] ...
#   --total-samples N   rows to keep (default 2500)
#   --min-tokens N      keep rows of at least N tokens before sampling (default 16000)
#   --seed S            sampling seed (default 42): same inputs + seed = same sample
#   --target-tokens N   compression budget (default 15250)
#   --tokenizer SPEC    o200k_base (default), cl100k_base, a .tiktoken or tokenizer.json file
#   --output FILE       the merged result (default data/compressed_agentic.jsonl)
#   --config FILE       traj-compress's YAML config (the reference's trajectory_compression.yaml)
#   --base-url URL      OpenAI-compatible endpoint of the summariser (as traj-compress)
#   --model NAME        summariser model (as traj-compress)
#   --api-key-env VAR   environment variable holding the API key (as traj-compress)
#   --bin DIR           where the traj binaries are (default: target/release, or
#                       $CARGO_TARGET_DIR/release, else PATH)
#
# Each input is normalised to Hermes ShareGPT (any shape traj-normalize reads: OpenAI
# messages, ShareGPT variants, HuggingFace dumps fetched with huggingface-cli) and tagged
# with `_source_dataset` (the file name). Rows under --min-tokens are dropped (counted in
# the rejects file), then `traj-merge --key line --sample` drops exact duplicates only
# (byte-identical rows, counted and kept in sample_rejects.jsonl) and keeps a uniform
# sample of --total-samples rows of the whole qualifying pool, chosen by a seeded hash of
# each row (bottom-k: independent of input order and of thread count), then
# traj-compress fits each row into the budget.
#
# Example:
#   huggingface-cli download NousResearch/hermes-agent-megascience-sft1 --repo-type dataset --local-dir hf/
#   scripts/sample-and-compress.sh --total-samples 500 --min-tokens 8000 hf/data/*.jsonl
set -euo pipefail

total=2500; min_tokens=16000; seed=42; target=15250; tokenizer=o200k_base
output=data/compressed_agentic.jsonl; bin=""; inputs=(); compress_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --total-samples) total="$2"; shift 2 ;;
    --min-tokens) min_tokens="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --target-tokens) target="$2"; shift 2 ;;
    --tokenizer) tokenizer="$2"; shift 2 ;;
    --output) output="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --config|--base-url|--model|--api-key-env) compress_flags+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "sample-and-compress: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) inputs+=("$1"); shift ;;
  esac
done
[ ${#inputs[@]} -gt 0 ] || { echo "sample-and-compress: no input files (see --help)" >&2; exit 2; }
# shellcheck source=lib-bins.sh
source "$(dirname "$0")/lib-bins.sh"
find_bins traj-normalize

work="${output%.jsonl}_work"
mkdir -p "$work"
rm -f "$work"/*.long.jsonl
i=0
for f in "${inputs[@]}"; do
  name=$(basename "$f"); name=${name%.gz}; name=${name%.jsonl}
  # numbered: two inputs of the same name (hf/a/train.jsonl, hf/b/train.jsonl) never
  # overwrite each other's rows
  i=$((i + 1)); part="$work/$(printf %03d "$i").$name"
  t traj-normalize --set "_source_dataset=$name" --rejects "$part.normalize_rejects.jsonl" "$f" \
    | t traj-filter --min-row-tokens "$min_tokens" --tokenizer "$tokenizer" \
        --rejects "$part.short.jsonl" -q -o "$part.long.jsonl"
  echo "sample-and-compress: $f: $(wc -l < "$part.long.jsonl") rows of >= $min_tokens tokens" >&2
done
pool=$(cat "$work"/*.long.jsonl | wc -l)
t traj-merge --sample "$total" --seed "$seed" --key line -q --rejects "$work/sample_rejects.jsonl" \
  "$work"/*.long.jsonl -o "$work/sample.jsonl"
dups=$(wc -l < "$work/sample_rejects.jsonl")
echo "sample-and-compress: pool of $pool rows, $dups exact duplicates dropped" \
  "($work/sample_rejects.jsonl), sampled $(wc -l < "$work/sample.jsonl")" >&2
t traj-compress --target-max-tokens "$target" --tokenizer "$tokenizer" \
  ${compress_flags[@]+"${compress_flags[@]}"} \
  --stats "$work/compression_metrics.json" "$work/sample.jsonl" -o "$output"
echo "sample-and-compress: $(wc -l < "$output") rows in $output (metrics: $work/compression_metrics.json)" >&2
