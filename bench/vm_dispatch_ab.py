"""The Pallas VM's step specialized per opcode (``vm_pallas._step``'s ``dispatch``), on a
GPU: is it right, and what does it change? One process, the settings alternating.

1. Checks, ``dispatch`` (``--check``: every opcode or HOT_OPS) against the XLA VM (the
   whole final state, vm.Packed: every register and memory word of every lane):
   bench/pallas_probe.py's hostile batch (2,112
   lanes of random bytecode with garbage and hostile programs, random budgets) laid out
   three ways: as it comes (blocks of mixed lanes: mostly the general step); each lane
   alone in its block beside lanes stopped at the start (``spread``: every step the
   specialized copy); each lane's program 32 times in a block, half with its own
   arguments and half with random ones (``lockstep``: specialized while the block agrees,
   the general step once it diverges). Plus the hand cases and compiled generated
   programs through ``vm_pallas.run_batch``.
2. Timings, the settings (``--variants``: off, hot, all) in alternating rounds:
   bench/pallas_probe.py's sum of squares (n = 1000, ~9,000 steps per lane) on one lane, on 65,536 lanes of equal n and of n
   in [n/2, n]; and the loop's VM stage (``pipeline.run_cases`` as ``evaluate`` calls it)
   on 65,536 programs of the small and medium corpora with their tests (bytecode from
   ``compiler.compile_arrays``), verdicts compared. The first call of each setting is
   its compile.

    PYTHONPATH=. python bench/vm_dispatch_ab.py          # JSON lines; $OUT/vm_dispatch_ab.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench import pallas_probe as pp  # noqa: E402
from jaxcc import isa, vm_pallas  # noqa: E402


def spread(inputs, block=32):
    """Each lane alone in its block: ``block - 1`` copies beside it whose entry (-1) stops
    them at the start."""
    batch, entry, args, budget, limits = inputs
    n = len(entry)
    idx = np.repeat(np.arange(n), block)
    first = np.arange(n * block) % block == 0
    batch = jax.tree.map(lambda x: np.asarray(x)[idx], batch)
    return batch, np.where(first, entry[idx], -1).astype(np.int32), args[idx], budget[idx], limits


def lockstep(inputs, block=32, seed=5):
    """Each lane's program ``block`` times in a block: the first half of the copies with
    the lane's arguments, the second with random ones (so many blocks diverge)."""
    batch, entry, args, budget, limits = inputs
    n = len(entry)
    idx = np.repeat(np.arange(n), block)
    rng = np.random.default_rng(seed)
    args2 = np.asarray(args)[idx].copy()
    other = (np.arange(n * block) % block) >= block // 2
    args2[other] = rng.integers(-4, 12, args2[other].shape)
    batch = jax.tree.map(lambda x: np.asarray(x)[idx], batch)
    return batch, entry[idx], args2.astype(np.int32), budget[idx], limits


def loop_vm_inputs(size, b):
    from bench import breakdown
    from jaxcc import compiler

    lim, src, length, cases = breakdown.corpus_inputs(size, b)
    comp = jax.jit(lambda s, n: compiler.compile_arrays(s, n, lim, tiers=False)[:2])
    program, error = comp(jnp.asarray(src), jnp.asarray(length))
    return program, error, jax.device_put(cases), lim


VARIANTS = {"off": False, "hot": vm_pallas.HOT_OPS, "all": True}


def ab_sum_squares(pr, a, lanes, varied, names):
    """Both settings in ``a.rounds`` alternating rounds; the second's results compared."""
    res = {}

    def one(d):
        rec, r = pp.time_one("pallas", lanes, a.n, varied, a.repeats, 16, dispatch=d)
        res[d] = r
        if d is not False and False in res:
            bad = pp.diff_fields(jax.device_get(r), jax.device_get(res[False]),
                                 isa.RunResult._fields)  # fmt: skip
            rec["equal_to_off"] = not bad
        return rec

    for rnd in range(a.rounds):
        for name in names:
            d = VARIANTS[name]
            pr.guarded("timings", "sum_squares", lambda d=d: one(d), round=rnd, lanes=lanes,
                       varied=varied, dispatch=name)  # fmt: skip


