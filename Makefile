# traj: build, test, benchmark, and the batch-then-compress pipeline.
# `make help` lists the targets and the variables they take.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DELETE_ON_ERROR:

CARGO ?= cargo
# Where cargo builds (CARGO_TARGET_DIR when it is set, as cargo does), so that BIN finds
# what `make build` just made.
BIN ?= $(or $(CARGO_TARGET_DIR),target)/release
PREFIX ?= $(HOME)/.local

# Pipeline settings (override on the command line: make batch RUN=x DATASET=y MODEL=z).
DATASET ?= examples/prompts.jsonl
RUN ?= demo
MODEL ?= anthropic/claude-sonnet-4.6
BASE_URL ?= https://openrouter.ai/api/v1
API_KEY_ENV ?= OPENROUTER_API_KEY
DISTRIBUTION ?= terminal_only
SEED ?= 0
WORKERS ?= 8
BATCH_SIZE ?= 10
MAX_TURNS ?= 10
SANDBOX ?= auto
FILTERS ?= --well-formed --valid-tools
TARGET_TOKENS ?= 15250
TOKENIZER ?= o200k_base
RUN_FLAGS ?=
COMPRESS_FLAGS ?=

DATA ?= data
RUN_DIR := $(DATA)/$(RUN)
TASKS := $(RUN_DIR)/tasks.jsonl
RUN_DONE := $(RUN_DIR)/.run-complete
TRAJECTORIES := $(RUN_DIR)/trajectories.jsonl
COMPRESSED := $(RUN_DIR)/trajectories_compressed.jsonl
IN ?= $(TRAJECTORIES)
IN_COMPRESSED = $(patsubst %.jsonl,%_compressed.jsonl,$(patsubst %.gz,%,$(IN)))

# make cannot name a file with a space in it: a path with one would be cut into two
# targets and the stages would write elsewhere (./data). Refuse it instead.
spaced = $(foreach v,$(1),$(if $(word 2,$($(v))),$(v)))
ifneq ($(filter batch pipeline,$(MAKECMDGOALS)),)
  SPACED += $(call spaced,DATA RUN DATASET)
endif
ifneq ($(filter compress,$(MAKECMDGOALS)),)
  SPACED += $(call spaced,IN)
endif
ifneq ($(strip $(SPACED)),)
  $(error $(strip $(SPACED)): a path with a space, which make cannot handle; use scripts/batch-then-compress.sh, or a path without one)
endif

BINARIES := traj-normalize traj-filter traj-merge traj-compress traj-sample-tools traj-run traj-report

.PHONY: help setup build core test lint bench install wheel clean demo batch compress pipeline fuzz

FUZZ_SECS ?= 600

help: ## List the targets
	@echo "traj: make TARGET [VAR=value ...]"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 12
	@echo
	@echo "Pipeline variables (now): DATASET=$(DATASET) RUN=$(RUN) DATA=$(DATA) MODEL=$(MODEL)"
	@echo "  BASE_URL=$(BASE_URL) API_KEY_ENV=$(API_KEY_ENV) DISTRIBUTION=$(DISTRIBUTION)"
	@echo "  WORKERS=$(WORKERS) BATCH_SIZE=$(BATCH_SIZE) MAX_TURNS=$(MAX_TURNS) SANDBOX=$(SANDBOX)"
	@echo "  FILTERS='$(FILTERS)' TARGET_TOKENS=$(TARGET_TOKENS) TOKENIZER=$(TOKENIZER) IN=$(IN)"
	@echo "  RUN_FLAGS / COMPRESS_FLAGS: extra flags for traj-run / traj-compress"

build: ## Build the seven binaries and the stand-in endpoint (release)
	$(CARGO) build --release --locked --bins --examples

core: ## Build the data-stage binaries and traj-report without the agent runtime (release, --no-default-features, into target/core)
	$(CARGO) build --release --locked --no-default-features --bins --target-dir target/core

