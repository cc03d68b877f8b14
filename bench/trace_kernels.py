"""The GPU kernels of a Perfetto trace (``jax.profiler.trace(..., create_perfetto_trace=True)``)
by total time: ``python bench/trace_kernels.py DIR [--top 30]``."""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os


def kernels(path: str) -> tuple[dict[str, float], dict[str, int], list[str]]:
    """(total microseconds, calls) per GPU kernel name in the first Perfetto trace under
    ``path``, and the trace's process names."""
    files = glob.glob(os.path.join(path, "**", "*.trace.json.gz"), recursive=True)
    if not files:
        raise FileNotFoundError(f"no *.trace.json.gz under {path}")
    with gzip.open(files[0]) as f:
        tr = json.load(f)
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    pids = {e["pid"]: e["args"]["name"] for e in ev
            if e.get("ph") == "M" and e.get("name") == "process_name"}  # fmt: skip
    tot: dict[str, float] = collections.Counter()
    cnt: dict[str, int] = collections.Counter()
    for e in ev:
        if e.get("ph") == "X" and "GPU" in pids.get(e.get("pid"), "") and "dur" in e:
            tot[e["name"]] += e["dur"]
            cnt[e["name"]] += 1
    return dict(tot), dict(cnt), sorted(set(pids.values()))


def trace_top(compiled, args: tuple, path: str, calls: int = 2, top: int = 8) -> list:
    """Trace ``calls`` calls of ``compiled(*args)`` into ``path``; the ``top`` kernels as
    [name, ms per call, launches per call, share of the kernels' time] (empty when the
    profiler gives no GPU kernels, as on the CPU)."""
    import jax

    jax.block_until_ready(compiled(*args))
    with jax.profiler.trace(path, create_perfetto_trace=True):
        for _ in range(calls):
            jax.block_until_ready(compiled(*args))
    tot, cnt, _ = kernels(path)
    total = sum(tot.values()) or 1.0
    best = sorted(tot.items(), key=lambda x: -x[1])[:top]
    return [[k, round(v / 1e3 / calls, 3), cnt[k] // calls, round(v / total, 3)] for k, v in best]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--top", type=int, default=30)
    ns = p.parse_args(argv)
    tot, cnt, procs = kernels(ns.dir)
    if not tot:
        print("no GPU kernels; processes:", procs)
    total = sum(tot.values())
    print(f"{len(tot)} kernels, {total / 1e3:.2f} ms in all")
    for name, us in sorted(tot.items(), key=lambda x: -x[1])[: ns.top]:
        print(f"{us / 1e3:9.3f} ms {100 * us / total:5.1f}% x{cnt[name]:<5d} {name[:110]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
