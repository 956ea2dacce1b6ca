#!/usr/bin/env bash
# Run every stage of two builds of traj on the same inputs and compare what each writes:
# stdout bytes, rejects lines and exit code, per stage and input.
#
#   scripts/compare-revisions.sh OLD_BIN_DIR NEW_BIN_DIR [INPUT.jsonl ...]
#
# Default inputs: every tests/fixtures/*.jsonl. Prints one row per (stage, input):
# `same`, or what differs (out / rejects / exit OLD->NEW). Exit 0 always: the table is
# the result; a reviewer decides which differences are intended.
set -uo pipefail
old=${1:?OLD_BIN_DIR}; new=${2:?NEW_BIN_DIR}; shift 2
inputs=("$@")
if [ ${#inputs[@]} -eq 0 ]; then inputs=(tests/fixtures/*.jsonl); fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

stages=(
  "traj-normalize"
  "traj-normalize --to openai"
  "traj-filter"
  "traj-filter --well-formed --valid-tools"
  "traj-merge"
  "traj-compress --target-max-tokens 2000"
  "traj-sample-tools --distribution default --seed 1"
)
run() { # bin_dir stage input tag
  local dir=$1 stage=$2 in=$3 tag=$4 bin rest
  bin=${stage%% *}; rest=${stage#"$bin"}
  # shellcheck disable=SC2086
  env -u OPENROUTER_API_KEY -u OPENAI_API_KEY "$dir/$bin" $rest --on-error skip \
    --rejects "$work/$tag.rej" "$in" >"$work/$tag.out" 2>"$work/$tag.err" </dev/null
  echo $? >"$work/$tag.rc"
  # The original lines of the rejects, whatever the rejects format around them.
  if [ -s "$work/$tag.rej" ]; then
    python3 - "$work/$tag.rej" >"$work/$tag.rejlines" <<'PY'
import base64, json, sys
for line in open(sys.argv[1], "rb"):
    r = json.loads(line)
    raw = r.get("raw")
    if raw is None and "raw_base64" in r:
        raw = base64.b64decode(r["raw_base64"]).decode("utf-8", "replace")
    if raw is None:
        raw = r.get("record")
    elif isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            pass
    print(json.dumps(raw, sort_keys=True))
PY
  else : >"$work/$tag.rejlines"; fi
}
printf '| stage | input | old exit | new exit | result |\n|---|---|---:|---:|---|\n'
for stage in "${stages[@]}"; do
  for in in "${inputs[@]}"; do
    run "$old" "$stage" "$in" old; run "$new" "$stage" "$in" new
    what=()
    cmp -s "$work/old.out" "$work/new.out" || what+=("out: $(wc -l <"$work/old.out")->$(wc -l <"$work/new.out") lines, $(diff <(cat "$work/old.out") <(cat "$work/new.out") | grep -c '^>') changed")
    cmp -s "$work/old.rejlines" "$work/new.rejlines" || what+=("rejects: $(wc -l <"$work/old.rejlines")->$(wc -l <"$work/new.rejlines")")
    [ "$(cat "$work/old.rc")" = "$(cat "$work/new.rc")" ] || what+=("exit")
    res=same; [ ${#what[@]} -gt 0 ] && res=$(IFS=';'; echo "${what[*]}")
    printf '| `%s` | %s | %s | %s | %s |\n' "$stage" "$(basename "$in")" "$(cat "$work/old.rc")" "$(cat "$work/new.rc")" "$res"
  done
done
