"""What spark_pipeline.py and ray_pipeline.py share on the driver: the common
command line (input, output folder, stages, --bin-dir) and where the binaries are."""

import argparse
import os
import shlex
import shutil
import sys


def stage_parser(framework, doc):
    """The parser of `SCRIPT INPUT OUTPUT_DIR 'STAGE ARGS'... [--bin-dir DIR]`."""
    p = argparse.ArgumentParser(
        description=f"Run traj stages over a dataset with {framework}.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=doc.split("\n\n", 1)[1],
    )
    p.add_argument("input")
    p.add_argument("output_dir")
    p.add_argument("stages", nargs="+", metavar="'STAGE ARGS'")
    p.add_argument("--bin-dir", default=None, help="where the traj binaries are (default: target/release, else PATH)")
    return p


def find_binary(name, bin_dir, script):
    """The path of binary `name`: in `bin_dir`, else where cargo builds (target/release,
    or $CARGO_TARGET_DIR/release), else on PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.environ.get("CARGO_TARGET_DIR") or os.path.join(here, "..", "target")
    for d in [bin_dir, os.path.join(built, "release")]:
        if d and os.path.isfile(os.path.join(d, name)):
            return os.path.abspath(os.path.join(d, name))
    found = shutil.which(name)
    if not found:
        sys.exit(f"{script}: {name} not found (build with `make build` or pass --bin-dir)")
    return found


def parse_stages(stages, script):
    """Each 'STAGE ARGS' word as (binary name, its arguments); a stage must be a traj binary."""
    out = []
    for s in stages:
        words = shlex.split(s)
        if not words or not words[0].startswith("traj-"):
            sys.exit(f"{script}: a stage is a traj binary and its flags, not {s!r}")
        out.append((words[0], words[1:]))
    return out
