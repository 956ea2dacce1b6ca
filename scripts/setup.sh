#!/usr/bin/env bash
# Install what traj's tests, demo and benchmarks need on a fresh Debian machine with Rust:
# jq and bubblewrap (Debian), Python `datasets` (for the loading tests), rustfmt/clippy.
set -euo pipefail

need_apt=()
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 || need_apt+=(util-linux)  # per-call limits of tool commands
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install: ${need_apt[*]}" >&2
  fi
fi

if ! python3 -c 'import datasets' >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check datasets
fi

rustup component add rustfmt clippy >/dev/null 2>&1 || true
