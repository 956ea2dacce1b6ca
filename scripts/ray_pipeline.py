#!/usr/bin/env python3
"""Run traj stages over a dataset with Ray Data, block by block.

    ray_pipeline.py INPUT OUTPUT_DIR 'STAGE ARGS' ['STAGE ARGS' ...]

Examples:
    scripts/ray_pipeline.py raw/ out/ 'traj-normalize' 'traj-filter --well-formed'
    RAY_ADDRESS=auto scripts/ray_pipeline.py --bin-dir /shared/bin hf/ out/ 'traj-normalize'

INPUT is a file or a directory of JSONL (plain, .gz) or Parquet files. Each stage is a
traj binary with its flags, run as a subprocess in `map_batches` over each block of
lines; its exit code is checked, so a stage that fails (a bad line under the strict
default, exit 1) fails the job with the stage's stderr, never losing rows silently. Each
batch's rejects go to OUTPUT_DIR/rejects/STAGE-K-BATCH.jsonl, the rows (in input order)
to OUTPUT_DIR/data.jsonl. On a cluster, --bin-dir must be a path every node has.
"""

import os
import shlex
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import traj_stages  # noqa: E402


def parse_args(argv):
    p = traj_stages.stage_parser("Ray Data", __doc__)
    p.add_argument("--batch-size", type=int, default=4096, help="lines per subprocess call")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local Ray (default: all)")
    return p.parse_args(argv)


def find_binary(name, bin_dir):
    return traj_stages.find_binary(name, bin_dir, "ray_pipeline")


class Stage:
    """One traj stage as a Ray Data batch function: lines in, lines out, exit checked."""

    def __init__(self, argv, rejects_prefix):
        self.argv = argv
        self.rejects_prefix = rejects_prefix

    def __call__(self, batch):
        lines = [str(t) for t in batch["text"]]
        rejects = f"{self.rejects_prefix}-{uuid.uuid4().hex[:12]}.jsonl"
        cmd = self.argv + ["--rejects", rejects, "--quiet"]
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        p = subprocess.run(cmd, input=data, capture_output=True)
        if p.returncode != 0:
            raise RuntimeError(
                f"{shlex.join(cmd)} exited {p.returncode}: {p.stderr.decode('utf-8', 'replace').strip()}"
            )
        return {"text": lines_of(p.stdout)}


def lines_of(data):
    """The lines of `data` (bytes), cut at "\n" only: str.splitlines (and so Ray's
    read_text) also cuts at U+2028, U+2029, U+0085 and other characters that a JSON
    string may hold as they are, which would split one row in pieces."""
    return [line for line in data.decode("utf-8").split("\n") if line.strip()]


def main(argv):
    a = parse_args(argv)
    stages = [(find_binary(name, a.bin_dir), name, args)
              for name, args in traj_stages.parse_stages(a.stages, "ray_pipeline")]

    import ray

    ray.init(num_cpus=a.num_cpus, include_dashboard=False, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False

    paths = a.input
    parquet = paths.endswith(".parquet") or (
        os.path.isdir(paths)
        and any(f.endswith(".parquet") for _, _, fs in os.walk(paths, followlinks=True) for f in fs)
    )
    if parquet:
        import json

        ds = ray.data.read_parquet(paths).map(lambda r: {"text": json.dumps(r, default=str)})
    else:
        # Not read_text: it splits with str.splitlines (see lines_of).
        ds = ray.data.read_binary_files(paths).flat_map(
            lambda r: [{"text": line} for line in lines_of(r["bytes"])]
        )

    rejects_dir = os.path.join(a.output_dir, "rejects")
    os.makedirs(rejects_dir, exist_ok=True)
    for k, (path, name, args) in enumerate(stages):
        fn = Stage([path] + args, os.path.join(rejects_dir, f"{name}-{k}"))
        ds = ds.map_batches(fn, batch_size=a.batch_size, batch_format="numpy", zero_copy_batch=False)

    out_path = os.path.join(a.output_dir, "data.jsonl")
    try:
        with open(out_path + ".tmp", "w", encoding="utf-8") as f:
            for row in ds.iter_rows():
                f.write(str(row["text"]) + "\n")
    except Exception as e:
        msg = str(e)
        first = next((l for l in msg.splitlines() if "exited" in l), msg.splitlines()[0] if msg else repr(e))
        print(f"ray_pipeline: a stage failed: {first.strip()}", file=sys.stderr)
        os.remove(out_path + ".tmp")
        ray.shutdown()
        return 1
    os.replace(out_path + ".tmp", out_path)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
