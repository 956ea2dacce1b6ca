#!/usr/bin/env bash
# Load traj's training files with LLaMA-Factory's own loader (its dataset_info parser and
# converters, data/converter.py) and its qwen template's formatters: 0 rows dropped, no
# tool response wrapped twice, tool-call arguments rendered as objects.
# LLaMA-Factory pulls torch (several GB), so this is `make check-consumers`, not CI.
#   usage: scripts/check-consumers.sh [BIN_DIR]   (default target/release)
#   env:   TRAJ_VENVS (default target/venvs), LLAMAFACTORY (default llamafactory==0.9.5)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release}
venvs=${TRAJ_VENVS:-$here/target/venvs}
spec=${LLAMAFACTORY:-llamafactory==0.9.5}
py="$venvs/llamafactory/bin/python"
if ! "$py" -c 'import llamafactory' >/dev/null 2>&1; then
  echo "check-consumers: installing $spec (torch included: about 7 GB) into $venvs/llamafactory" >&2
  mkdir -p "$venvs"
  python3 -m venv "$venvs/llamafactory"
  "$py" -m pip install --quiet --disable-pip-version-check "$spec"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every real source: fixtures and shared data, mixed in one file.
data="$here/tests/fixtures"
shared="$here/../shared/data"
{
  for f in "$data"/llamafactory_glaive_toolcall_en.jsonl "$data"/llamafactory_reason_tool_use_50.jsonl \
    "$data"/hermes_reason_tool_use_50.jsonl "$data"/openai_legacy_shapes.jsonl \
    "$data"/traj_run_records.jsonl "$shared"/llamafactory_*.jsonl; do
    "$bin/traj-normalize" -q --columns core "$f"
  done
  for f in "$data"/swe_agent_demo_trajs.jsonl "$shared"/swe_agent_demo_trajs.jsonl; do
    "$bin/traj-normalize" -q --columns core --messages-field history "$f"
  done
} > "$work/first.jsonl"
jq -sc '[.[].tool_stats | keys[]] | unique' "$work/first.jsonl" > "$work/tools.json"
"$bin/traj-normalize" -q --merge-consecutive --columns core --tools "$work/tools.json" "$work/first.jsonl" \
  | "$bin/traj-filter" -q --alternating --rejects "$work/not_alternating.jsonl" -o "$work/trajectories.jsonl"
"$bin/traj-normalize" -q --to openai --arguments object --tools-as string --columns core \
  --tools "$work/tools.json" "$work/trajectories.jsonl" -o "$work/trajectories_openai.jsonl"
cp "$here/examples/training/dataset_info.json" "$work/"
echo "check-consumers: $(wc -l < "$work/first.jsonl") rows in, $(wc -l < "$work/trajectories.jsonl") alternate, $(wc -l < "$work/not_alternating.jsonl") rejected by --alternating" >&2
HF_DATASETS_OFFLINE=1 HF_HOME="$work/hf" "$py" - "$work" <<'PY'
import json, sys
from datasets import load_dataset
from transformers import Seq2SeqTrainingArguments
from llamafactory.data.converter import align_dataset
from llamafactory.data.parser import get_dataset_list
from llamafactory.data.template import TEMPLATES
from llamafactory.hparams import DataArguments

work = sys.argv[1]
data_args = DataArguments(dataset_dir=work, template="qwen")
targs = Seq2SeqTrainingArguments(output_dir=work + "/out")
qwen = TEMPLATES["qwen"]
failed = False
for attr in get_dataset_list(["traj_hermes", "traj_openai"], work):
    raw = load_dataset("json", data_files=f"{work}/{attr.dataset_name}", split="train")
    aligned = align_dataset(raw, attr, data_args, targs)
    dropped = sum(1 for r in aligned if not r["_prompt"] or not r["_response"])
    twice = string_args = calls = 0
    for r in aligned:
        for m in r["_prompt"] + r["_response"]:
            if m["role"] == "observation":
                text = "".join(s for s in qwen.format_observation.apply(content=m["content"]) if isinstance(s, str))
                twice += "<tool_response>\n<tool_response>" in text
            if m["role"] == "function":
                for c in json.loads(m["content"]):
                    calls += 1
                    string_args += isinstance(c.get("arguments"), str)
    print(f"check-consumers: {attr.dataset_name} ({attr.formatting}): {len(raw)} rows, "
          f"{dropped} dropped by LLaMA-Factory, {twice} tool responses wrapped twice by qwen, "
          f"{calls} calls, {string_args} with string arguments")
    if dropped:
        failed = True
    if attr.formatting == "openai" and (twice or string_args or not calls):
        failed = True
sys.exit(1 if failed else 0)
PY
