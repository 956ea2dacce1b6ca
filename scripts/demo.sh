#!/usr/bin/env bash
# The offline demo: build, start the stand-in endpoint, run the whole batch-then-compress
# pipeline over examples/prompts.jsonl, and say where each file is and what each stage did
# (rows in and out, rejects, tokens before and after compression, the sandbox that ran),
# and write a traj-report page of the data (DATA/NAME/report.html).
#
# Usage: scripts/demo.sh [--run NAME] [--base-url URL --model MODEL] [--fresh]
#   --run NAME       run directory DATA/NAME (default: demo, or demo-live with a real model)
#   --base-url URL   a real OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama, OpenAI...)
#   --model MODEL    the model to ask (default anthropic/claude-sonnet-4.6 on OpenRouter)
#   --fresh          delete DATA/NAME first
#   env BIN=DIR      use the binaries in DIR instead of building target/release
#                    ($CARGO_TARGET_DIR/release when that is set)
#   env DATA=DIR     where run directories go (default: data)
#
# With no API key and no --base-url, the model is a STAND-IN: a scripted local server
# (tests/standin) that answers each demo prompt with realistic tool calls. The tools run
# for real, under bubblewrap when it works here (`--sandbox auto`). Two tasks (a generated
# access log, pydoc pages) make long tool output, so that traj-compress has work at the
# demo's 4,000-token budget. With OPENROUTER_API_KEY set (or --base-url), the same
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
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }

if [ -n "${BIN:-}" ]; then
  bin=$BIN
else
  bin=${CARGO_TARGET_DIR:-target}/release
  make --no-print-directory build >&2
fi
data=${DATA:-data}

# --sandbox auto runs the tools under bubblewrap when it works; install it if we can.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing bubblewrap (the demo's tools run inside it)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    say "WARNING: bubblewrap is not installed: the tools will run WITHOUT isolation (install bubblewrap)"
  fi
fi

standin_pid=""
cleanup() { [ -n "$standin_pid" ] && kill "$standin_pid" 2>/dev/null || true; }
trap cleanup EXIT

if [ -z "$base_url" ] && [ -z "${OPENROUTER_API_KEY:-}" ]; then
  run=${run:-demo}
  addr_file=$(mktemp)
  "$bin/examples/standin" --port 0 --script examples/standin-script.json > "$addr_file" &
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
  say "model: $model at $base_url"
fi

dir="$data/$run"
[ "$fresh" = 1 ] && rm -rf "$dir"
budget=4000

make --no-print-directory pipeline BIN="$bin" DATA="$data" RUN="$run" DATASET=examples/prompts.jsonl \
  BASE_URL="$base_url" MODEL="$model" DISTRIBUTION=terminal_only WORKERS=4 BATCH_SIZE=5 \
  MAX_TURNS=6 TARGET_TOKENS=$budget TOKENIZER=o200k_base SANDBOX=auto >&2

# What each stage did, from the files it left (rows in = rows out + rejected + dropped).
count() { if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi; }
prompts=$(count examples/prompts.jsonl)
tasks=$(count "$dir/tasks.jsonl")
records=$(cat "$dir"/batch_*.jsonl 2>/dev/null | grep -c . || true)
failures=$(count "$dir/failures.jsonl")
merge_rej=$(count "$dir/merge_rejects.jsonl")
norm_rej=$(count "$dir/normalize_rejects.jsonl")
filter_in=$(jq .read "$dir/filter_stats.json")
kept=$(count "$dir/trajectories.jsonl")
filter_rej=$(count "$dir/rejects.jsonl")
norm_in=$((filter_in + norm_rej))
merge_dup=$((records - norm_in - merge_rej))
m="$dir/compression_metrics.json"
comp_out=$(count "$dir/trajectories_compressed.jsonl")
read -r comp_in compressed under over before after < <(jq -r '[.summary.total_trajectories,
  .summary.trajectories_compressed, .summary.trajectories_skipped_under_target,
  .summary.trajectories_still_over_limit, .tokens.total_before, .tokens.total_after] | @tsv' "$m")
read -r calls api_tokens < <(jq -r '[.api_calls, .usage.total_tokens] | @tsv' "$dir/statistics.json")
sandbox=$(jq -r '.sandbox.backend // "?"' "$dir/statistics.json")
warning=$(jq -r '.sandbox.warning // empty' "$dir/statistics.json")
saved=$(( before > 0 ? (before - after) * 100 / before : 0 ))

# A page of the demo's data: the compressed rows (each summary beside the turns it
# replaced), the rejects of every stage and traj-run's failures, the budget drawn.
report="$dir/report.html"
report_in=("$dir/trajectories_compressed.jsonl")
for f in failures merge_rejects normalize_rejects rejects; do
  [ -s "$dir/$f.jsonl" ] && report_in+=("$dir/$f.jsonl")
done
"$bin/traj-report" -q "${report_in[@]}" --before "$dir/trajectories.jsonl" --budget "$budget" \
  --title "traj demo: $dir" -o "$report"

echo
echo "What each stage did ($dir):"
printf '  %-18s %7s %8s %8s  %s\n' stage "rows in" "rows out" rejected notes
row() { printf '  %-18s %7s %8s %8s  %s\n' "$@"; }
row traj-sample-tools "$prompts" "$tasks" 0 "a toolset per prompt -> tasks.jsonl"
row traj-run "$tasks" "$records" "$failures" "$calls API calls, $api_tokens API tokens; tools ran under sandbox: $sandbox"
row traj-merge "$records" "$norm_in" "$merge_rej" "ordered by prompt, $merge_dup duplicates dropped (merge_rejects.jsonl)"
row traj-normalize "$norm_in" "$filter_in" "$norm_rej" "Hermes ShareGPT (normalize_rejects.jsonl)"
row traj-filter "$filter_in" "$kept" "$filter_rej" "$before tokens -> trajectories.jsonl (rejects.jsonl)"
row traj-compress "$comp_in" "$comp_out" 0 "tokens $before -> $after (-$saved%): $compressed compressed, $under under the $budget budget, $over still over"
echo
if [ "$sandbox" = bwrap ]; then
  echo "Sandbox: bwrap (bubblewrap: no network, host read-only, only the workspace writable)."
else
  echo "Sandbox: $sandbox${warning:+. WARNING: $warning}"
fi
echo "Files: $dir/trajectories.jsonl, $dir/trajectories_compressed.jsonl (metrics: compression_metrics.json,"
echo "  statistics: statistics.json, checkpoint: checkpoint.json, raw records: batch_*.jsonl)"
echo "Report: $report (open it in a browser: file://$(cd "$(dirname "$report")" && pwd)/report.html)"
echo "Look at one trajectory:  head -n 1 $dir/trajectories.jsonl | jq -r '.conversations[] | \"[\" + .from + \"] \" + .value' | less"