def loop_vm_ab(pr, size, batch, repeats, rounds, variants):
    """The loop's VM stage and verdicts (``pipeline.run_cases`` + ``_judge`` on ``batch``
    programs of the ``size`` corpus) under each variant, compiled ahead of time, then
    timed in ``rounds`` alternating rounds. ``variants``: ``(fields, settings)`` pairs,
    ``fields`` recorded with each row, ``settings`` the ``vm_pallas`` globals (read when
    the kernel is traced: DISPATCH, BLOCK, PREFETCH, ...) set for its trace; verdicts are
    compared with the first variant's."""
    from jaxcc import pipeline

    t0 = time.perf_counter()
    try:
        program, error, cases, lim = loop_vm_inputs(size, batch)
        jax.block_until_ready((program, error))
    except Exception as e:  # noqa: BLE001 - recorded, the probe goes on
        pr.record("timings", dict(name="loop_vm_inputs", size=size, error=repr(e)[:2000]))
        return
    pr.record("timings", dict(name="loop_vm_inputs", size=size,
                              prep_s=round(time.perf_counter() - t0, 1)))  # fmt: skip

    def vm_stage(prog, err, c):
        return pipeline._judge(prog, err, pipeline.run_cases(prog, err, c, lim, "pallas")[1], c)

    fns, verdicts = {}, {}

    def build(i, settings):
        # vm.run_tests' own jit caches its trace: a fresh trace per variant
        saved = {k: getattr(vm_pallas, k) for k in settings}
        for k, v in settings.items():
            setattr(vm_pallas, k, v)
        jax.clear_caches()
        t0 = time.perf_counter()
        try:
            fns[i] = jax.jit(vm_stage).lower(program, error, cases).compile()
        finally:
            for k, v in saved.items():
                setattr(vm_pallas, k, v)
        return dict(compile_s=round(time.perf_counter() - t0, 1))

    def one(i):
        ev, first_s = pp.timed(lambda: fns[i](program, error, cases))
        ts = [pp.timed(lambda: fns[i](program, error, cases))[1] for _ in range(repeats)]
        verdicts[i] = np.asarray(ev.verdict)
        rec = dict(first_call_s=round(first_s, 3), ms=round(1e3 * statistics.median(ts), 3),
                   min_ms=round(1e3 * min(ts), 3), passed=int((verdicts[i] == 0).sum()))  # fmt: skip
        if i and 0 in verdicts:
            rec["verdicts_equal"] = bool(np.array_equal(verdicts[0], verdicts[i]))
        return rec

    for i, (fields, settings) in enumerate(variants):
        pr.guarded("timings", "loop_vm_compile", lambda i=i, st=settings: build(i, st),
                   size=size, **fields)  # fmt: skip
    if len(fns) < len(variants):
        return
    for rnd in range(rounds):
        for i, (fields, _) in enumerate(variants):
            pr.guarded("timings", "loop_vm", lambda i=i: one(i), size=size, batch=batch,
                       round=rnd, **fields)  # fmt: skip


def ab_loop_vm(pr, a, size, names):
    """The loop's VM stage with each ``dispatch`` setting (``VARIANTS``)."""
    variants = [({"dispatch": n}, {"DISPATCH": VARIANTS[n]}) for n in names]
    loop_vm_ab(pr, size, a.batch, a.repeats, a.rounds, variants)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--lanes", type=int, default=65536)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sizes", default="small,medium")
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--quick", action="store_true", help="a small hostile batch (CPU smoke)")
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument(
        "--variants",
        default="off,hot,all",
        help="settings to time: off, hot (HOT_OPS), all (every opcode)",
    )
    p.add_argument("--one-lane", default=None, help="settings for one lane (default: --variants)")
    p.add_argument("--check", default="all", help="the setting the checks run (hot or all)")
    a = p.parse_args(argv)
    out = os.environ.get("OUT")
    pr = pp.Probe(os.path.join(out, "vm_dispatch_ab.json") if out else None, a.budget_s)

    sizes = a.sizes.split(",")
    # the timings of one lane first (the point of the change), the checks after the
    # first corpus, so that a run cut short by its budget keeps what matters most
    names = a.variants.split(",")
    one_lane = (a.one_lane or a.variants).split(",")
    for lanes, varied in [(1, False), (a.lanes, False), (a.lanes, True)]:
        ab_sum_squares(pr, a, lanes, varied, one_lane if lanes == 1 else names)
    if sizes[:1]:
        ab_loop_vm(pr, a, sizes[0], names)
    check = VARIANTS[a.check]
    if not a.no_check:
        hostile = pp.hostile_inputs(*((24, 8) if a.quick else ()))
        for name, inp in (("hostile", hostile), ("hostile_spread", spread(hostile)),
                          ("hostile_lockstep", lockstep(hostile))):  # fmt: skip
            pr.guarded("checks", name, lambda inp=inp: pp.check_state(*inp, dispatch=check),
                       dispatch=a.check)  # fmt: skip
        pr.guarded("checks", "hand_cases",
                   lambda: pp.check_results(*pp._hand(), dispatch=check),
                   dispatch=a.check)  # fmt: skip
        pr.guarded("checks", "generated_programs",
                   lambda: pp.check_results(*pp._generated(4 if a.quick else 40),
                                            dispatch=check), dispatch=a.check)  # fmt: skip

    for size in sizes[1:]:
        ab_loop_vm(pr, a, size, names)
    print(f"done in {time.perf_counter() - pp.T0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
