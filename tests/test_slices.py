"""The VM in slices (jaxcc.driver, vm.start/advance/finish): bit-identical to one
``vm.run`` whatever the slice length S and the compaction, on random and hostile bytecode
and on compiled generated programs; lanes reported once each, as they finish; the
wall-clock timeout (a runaway lane among finished ones) and the stop request.

Small Limits and few lane counts: every (lane count, inner_steps) is one XLA compile.
"""

from __future__ import annotations

import random
import time

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from jaxcc import driver, isa, lexer, pipeline, vm
from jaxcc.errors import Code
from jaxcc.isa import Op
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.interp import run_program
from jaxcc.testing import programs
from property_tests.limits import PIPELINE
from property_tests.test_vm_vs_reference import (
    COMPILE,
    F_R,
    I_R,
    RAND,
    RUN,
    random_inputs,
    random_program,
    stack_programs,
)

FIELDS = isa.RunResult._fields


def assert_same(got, want, what=""):
    got, want = jax.device_get((got, want))
    for name in FIELDS:
        g, w = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        assert np.array_equal(g, w), f"{what}: {name} differs at lanes {np.flatnonzero(g != w)}"


def program(body, nparams=0, nlocals=0, maxstack=4) -> isa.Program:
    """One function (the entry, id 0) at RAND's shapes (I_R instructions, F_R functions)."""
    op, arg = np.zeros(I_R, np.int32), np.zeros(I_R, np.int32)
    for i, ins in enumerate(body):
        op[i], arg[i] = ins if isinstance(ins, tuple) else (ins, 0)
    tab = np.zeros((4, F_R), np.int32)
    tab[:, 0] = 0, nparams, nlocals, maxstack
    return isa.Program(op, arg, np.arange(1, I_R + 1, dtype=np.int32), np.int32(len(body)),
                       tab[0], tab[1], tab[2], tab[3], np.zeros(F_R, np.int32), np.int32(1))  # fmt: skip


# countdown(n): 7 steps per iteration, prints n at the end: run times that grow with n
COUNTDOWN = program(
    [(Op.LOAD_VAR, 0), (Op.JUMP_IF_FALSE, 7), (Op.LOAD_VAR, 0), (Op.LOAD_CONST, 1), Op.SUB,
     (Op.STORE_VAR, 0), (Op.JUMP, 0), (Op.LOAD_CONST, 42), (Op.PRINT_INT, 1),
     (Op.PRINT_NEWLINE, 0), Op.RETURN_VALUE],
    nparams=1, nlocals=1, maxstack=2,
)  # fmt: skip
RUNAWAY = program([Op.NOP, (Op.JUMP, 0)])
RECURSE = program([(Op.CALL, 0), Op.RETURN_VALUE], maxstack=1)
SPAM = program([(Op.LOAD_CONST, 7), (Op.PRINT_INT, 1), (Op.JUMP, 1)], maxstack=1)


def mixed_batch(seed: int, n: int = 64):
    """Random plausible bytecode (property_tests' generator) and hostile lanes: infinite
    loops, unbounded recursion, output spam, countdowns of every length up to past the
    step budget (so lanes stop at every point of the run)."""
    rng = np.random.default_rng(seed)
    progs = [random_program(rng) for _ in range(n - 16)]
    entries, args = random_inputs(rng, progs)
    extra = [RUNAWAY, RECURSE, SPAM] + [COUNTDOWN] * 13
    extra_args = [[0, 0]] * 3 + [[k * 4, 0] for k in range(13)]  # up to 48 * 7 > 300 steps
    order = rng.permutation(n)
    progs = [(progs + extra)[i] for i in order]
    entries = np.concatenate([entries, np.zeros(16, np.int32)])[order]
    args = np.concatenate([args, np.array(extra_args, np.int32)])[order]
    return stack_programs(progs), entries, args


@pytest.fixture(scope="module")
def mixed():
    batch, entries, args = mixed_batch(seed=5)
    want = jax.device_get(vm.run(batch, RAND, entry=entries, args=args))
    return batch, entries, args, want


