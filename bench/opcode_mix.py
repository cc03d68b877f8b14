"""Which opcodes the corpora's programs execute, and how often: the dynamic opcode mix
that ``vm_pallas.HOT_OPS`` (the opcodes with a copy of the kernel's step) was chosen by.

Each program of ``bench.corpus.generate(0, size, N)`` is compiled by the reference
compiler and run on each of its tests by the reference interpreter, whose ``trace``
hook counts every instruction started:

    PYTHONPATH=. python bench/opcode_mix.py [--n 256] [--sizes small,medium]

Prints each size's mix, then the sizes combined with the cumulative share, one line per
opcode (most frequent first). Pure Python on the CPU (about a minute for the default).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def mix(size: str, n: int) -> tuple[collections.Counter, int]:
    """(opcode -> instructions started, the interpreter's own step count summed)."""
    import jax
    import numpy as np

    from bench import baselines
    from bench import corpus as C
    from jaxcc.reference import compiler, interp

    progs = C.generate(0, size, n)
    lim = C.LIMITS[size]
    prog = jax.tree.map(np.asarray, compiler.compile_many([p["source"] for p in progs], lim)[0])
    t = baselines.test_arrays(progs)
    count, steps = collections.Counter(), 0

    def trace(fn, pc, op, arg, operands):
        count[op] += 1

    for b in range(len(progs)):
        one = jax.tree.map(lambda x, b=b: x[b], prog)
        for k in range(t["args"].shape[1]):
            r = interp.run_program(one, lim, int(t["entry"][b]), list(t["args"][b, k]), trace)
            steps += int(r.steps)
    return count, steps


def main(argv=None) -> int:
    from jaxcc.isa import Op

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=256, help="programs per size")
    p.add_argument("--sizes", default="small,medium")
    a = p.parse_args(argv)
    total = collections.Counter()
    for size in a.sizes.split(","):
        c, _ = mix(size, a.n)
        total.update(c)
        n = sum(c.values())
        print(f"{size}: {n} instructions")
        for op, k in c.most_common():
            print(f"  {Op(op).name:22s} {k / n:.3f}")
    n, cum = sum(total.values()), 0.0
    print(f"combined: {n} instructions")
    for i, (op, k) in enumerate(total.most_common()):
        cum += k / n
        print(f"  {i + 1:2d} {Op(op).name:22s} {k / n:.3f}  cumulative {cum:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