setup: ## Install what the tests need if missing (Debian packages; Python ones into venvs under target/venvs)
	bash scripts/setup.sh

# The data core's own run: every test that builds without the agent runtime (the lib's
# and the CLI tests of the six data binaries), with --no-default-features. Measured on
# the shared 2-core machine (2026-12-03): 220 lib and 172 CLI tests, 190 s to run after
# about 3 minutes of building (the dependencies' features differ without headless_chrome).

test: setup build ## fmt check, clippy -D warnings (both feature sets), the rust-version check, every test, then every test of the data core without the agent runtime
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) clippy --locked --all-targets --no-default-features --features tiktoken-compare -- -D warnings
	python3 scripts/check-msrv.py
	$(CARGO) test --locked
	$(CARGO) test --locked --no-default-features

lint: ## fmt check, clippy and the rust-version check only
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) clippy --locked --all-targets --no-default-features --features tiktoken-compare -- -D warnings
	python3 scripts/check-msrv.py

fuzz: ## Each parser's fuzz target for FUZZ_SECS seconds (default 600; not part of `make test`)
	FUZZ_SECS=$(FUZZ_SECS) $(CARGO) test --locked --test fuzz

bench: build ## Every stage on a generated 500 MB corpus beside cat and jq; writes BENCHMARKS.md
	bash scripts/bench.sh

