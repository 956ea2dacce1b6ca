#!/usr/bin/env python3
"""Generate a synthetic trajectory corpus for traj's benchmarks.

Deterministic for a given --seed. Shapes:
  sharegpt  Hermes-format ShareGPT rows (system with <tools>, human, gpt with <think> and
            <tool_call>, tool turns of <tool_response> blocks), as traj-normalize writes.
  openai    raw run records as traj-run writes them: OpenAI `messages` with reasoning,
            `tool_calls` and `role: "tool"` results, plus `tools` (the schemas offered).

  real      rows nobody here wrote, from tests/fixtures (see its LICENSES.md): hermes-agent's
            Hermes ShareGPT rows (hermes_reason_tool_use_50, hermes_agent_repairs) and
            long mini-swe-agent runs in OpenAI `messages` (mini_swe_agent_trajs, up to
            100 KB a row), in a seeded shuffle, each copy with its own `id` (the only
            change to a row; --real-frac sets the byte share of the OpenAI runs).

Generated rows have 10 to 62 turns; tool output is about 60% of the text. --long-frac
sets the share of rows made long (several times a typical row), for the compression
benchmark.

Example:
  python3 scripts/gen_corpus.py --shape sharegpt --mb 500 --seed 1 > target/bench/corpus.jsonl
"""

import argparse
import json
import os
import random
import sys

WORDS = (
    "the a of to in is for on with that this file test error value run build make "
    "function return config path line output input check data model token list map "
    "we should first look at then fix update patch read write search found missing "
    "import module class struct impl trait result option string number bool array "
    "directory install package version failed passed warning assert expected actual"
).split()

