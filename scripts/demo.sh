#!/usr/bin/env bash
# The offline demo: build, start the stand-in endpoint, run the whole batch-then-compress
# pipeline over examples/prompts.jsonl, and say where each file is and what each stage did.
#
# Usage: scripts/demo.sh [--run NAME] [--base-url URL --model MODEL] [--fresh]
#   --run NAME       run directory data/NAME (default: demo, or demo-live with a real model)
#   --base-url URL   a real OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama, OpenAI...)
#   --model MODEL    the model to ask (default anthropic/claude-sonnet-4.6 on OpenRouter)
#   --fresh          delete data/NAME first
#
# With no API key and no --base-url, the model is a STAND-IN: a scripted local server
# (tests/standin) that answers each demo prompt with realistic tool calls. The tools run
# for real in a sandboxed workspace. With OPENROUTER_API_KEY set (or --base-url), the same
# command produces real data from a real model.
set -euo pipefail
cd "$(dirname "$0")/.."

run=""; base_url=""; model=""; fresh=0
while [ $# -gt 0 ]; do
  case "$1" in
    --run) run="$2"; shift 2 ;;
    --base-url) base_url="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }

make --no-print-directory build >&2

standin_pid=""
cleanup() { [ -n "$standin_pid" ] && kill "$standin_pid" 2>/dev/null || true; }
trap cleanup EXIT

if [ -z "$base_url" ] && [ -z "${OPENROUTER_API_KEY:-}" ]; then
  run=${run:-demo}
  addr_file=$(mktemp)
  target/release/examples/standin --port 0 --script examples/standin-script.json > "$addr_file" &
  standin_pid=$!
  for _ in $(seq 100); do [ -s "$addr_file" ] && break; sleep 0.05; done
  base_url=$(head -n 1 "$addr_file"); rm -f "$addr_file"
  [ -n "$base_url" ] || { echo "demo: the stand-in did not start" >&2; exit 1; }
  model=standin
  say "NO API KEY: the model is a STAND-IN (scripted answers from examples/standin-script.json)"
  say "served at $base_url. The tools (terminal, write_file, ...) run for real in a sandbox."
  say "Set OPENROUTER_API_KEY, or pass --base-url, to make real data with the same command."
else
  run=${run:-demo-live}
  base_url=${base_url:-https://openrouter.ai/api/v1}
  model=${model:-anthropic/claude-sonnet-4.6}
  say "real model: $model at $base_url"
fi

[ "$fresh" = 1 ] && rm -rf "data/$run"
dir="data/$run"

make --no-print-directory pipeline RUN="$run" DATASET=examples/prompts.jsonl \
  BASE_URL="$base_url" MODEL="$model" DISTRIBUTION=terminal_only WORKERS=4 BATCH_SIZE=5 \
  MAX_TURNS=6 TARGET_TOKENS=2000 TOKENIZER=o200k_base >&2

count() { if [ -f "$1" ]; then wc -l < "$1" | tr -d ' '; else echo 0; fi; }
batches=$(cat "$dir"/batch_*.jsonl 2>/dev/null | wc -l | tr -d ' ')
echo
echo "What each stage did (data/$run):"
printf '  %-19s %s\n' "traj-sample-tools" "$(count "$dir/tasks.jsonl") prompts -> $dir/tasks.jsonl (toolsets per prompt)"
printf '  %-19s %s\n' "traj-run" "$batches raw records in $dir/batch_*.jsonl, $(count "$dir/failures.jsonl") failures in failures.jsonl"
printf '  %-19s %s\n' "" "checkpoint: $dir/checkpoint.json, statistics: $dir/statistics.json"
printf '  %-19s %s\n' "traj-merge" "ordered, de-duplicated ($(count "$dir/merge_rejects.jsonl") rejected: merge_rejects.jsonl)"
printf '  %-19s %s\n' "traj-normalize" "Hermes ShareGPT ($(count "$dir/normalize_rejects.jsonl") rejected: normalize_rejects.jsonl)"
printf '  %-19s %s\n' "traj-filter" "$(count "$dir/trajectories.jsonl") kept -> $dir/trajectories.jsonl ($(count "$dir/rejects.jsonl") rejected: rejects.jsonl)"
printf '  %-19s %s\n' "traj-compress" "$(count "$dir/trajectories_compressed.jsonl") rows -> $dir/trajectories_compressed.jsonl (metrics: compression_metrics.json)"
echo
echo "Look at one trajectory:  head -n 1 $dir/trajectories.jsonl | jq -r '.conversations[] | \"[\" + .from + \"] \" + .value' | less"
