#!/usr/bin/env bash
# Load traj's training files with LLaMA-Factory's own loader (its dataset_info parser and
# converters, data/converter.py) and render them with its templates' own formatters
# (`traj_hermes` with chatml; `traj_llamafactory` and `traj_llamafactory_openai` with
# qwen), per source file and for the mix of every source: every row loaded, 0 dropped,
# no tool response wrapped twice, every call rendered with object arguments, every tool
# list read. Prints the figures of each entry per file; exit 1 on any failure.
# LLaMA-Factory pulls torch (several GB), so this is `make check-consumers`, not CI.
#   usage: scripts/check-consumers.sh [BIN_DIR]   (default target/release)
#   env:   TRAJ_CONSUMER_VENVS (default target/venvs-consumers: its own, torch is big),
#          LLAMAFACTORY (default llamafactory==0.9.5)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release}
venvs=${TRAJ_CONSUMER_VENVS:-$here/target/venvs-consumers}
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
data="$here/tests/fixtures"
shared="$here/../shared/data"
# Every real source: fixtures and shared data. name<TAB>file<TAB>extra flags
sources=$(
  for f in "$data"/llamafactory_glaive_toolcall_en.jsonl "$data"/llamafactory_reason_tool_use_50.jsonl \
    "$data"/hermes_reason_tool_use_50.jsonl "$data"/openai_legacy_shapes.jsonl "$data"/traj_run_records.jsonl; do
    printf 'fixtures/%s\t%s\t\n' "$(basename "$f")" "$f"
  done
  printf 'fixtures/swe_agent_demo_trajs.jsonl\t%s\t--messages-field history\n' "$data/swe_agent_demo_trajs.jsonl"
  for f in "$shared"/llamafactory_*.jsonl; do printf 'shared/%s\t%s\t\n' "$(basename "$f")" "$f"; done
  printf 'shared/swe_agent_demo_trajs.jsonl\t%s\t--messages-field history\n' "$shared/swe_agent_demo_trajs.jsonl"
)
# The run's tool list (every tool any source uses), so every row has the same tool_stats keys.
while IFS=$'\t' read -r name f extra; do
  # shellcheck disable=SC2086
  "$bin/traj-normalize" -q --columns core $extra "$f"
done <<< "$sources" > "$work/first.jsonl"
jq -sc '[.[].tool_stats | fromjson | keys[]] | unique' "$work/first.jsonl" > "$work/tools.json"  # core: JSON strings
# Per source: merge, keep what alternates, write both files (make-training-files.sh's steps).
files=()
i=0
while IFS=$'\t' read -r name f extra; do
  d="$work/$i"; mkdir -p "$d"
  # shellcheck disable=SC2086
  "$bin/traj-normalize" -q $extra --columns core "$f" > "$d/in.jsonl"
  "$bin/traj-normalize" -q --merge-consecutive --columns core --tools "$work/tools.json" "$d/in.jsonl" \
    | "$bin/traj-filter" -q --alternating --rejects "$d/not_alternating.jsonl" -o "$d/trajectories.jsonl"
  for to in llamafactory llamafactory-openai; do
    "$bin/traj-normalize" -q --to "$to" --columns core --tools "$work/tools.json" \
      "$d/trajectories.jsonl" -o "$d/trajectories_${to//-/_}.jsonl"
  done
  files+=("$name" "$d")
  i=$((i + 1))
done <<< "$sources"
# The mix of every source in one file.
d="$work/mix"; mkdir -p "$d"
for ((k = 0; k < i; k++)); do cat "$work/$k/in.jsonl"; done > "$d/in.jsonl"
for ((k = 0; k < i; k++)); do cat "$work/$k/trajectories.jsonl"; done > "$d/trajectories.jsonl"
for ((k = 0; k < i; k++)); do cat "$work/$k/not_alternating.jsonl" 2>/dev/null || true; done > "$d/not_alternating.jsonl"
for f in trajectories_llamafactory trajectories_llamafactory_openai; do
  for ((k = 0; k < i; k++)); do cat "$work/$k/$f.jsonl"; done > "$d/$f.jsonl"
done
files+=("mix of all sources" "$d")
HF_DATASETS_OFFLINE=1 HF_HOME="$work/hf" "$py" - "$here/examples/training/dataset_info.json" \
  "$data/templates/qwen2.5-style" "${files[@]}" <<'PY'
import json, os, re, sys
import pyarrow.json as pj
from datasets import disable_progress_bars, load_dataset
from transformers import AutoTokenizer, Seq2SeqTrainingArguments
from llamafactory.data.converter import align_dataset
from llamafactory.data.parser import get_dataset_list
from llamafactory.data.template import TEMPLATES
from llamafactory.hparams import DataArguments

