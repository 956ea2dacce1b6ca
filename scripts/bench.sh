#!/usr/bin/env bash
# Run every stage's benchmark and write BENCHMARKS.md.
#
# Usage: scripts/bench.sh [--mb N] [--only STAGE]... [--before DIR [--runs N]]
#   --mb N       corpus size in MB (default 500; the issues' targets are stated for >= 500)
#   --only NAME  run only scripts/bench-NAME.sh (repeatable); its section of an existing
#                BENCHMARKS.md is replaced and the other sections are kept
#   --before DIR only the before/after comparison: every stage run by the binaries in DIR
#                (an older release build) and by this tree's, interleaved, on the same
#                corpus (default --mb 200); writes the section bench:before-after
#   --runs N     runs per command with --before (default 3; the best is kept)
#
# Every run compares its figures with the committed BENCHMARKS.md and prints a loud
# warning for each MB/s (or other per-second) figure that fell by more than 15%.
#
# The corpora are generated once under target/bench/ (never in the repo) and shared by the
# stage scripts through TRAJ_BENCH_SHAREGPT, TRAJ_BENCH_OPENAI and TRAJ_BENCH_MB.
set -euo pipefail
cd "$(dirname "$0")/.."

mb=""
only=()
before=""
runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    --before) before="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -n "$before" ]; then
  [ -x "$before/traj-filter" ] || { echo "bench.sh: $before/traj-filter: no such binary (an older release build's target/release)" >&2; exit 2; }
  only=(before-after)
  mb=${mb:-200}
fi
mb=${mb:-500}

# regressions OLD NEW: print, loudly, every per-second figure of NEW's tables that is more
# than 15% below the same cell of OLD (same section, same table header, same first cell).
regressions() {
  python3 - "$1" "$2" <<'PY' >&2
import re, sys
def cells(path):
    out, section, header = {}, None, None
    for line in open(path, encoding="utf-8"):
        m = re.match(r"<!-- bench:(\S+) -->", line)
        if m:
            section, header = m.group(1), None
            continue
        if not line.startswith("|"):
            header = None
            continue
        row = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if header is None:
            header = row
            continue
        if set("".join(row)) <= set("-: "):
            continue
        for h, c in zip(header[1:], row[1:]):
            if re.search(r"(MB|rows|prompts|summaries|tokens|requests)[^|]*/s|/s\b", h) and "CPU-s" not in h or "MB per CPU-s" in h:
                m = re.match(r"^\**([0-9][0-9,]*\.?[0-9]*)", c)
                if m:
                    out[(section, tuple(header), row[0], h)] = float(m.group(1).replace(",", ""))
    return out
old, new = cells(sys.argv[1]), cells(sys.argv[2])
bad = [(k, old[k], v) for k, v in new.items() if k in old and old[k] > 0 and v < 0.85 * old[k]]
if bad:
    print("\n" + "!" * 78)
    print(f"!!! bench: {len(bad)} figure(s) regressed by more than 15% against the committed BENCHMARKS.md")
    for (sec, _, row, col), o, n in bad:
        print(f"!!!   [{sec}] {row} / {col}: {o:g} -> {n:g} ({100 * (n / o - 1):+.0f}%)")
    print("!" * 78 + "\n")
else:
    print(f"bench: no figure regressed by more than 15% ({len([k for k in new if k in old])} compared)")
PY
}

# better BEST T: the smaller of two wall times ("" and "fail" lose).
better() {
  if [ -z "$1" ] || [ "$1" = fail ]; then echo "$2"
  elif [ "$2" = fail ]; then echo "$1"
  else awk -v a="$1" -v b="$2" 'BEGIN { print (b < a) ? b : a }'; fi
}

