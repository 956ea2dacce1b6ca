#!/usr/bin/env bash
# Run every stage's benchmark and write BENCHMARKS.md.
#
# Usage: scripts/bench.sh [--mb N] [--only STAGE]...
#   --mb N       corpus size in MB (default 500; the issues' targets are stated for >= 500)
#   --only NAME  run only scripts/bench-NAME.sh (repeatable); its section of an existing
#                BENCHMARKS.md is replaced and the other sections are kept
#
# The corpora are generated once under target/bench/ (never in the repo) and shared by the
# stage scripts through TRAJ_BENCH_SHAREGPT, TRAJ_BENCH_OPENAI and TRAJ_BENCH_MB.
set -euo pipefail
cd "$(dirname "$0")/.."

mb=500
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

cargo build --release --locked --bins --examples >&2
mkdir -p target/bench
export TRAJ_BENCH_MB="$mb"
export TRAJ_BENCH_SHAREGPT="target/bench/sharegpt-${mb}mb.jsonl"
export TRAJ_BENCH_OPENAI="target/bench/openai-${mb}mb.jsonl"
[ -s "$TRAJ_BENCH_SHAREGPT" ] || python3 scripts/gen_corpus.py --shape sharegpt --mb "$mb" --seed 1 > "$TRAJ_BENCH_SHAREGPT"
[ -s "$TRAJ_BENCH_OPENAI" ] || python3 scripts/gen_corpus.py --shape openai --mb "$mb" --seed 1 > "$TRAJ_BENCH_OPENAI"

# Each stage's section sits between <!-- bench:NAME --> markers, so that a run with
# --only can replace its own sections and keep the others.
sections=$(mktemp -d)
trap 'rm -rf "$sections"' EXIT
for script in scripts/bench-*.sh; do
  name=$(basename "$script" .sh); name=${name#bench-}
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $name "* ]]; then continue; fi
  echo "bench: $name" >&2
  bash "$script" > "$sections/$name.md"
done

out=BENCHMARKS.md.tmp
if [ ${#only[@]} -gt 0 ] && [ -s BENCHMARKS.md ]; then
  python3 - "$sections" BENCHMARKS.md > "$out" <<'PY'
import pathlib, re, sys
new = {p.stem: p.read_text().rstrip("\n") for p in pathlib.Path(sys.argv[1]).glob("*.md")}
text = pathlib.Path(sys.argv[2]).read_text()
def swap(m):
    body = new.pop(m.group(1), None)
    return m.group(0) if body is None else f"<!-- bench:{m.group(1)} -->\n{body}\n<!-- /bench:{m.group(1)} -->"
text = re.sub(r"<!-- bench:(\S+) -->\n.*?<!-- /bench:\1 -->", swap, text, flags=re.S)
for name, body in sorted(new.items()):  # stages without a section yet
    text = text.rstrip("\n") + f"\n\n<!-- bench:{name} -->\n{body}\n<!-- /bench:{name} -->\n"
sys.stdout.write(text)
PY
else
  {
    echo "# Benchmarks"
    echo
    echo "Written by \`make bench\` (\`scripts/bench.sh --mb $mb\`) on $(date -u +%Y-%m-%d):"
    echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM,"
    echo "$(rustc --version). Corpora: \`scripts/gen_corpus.py --mb $mb --seed 1\` (ShareGPT and"
    echo "OpenAI shapes). Every ratio compares figures measured in the same run; the machine is"
    echo "shared, so absolute figures vary by about 15% between runs. A section may be newer"
    echo "than this date: \`scripts/bench.sh --only NAME\` replaces one stage's section."
    echo
    for f in "$sections"/*.md; do
      name=$(basename "$f" .md)
      echo "<!-- bench:$name -->"
      cat "$f"
      echo "<!-- /bench:$name -->"
      echo
    done
  } > "$out"
fi
mv "$out" BENCHMARKS.md
echo "bench: wrote BENCHMARKS.md" >&2
