#!/usr/bin/env bash
# Sizes of the installed binaries and fresh build times, default features and the data
# core (--no-default-features); writes the bench:sizes section of BENCHMARKS.md.
#
# Usage: scripts/bench-sizes.sh          (sizes: release builds of both feature sets)
#        (`make bench` runs it with the other benchmarks: `scripts/bench.sh --only sizes`)
#        TRAJ_BENCH_BUILD=1 scripts/bench-sizes.sh
#                                        (also the fresh build times: two clean
#                                        `cargo build --release` runs, ~10 min each on 2
#                                        cores; without it the committed times are kept)
# MB = 10^6 bytes. The binaries are what `make install`, `cargo install` and the wheel
# install (the wheel's scripts are these files).
set -euo pipefail
cd "$(dirname "$0")/.."

bytes() { [ -f "$1" ] && stat -c %s "$1" || echo 0; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
# The size of one ELF section (`size -A`), 0 when the file or the section is absent.
section() { [ -f "$1" ] && size -A "$1" | awk -v s="$2" '$1 ~ s { n += $2 } END { print n + 0 }' || echo 0; }
# Whether the binary embeds the BPE tables (format::tokens::tables): the message of its
# loader is in every binary that links it (symbols are stripped, strings are not).
tokenizers_in() {
  if grep -qa 'the embedded table decompresses' "$1"; then echo "o200k + cl100k tables (zstd)"; else echo "none"; fi
}

six=(traj-normalize traj-filter traj-merge traj-compress traj-sample-tools traj-run)
# The data core first (--no-default-features), its binaries copied aside, then the default
# build, so target/release ends as `make build` leaves it. One target directory: the
# dependencies are built once for both.
core=target/sizes/core
cargo build --release --locked --no-default-features --bins >&2
rm -rf "$core" && mkdir -p "$core"
for b in "${six[@]}" traj-report; do
  [ -f "target/release/$b" ] && cp "target/release/$b" "$core/"
done
cargo build --release --locked --bins >&2

echo "## Binary sizes and build times"
echo
echo "\`scripts/bench-sizes.sh\` on $(date -u +%Y-%m-%d), $(rustc --version | cut -d' ' -f1-2):"
echo "release profile (no debug info, no symbols), MB = 10^6 bytes. Default features, and"
echo "the data core alone (\`--no-default-features\`: no traj-run, no agent runtime)."
echo "Targets (issue 30): the six <= 120 MB, traj-merge and traj-sample-tools <= 15 MB each."
echo
echo "| binary | default MB | .text MB | .rodata MB | --no-default-features MB | tokenizer crates linked |"
echo "|---|---|---|---|---|---|"
total=0
core_total=0
for b in "${six[@]}"; do
  f=target/release/$b
  s=$(bytes "$f")
  c=$(bytes "$core/$b")
  total=$((total + s))
  core_total=$((core_total + c))
  cs=$([ "$c" -gt 0 ] && mb "$c" || echo "(not built)")
  echo "| $b | $(mb "$s") | $(mb "$(section "$f" '^\.text$')") | $(mb "$(section "$f" '^\.rodata$')") | $cs | $(tokenizers_in "$f") |"
done
echo "| **the six** | **$(mb $total)** | | | **$(mb $core_total)** (five) | |"
if [ -f target/release/traj-report ]; then
  r=target/release/traj-report
  echo "| traj-report (counted apart) | $(mb "$(bytes $r)") | $(mb "$(section $r '^\.text$')") | $(mb "$(section $r '^\.rodata$')") | $(mb "$(bytes $core/traj-report)") | $(tokenizers_in $r) |"
fi
echo
echo "A tokenizer's tables (bpe-openai's serialized o200k and cl100k) are in a"
echo "binary only when it links the crate that counts (last column, from the binary's"
echo "symbols); tiktoken-rs's own copies of those tables only with the \`tiktoken-compare\`"
echo "feature, which release builds leave out."
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
