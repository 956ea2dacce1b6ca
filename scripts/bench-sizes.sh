#!/usr/bin/env bash
# Sizes of the installed binaries and fresh build times, default features and the data
# core (--no-default-features); writes the bench:sizes section of BENCHMARKS.md.
#
# Usage: scripts/bench-sizes.sh          (sizes: builds target/release and target/core)
#        TRAJ_BENCH_BUILD=1 scripts/bench-sizes.sh
#                                        (also the fresh build times: two clean
#                                        `cargo build --release` runs, ~10 min each on 2
#                                        cores; without it the committed times are kept)
# MB = 10^6 bytes. The binaries are what `make install`, `cargo install` and the wheel
# install (the wheel's scripts are these files).
set -euo pipefail
cd "$(dirname "$0")/.."

six=(traj-normalize traj-filter traj-merge traj-compress traj-sample-tools traj-run)
cargo build --release --locked --bins >&2
cargo build --release --locked --no-default-features --bins --target-dir target/core >&2

mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
bytes() { [ -f "$1" ] && stat -c %s "$1" || echo 0; }
# The bytes of the ELF sections of $1 named by the regex $2 (`size -A`).
section() { size -A "$1" | awk -v re="$2" '$1 ~ re { s += $2 } END { print s + 0 }'; }

echo "## Binary sizes and build times"
echo
echo "\`scripts/bench-sizes.sh\` on $(date -u +%Y-%m-%d), $(rustc --version | cut -d' ' -f1-2):"
echo "release profile (no debug info, symbols kept), MB = 10^6 bytes. Default features, and"
echo "the data core alone (\`--no-default-features\`: no traj-run, no agent runtime)."
echo "Targets (issue 30): the six <= 120 MB, traj-merge and traj-sample-tools <= 15 MB each."
echo
echo "| binary | default MB | .text MB | .rodata MB | --no-default-features MB |"
echo "|---|---|---|---|---|"
total=0
core_total=0
for b in "${six[@]}"; do
  f=target/release/$b
  s=$(bytes "$f")
  c=$(bytes "target/core/release/$b")
  total=$((total + s))
  core_total=$((core_total + c))
  core=$([ "$c" -gt 0 ] && mb "$c" || echo "(not built)")
  echo "| $b | $(mb "$s") | $(mb "$(section "$f" '^\.text$')") | $(mb "$(section "$f" '^\.rodata$')") | $core |"
done
echo "| **the six** | **$(mb $total)** | | | **$(mb $core_total)** (five) |"
if [ -f target/release/traj-report ]; then
  echo "| traj-report (counted apart) | $(mb "$(bytes target/release/traj-report)") | | | $(mb "$(bytes target/core/release/traj-report)") |"
fi
echo
echo "The .rodata of traj-filter and traj-compress is mostly bpe-openai's serialized"
echo "o200k and cl100k tables (the only binaries that count tokens); the other binaries"
echo "link no tokenizer."
echo
pkgs=$(grep -c '^\[\[package\]\]' Cargo.lock)
core_pkgs=$(cargo tree --locked --no-default-features -e normal,build --prefix none 2>/dev/null | sed 's/ (\*)//' | sort -u | wc -l)
all_pkgs=$(cargo tree --locked -e normal,build --prefix none 2>/dev/null | sed 's/ (\*)//' | sort -u | wc -l)
echo "Crates: $pkgs in Cargo.lock (dev-dependencies included); built: $all_pkgs with the"
echo "default features, $core_pkgs with \`--no-default-features\` (\`cargo tree -e normal,build\`)."
echo

# Fresh build times: measured with TRAJ_BENCH_BUILD=1, else the committed table kept.
echo "<!-- build-times -->"
if [ "${TRAJ_BENCH_BUILD:-0}" = 1 ]; then
  echo "Fresh \`cargo build --release --locked --bins\` on a clean target directory"
  echo "($(nproc) cores, shared machine, crates already downloaded), measured $(date -u +%Y-%m-%d):"
  echo
  echo "| features | wall s | user+sys s |"
  echo "|---|---|---|"
  for cfg in default --no-default-features; do
    dir=$(mktemp -d /tmp/fresh-traj-XXXXXX)
    flags=()
    [ "$cfg" = default ] || flags=("$cfg")
    /usr/bin/time -f '%e %U %S' -o "$dir/time" \
      cargo build --release --locked --bins "${flags[@]}" --target-dir "$dir/t" >&2 2>/dev/null
    read -r wall user sys < "$dir/time"
    echo "| $cfg | $wall | $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.0f", u + s }') |"
    rm -rf "$dir"
  done
else
  python3 - BENCHMARKS.md <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r"<!-- build-times -->\n(.*?)<!-- /build-times -->", text, re.S)
sys.stdout.write(m.group(1) if m else "Fresh build times: not measured yet (TRAJ_BENCH_BUILD=1).\n")
PY
fi
echo "<!-- /build-times -->"
