#!/usr/bin/env python3
"""Check that the crate's `rust-version` is honest: no dependency in Cargo.lock's
resolution declares a newer one, and the toolchain in use is not older than it.
(clippy's `incompatible_msrv` lint checks our own use of std against it.)"""
import json
import subprocess
import sys


def ver(s):
    return tuple(int(x) for x in s.split(".")) + (0,) * (3 - len(s.split(".")))


meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
ours = next(p for p in meta["packages"] if p["name"] == "traj")
msrv = ver(ours["rust_version"])
newer = [
    f"{p['name']} {p['version']} needs {p['rust_version']}"
    for p in meta["packages"]
    if p.get("rust_version") and ver(p["rust_version"]) > msrv
]
rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.split()[1]
if ver(rustc.split("-")[0]) < msrv:
    newer.append(f"the toolchain is {rustc}")
if newer:
    sys.exit(f"rust-version {ours['rust_version']} is too low: " + "; ".join(newer))
print(f"rust-version {ours['rust_version']}: every dependency fits")
