"""Differential tests of the optimizer on generated programs (jaxcc.testing.programs() and
near_misses(), Hypothesis, derandomized unless --slow):

* the device optimizer (jaxcc.optimize) gives the reference optimizer's Program
  (jaxcc.reference.optimize), field by field, program by program;
* the optimized program behaves as the compiler's own code: the module body and every
  function called with boundary and random arguments give the same status, detail,
  error line, result and output on the reference interpreter, and on the JAX VM (each
  level lane by lane against the reference interpreter). A lane that stops with
  TimeoutError is compared on its status only: the optimized code takes fewer steps, so
  it gets further (and may print more) before the budget ends it. Where only -O0 runs
  out of steps, -O0 runs again with eight times the budget and must end as -O1 did.

One Limits (property_tests.limits.OPTIMIZE) and fixed batch shapes, so the device
optimizer and the VM compile once. The helpers are shared with tests/test_optimize.py.
"""

from __future__ import annotations

import concurrent.futures
import os
import random

import jax
import numpy as np

from jaxcc import isa, vm
from jaxcc import optimize as dopt
from jaxcc.errors import Code
from jaxcc.reference import optimize as ropt
from jaxcc.reference.compiler import compile_many
from jaxcc.reference.interp import run_program
from jaxcc.testing import near_misses, programs
from property_tests.limits import OPTIMIZE as LIMITS
from property_tests.test_pipeline_vs_reference import collect

SLOW = os.environ.get("JAXCC_SLOW") == "1"
SCALE = 10 if SLOW else 1
B = 32  # programs per device-optimizer call
LANES = 128  # lanes per JAX VM call
A = 4  # argument columns per lane
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
EDGES = (0, 1, -1, 2, INT_MAX, INT_MIN, 7)


def compile_ref(sources: list[str]):
    """(Program [n, ...], error codes [n]) from the reference compiler."""
    program, error, _ = compile_many(sources, LIMITS)
    return jax.tree.map(np.asarray, program), np.asarray(error.code)


def rows(program, idx) -> isa.Program:
    return isa.Program(*(np.asarray(f)[np.asarray(idx)] for f in program))


def lane(program, i: int) -> isa.Program:
    return isa.Program(*(np.asarray(f)[i] for f in program))


def device_optimize(program, passes=dopt.PASSES, max_rounds=dopt.MAX_ROUNDS) -> isa.Program:
    """The device optimizer over a batch of any size, in calls of exactly B programs."""
    n = np.shape(program.op)[0]
    out = []
    for s in range(0, n, B):
        idx = np.arange(s, s + B) % n
        got = jax.device_get(dopt.optimize(rows(program, idx), LIMITS, passes, max_rounds))
        out.append(rows(got, np.arange(min(B, n - s))))
    return isa.Program(*(np.concatenate([o[k] for o in out]) for k in range(len(out[0]))))