TOOLS = [
    ("terminal", "Run a shell command in the task workspace.",
     {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    ("read_file", "Read a text file from the workspace.",
     {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    ("write_file", "Write a text file in the workspace.",
     {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
      "required": ["path", "content"]}),
    ("search_files", "Search file names and contents in the workspace.",
     {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}),
    ("web_search", "Search the web.",
     {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
]

SYSTEM_HEAD = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools> </tools> XML tags. You may call one or more functions to assist with the user "
    "query. Don't make assumptions about what values to plug into functions. After calling "
    "& executing the functions, you will be provided with function results within "
    "<tool_response> </tool_response> XML tags. Here are the available tools:\n"
)
SYSTEM_TAIL = (
    "\nFor each function call return a JSON object, with the following pydantic model json "
    "schema for each tool call you will make: {'title': 'FunctionCall', 'type': 'object', "
    "'properties': {'name': {'title': 'Name', 'type': 'string'}, 'arguments': {'title': "
    "'Arguments', 'type': 'object'}}, 'required': ['name', 'arguments']}\nEach function call "
    "should be enclosed within <tool_call> </tool_call> XML tags.\nExample:\n<tool_call>\n"
    "{'name': <function-name>,'arguments': <args-dict>}\n</tool_call>"
)


def dumps(v):
    return json.dumps(v, ensure_ascii=False)


class Text:
    """A pool of pre-built paragraphs, so that generation is fast."""

    def __init__(self, rng):
        self.rng = rng
        self.pool = []
        for _ in range(3000):
            n = rng.randint(8, 60)
            self.pool.append(" ".join(rng.choice(WORDS) for _ in range(n)))
        self.code = []
        for _ in range(1000):
            lines = []
            for _ in range(rng.randint(3, 30)):
                w = rng.sample(WORDS, 4)
                lines.append(f"{w[0]}_{w[1]}({w[2]}) -> {w[3]}: \"{rng.randint(0, 99999)}\"")
            self.code.append("\n".join(lines))

    def prose(self, k):
        return " ".join(self.rng.choice(self.pool) for _ in range(k))

    def output(self, k):
        return "\n".join(self.rng.choice(self.code) for _ in range(k))


def make_row(rng, text, idx, long_row):
    turns = rng.randint(10, 62)
    scale = 6 if long_row else 1
    tools = rng.sample(TOOLS, rng.randint(2, len(TOOLS)))
    steps = []  # (reasoning, content, [(call_id, name, args, result)])
    n_steps = max(1, (turns - 2) // 2)
    for s in range(n_steps):
        reasoning = text.prose(rng.randint(1, 3))
        last = s == n_steps - 1
        if last:
            steps.append((reasoning, text.prose(rng.randint(1, 4)), []))
            break
        calls = []
        for c in range(rng.choice([1, 1, 1, 2])):
            name, _, _ = rng.choice(tools)
            args = {"command": "ls -la && cat " + rng.choice(WORDS) + ".txt"} if name == "terminal" \
                else {"path": rng.choice(WORDS) + "/" + rng.choice(WORDS) + ".py"}
            out = text.output(rng.randint(1, 4) * scale)
            result = {"output": out, "exit_code": rng.choice([0, 0, 0, 1]), "error": None} \
                if name == "terminal" else {"content": out}
            calls.append((f"call_{idx}_{s}_{c}", name, args, result))
        steps.append((reasoning, text.prose(1) if rng.random() < 0.3 else "", calls))
    prompt = text.prose(rng.randint(1, 3))
    return prompt, tools, steps


def sharegpt_row(idx, prompt, tools, steps):
    tool_list = [{"name": n, "description": d, "parameters": p, "required": None}
                 for n, d, p in tools]
    conv = [{"from": "system", "value": SYSTEM_HEAD + "<tools>\n" + dumps(tool_list)
             + "\n</tools>\n" + SYSTEM_TAIL},
            {"from": "human", "value": prompt}]
    stats = {}
    for reasoning, content, calls in steps:
        v = "<think>\n" + reasoning + "\n</think>\n"
        if content:
            v += content + "\n"
        for _, name, args, _ in calls:
            v += "<tool_call>\n" + dumps({"name": name, "arguments": args}) + "\n</tool_call>\n"
        conv.append({"from": "gpt", "value": v.rstrip() if calls else v.strip()})
        if calls:
            blocks = ["<tool_response>\n" + dumps({"tool_call_id": cid, "name": name,
                                                   "content": result}) + "\n</tool_response>"
                      for cid, name, _, result in calls]
            conv.append({"from": "tool", "value": "\n".join(blocks)})
            for _, name, _, _ in calls:
                st = stats.setdefault(name, {"count": 0, "success": 0, "failure": 0})
                st["count"] += 1
                st["success"] += 1
    names = sorted(n for n, _, _ in TOOLS)
    tool_stats = {n: stats.get(n, {"count": 0, "success": 0, "failure": 0}) for n in names}
    return {"prompt_index": idx, "conversations": conv, "completed": True, "partial": False,
            "api_calls": len(steps), "toolsets_used": ["terminal", "file"],
            "tool_stats": tool_stats,
            "tool_error_counts": {n: tool_stats[n]["failure"] for n in names}}


def openai_row(idx, prompt, tools, steps):
    msgs = [{"role": "user", "content": prompt}]
    for reasoning, content, calls in steps:
        m = {"role": "assistant", "content": content, "reasoning_content": reasoning}
        if calls:
            m["tool_calls"] = [{"id": cid, "type": "function",
                                "function": {"name": name, "arguments": dumps(args)}}
                               for cid, name, args, _ in calls]
        msgs.append(m)
        for cid, name, _, result in calls:
            msgs.append({"role": "tool", "tool_call_id": cid, "content": dumps(result)})
    return {"prompt_index": idx, "prompt": prompt, "messages": msgs,
            "tools": [{"type": "function", "function": {"name": n, "description": d,
                                                        "parameters": p}}
                      for n, d, p in tools],
            "toolsets": ["terminal", "file"], "model": "synthetic", "completed": True,
            "partial": False, "api_calls": len(steps)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=["sharegpt", "openai", "real"], default="sharegpt")
    ap.add_argument("--mb", type=float, default=100, help="stop after this many MB")
    ap.add_argument("--rows", type=int, default=0, help="stop after this many rows (0: by --mb)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--long-frac", type=float, default=0.0,
                    help="share of rows made about six times longer (default 0)")
    ap.add_argument("--real-frac", type=float, default=0.5,
                    help="--shape real: byte share of the long OpenAI runs (default 0.5)")
    a = ap.parse_args()
    if a.shape == "real":
        return real_rows(a)
    rng = random.Random(a.seed)
    text = Text(rng)
    limit = int(a.mb * 1_000_000)
    written = 0
    idx = 0
    out = sys.stdout
    while (a.rows and idx < a.rows) or (not a.rows and written < limit):
        prompt, tools, steps = make_row(rng, text, idx, rng.random() < a.long_frac)
        row = sharegpt_row(idx, prompt, tools, steps) if a.shape == "sharegpt" \
            else openai_row(idx, prompt, tools, steps)
        line = dumps(row) + "\n"
        out.write(line)
        written += len(line.encode("utf-8"))
        idx += 1


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")


def real_rows(a):
    """--shape real: the fixtures' rows, each copy with its own `id` put first."""
    def load(names):
        rows = []
        for n in names:
            with open(os.path.join(FIXTURES, n), encoding="utf-8") as f:
                rows += [json.loads(line) for line in f if line.strip()]
        return rows
    hermes = load(["hermes_reason_tool_use_50.jsonl", "hermes_agent_repairs.jsonl"])
    openai = load(["mini_swe_agent_trajs.jsonl"])
    rng = random.Random(a.seed)
    limit = int(a.mb * 1_000_000)
    written = {"hermes": 0, "openai": 0}
    idx = 0
    out = sys.stdout
    while (a.rows and idx < a.rows) or (not a.rows and sum(written.values()) < limit):
        total = sum(written.values())
        kind = "openai" if total == 0 or written["openai"] < a.real_frac * total else "hermes"
        src = rng.choice(openai if kind == "openai" else hermes)
        row = {"id": f"real-{idx}"}
        row.update((k, v) for k, v in src.items() if k != "id")
        line = json.dumps(row, ensure_ascii=False) + "\n"
        out.write(line)
        written[kind] += len(line.encode("utf-8"))
        idx += 1


if __name__ == "__main__":
    main()