# before_after OLD_BIN_DIR RUNS: every stage, the old binaries and this tree's, one after
# the other on each round (interleaved: load changes hit both), best of RUNS; markdown.
before_after() {
  local old=$1 n=$2 new=target/release work corpus prompts bytes pbytes
  work=$(mktemp -d target/bench/before-after.XXXXXX)
  corpus=$TRAJ_BENCH_SHAREGPT
  prompts=target/bench/prompts-before-after-${mb}mb.jsonl
  [ -s "$prompts" ] || python3 -c '
import json, random, sys
random.seed(1)
words = "list files python error test build search install compare explain data table server".split()
size, i = 0, 0
while size < int(sys.argv[1]) * 10**6 // 4:
    line = json.dumps({"prompt": " ".join(random.choice(words) for _ in range(random.randint(10, 120))), "id": i}) + "\n"
    sys.stdout.write(line); size += len(line); i += 1
' "$mb" > "$prompts"
  bytes=$(stat -L -c %s "$corpus"); pbytes=$(stat -L -c %s "$prompts")
  cat "$corpus" "$prompts" > /dev/null
  # name | input | command (BIN is the binaries' folder, IN the input, W a scratch folder)
  local -a specs=(
    "traj-normalize|c|\$BIN/traj-normalize -q \$IN"
    "traj-filter, no predicate|c|\$BIN/traj-filter -q \$IN"
    "cat file \\| traj-filter \\| cat|c|cat \$IN | \$BIN/traj-filter -q | cat"
    "traj-filter --well-formed --valid-tools --require-reasoning|c|\$BIN/traj-filter -q --well-formed --valid-tools --require-reasoning \$IN"
    "traj-filter -o FILE (durable)|c|\$BIN/traj-filter -q \$IN -o \$W/out.jsonl"
    "traj-merge (de-duplicate, in memory)|c|\$BIN/traj-merge -q \$IN"
    "traj-compress --count-only|c|\$BIN/traj-compress --count-only \$IN"
    "traj-compress offline (budget 15250)|c|\$BIN/traj-compress -q \$IN --target-max-tokens 15250 -o \$W/c.jsonl"
    "traj-sample-tools|p|\$BIN/traj-sample-tools -q < \$IN"
  )
  local -A best_old best_new
  local r spec name kind cmd side bin in t
  for ((r = 0; r < n; r++)); do
    for spec in "${specs[@]}"; do
      IFS='|' read -r name kind cmd <<< "${spec//\\|/$'\x1f'}"
      name=${name//$'\x1f'/\\|}; cmd=${cmd//$'\x1f'/|}
      [ "$kind" = p ] && in=$prompts || in=$corpus
      for side in old new; do
        [ $side = old ] && bin=$old || bin=$new
        t=$( { TIMEFORMAT=%R; time BIN=$bin IN=$in W=$work bash -c "$cmd" > /dev/null 2>> "$work/$side.err"; } 2>&1 ) \
          || t=fail
        if [ $side = old ]; then
          best_old[$name]=$(better "${best_old[$name]:-}" "$t")
        else
          best_new[$name]=$(better "${best_new[$name]:-}" "$t")
        fi
        echo "  round $r $side $name: $t s" >&2
      done
    done
  done
  local old_rev new_rev
  old_rev=$(cat "$old/../../.git-rev" 2>/dev/null || git -C "$old/../.." rev-parse --short HEAD 2>/dev/null || echo "$old")
  new_rev=$(git rev-parse --short HEAD)
  echo "## Before and after"
  echo
  echo "Every stage run by the older build ($old_rev, \`scripts/bench.sh --before DIR\`) and by this"
  echo "tree's ($new_rev), one after the other in each of $n rounds, best round kept; $(nproc) cores,"
  echo "$(date -u +%Y-%m-%dT%H:%MZ), load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "Corpus: \`scripts/gen_corpus.py --shape sharegpt --mb $mb --seed 1\` ($((bytes / 1000000)) MB);"
  echo "traj-sample-tools reads $((pbytes / 1000000)) MB of prompts. MB/s of the input's bytes."
  echo
  echo "| stage | before MB/s | after MB/s | after / before |"
  echo "|---|---:|---:|---:|"
  for spec in "${specs[@]}"; do
    IFS='|' read -r name kind cmd <<< "${spec//\\|/$'\x1f'}"
    name=${name//$'\x1f'/\\|}
    [ "$kind" = p ] && b=$pbytes || b=$bytes
    awk -v n="$name" -v b="$b" -v o="${best_old[$name]}" -v w="${best_new[$name]}" 'BEGIN {
      fo = (o == "fail") ? "fails" : sprintf("%.0f", b / 1e6 / o)
      fw = (w == "fail") ? "fails" : sprintf("%.0f", b / 1e6 / w)
      r = (o == "fail" || w == "fail") ? "-" : sprintf("%.2f", o / w)
      printf "| %s | %s | %s | %s |\n", n, fo, fw, r }'
  done
  echo
  arbitrary_precision_cost
  rm -rf "$work"
}

# The cost of serde_json's arbitrary_precision (numbers kept as written, #12), alone: the
# same corpus parsed into serde_json::Value and written back, by one small program built
# twice, with and without the feature (every other feature as traj uses them).
arbitrary_precision_cost() {
  local probe=target/bench/ap-probe ver
  ver=$(awk '/^name = "serde_json"/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)
  mkdir -p "$probe/src"
  cat > "$probe/src/main.rs" <<'RS'
use std::io::{BufRead, Write};
fn main() {
    let f = std::fs::File::open(std::env::args().nth(1).unwrap()).unwrap();
    let mut out = std::io::BufWriter::new(std::io::sink());
    let t = std::time::Instant::now();
    for line in std::io::BufReader::with_capacity(1 << 20, f).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        serde_json::to_writer(&mut out, &v).unwrap();
        out.write_all(b"\n").unwrap();
    }
    println!("{:.3}", t.elapsed().as_secs_f64());
}
RS
  local feats
  for feats in plain ap; do
    mkdir -p "$probe/$feats/src"; cp "$probe/src/main.rs" "$probe/$feats/src/"
    local extra=""; [ $feats = ap ] && extra=', "arbitrary_precision"'
    printf '[package]\nname = "ap-probe-%s"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nserde_json = { version = "=%s", features = ["preserve_order", "raw_value"%s] }\n[profile.release]\ncodegen-units = 1\n[workspace]\n' \
      "$feats" "$ver" "$extra" > "$probe/$feats/Cargo.toml"
    cargo build --release --quiet --offline --manifest-path "$probe/$feats/Cargo.toml" >&2 2>/dev/null \
      || cargo build --release --quiet --manifest-path "$probe/$feats/Cargo.toml" >&2
  done
  local bp=9999 ba=9999 tp ta
  for _ in 1 2 3; do
    tp=$("$probe/plain/target/release/ap-probe-plain" "$TRAJ_BENCH_SHAREGPT"); ta=$("$probe/ap/target/release/ap-probe-ap" "$TRAJ_BENCH_SHAREGPT")
    bp=$(awk -v a="$tp" -v b="$bp" 'BEGIN { print (a < b) ? a : b }'); ba=$(awk -v a="$ta" -v b="$ba" 'BEGIN { print (a < b) ? a : b }')
  done
  local bytes; bytes=$(stat -L -c %s "$TRAJ_BENCH_SHAREGPT")
  echo "**The cost of keeping numbers as written** (serde_json \`arbitrary_precision\`, which the"
  echo "older build lacked): a program that parses every row of the same corpus into"
  echo "\`serde_json::Value\` and writes it back (serde_json $ver, one thread) runs at"
  awk -v b="$bytes" -v p="$bp" -v a="$ba" 'BEGIN { printf "%.0f MB/s without the feature and %.0f MB/s with it (%+.0f%%). ", b / 1e6 / p, b / 1e6 / a, 100 * (p / a - 1) }'
  echo "Stages that"
  echo "parse rows into values (traj-normalize, traj-merge, the parts of traj-compress that"
  echo "rebuild a row) pay that share of their parse time; traj-filter validates with its own"
  echo "scanner and does not."
}

if [ -n "$before" ]; then
  cargo build --release --locked --bins >&2 # no stand-in servers needed
else
  cargo build --release --locked --bins --examples >&2
fi
mkdir -p target/bench
export TRAJ_BENCH_MB="$mb"
export TRAJ_BENCH_SHAREGPT="target/bench/sharegpt-${mb}mb.jsonl"
export TRAJ_BENCH_OPENAI="target/bench/openai-${mb}mb.jsonl"
[ -s "$TRAJ_BENCH_SHAREGPT" ] || python3 scripts/gen_corpus.py --shape sharegpt --mb "$mb" --seed 1 > "$TRAJ_BENCH_SHAREGPT"
[ -n "$before" ] || [ -s "$TRAJ_BENCH_OPENAI" ] || python3 scripts/gen_corpus.py --shape openai --mb "$mb" --seed 1 > "$TRAJ_BENCH_OPENAI"

# Each stage's section sits between <!-- bench:NAME --> markers, so that a run with
# --only can replace its own sections and keep the others.
sections=$(mktemp -d)
trap 'rm -rf "$sections"' EXIT
if [ -n "$before" ]; then
  echo "bench: before-after ($before vs target/release)" >&2
  before_after "$before" "$runs" > "$sections/before-after.md"
else
  for script in scripts/bench-*.sh; do
    name=$(basename "$script" .sh); name=${name#bench-}
    if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $name "* ]]; then continue; fi
    echo "bench: $name" >&2
    bash "$script" > "$sections/$name.md"
  done
fi

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
    echo "than this date: \`scripts/bench.sh --only NAME\` replaces one stage's section, and"
    echo "\`scripts/bench.sh --before DIR\` the before/after comparison (\`bench:before-after\`: the"
    echo "binaries of an older build in DIR against this tree's, interleaved on one corpus). Each"
    echo "run compares its per-second figures with the committed file and prints a loud warning"
    echo "for any that fell by more than 15%."
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
committed=$(mktemp)
git show HEAD:BENCHMARKS.md > "$committed" 2>/dev/null || : > "$committed"
mv "$out" BENCHMARKS.md
echo "bench: wrote BENCHMARKS.md" >&2
regressions "$committed" BENCHMARKS.md
rm -f "$committed"
