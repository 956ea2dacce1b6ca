#!/usr/bin/env bash
# Install what traj's tests, demo and benchmarks need on a fresh Debian machine with Rust:
# jq, bubblewrap, GNU parallel, chromium, a JRE (Debian), and the Python packages of the
# loading tests, PySpark, Ray, transformers and maturin in venvs under target/venvs.
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

# Every Python package the tests need goes into a venv under target/venvs (or
# $TRAJ_VENVS), never into the system Python; only Debian packages are installed
# system-wide.
venvs=${TRAJ_VENVS:-$(cd "$(dirname "$0")/.." && pwd)/target/venvs}
mkdir -p "$venvs"

# venv NAME CHECK SPEC...: make $venvs/NAME and pip-install SPEC... unless its Python
# already runs CHECK.
venv() {
  local name=$1 check=$2
  shift 2
  if ! "$venvs/$name/bin/python" -c "$check" >/dev/null 2>&1; then
    python3 -m venv "$venvs/$name"
    "$venvs/$name/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
  fi
}

# Python consumers and scale-out frameworks the tests drive: datasets (+ pyarrow),
# PySpark (needs a JRE: Debian's) and Ray Data, all in local mode (tests/cli/util.rs
# data_python).
command -v java >/dev/null 2>&1 || need_java=1
if [ "${need_java:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
venv data 'import datasets, pyarrow, pyspark, ray.data' datasets pyarrow pyspark 'ray[data]'

# transformers (CPU, no torch: apply_chat_template only) for the chat-template counting
# tests (tests/cli/util.rs transformers_python, or $TRAJ_TRANSFORMERS_PYTHON).
venv tok 'import transformers' transformers tokenizers jinja2

# TRL's own preference-data code (trl.data_utils: is_conversational,
# maybe_apply_chat_template) for the --to dpo test (tests/cli/util.rs trl_python). CPU
# only and without torch: trl.data_utils imports datasets, transformers, numpy and
# pyarrow, never torch or accelerate, so trl itself goes in with --no-deps beside those.
if ! "$venvs/trl/bin/python" -c 'import trl.data_utils' >/dev/null 2>&1; then
  python3 -m venv "$venvs/trl"
  "$venvs/trl/bin/python" -m pip install --quiet --disable-pip-version-check \
    datasets transformers tokenizers jinja2 numpy pandas pyarrow pyyaml packaging psutil
  "$venvs/trl/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps 'trl>=1,<2'
fi

# maturin, which builds the wheel (`make wheel`, tests/cli/install.rs).
venv maturin 'import maturin' 'maturin>=1.9,<2'

rustup component add rustfmt clippy >/dev/null 2>&1 || true

# HF datasets 4.0.0 and 5.x, one venv each, for the training-output tests
# (tests/cli/training.rs makes them itself when they are missing).
venv datasets-4.0.0 'import datasets, pyarrow' datasets==4.0.0
venv datasets-5 'import datasets, pyarrow' 'datasets>=5,<6'