install: build ## Copy the seven binaries, their man pages and shell completions under $(PREFIX)
	install -d $(PREFIX)/bin
	install -m 755 $(addprefix $(BIN)/,$(BINARIES)) $(PREFIX)/bin/
	rm -rf target/gen-docs && $(BIN)/examples/gen-docs target/gen-docs
	install -d $(PREFIX)/share/man/man1 $(PREFIX)/share/bash-completion/completions \
	  $(PREFIX)/share/zsh/site-functions $(PREFIX)/share/fish/vendor_completions.d
	install -m 644 target/gen-docs/man/man1/*.1 $(PREFIX)/share/man/man1/
	install -m 644 target/gen-docs/completions/bash/* $(PREFIX)/share/bash-completion/completions/
	install -m 644 target/gen-docs/completions/zsh/* $(PREFIX)/share/zsh/site-functions/
	install -m 644 target/gen-docs/completions/fish/* $(PREFIX)/share/fish/vendor_completions.d/

# The wheel: maturin (from PyPI, in its own venv under target/venvs) packs the release
# binaries `make build` made as the wheel's scripts. `make wheel WHEEL_PROFILE=dist`
# packs the dist profile's instead (fat LTO: 10-25% smaller, a much longer build;
# BENCHMARKS.md bench:sizes).
MATURIN_VENV ?= target/venvs/maturin
DIST ?= dist
WHEEL_PROFILE ?= release

wheel: build ## The pip-installable wheel of the seven binaries into $(DIST)/ (pip install dist/traj-*.whl)
	@[ -x $(MATURIN_VENV)/bin/maturin ] || { python3 -m venv $(MATURIN_VENV) && \
	  $(MATURIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'maturin>=1.9,<2'; }
	$(MATURIN_VENV)/bin/maturin build --profile $(WHEEL_PROFILE) --locked --out $(DIST)

clean: ## Remove build output (not data/)
	$(CARGO) clean

demo: ## The whole pipeline offline, against the stand-in model (or a real one with a key)
	bash scripts/demo.sh

batch: $(TRAJECTORIES) ## sample-tools | run into data/RUN, then merge | normalize | filter
	@echo "batch: $(TRAJECTORIES): $$(wc -l < $(TRAJECTORIES)) trajectories" \
	  "(rejects: $(RUN_DIR)/rejects.jsonl; statistics: $(RUN_DIR)/statistics.json)"

compress: $(IN_COMPRESSED) ## Compress IN=file.jsonl into file_compressed.jsonl (TARGET_TOKENS)
	@echo "compress: $(IN_COMPRESSED) (metrics: $(dir $(IN_COMPRESSED))compression_metrics.json)"

pipeline: ## batch, then compress the batch's trajectories
	$(MAKE) --no-print-directory batch
	$(MAKE) --no-print-directory compress IN=$(TRAJECTORIES)

# The stages, as real file dependencies: re-running redoes only what is out of date.
$(BIN)/%:
	$(CARGO) build --release --locked --bin $*
# A binary built for a pattern rule (`make compress`) is kept, not removed afterwards as
# an intermediate file.
.SECONDARY: $(addprefix $(BIN)/,$(BINARIES))

$(TASKS): $(DATASET) | $(BIN)/traj-sample-tools
	@mkdir -p $(RUN_DIR)
	$(BIN)/traj-sample-tools --distribution $(DISTRIBUTION) --seed $(SEED) $(DATASET) -o $@

# traj-run always resumes: after an interruption, `make batch` again runs only what is left.
# Prompts that failed (failures.jsonl) do not stop the batch: it goes on with the others,
# the run is not marked complete, and `make batch` again runs the failed ones again (up to
# --max-attempts). A stopped run (Ctrl-C, --max-cost, out of credits) stops the batch.
$(RUN_DONE): $(TASKS) | $(BIN)/traj-run
	rc=0; $(BIN)/traj-run --resume --run-dir $(RUN_DIR) --model '$(MODEL)' --base-url '$(BASE_URL)' \
	  --api-key-env $(API_KEY_ENV) --num-workers $(WORKERS) --batch-size $(BATCH_SIZE) \
	  --max-turns $(MAX_TURNS) --sandbox $(SANDBOX) --seed $(SEED) $(RUN_FLAGS) $(TASKS) > /dev/null || rc=$$?; \
	if [ $$rc -eq 0 ]; then touch $@; \
	elif [ $$rc -eq 1 ] && bash scripts/run-ended.sh $(RUN_DIR); then \
	  echo "make: some prompts failed ($(RUN_DIR)/failures.jsonl): the batch goes on with the others; make batch again runs them again" >&2; \
	else exit $$rc; fi

# traj-filter, at the end of a pipe, cannot know that a stage before it failed: it writes
# a part file, put in place only when the whole pipe succeeded (an earlier good
# trajectories.jsonl is kept when a stage fails, never replaced by a part and deleted).
$(TRAJECTORIES): $(RUN_DONE) | $(BIN)/traj-merge $(BIN)/traj-normalize $(BIN)/traj-filter
	$(BIN)/traj-merge $(RUN_DIR) --rejects $(RUN_DIR)/merge_rejects.jsonl \
	  | $(BIN)/traj-normalize --on-error skip --rejects $(RUN_DIR)/normalize_rejects.jsonl \
	      --tools <($(BIN)/traj-sample-tools --list-toolsets --json | jq -c '[.[].tools[].name] | unique') \
	  | $(BIN)/traj-filter $(FILTERS) --rejects $(RUN_DIR)/rejects.jsonl \
	      --stats $(RUN_DIR)/filter_stats.json -o $@.part \
	  || { rm -f $@.part; exit 1; }
	mv -f $@.part $@

# IN=x.jsonl or IN=x.jsonl.gz, either into x_compressed.jsonl.
define compress_recipe
$(BIN)/traj-compress --target-max-tokens $(TARGET_TOKENS) --tokenizer $(TOKENIZER) \
  --metrics $(dir $@)compression_metrics.json $(COMPRESS_FLAGS) $< -o $@
endef
%_compressed.jsonl: %.jsonl | $(BIN)/traj-compress
	$(compress_recipe)
%_compressed.jsonl: %.jsonl.gz | $(BIN)/traj-compress
	$(compress_recipe)

.PHONY: check-consumers
check-consumers: build ## Load traj's output with LLaMA-Factory's own loader (installs it with torch into a venv, several GB)
	bash scripts/check-consumers.sh $(BIN)
