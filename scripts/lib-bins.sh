# Sourced by the pipeline scripts: where the traj binaries are, and `t NAME ARGS...`,
# which runs one of them.
#
# find_bins NAME: keeps $bin when it is set (--bin-dir); else this checkout's release
# build ($CARGO_TARGET_DIR/release, or target/release) when it holds NAME; else $bin
# stays empty and `t` runs the binaries found on PATH.
find_bins() {
  if [ -z "${bin:-}" ]; then
    local here rel
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    rel=${CARGO_TARGET_DIR:-$here/target}/release
    if [ -x "$rel/$1" ]; then bin=$rel; fi
  fi
}
t() { if [ -n "${bin:-}" ]; then "$bin/$1" "${@:2}"; else "$@"; fi; }
