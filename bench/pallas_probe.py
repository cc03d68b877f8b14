"""Probe the Pallas VM kernel (jaxcc/vm_pallas.py) on a GPU: is it right, and how fast?

1. Checks (every RunResult field of every lane, pallas == xla; for hostile bytecode the
   whole final state, registers and every memory word): tests/test_vm.py's hand cases,
   random plausible bytecode with garbage beside hostile lanes and random budgets (several
   kernel configurations, barrier off included), compiled generated programs, run_tests.
2. Timings: lane-steps/s of sum(i * i for i in range(n)) (bench/bench_vm.py's program,
   9 instructions per iteration; n = 1000: ~9,000 steps per lane) on 65,536 lanes (every
   lane the same n; and n uniform in [n/2, n]) and on one lane alone, for the XLA VM and
   the kernel in a few configurations (block size, barrier). Compile time (first call)
   apart; then the median of --repeats calls. Every timed result is also compared.

Run from the repository root (JSON to $OUT/pallas_probe.json when OUT is set, and each
record to stdout as it is made, so a run cut short keeps what it measured):

    PYTHONPATH=. python bench/pallas_probe.py
    PYTHONPATH=. python bench/pallas_probe.py --quick        # fewer configurations
    PYTHONPATH=. python bench/pallas_probe.py --no-check --blocks 64,128,256 --inner 16,64

Everything is guarded: an exception (a Triton compile error, say) is recorded in its
record and the probe goes on. It stops starting new measurements after --budget-s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jaxcc import isa, vm, vm_pallas  # noqa: E402
from jaxcc.errors import Code  # noqa: E402
from jaxcc.limits import Limits  # noqa: E402

BENCH_LIMITS = Limits(max_stack=64, max_depth=16, max_output=16)  # bench_vm --small-limits
T0 = time.perf_counter()


class Probe:
    def __init__(self, path, budget_s):
        self.path, self.budget_s = path, budget_s
        dev = jax.devices()[0]
        self.data = dict(
            info=dict(
                device_kind=dev.device_kind,
                platform=dev.platform,
                jax=jax.__version__,
                n_devices=jax.device_count(),
                argv=sys.argv[1:],
            ),  # fmt: skip
            checks=[],
            timings=[],
        )
        print(json.dumps(self.data["info"]), flush=True)

    def out_of_time(self):
        return time.perf_counter() - T0 > self.budget_s

    def record(self, kind, rec):
        rec["at_s"] = round(time.perf_counter() - T0, 1)
        self.data[kind].append(rec)
        print(json.dumps(rec), flush=True)
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.data, f, indent=1)

    def guarded(self, kind, name, fn, **meta):
        if self.out_of_time():
            self.record(kind, dict(name=name, skipped="out of time", **meta))
            return
        try:
            rec = fn()
        except Exception as e:  # noqa: BLE001 - the probe records every failure
            rec = dict(error=f"{type(e).__name__}: {e}"[:2000],
                       trace=traceback.format_exc()[-3000:])  # fmt: skip
        self.record(kind, dict(name=name, **meta, **rec))


def diff_fields(got, want, names):
    """{field: [first lanes that differ]} over the given NamedTuple fields."""
    bad = {}
    for f in names:
        g, w = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        if g.shape != w.shape:
            bad[f] = f"shape {g.shape} != {w.shape}"
            continue
        lanes = np.nonzero((g != w).reshape(g.shape[0], -1).any(axis=1))[0]
        if len(lanes):
            bad[f] = [int(i) for i in lanes[:8]] + ([f"... {len(lanes)} lanes"] * (len(lanes) > 8))
    return bad


def timed(fn):
    t0 = time.perf_counter()
    r = jax.block_until_ready(fn())
    return r, time.perf_counter() - t0


# ----------------------------------------------------------------------------- checks


def check_results(batch, limits, entry, args, budget=None, **options):
    b = np.shape(batch.op)[0]
    budget = np.full(b, limits.max_steps, np.int32) if budget is None else budget
    want, xla_s = timed(lambda: vm.run_batch(batch, entry, args, budget, limits))
    got, first_s = timed(lambda: vm_pallas.run_batch(batch, entry, args, budget, limits, **options))
    bad = diff_fields(jax.device_get(got), jax.device_get(want), isa.RunResult._fields)
    status = np.asarray(want.status)
    return dict(equal=not bad, mismatches=bad, lanes=int(b), pallas_first_call_s=round(first_s, 2),
                xla_first_call_s=round(xla_s, 2), max_steps=int(np.max(want.steps)),
                statuses={Code(int(s)).name: int(c) for s, c in
                          zip(*np.unique(status, return_counts=True), strict=True)})  # fmt: skip


def hand_inputs():
    from tests import test_vm as hand  # needs pytest and chex

    return (*hand.hand_inputs(), hand.SMALL)


def hostile_inputs(n_random=2048, n_hostile=64, seed=1):
    from property_tests import test_vm_vs_reference as prop  # needs hypothesis
    from tests import test_vm as hand

    rng = np.random.default_rng(seed)

    def pad(p):
        d = p._asdict()
        for k in ("op", "arg", "line"):
            a = np.zeros(hand.I_PAD, np.int32)
            a[: len(d[k])] = d[k]
            d[k] = a
        return isa.Program(**d)

    progs = [pad(prop.random_program(rng)) for _ in range(n_random)]
    progs += hand.hostile_programs(n_hostile, seed=seed)
    order = rng.permutation(len(progs))  # hostile lanes spread over the blocks
    progs = [progs[i] for i in order]
    entry, args = prop.random_inputs(rng, progs)
    budget = rng.choice([0, -3, 1, 7, 60, 300, 2**31 - 1], len(progs)).astype(np.int32)
    return hand.stack_programs(progs), entry, args, budget, prop.RAND


def check_state(batch, entry, args, budget, limits, **options):
    """The whole final state (vm.Packed: registers, every memory word), pallas == xla."""
    want = vm.advance(vm.start(batch, limits, entry, args, budget), limits)
    jax.block_until_ready(want)
    start = vm.start(batch, limits, entry, args, budget)
    adv = jax.jit(vm_pallas.advance_lanes,
                  static_argnames=("limits", "inner_steps", "unroll", "block", "num_warps",
                                   "barrier", "lazy", "dispatch", "hoist", "forward",
                                   "prefetch"))  # fmt: skip
    got, first_s = timed(lambda: adv(start.tables, start.lanes, limits=limits, **options))
    bad = diff_fields(jax.device_get(got), jax.device_get(want.lanes), vm.Packed._fields)
    status = np.asarray(want.lanes.regs[:, vm._STATUS])
    return dict(equal=not bad, mismatches=bad, lanes=int(status.shape[0]),
                pallas_first_call_s=round(first_s, 2),
                statuses={Code(int(s)).name: int(c) for s, c in
                          zip(*np.unique(status, return_counts=True), strict=True)})  # fmt: skip


def generated_inputs(n_programs=40, calls=3):
    from jaxcc.reference.compiler import compile_source
    from jaxcc.testing import seeded_program
    from tests import test_vm as hand
    from tests.test_vm_pallas import COMPILE, RUN

    rng = np.random.default_rng(3)
    progs, entry, args = [], [], []
    seed = 0
    while len(progs) < n_programs * (calls + 1):
        seed += 1
        c = compile_source(seeded_program(seed), COMPILE)
        if int(c.error.code) != Code.OK:
            continue
        for k in range(calls + 1):
            progs.append(c.program)
            entry.append(0 if k == 0 else int(rng.integers(0, int(c.program.n_funcs))))
            args.append(rng.choice([-3, -1, 0, 1, 2, 3, 7, 10], 3))
    return hand.stack_programs(progs), np.array(entry, np.int32), np.array(args, np.int32), RUN


def check_run_tests():
    batch, entry, _, limits = generated_inputs(16, 0)
    b, k = np.shape(batch.op)[0], 4
    rng = np.random.default_rng(9)
    targs = rng.choice([-2, 0, 1, 4], (b, k, 3)).astype(np.int32)
    res = vm.finish(vm.advance(vm.start_tests(batch, entry, targs, limits), limits), limits)
    right = np.asarray(res.result).reshape(b, k)
    expected = np.where(np.arange(k)[None] % 2 == 0, right, right + 1).astype(np.int32)
    want = vm.run_tests(batch, entry, targs, expected, limits)
    got = vm.run_tests(batch, entry, targs, expected, limits, backend="pallas")
    equal = all(
        np.array_equal(np.asarray(g), np.asarray(w)) for g, w in zip(got, want, strict=True)
    )
    return dict(equal=equal, lanes=int(b * k), per_case=np.asarray(got[1]).tolist())


# ---------------------------------------------------------------------------- timings


def sum_squares_inputs(lanes, n, varied, seed=0):
    from bench.bench_vm import batch, sum_squares_program

    rng = np.random.default_rng(seed)
    ns = rng.integers(n // 2, n + 1, lanes) if varied else np.full(lanes, n)
    prog = batch(sum_squares_program(), lanes)
    prog = jax.tree.map(lambda x: jnp.array(x), prog)  # materialized, on the device
    entry = jnp.ones((lanes,), jnp.int32)
    args = jnp.asarray(ns, jnp.int32)[:, None]
    budget = jnp.full((lanes,), BENCH_LIMITS.max_steps, jnp.int32)
    return prog, entry, args, budget, ns


def time_one(backend, lanes, n, varied, repeats, inner_steps, reference=None, **options):
    prog, entry, args, budget, ns = sum_squares_inputs(lanes, n, varied)
    if backend == "xla":

        def call():
            return vm.run_batch(prog, entry, args, budget, BENCH_LIMITS, inner_steps)
    else:

        def call():
            return vm_pallas.run_batch(prog, entry, args, budget, BENCH_LIMITS, inner_steps,
                                       **options)  # fmt: skip

    r, first_s = timed(call)
    times = [timed(call)[1] for _ in range(repeats)]
    t = statistics.median(times)
    r = jax.device_get(r)
    steps = np.asarray(r.steps).astype(np.int64)
    want = np.array([sum(i * i for i in range(k)) for k in ns], np.int64)
    ok = np.asarray(r.status) == Code.OK
    rec = dict(
        first_call_s=round(first_s, 3),
        time_s=t,
        times_s=[round(x, 5) for x in times],
        lane_steps=int(steps.sum()),
        lane_steps_per_s=float(steps.sum() / t),
        max_steps=int(steps.max()),
        us_per_step_of_slowest_lane=1e6 * t / int(steps.max()),
        all_ok=bool(ok.all()),
        results_right=bool(np.array_equal(np.asarray(r.result)[ok], want[ok])),
    )
    if reference is not None:
        rec["equal_to_xla"] = not diff_fields(r, reference, isa.RunResult._fields)
    return rec, r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--lanes", type=int, default=65536)
    p.add_argument("--n", type=int, default=1000, help="loop count (about 9n steps per lane)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--blocks", default="128,256", help="kernel block sizes to time")
    p.add_argument("--inner", default="16", help="inner_steps values to time (both backends)")
    p.add_argument("--quick", action="store_true", help="fewer checks and configurations")
    p.add_argument("--extra", default="[]",
                   help='more kernel option sets to time, JSON: \'[{"lazy": false}]\'')  # fmt: skip
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--no-time", action="store_true")
    p.add_argument("--budget-s", type=float, default=500.0,
                   help="start no new measurement after this many seconds")  # fmt: skip
    a = p.parse_args(argv)
    out = os.environ.get("OUT")
    path = None
    if out:
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "pallas_probe.json")
    pr = Probe(path, a.budget_s)

    if not a.no_check:
        pr.guarded("checks", "hand_cases", lambda: check_results(*_hand()))
        configs = [dict(), dict(barrier=False), dict(lazy=True)]
        if not a.quick:
            configs += [dict(block=256, inner_steps=64), dict(block=32, num_warps=1)]
        hostile = {}
        for opts in configs:

            def run(opts=opts):
                if "in" not in hostile:
                    hostile["in"] = hostile_inputs()
                return check_state(*hostile["in"], **opts)

            pr.guarded("checks", "hostile_state", run, options=opts)
        pr.guarded("checks", "generated_programs",
                   lambda: check_results(*_generated(10 if a.quick else 40)))  # fmt: skip
        pr.guarded("checks", "run_tests", check_run_tests)

    if not a.no_time:
        blocks = [int(x) for x in a.blocks.split(",")]
        inner = [int(x) for x in a.inner.split(",")]
        shapes = [(a.lanes, False), (1, False)] + ([] if a.quick else [(a.lanes, True)])
        variants = [("pallas", dict(block=b)) for b in blocks]
        if not a.quick:
            variants.append(("pallas", dict(block=blocks[0], barrier=False)))
        variants += [("pallas", dict(opts)) for opts in json.loads(a.extra)]
        for k in inner:
            for lanes, varied in shapes:
                meta = dict(lanes=lanes, n=a.n, varied=varied, inner_steps=k)
                ref = {}

                def xla(lanes=lanes, varied=varied, k=k, ref=ref):
                    rec, ref["r"] = time_one("xla", lanes, a.n, varied, a.repeats, k)
                    return rec

                pr.guarded("timings", "xla", xla, **meta)
                for backend, opts in variants:

                    def pallas(
                        lanes=lanes, varied=varied, k=k, opts=opts, ref=ref, backend=backend
                    ):
                        return time_one(backend, lanes, a.n, varied, a.repeats, k,
                                        reference=ref.get("r"), **opts)[0]  # fmt: skip

                    pr.guarded("timings", "pallas", pallas, options=opts, **meta)
    print(f"done in {time.perf_counter() - T0:.1f} s" + (f"; wrote {path}" if path else ""))


def _hand():
    batch, entry, args, limits = hand_inputs()
    return batch, limits, entry, args


def _generated(n):
    batch, entry, args, limits = generated_inputs(n)
    return batch, limits, entry, args


if __name__ == "__main__":
    main()
