"""Runs one side of a side-by-side benchmark in its own process and reads its figures back.

A benchmark script that supports ``--side NAME`` (measure one library, print one JSON line) calls
``run_side`` for each side; the torch side runs in an interpreter that has torch (``peer_python``:
/work/peervenv/bin/python where it exists, else this interpreter), so rlpipe's environment never
needs torch, and per-process figures (page faults, allocator state) stay apart."""
import json
import os
import subprocess
import sys

DEFAULT_PEER = "/work/peervenv/bin/python"


def peer_python():
    """The default interpreter for the torch side."""
    return DEFAULT_PEER if os.path.exists(DEFAULT_PEER) else sys.executable


def run_side(script, python, side, args=(), **env):
    """The JSON figures that ``python script --side side *args`` prints last, run with ``env``
    added to this environment; None (with the reason printed) when that run fails."""
    cmd = [python, os.path.abspath(script), "--side", side, *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if proc.returncode != 0:
        print(f"{side} side not measured ({python}): {proc.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])