@pytest.mark.parametrize(
    "slice_steps,compact,backend",
    [(1, True, "xla"), (7, True, "xla"), (48, False, "xla"), (None, True, "xla"),
     (1, True, "serial"), (7, True, "serial"), (None, True, "serial")],
    ids=["S=1", "S=7", "S=48-no-compaction", "S=adaptive", "serial-S=1", "serial-S=7",
         "serial-S=adaptive"],
)  # fmt: skip
def test_slices_equal_one_run(mixed, slice_steps, compact, backend):
    """The lockstep VM (compaction to the fixed tiers, or none) and the serial one (one
    lane after another, which never compacts) in slices: each equal to one lockstep run."""
    batch, entries, args, want = mixed
    statuses = set(np.asarray(want.status).tolist())
    assert {Code.OK, Code.TIMEOUT, Code.RECURSION, Code.OUTPUT_LIMIT} <= statuses
    d = driver.Driver(vm.start(batch, RAND, entries, args), RAND, slice_steps=slice_steps,
                      compact=compact, ratio=4, backend=backend)  # fmt: skip
    assert d.backend == backend
    compact = compact and backend == "xla"
    seen = np.zeros(len(entries), int)
    for done in d:
        assert list(done.lanes) == sorted(done.lanes) and not done.expired.any()
        seen[done.lanes] += 1
        for k, lane in enumerate(done.lanes):  # each lane's result as reported = final
            for name in FIELDS:
                g = np.asarray(getattr(done.result, name))[k]
                assert np.array_equal(g, np.asarray(getattr(want, name))[lane]), (lane, name)
        if slice_steps is not None:  # a lane reported after k slices made <= k * S steps
            assert np.all(done.result.steps <= d.stats().slices * slice_steps)
    assert np.all(seen == 1) and d.finished and not d.interrupted
    assert_same(d.result(), want, f"S={slice_steps} compact={compact}")
    sizes = d.stats().sizes
    if compact:  # the long tail ran at smaller tiers, all from the fixed list
        assert len(sizes) > 1 and set(sizes) <= set(driver.tiers(len(entries), 4))
    else:
        assert set(sizes) == {len(entries)}
    assert d.stats().steps >= int(np.max(want.steps))


@pytest.mark.parametrize("backend", ["xla", "serial"])
def test_advance_to_the_end_in_one_call(mixed, backend):
    batch, entries, args, want = mixed
    state = vm.advance(vm.start(batch, RAND, entries, args), RAND, backend=backend)
    assert_same(vm.finish(state, RAND), want, "advance(steps=None)")  # to the end
    # a few uneven advances by hand, then the rest
    state = vm.start(batch, RAND, entries, args)
    for steps in (0, 3, 16, 5):
        state = vm.advance(state, RAND, steps, backend=backend)
        # every lane made at most the steps given so far
        assert np.all(np.asarray(vm.finish(state, RAND).steps) <= 24)
    assert np.asarray(vm.status(state) == Code.RUNNING).any()
    state = vm.advance(state, RAND, backend=backend)
    assert_same(vm.finish(state, RAND), want, "advance by hand")


def test_serial_run_equals_lockstep(mixed):
    """vm.run and run_tests with backend="serial" (one lane after another) equal lockstep."""
    batch, entries, args, want = mixed
    assert_same(vm.run(batch, RAND, entry=entries, args=args, backend="serial"), want, "run")
    # two cases per program, its own run's arguments; the second case of every other
    # program expects a wrong value
    targs = np.repeat(args[:, None, :], 2, axis=1)
    res = np.asarray(want.result)
    expected = np.stack([res, res + np.arange(len(res)) % 2], axis=1)
    got = vm.run_tests(batch, entries, targs, expected, RAND, backend="serial")
    ref = vm.run_tests(batch, entries, targs, expected, RAND, backend="xla")
    for g, r in zip(jax.device_get(got), jax.device_get(ref), strict=True):
        assert np.array_equal(np.asarray(g), np.asarray(r))
    passed, per_case = map(np.asarray, ref)
    assert passed.any() and not passed.all()
    assert {Code.OK, vm.WRONG_RESULT} <= set(per_case.ravel().tolist())


def test_tiers():
    assert driver.tiers(65536) == (65536, 8192, 1024, 128, 16, 2)
    assert driver.tiers(11, 2) == (11, 4, 2, 1)
    assert driver.tiers(64, 4) == (64, 16, 4, 1)
    assert driver.tiers(1) == (1,) and driver.tiers(7) == (7,)
    assert driver.tiers(100, 8, smallest=4) == (100, 8)
    with pytest.raises(ValueError):
        driver.tiers(8, 1)


# ---------------------------------------------------------------------------------------
# compiled generated programs


def _collect(strategy, n):
    out = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(strategy)
    def grab(x):
        out.append(x)

    grab()
    return out


