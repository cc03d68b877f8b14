"""Where one lane's VM step goes on a GPU: the latency floors of what a step is made of,
and the kernel with narrower blocks. One process:

1. Floors (``--floors``): tiny Pallas Triton kernels, one program instance, a chain of
   ``K`` dependent iterations of one thing each, timed at K and 2K iterations (the
   difference over K: ns per iteration, launch cost removed), for a block of 1 lane
   and of 32 lanes (one warp):

   * ``alu``: x = x * 3 + 1 (the loop's own cost);
   * ``barrier``: the same with a block barrier per iteration (the VM's ``barrier``);
   * ``reduce``: x = x + min over the block of x (the VM's per-step agreement test,
     ``_step``'s dispatch, is two such reductions);
   * ``load``: x = table[x], a read-only table in global memory (the instruction fetch);
   * ``store_load``: store x + 1 to a word, barrier, load it back (the operand stack:
     a step reads what the previous step wrote);
   * ``store_load_old``: the same, loading the word stored 8 iterations before (a local
     variable stored a few steps ago: does a stored line stay in L1?).

2. The kernel on one lane (bench/pallas_probe.py's sum of squares, ~9,000 steps) with
   each option set of ``ONE_LANE`` (session 47: blocks of 32 and 1, ``hoist``,
   ``forward``, the barrier; session 48: ``prefetch``, ``unroll``), in alternating
   rounds; the sets of ``WIDE`` on 65,536 lanes (their cost where latency is hidden);
   and few-lane batches (``--few``) with blocks of 1 and of 32 (``--few-blocks``;
   lane-steps/s: a block per lane has no lockstep divergence and always runs its
   opcode's copy, but uses one thread of 32); with ``--loop-blocks`` the loop's VM stage
   (65,536 programs of the small and medium corpora, four tests each) with each default
   block.
3. Checks against the XLA VM with the sets of ``CHECKS``: the whole final state of the
   hostile batch (and laid out one lane per block), the hand cases and generated
   programs in blocks of one lane.

    PYTHONPATH=. python bench/vm_latency_probe.py      # JSON lines; $OUT/vm_latency_probe.json
    PYTHONPATH=. python bench/vm_latency_probe.py --quick   # CPU smoke (interpret mode)
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench import pallas_probe as pp  # noqa: E402
from bench.vm_dispatch_ab import loop_vm_ab, spread  # noqa: E402
from jaxcc import isa, vm_pallas  # noqa: E402

FLOORS = ("alu", "barrier", "reduce", "load", "store_load", "store_load_old")
WORDS = 1024  # the table / memory words per lane of the floor kernels


def _floor_kernel(kind: str, block: int, k: int, barrier: bool):
    def kernel(table_ref, mem_in_ref, x_ref, out_ref, mem_ref):
        del mem_in_ref  # aliased with mem_ref
        lane = lax.broadcasted_iota(jnp.int32, (block,), 0)
        x0 = x_ref[...] + lane  # not a constant: the chain starts from data

        def body(i, x):
            if kind == "alu":
                return x * 3 + 1
            if kind == "barrier":
                if barrier:
                    plt.debug_barrier()
                return x * 3 + 1
            if kind == "reduce":
                return x + jnp.min(x) + 1
            if kind == "load":
                return plt.load(table_ref.at[x & (WORDS - 1), lane])
            at = i & (WORDS - 1)  # store_load, store_load_old
            plt.store(mem_ref.at[at, lane], x + 1)
            if barrier:  # (interpret mode has none, and needs none)
                plt.debug_barrier()
            back = 0 if kind == "store_load" else 8  # a word stored 8 iterations before
            return plt.load(mem_ref.at[(i - back) & (WORDS - 1), lane])

        out_ref[...] = lax.fori_loop(0, k, body, x0)

    return kernel


@functools.partial(jax.jit, static_argnames=("kind", "block", "k", "interpret"))
def floor_call(table, mem, x, kind, block, k, interpret=False):
    out, _ = pl.pallas_call(
        _floor_kernel(kind, block, k, not interpret),
        grid=(1,),
        out_shape=[
            jax.ShapeDtypeStruct(x.shape, jnp.int32),
            jax.ShapeDtypeStruct(mem.shape, jnp.int32),
        ],  # fmt: skip
        input_output_aliases={1: 1},
        interpret=interpret,
        compiler_params=plt.CompilerParams(num_warps=1, num_stages=1),
    )(table, mem, x)
    return out


def floor(kind, block, k, repeats, interpret):
    rng = np.random.default_rng(0)
    # a random cycle through the table (every lane's own column): x = table[x] visits all
    perm = rng.permutation(WORDS)
    table = np.zeros((WORDS, block), np.int32)
    table[perm, :] = np.roll(perm, -1)[:, None]
    table, mem = jnp.asarray(table), jnp.zeros((WORDS, block), jnp.int32)
    x = jnp.zeros((block,), jnp.int32)
    times = {}
    for kk in (k, 2 * k):
        fn = functools.partial(floor_call, kind=kind, block=block, k=kk, interpret=interpret)
        first = pp.timed(lambda fn=fn: fn(table, mem, x))[1]  # noqa: B023
        times[kk] = statistics.median(
            pp.timed(lambda fn=fn: fn(table, mem, x))[1]  # noqa: B023
            for _ in range(repeats)
        )
    ns = 1e9 * (times[2 * k] - times[k]) / k
    return dict(ns_per_iter=round(ns, 2), k=k, first_call_s=round(first, 2),
                ms={str(kk): round(1e3 * t, 4) for kk, t in times.items()})  # fmt: skip


# the variants timed and checked (each a dict of run_batch options; the others default).
# Session 47's (docs/results/2026-12-07-h100-latency) were block, barrier, hoist and
# forward; session 48's the prefetched instruction (``prefetch``) and two steps per
# inner-loop iteration (``unroll``).
ONE_LANE = [dict(block=1), dict(block=1, prefetch=1), dict(block=1, prefetch=2),
            dict(block=1, prefetch=2, unroll=2)]  # fmt: skip
# (session 49: prefetch in blocks of 128; session 50: blocks of 32, 64 and 128)
WIDE = [dict(), dict(prefetch=0), dict(block=128)]
CHECKS = [dict(prefetch=2, forward=2), dict(prefetch=1), dict(block=1, prefetch=2),
          dict(block=32, prefetch=1)]  # fmt: skip


def few_variant(spec: str) -> dict:
    """``"128"`` -> ``{"block": 128}``; ``"128:1"`` -> ``{"block": 128, "prefetch": 1}``."""
    block, _, prefetch = spec.partition(":")
    return dict(block=int(block), **({"prefetch": int(prefetch)} if prefetch else {}))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--lanes", type=int, default=65536, help="lanes of the throughput rows")
    p.add_argument("--k", type=int, default=1 << 16, help="floor kernels' iterations")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--few", default="11,132,4096,65536",
                   help="lane counts timed with each --few-blocks variant")  # fmt: skip
    p.add_argument(
        "--few-blocks",
        default="1,32",
        help="the few-lane rows' variants: blocks, each optionally with a prefetch"
        " value after a colon (128:1 is blocks of 128 with prefetch=1)",
    )
    p.add_argument(
        "--wide-blocks",
        default="",
        help="the throughput rows' variants, as --few-blocks (default: WIDE)",
    )
    p.add_argument(
        "--loop-blocks",
        default="",
        help="time the loop's VM stage (pipeline.run_cases + _judge, 65,536"
        " programs of each --loop-sizes corpus) with the kernel's default"
        " block and prefetch set to each of these (as --few-blocks)",
    )
    p.add_argument("--loop-sizes", default="small,medium")
    p.add_argument("--no-floors", action="store_true")
    p.add_argument("--no-one-lane", action="store_true")
    p.add_argument("--no-wide", action="store_true")
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--quick", action="store_true", help="small sizes (CPU smoke)")
    p.add_argument("--budget-s", type=float, default=540.0)
    a = p.parse_args(argv)
    out = os.environ.get("OUT")
    pr = pp.Probe(os.path.join(out, "vm_latency_probe.json") if out else None, a.budget_s)
    interpret = vm_pallas._interpret_here()
    if a.quick:
        a.k, a.n, a.repeats, a.rounds, a.few, a.lanes = 8, 20, 1, 1, "3", 4

    if not a.no_floors:
        for kind in FLOORS:
            for block in (1, 32):
                pr.guarded("timings", "floor",
                           lambda kind=kind, block=block: floor(kind, block, a.k, a.repeats,
                                                                interpret),
                           floor=kind, block=block)  # fmt: skip

    def compared(ref, **options):
        """A timing with ``options``; its results compared with the first of ``ref``'s."""

        def fn():
            rec, r = pp.time_one("pallas", **options)
            r = jax.device_get(r)
            if "base" in ref:
                rec["equal"] = not pp.diff_fields(r, ref["base"], isa.RunResult._fields)
            ref.setdefault("base", r)
            return rec

        return fn

    common = dict(n=a.n, repeats=a.repeats, inner_steps=16)
    # one lane: each variant's options (the kernel's defaults for the others), in
    # alternating rounds; the first is the kernel's defaults of session 47 (block 1 for
    # one lane, hoist=2)
    ref = {}
    for rnd in range(0 if a.no_one_lane else a.rounds):
        for opts in ONE_LANE:
            fn = compared(ref, lanes=1, varied=False, **opts, **common)
            pr.guarded("timings", "one_lane", fn, round=rnd, **opts)

    # many lanes (throughput): what the options cost where latency is hidden
    wide = [few_variant(v) for v in a.wide_blocks.split(",") if v] or WIDE
    for varied in (False, True):
        ref = {}
        for rnd in range(0 if a.no_wide else a.rounds):
            for opts in wide:
                fn = compared(ref, lanes=a.lanes, varied=varied, **opts, **common)
                pr.guarded("timings", "wide", fn, round=rnd, lanes=a.lanes, varied=varied,
                           **opts)  # fmt: skip

    if not a.no_check:
        hostile = pp.hostile_inputs(*((24, 8) if a.quick else ()))
        for opts in CHECKS:
            pr.guarded("checks", "hostile", lambda o=opts: pp.check_state(*hostile, **o), **opts)
        opts = CHECKS[0]
        pr.guarded("checks", "hostile_spread",
                   lambda: pp.check_state(*spread(hostile), **opts), **opts)  # fmt: skip
        opts = dict(block=1, **CHECKS[0])
        pr.guarded("checks", "hand_cases", lambda: pp.check_results(*pp._hand(), **opts), **opts)
        pr.guarded("checks", "generated_programs",
                   lambda: pp.check_results(*pp._generated(4 if a.quick else 40), **opts),
                   **opts)  # fmt: skip

    # the loop's VM stage (short programs, four tests each) with each default block
    # each variant's options name the kernel's defaults: block -> BLOCK, prefetch -> PREFETCH
    loop = [few_variant(v) for v in a.loop_blocks.split(",") if v]
    loop = [(o, {k.upper(): v for k, v in o.items()}) for o in loop]
    for size in a.loop_sizes.split(",") if loop else ():
        loop_vm_ab(pr, size, 4 if a.quick else 65536, a.repeats, a.rounds, loop)

    # few lanes: a block per lane against wider blocks
    variants = [few_variant(v) for v in a.few_blocks.split(",") if v]
    for lanes in (int(x) for x in a.few.split(",") if x):
        ref = {}
        for rnd in range(a.rounds):
            for opts in variants:
                fn = compared(ref, lanes=lanes, varied=True, **opts, **common)
                pr.guarded("timings", "few_lanes", fn, round=rnd, lanes=lanes, **opts)

    print(f"done in {time.perf_counter() - pp.T0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
