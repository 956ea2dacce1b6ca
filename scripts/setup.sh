#!/usr/bin/env bash
# Install what traj's tests, demo and benchmarks need on a fresh Debian machine with Rust:
# jq, bubblewrap and GNU parallel (Debian), Python `datasets` (for the loading tests), rustfmt/clippy.
set -euo pipefail

need_apt=()
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
{ command -v prlimit && command -v unshare && command -v setpriv; } >/dev/null 2>&1 || need_apt+=(util-linux)  # per-call limits, the local namespace, the non-root sandbox tests
command -v parallel >/dev/null 2>&1 || need_apt+=(parallel) # docs/pipeline.md's recipes
command -v zstd >/dev/null 2>&1 || need_apt+=(zstd) # the Hub-snapshot test writes a .zst blob
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)  # the browser toolset (headless, driven over DevTools)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install: ${need_apt[*]}" >&2
  fi
fi

# Python consumers and scale-out frameworks the tests drive: datasets (+ pyarrow),
# PySpark (needs a JRE: Debian's) and Ray Data, all in local mode.
command -v java >/dev/null 2>&1 || need_java=1
if [ "${need_java:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
need_pip=()
python3 -c 'import datasets, pyarrow' >/dev/null 2>&1 || need_pip+=(datasets pyarrow)
python3 -c 'import pyspark' >/dev/null 2>&1 || need_pip+=(pyspark)
python3 -c 'import ray.data' >/dev/null 2>&1 || need_pip+=('ray[data]')
if [ ${#need_pip[@]} -gt 0 ]; then
  python3 -m pip install --quiet --disable-pip-version-check "${need_pip[@]}"
fi

# transformers (CPU, no torch: apply_chat_template only) for the chat-template counting
# tests, in its own venv (tests/cli/compress.rs looks there, or $TRAJ_TRANSFORMERS_PYTHON).
tok_venv="${TRAJ_VENVS:-/tmp/venvs}/tok"
if ! "$tok_venv/bin/python" -c 'import transformers' >/dev/null 2>&1; then
  python3 -m venv "$tok_venv"
  "$tok_venv/bin/pip" install --quiet --disable-pip-version-check transformers tokenizers jinja2
fi

rustup component add rustfmt clippy >/dev/null 2>&1 || true

# HF datasets 4.0.0 and 5.x, one venv each, for the training-output tests
# (tests/cli/training.rs makes them itself when they are missing).
venvs=${TRAJ_VENVS:-$(cd "$(dirname "$0")/.." && pwd)/target/venvs}
while read -r name spec; do
  if ! "$venvs/$name/bin/python" -c 'import datasets, pyarrow' >/dev/null 2>&1; then
    mkdir -p "$venvs"
    python3 -m venv "$venvs/$name"
    "$venvs/$name/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
  fi
done <<'VENVS'
datasets-4.0.0 datasets==4.0.0
datasets-5 datasets>=5,<6
VENVS