def test_generated_programs_sliced_equal_one_run():
    rng = random.Random(3)
    progs = []
    for src in dict.fromkeys(_collect(programs(), 60)):  # distinct programs, in draw order
        c = compile_source(src, COMPILE)
        if int(c.error.code) == Code.OK:
            progs.append(c.program)
        if len(progs) == 16:
            break
    assert len(progs) == 16
    n_f = [int(p.n_funcs) for p in progs]
    entries = np.array([0 if i % 2 == 0 else rng.randrange(n_f[i]) for i in range(16)], np.int32)
    args = np.array([[rng.choice([-3, 0, 1, 2, 7]) for _ in range(3)] for _ in range(16)],
                    np.int32)  # fmt: skip
    batch = stack_programs(progs)
    want = jax.device_get(vm.run(batch, RUN, entry=entries, args=args))
    assert len(set(np.asarray(want.steps).tolist())) > 8  # a spread of run times
    got = driver.run(batch, RUN, entries, args, slice_steps=5, compact=False)
    assert_same(got, want, "S=5")
    got = driver.run(batch, RUN, entries, args, ratio=4)
    assert_same(got, want, "adaptive S, compaction")
    # run_tests: the same lanes as test cases, half of them expecting a wrong value
    k = 2
    targs = np.array([[[rng.choice([-2, 0, 1, 4]) for _ in range(3)] for _ in range(k)]
                      for _ in range(16)], np.int32)  # fmt: skip
    res = [[run_program(progs[b], RUN, int(entries[b]), list(targs[b, j])) for j in range(k)]
           for b in range(16)]  # fmt: skip
    expected = np.array([[int(r.result) + j for j, r in enumerate(row)] for row in res], np.int32)
    passed, per_case = jax.device_get(vm.run_tests(batch, entries, targs, expected, RUN))
    got_p, got_c = jax.device_get(driver.run_tests(batch, entries, targs, expected, RUN))
    assert np.array_equal(got_c, per_case) and np.array_equal(got_p, passed)
    assert {Code.OK, vm.WRONG_RESULT} <= set(np.asarray(per_case).ravel().tolist())


# ---------------------------------------------------------------------------------------
# wall-clock timeout and stop requests

LONG = RAND._replace(max_steps=2**31 - 1)  # the step budget never ends the runaway


def runaway_batch():
    progs = [COUNTDOWN] * 3 + [RECURSE, COUNTDOWN, RUNAWAY, SPAM, COUNTDOWN]
    args = np.array([[n, 0] for n in (0, 5, 20, 0, 30, 0, 0, 9)], np.int32)
    return stack_programs(progs), np.zeros(8, np.int32), args, progs


def test_runaway_times_out_and_the_others_are_reported_first():
    batch, entries, args, progs = runaway_batch()
    d = driver.Driver(vm.start(batch, LONG, entries, args), LONG, timeout=1.0)
    reports = []
    for done in d:
        reports.append((time.monotonic(), done))
    t_end = time.monotonic()
    *others, last = reports
    assert list(last[1].lanes) == [5] and list(last[1].expired) == [True]
    r = jax.tree.map(lambda x: x[0], last[1].result)
    assert int(r.status) == Code.TIMEOUT and 0 < int(r.steps) < LONG.max_steps
    # every other lane was reported with its own result, well before the timeout ended
    lanes = [int(i) for _, d_ in others for i in d_.lanes]
    assert sorted(lanes) == [0, 1, 2, 3, 4, 6, 7]
    for t, done in others:
        assert t_end - t > 0.5 and not done.expired.any()
        for k, i in enumerate(done.lanes):
            want = run_program(progs[i], LONG, int(entries[i]), list(args[i]))
            assert_same(jax.tree.map(lambda x, k=k: x[k], done.result), want, f"lane {i}")
    assert 1.0 <= d.stats().run_s < 1.0 + 5.0
    final = jax.device_get(d.result())
    assert list(final.status[[0, 3, 5, 6]]) == [Code.OK, Code.RECURSION, Code.TIMEOUT,
                                                Code.OUTPUT_LIMIT]  # fmt: skip
    assert int(final.steps[5]) == int(r.steps)


def test_stop_request_ends_the_run_between_slices():
    batch, entries, args, _ = runaway_batch()
    calls = []
    d = driver.Driver(vm.start(batch, LONG, entries, args), LONG,
                      should_stop=lambda: bool(calls))  # fmt: skip
    for done in d:
        calls.append(done)
    assert d.interrupted and not d.expired.any()
    assert sorted(int(i) for c in calls for i in c.lanes) == [0, 1, 2, 3, 4, 6, 7]
    final = jax.device_get(d.result())
    assert int(final.status[5]) == Code.RUNNING
    assert list(np.flatnonzero(final.status == Code.RUNNING)) == [5]


