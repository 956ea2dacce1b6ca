# traj: build, test, benchmark, and the batch-then-compress pipeline.
# `make help` lists the targets.

CARGO ?= cargo
RELEASE_DIR := target/release

.PHONY: help build test lint bench install clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

build: ## Build the six binaries (release)
	$(CARGO) build --release --locked

test: ## fmt check, clippy -D warnings, and every test
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) test --locked

lint: ## fmt check and clippy only
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

bench: build ## Benchmarks on a generated corpus; writes BENCHMARKS.md
	bash scripts/bench.sh

install: build ## Copy the binaries to $(PREFIX)/bin (default ~/.local)
	install -d $(or $(PREFIX),$(HOME)/.local)/bin
	install -m 755 $(addprefix $(RELEASE_DIR)/,traj-normalize traj-filter traj-merge traj-compress traj-sample-tools traj-run) $(or $(PREFIX),$(HOME)/.local)/bin/

clean: ## Remove build output
	$(CARGO) clean