def device_optimize_many(program, variants) -> list[isa.Program]:
    """device_optimize for each (passes, max_rounds) of ``variants``, from threads: each
    variant is its own XLA compile, and XLA compiles without holding the GIL, so they
    overlap on the cores (the tests' time is mostly these compiles)."""
    workers = max(1, min(len(variants), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(lambda v: device_optimize(program, *v), variants))


def assert_programs_equal(got, want, what: str, sources=None) -> None:
    for i in range(np.shape(want.op)[0]):
        for name in isa.Program._fields:
            g, w = np.asarray(getattr(got, name))[i], np.asarray(getattr(want, name))[i]
            if not np.array_equal(g, w):
                src = f"\n{sources[i]}" if sources is not None else ""
                n = int(max(got.n_code[i], want.n_code[i]))
                g_code = list(zip(got.op[i][:n].tolist(), got.arg[i][:n].tolist(), strict=True))
                w_code = list(zip(want.op[i][:n].tolist(), want.arg[i][:n].tolist(), strict=True))
                raise AssertionError(f"{what} program {i}: {name} differs{src}\n"
                                     f"device    {g_code}\nreference {w_code}")  # fmt: skip


def calls(program: isa.Program, rng: random.Random) -> list[tuple[int, list[int]]]:
    """(entry, args) runs of one program: the module body, then each function with
    boundary arguments and random ones."""
    out = [(0, [])]
    for f in range(1, int(program.n_funcs)):
        k = int(program.fn_nparams[f])
        for v in EDGES[:3]:
            out.append((f, [v] * k))
        out.append((f, [rng.choice(EDGES) for _ in range(k)]))
        out.append((f, [rng.randint(-50, 50) for _ in range(k)]))
    return out


def outcome(res, i=None, program=None) -> tuple:
    """What must not change: status, detail, line, result, output (status alone for a
    TimeoutError, see the module docstring). For an UnboundLocalError the detail is
    replaced by the unbound slot (isa.failing_slot of ``program``'s failing instruction:
    a LOAD_VAR2's detail says which of its two slots)."""
    pick = (lambda x: np.asarray(x)) if i is None else (lambda x: np.asarray(x)[i])
    status = int(pick(res.status))
    if status == Code.TIMEOUT:
        return (status,)
    n = int(pick(res.n_out))
    detail = int(pick(res.detail))
    if status == Code.UNBOUND_LOCAL and program is not None:
        pc = int(pick(res.pc))
        detail = isa.failing_slot(np.asarray(program.op)[pc], np.asarray(program.arg)[pc], detail)
    return (status, detail, int(pick(res.line)), int(pick(res.fn)),
            int(pick(res.result)), n, pick(res.out_kind)[:n].tolist(),
            pick(res.out_val)[:n].tolist())  # fmt: skip


def check_behaviour(p0, p1, ok, seed: int, jax_vm: bool = True) -> int:
    """-O0 (p0) against -O1 (p1) on the reference interpreter, and on the JAX VM; returns
    the number of runs compared."""
    rng = random.Random(seed)
    runs = []  # (program index, entry, args)
    for i in np.flatnonzero(ok):
        for entry, args in calls(lane(p0, i), rng):
            runs.append((int(i), entry, args))
    want0, want, steps = {}, {}, []
    for i, entry, args in runs:
        q0, q1 = lane(p0, i), lane(p1, i)
        a = run_program(q0, LIMITS, entry, args)
        b = run_program(q1, LIMITS, entry, args)
        w0 = outcome(a, None, q0)
        ab = a
        if int(a.status) == Code.TIMEOUT and int(b.status) != Code.TIMEOUT:
            # the optimized code ends within the budget where -O0's steps do not: -O0
            # with a larger budget must end the same way
            ab = run_program(q0, LIMITS._replace(max_steps=8 * LIMITS.max_steps), entry, args)
        assert outcome(ab, None, q0) == outcome(b, None, q1), (
            i,
            entry,
            args,
            outcome(ab),
            outcome(b),
        )
        assert int(b.steps) <= int(ab.steps) or int(ab.status) == Code.TIMEOUT, (i, entry, args)
        want0[(i, entry, tuple(args))] = w0
        want[(i, entry, tuple(args))] = outcome(b, None, q1)
        steps.append(int(a.steps))
    if not jax_vm:
        return len(runs)
    # the JAX VM runs a call until its longest lane stops: runs in order of their steps
    # put the long ones (a TimeoutError's whole budget) into as few calls as possible
    runs = [runs[j] for j in np.argsort(steps, kind="stable")]
    for s in range(0, len(runs), LANES):
        chunk = [runs[(s + j) % len(runs)] for j in range(LANES)]
        idx = [r[0] for r in chunk]
        entry = np.array([r[1] for r in chunk], np.int32)
        args = np.zeros((LANES, A), np.int32)
        for j, r in enumerate(chunk):
            args[j, : len(r[2])] = r[2]
        r0 = jax.device_get(vm.run(rows(p0, idx), LIMITS, entry, args))
        r1 = jax.device_get(vm.run(rows(p1, idx), LIMITS, entry, args))
        for j, (i, e, a) in enumerate(chunk):
            o0, o1 = outcome(r0, j, lane(p0, i)), outcome(r1, j, lane(p1, i))
            # each level as on the reference interpreter (where -O0 was checked against
            # -O1, with the larger budget where only -O0 ran out of steps)
            assert o0 == want0[(i, e, tuple(a))], (i, e, a, o0)
            assert o1 == want[(i, e, tuple(a))], (i, e, a, o1)
    return len(runs)


def check_sources(sources: list[str], seed: int) -> None:
    """-O2 (every pass to a fixpoint) and -O1 (the loop's preset: one round): the device
    optimizer equals the reference, and the code behaves as the compiler's (-O1's on the
    reference interpreter)."""
    p0, codes = compile_ref(sources)
    ok = codes == Code.OK
    p1 = ropt.optimize(p0)
    o1 = dopt.LEVELS[1]
    q1 = ropt.optimize(p0, *o1)
    got, got_o1 = device_optimize_many(p0, [(dopt.PASSES, dopt.MAX_ROUNDS), o1])
    assert_programs_equal(got, p1, "device vs reference", sources)
    assert_programs_equal(got_o1, q1, "device vs reference, -O1", sources)
    assert check_behaviour(p0, p1, ok, seed) > 0
    # -O1 on the reference interpreter (the JAX VM runs the same opcodes at -O2 above)
    assert check_behaviour(p0, q1, ok, seed + 100, jax_vm=False) > 0
    # the compare-and-branch rule fires on these programs (so the runs above cover it)
    valid = np.arange(np.shape(p1.op)[1])[None, :] < np.asarray(p1.n_code)[:, None]
    assert np.isin(np.asarray(p1.op)[valid], isa.COMPARE_JUMP_OPS).sum() > 0
    # and so does loadvar2 (LOAD_VAR; LOAD_VAR fused)
    assert (np.asarray(p1.op)[valid] == isa.Op.LOAD_VAR2).sum() > 0


def test_generated_programs():
    sources = collect(programs(), 48 * SCALE)
    check_sources(sources, 1)


def test_generated_near_misses():
    pairs = collect(near_misses(context=True), 32 * SCALE)
    check_sources([s for s, _ in pairs], 2)


def test_single_passes_off_equal_reference():
    """With any one pass off, the device optimizer still equals the reference with the
    same passes (and the code still behaves the same, on the reference interpreter)."""
    sources = collect(programs(), 16)
    p0, codes = compile_ref(sources)
    variants = [(tuple(p for p in dopt.PASSES if p != off), dopt.MAX_ROUNDS) for off in dopt.PASSES]
    for off, (passes, _), got in zip(dopt.PASSES, variants, device_optimize_many(p0, variants),
                                     strict=True):  # fmt: skip
        p1 = ropt.optimize(p0, passes)
        assert_programs_equal(got, p1, f"without {off}", sources)
        check_behaviour(p0, p1, codes == Code.OK, 3, jax_vm=False)