def test_driver_run_with_timeout():
    batch, entries, args, _ = runaway_batch()
    res = jax.device_get(driver.run(batch, LONG, entries, args, timeout=0.5, slice_steps=64))
    assert list(np.flatnonzero(res.status == Code.TIMEOUT)) == [5]
    assert int(res.result[0]) == 42 and int(res.n_out[7]) == 2  # 42 and a newline


# ---------------------------------------------------------------------------------------
# the loop's host wrapper


def test_evaluate_sources_with_a_runaway_candidate():
    """pipeline.evaluate_sources runs its cases through the driver: exactly
    pipeline.evaluate's Evaluation, and with a timeout a candidate that loops is a
    RUNTIME_ERROR (TimeoutError) without holding the batch. The shapes are
    tests/test_pipeline.py's (PIPELINE limits, 64 programs, 4 cases of 3 arguments), so
    the XLA compiles are shared through the persistent cache."""
    good = "def f(n: int) -> int:\n    return n * n\n"
    slow = "def f(n: int) -> int:\n    while True:\n        n = n + 0\n"
    wrong = "def f(n: int) -> int:\n    return n + n\n"
    bad = "def f(n: int) -> int:\n    return m\n"
    cases = [((3, 0, 0), 9), ((-4, 0, 0), 16), ((2, 0, 0), 4), ((0, 0, 0), 0)]
    sources = [good, good, wrong, bad] + ["pass\n"] * 60
    tests = [(1, cases)] * 4 + [(0, [])] * 60
    ev = pipeline.evaluate_sources(sources, tests, PIPELINE)
    source, length = lexer.encode(sources, PIPELINE)
    want = jax.device_get(pipeline.evaluate(source, length, pipeline.make_cases(tests), PIPELINE))
    for a, b in zip(jax.tree.leaves(ev), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(a, b)
    V = pipeline.Verdict
    assert list(ev.verdict[:4]) == [V.PASS, V.PASS, V.WRONG_ANSWER, V.COMPILE_ERROR]
    assert list(ev.passed[:4]) == [4, 4, 2, 0]
    # one slice per step: the loop's 20000-step budget would take seconds to reach,
    # the 0.5 s timeout ends it first
    sources[1] = slow
    ev = pipeline.evaluate_sources(sources, tests, PIPELINE, timeout=0.5, slice_steps=1)
    assert list(ev.verdict[:4]) == [V.PASS, V.RUNTIME_ERROR, V.WRONG_ANSWER, V.COMPILE_ERROR]
    assert list(ev.per_case[1]) == [Code.TIMEOUT] * 4
    assert list(ev.passed[:4]) == [4, 0, 2, 0]


def test_warm_up_compiles_what_a_run_of_its_shape_uses():
    """driver.warm_up(n, limits) (the CLI runs it in a thread while its compiler
    compiles) leaves jit's caches holding the start, slice and finish that a Driver over
    n lanes then uses (lanes that stop together: no compaction to other shapes): that
    run compiles none of them again, and its results are vm.run's."""
    limits = RAND._replace(max_code=I_R, max_funcs=F_R)  # the shapes program() makes
    batch = stack_programs([SPAM] * 3)
    budget = np.full(3, limits.max_steps, np.int32)
    jits = (vm._start, vm._advance, vm.finish)
    driver.warm_up(3, limits, ratio=2)
    before = [f._cache_size() for f in jits]
    d = driver.Driver(vm.start(batch, limits, None, None, budget), limits, ratio=2)
    for _ in d:
        pass
    assert [f._cache_size() for f in jits] == before
    assert_same(d.result(), vm.run(batch, limits, budget=budget), "after warm_up")


def test_auto_backend_is_serial_only_where_cpu_loops_are_hoisted(monkeypatch):
    """vm_pallas.resolve("auto") on the CPU: "serial" when XLA_FLAGS sets XLA:CPU's
    small-while-loop threshold (as `jaxcc run` does), else lockstep "xla" (serial without
    the hoisting is slower than lockstep); a GPU's is the kernel whatever the flags."""
    from jaxcc import cli, vm_pallas

    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    assert not vm.cpu_loops_hoisted() and vm_pallas.resolve("auto") == "xla"
    monkeypatch.setenv("XLA_FLAGS", f"{cli._HOIST_FLAG}{cli.CPU_WHILE_LOOP_BYTES}")
    assert vm.cpu_loops_hoisted() and vm_pallas.resolve("auto") == "serial"
    assert driver.Driver(vm.start(COUNTDOWN, RAND, 0, np.int32([3, 0])), RAND).backend == "serial"
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert vm_pallas.resolve("auto") == "pallas"
    assert vm_pallas.resolve("xla") == "xla" and vm_pallas.resolve("serial") == "serial"
