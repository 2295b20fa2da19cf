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


def print_side_by_side(ours, theirs, label, number_format):
    """The table of ``ours["us"]`` beside the torch side's (``theirs``, None when not measured), with
    their ratio; ``label`` heads the first column, ``number_format`` (e.g. "9.2f") shows the times."""
    print(f"peer: torch {theirs['version']} (own process)" if theirs else "peer: not measured")
    width = int(number_format.split(".")[0])
    print(f"{label:36s} {'rlpipe':>{width}s} {'torch':>{width}s} {'rlpipe/torch':>13s}")
    for name, mine in ours["us"].items():
        peer = theirs["us"][name] if theirs else float("nan")
        ratio = f"{mine / peer:12.2f}x" if theirs else ""
        print(f"{name:36s} {mine:{number_format}} {peer:{number_format}} {ratio}")


def measure_workloads(workloads, side, repeat, *args, no_grad=False):
    """CPU microseconds per call of each of ``workloads(lib, *args)``'s callables (name -> (callable, calls
    per timing)) for ``side`` ("rlpipe" or "torch"), best of ``repeat`` timings (CPU time, not wall time: the
    machine is shared, and waiting for a core is not the op's cost), under ``lib.no_grad()`` when ``no_grad``;
    as ``run_side`` reads them."""
    import contextlib
    import time
    import timeit
    if side == "torch":
        from one_thread import import_peer
        lib, = import_peer()
        if lib is None:
            sys.exit("torch is not importable")
    else:
        import rlpipe as lib
    out = {}
    with lib.no_grad() if no_grad else contextlib.nullcontext():
        for name, (fn, number) in workloads(lib, *args).items():
            fn()
            out[name] = min(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6
    return {"us": out, "version": lib.__version__}


def side_by_side_main(script, workloads, description, title, label="workload", number_format="10.1f",
                      number=None, no_grad=False):
    """A benchmark script's command line: ``--side`` measures one library and prints JSON; otherwise rlpipe
    here and torch in its own process (``--peer-python``), printed side by side under ``title``. With
    ``number`` (its default), ``--number`` is passed on to ``workloads(lib, number)``; ``no_grad`` as in
    ``measure_workloads``."""
    import argparse
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--repeat", type=int, default=5)
    if number is not None:
        p.add_argument("--number", type=int, default=number)
    p.add_argument("--peer-python", default=peer_python())
    p.add_argument("--side", choices=("rlpipe", "torch"), help="measure one library only and print JSON")
    args = p.parse_args()
    extra = () if number is None else (args.number,)
    if args.side:
        print(json.dumps(measure_workloads(workloads, args.side, args.repeat, *extra, no_grad=no_grad)))
        return
    ours = measure_workloads(workloads, "rlpipe", args.repeat, *extra, no_grad=no_grad)
    passed_on = ("--repeat", args.repeat) + (() if number is None else ("--number", args.number))
    theirs = run_side(script, args.peer_python, "torch", passed_on)
    print(f"{title}, best of {args.repeat}")
    print_side_by_side(ours, theirs, label, number_format)
