#!/usr/bin/env bash
# Benchmark traj-sample-tools on a synthetic prompt corpus, beside cat and jq -c .
#
# Usage: scripts/bench-sample.sh   (after `cargo build --release`; TRAJ_BENCH_MB sets the
# corpus size, default 100). The corpus is generated under target/bench/, never in the repo.
set -euo pipefail
cd "$(dirname "$0")/.."

mb="${TRAJ_BENCH_MB:-100}"
bin=target/release/traj-sample-tools
[ -x "$bin" ] || cargo build --release --bin traj-sample-tools >&2
mkdir -p target/bench
corpus="target/bench/prompts-${mb}mb.jsonl"
if [ ! -s "$corpus" ]; then
  python3 - "$mb" > "$corpus" <<'PY'
import json, random, sys
random.seed(1)
words = ("the a of to and in for on with by list files python error test build search "
         "install compare explain summarize data table process group timeout server "
         "function class module write read parse json csv http request response").split()
target = int(sys.argv[1]) * 2**20
size = i = 0
while size < target:
    prompt = " ".join(random.choice(words) for _ in range(random.randint(10, 120))) + "?"
    row = {"prompt": prompt, "id": f"row-{i}", "meta": {"source": "bench", "level": random.randint(1, 5)}}
    line = json.dumps(row) + "\n"
    sys.stdout.write(line)
    size += len(line)
    i += 1
PY
fi
lines=$(wc -l < "$corpus")

# Best of 3 wall-clock seconds of a command reading $corpus, output discarded.
best() {
  local best=""
  for _ in 1 2 3; do
    local s e t
    s=$(date +%s.%N); "$@" < "$corpus" > /dev/null; e=$(date +%s.%N)
    t=$(echo "$e - $s" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
  done
  echo "$best"
}

t_cat=$(best cat)
t_jq=$(best jq -c .)
t_def=$(best "$bin" -q)
t_bal=$(best "$bin" -q -d balanced --seed 7)

row() { printf '| %s | %.2f | %.0f | %.2f× |\n' "$1" "$2" "$(echo "$mb / $2" | bc -l)" "$(echo "$t_jq / $2" | bc -l)"; }
echo "## traj-sample-tools"
echo
echo "Corpus: ${mb} MB, ${lines} prompt rows (\`scripts/bench-sample.sh\`, best of 3, single-threaded stage)."
echo
echo "| command | seconds | MB/s | vs jq -c . |"
echo "|---|---|---|---|"
row "cat" "$t_cat"
row "jq -c ." "$t_jq"
row "traj-sample-tools (default)" "$t_def"
row "traj-sample-tools -d balanced" "$t_bal"
