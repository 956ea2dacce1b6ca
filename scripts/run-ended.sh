#!/usr/bin/env bash
# Usage: scripts/run-ended.sh RUN_DIR
#
# Exit 0 when the last traj-run of RUN_DIR ended with every prompt it scheduled either
# recorded or written to failures.jsonl, and was not stopped (Ctrl-C, --max-cost, out of
# credits): its exit status 1 then says only that some prompts failed, and a pipeline
# goes on with the others (the next `--resume` runs the failed ones again, up to
# --max-attempts). Exit 1 otherwise: the run must be resumed before its rows are used.
set -euo pipefail
jq -e '.this_run | .stopped == null and .records + .failures == .prompts_scheduled' \
  "$1/statistics.json" > /dev/null