disable_progress_bars()
info = json.load(open(sys.argv[1]))
# A real tokenizer (the Qwen2.5-style fixture's) for LLaMA-Factory's whole encode path.
tokenizer = AutoTokenizer.from_pretrained(sys.argv[2])
pairs = sys.argv[3:]
template_of = {"traj_hermes": "chatml", "traj_llamafactory": "qwen", "traj_llamafactory_openai": "qwen"}
keys = list(info)
assert set(keys) == set(template_of), f"entries {keys}: give each its template here"
CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)


def lines(p):
    return sum(1 for l in open(p, encoding="utf-8") if l.strip()) if os.path.exists(p) else 0


def text(slots):
    return "".join(s for s in slots if isinstance(s, str))


# The calls traj wrote (the Hermes file's <tool_call> blocks): every entry must render them all.
def hermes_calls(p):
    n = 0
    for l in open(p, encoding="utf-8"):
        for t in json.loads(l)["conversations"]:
            if t["from"] == "gpt":
                n += len(CALL.findall(t["value"]))
    return n


failed = False
verdict = {k: [0, 0] for k in keys}  # files passed, files failed
for name, d in zip(pairs[::2], pairs[1::2]):
    json.dump(info, open(f"{d}/dataset_info.json", "w"))
    n_in, n_alt, n_rej = lines(f"{d}/in.jsonl"), lines(f"{d}/trajectories.jsonl"), lines(f"{d}/not_alternating.jsonl")
    want_calls = hermes_calls(f"{d}/trajectories.jsonl")
    print(f"check-consumers: {name}: {n_in} rows in, {n_alt} alternate, {n_rej} rejected by --alternating (with reasons), {want_calls} calls")
    if n_alt + n_rej != n_in:
        print("  FAIL: rows lost before the trainer")
        failed = True
    data_args = DataArguments(dataset_dir=d)
    targs = Seq2SeqTrainingArguments(output_dir=f"{d}/out")
    for key, attr in zip(keys, get_dataset_list(keys, d)):
        path = f"{d}/{attr.dataset_name}"
        tpl = TEMPLATES[template_of[key]]
        head = f"  {key} ({attr.formatting}, {template_of[key]} template)"
        try:
            pj.read_json(path)  # datasets 4.0.0 crashes (SIGSEGV) on what Arrow cannot type
        except Exception as e:
            print(f"{head}: FAIL: datasets cannot load it: {str(e)[:160]}")
            failed = True
            verdict[key][1] += 1
            continue
        try:
            raw = load_dataset("json", data_files=path, split="train", cache_dir=f"{d}/hf")
            aligned = align_dataset(raw, attr, data_args, targs)
        except Exception as e:
            print(f"{head}: FAIL: LLaMA-Factory cannot convert it: {type(e).__name__}: {str(e)[:160]}")
            failed = True
            verdict[key][1] += 1
            continue
        dropped = sum(1 for r in aligned if not r["_prompt"] or not r["_response"])
        twice = calls = string_args = bad_tools = errors = 0
        for r in aligned:
            try:
                if r["_tools"]:
                    tpl.format_tools.apply(content=r["_tools"])
            except Exception:
                bad_tools += 1
            try:  # the template's whole encoding, as training sees it
                pairs_ids = tpl.encode_multiturn(tokenizer, r["_prompt"] + r["_response"], r["_system"], r["_tools"])
                full = tokenizer.decode([t for p, q in pairs_ids for t in p + q])
                twice += "<tool_response>\n<tool_response>" in full
            except Exception as e:
                errors += 1
                if errors == 1:
                    print(f"    encode error: {type(e).__name__}: {str(e)[:160]}")
            for m in r["_prompt"] + r["_response"]:
                try:
                    if m["role"] in ("assistant", "function"):
                        if m["role"] == "function":
                            out = tpl.format_function.apply(content=m["content"], thought_words=tpl.thought_words,
                                                            tool_call_words=tpl.tool_call_words)
                        else:
                            out = tpl.format_assistant.apply(content=m["content"])
                        for body in CALL.findall(text(out)):
                            calls += 1
                            string_args += not isinstance(json.loads(body).get("arguments"), dict)
                except Exception as e:
                    errors += 1
                    if errors == 1:
                        print(f"    render error: {type(e).__name__}: {str(e)[:160]}")
        bad = dropped or twice or string_args or bad_tools or errors or calls != want_calls or len(raw) != n_alt
        print(f"{head}: {len(raw)} rows loaded, {dropped} dropped by LLaMA-Factory, {twice} tool responses "
              f"wrapped twice (encoded rows), {calls} calls rendered, {string_args} with non-object "
              f"arguments, {bad_tools} tool lists and {errors} rows or turns it cannot render" + ("  FAIL" if bad else ""))
        failed = failed or bool(bad)
        verdict[key][bool(bad)] += 1
for key, (ok, bad) in verdict.items():
    print(f"check-consumers: {key}: {ok} of {ok + bad} files pass" + (f", {bad} FAIL" if bad else ""))
sys.exit(1 if failed else 0)
PY
