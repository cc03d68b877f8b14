"""The GPU kernels of a Perfetto trace (``jax.profiler.trace(..., create_perfetto_trace=True)``)
by total time: ``python bench/trace_kernels.py DIR [--top 30]``."""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--top", type=int, default=30)
    ns = p.parse_args(argv)
    files = glob.glob(os.path.join(ns.dir, "**", "*.trace.json.gz"), recursive=True)
    if not files:
        raise SystemExit(f"no *.trace.json.gz under {ns.dir}")
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
    if not tot:
        print("no GPU kernels; processes:", sorted(set(pids.values())))
    total = sum(tot.values())
    print(f"{len(tot)} kernels, {total / 1e3:.2f} ms in all ({files[0]})")
    for name, us in sorted(tot.items(), key=lambda x: -x[1])[: ns.top]:
        print(f"{us / 1e3:9.3f} ms {100 * us / total:5.1f}% x{cnt[name]:<5d} {name[:110]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
