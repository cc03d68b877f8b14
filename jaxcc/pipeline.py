"""The whole generate-compile-run-test loop in one jitted call (the paper's in-VRAM loop).

    source bytes + test cases ──lex─parse─middle_end──▶ bytecode ──vm.run_tests──▶ verdicts

Nothing returns to the host between phases; ``evaluate`` is a pure function of arrays with
a leading batch axis, so it composes with the caller's own ``jit`` and shards over devices
along the batch axis (``jaxcc.sharding.sharded(evaluate)``).

Test cases call one function of each program with arguments and compare its return value
(a bool function's result compares as 0/1). Functions are numbered as the VM numbers them:
0 is the module body, 1 is the program's first ``def``, 2 the second, and so on.
"""

from __future__ import annotations

import enum
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcc import compiler, driver, isa, lexer, vm, vm_pallas
from jaxcc import optimize as optimize_mod
from jaxcc.errors import Code, Error
from jaxcc.limits import DEFAULT, Limits

# The loop's VM (``evaluate``): a batch runs as long as its slowest lane, and in the
# corpora most lanes stop long before the slowest (small: median 18 steps, the slowest
# 140; medium: 45 and 1,372). Once at most 1/SHRINK_BY of the lanes run, the rest go on
# in an array 1/SHRINK_BY the size; below about 32,768 lanes an XLA VM step costs about
# the same on an H100 (its kernel launches), so one level of 8 from 262,144 lanes is
# where that ends. Each level is one more compiled loop body; below SHRINK_MIN_LANES
# lanes (the tests', the CLI's) it would only cost compile time.
SHRINK_BY = 8
SHRINK_MIN_LANES = 8192


class Verdict(enum.IntEnum):
    PASS = 0
    COMPILE_ERROR = 1
    RUNTIME_ERROR = 2  # any case stopped with a run-time error (TimeoutError included)
    WRONG_ANSWER = 3  # every case returned, some with the wrong value


class Cases(NamedTuple):
    """K test cases per program; unused cases have ``valid`` False."""

    entry: object  # Int32[Array, "B"]  function id under test (1 = first def)
    args: object  # Int32[Array, "B K A"]
    expected: object  # Int32[Array, "B K"]
    valid: object  # Bool[Array, "B K"]


class Evaluation(NamedTuple):
    verdict: object  # Int32[Array, "B"]  Verdict
    error: Error  # Int32[Array, "B"] each: the compile error (Code.OK if it compiled)
    per_case: object  # Int32[Array, "B K"]  Code of each case, or vm.WRONG_RESULT (-1);
    #                   the compile error's Code for every case of a program that failed to compile
    passed: object  # Int32[Array, "B"]  number of valid cases passed
    program: isa.Program  # the bytecode, for inspection


@functools.partial(
    jax.jit,
    static_argnames=("limits", "optimize", "passes", "max_rounds", "backend", "shrink",
                     "shrink_by", "tiers"),
)  # fmt: skip
def evaluate(source, length, cases: Cases, limits: Limits = DEFAULT, optimize: int = False,
             passes: tuple | None = None, max_rounds: int | None = None,
             backend: str = "auto", shrink: int | None = None,
             shrink_by: int = SHRINK_BY, tiers: bool | None = None) -> Evaluation:  # fmt: skip
    """Compile every program and run every (program, case) pair; verdicts per program.

    source: UInt8[B, N] (N = limits.max_source_bytes), length: Int32[B].
    ``optimize``, ``passes``, ``max_rounds`` (static): the optimizer as a stage between
    the compiler and the VM (compiler.compile_arrays'; True: -O1, the cheap one-round
    preset chosen for this loop; 2: -O2); step budgets then count the optimized code.
    ``backend`` (static): the VM's, "auto" (default: the Pallas kernel on a GPU, XLA
    elsewhere), "xla" or "pallas"; the same results either way. On an H100 the loop with
    the kernel took 64.2 ms for 65,536 small programs against 68.6 with the XLA VM, and
    153 ms medium against 188 with the XLA VM's shrink, and compiled in 16-18 s against
    24 (docs/benchmarks.md, ninth run).
    ``shrink``, ``shrink_by`` (static): the XLA VM's lockstep array shrinks ``shrink``
    times by ``shrink_by`` as its lanes stop (vm.run_tests); None: once (``SHRINK_BY``)
    for a batch of at least SHRINK_MIN_LANES (program, case) lanes, else never. The same
    results either way.
    ``tiers`` (static): the lexer's and the middle end's narrow widths, as
    compiler.compile_arrays' (None: on a GPU for a batch of at least 4,096 programs;
    False saves tens of seconds of cold compile for a shape run only a few times). The
    same results either way.
    Equivalent sequential Python::

        for b in range(B):
            program, error = compile(source[b])
            if error: verdict[b] = COMPILE_ERROR; continue
            results = [run(program, entry[b], args[b, k]) for k in range(K) if valid[b, k]]
            verdict[b] = (RUNTIME_ERROR if any(r.status != OK for r in results) else
                          WRONG_ANSWER if any(r.value != expected for r in results) else PASS)
    """
    program, error, _ = compiler.compile_arrays(
        source, length, limits, optimize, passes, max_rounds, tiers
    )
    _, per_case = run_cases(program, error, cases, limits, backend, shrink, shrink_by)
    return _judge(program, error, per_case, cases)


def run_cases(program: isa.Program, error: Error, cases: Cases, limits: Limits,
              backend: str = "auto", shrink: int | None = None,
              shrink_by: int = SHRINK_BY):  # fmt: skip
    """``evaluate``'s VM stage: every (program, case) lane with its budget (``_budget``:
    none for programs that did not compile and unused cases), the lockstep array
    shrinking as ``loop_shrink`` says. Returns vm.run_tests' (passed, per_case)."""
    lanes = cases.expected.shape[0] * cases.expected.shape[1]
    return vm.run_tests(
        program, cases.entry, cases.args, cases.expected, limits,
        budget=_budget(error, cases, limits), shrink=loop_shrink(shrink, lanes),
        backend=vm_pallas.resolve(backend), shrink_by=shrink_by,
    )  # fmt: skip


def loop_shrink(shrink: int | None, lanes: int) -> int:
    """``evaluate``'s VM ``shrink`` for a batch of ``lanes`` (program, case) lanes:
    ``shrink`` when given, else 1 from SHRINK_MIN_LANES lanes on, 0 below."""
    if shrink is not None:
        return shrink
    return 1 if lanes >= SHRINK_MIN_LANES else 0


def _budget(error: Error, cases: Cases, limits: Limits):
    """Int32[B, K]: lanes of programs that failed to compile, and unused cases, get no
    steps at all."""
    compiled = error.code == Code.OK
    return jnp.where(compiled[:, None] & cases.valid, jnp.int32(limits.max_steps), jnp.int32(0))


def _judge(program: isa.Program, error: Error, per_case, cases: Cases) -> Evaluation:
    """The Evaluation from the compile errors and run_tests' per_case codes."""
    compiled = error.code == Code.OK
    per_case = jnp.where(cases.valid, per_case, jnp.int32(Code.OK))
    per_case = jnp.where(compiled[:, None], per_case, error.code[:, None])
    ok = per_case == Code.OK
    runtime = jnp.any((per_case != Code.OK) & (per_case != vm.WRONG_RESULT), axis=1)
    verdict = jnp.where(
        ~compiled,
        Verdict.COMPILE_ERROR,
        jnp.where(
            runtime,
            Verdict.RUNTIME_ERROR,
            jnp.where(jnp.all(ok, axis=1), Verdict.PASS, Verdict.WRONG_ANSWER),
        ),
    ).astype(jnp.int32)
    passed = jnp.sum(ok & cases.valid, axis=1).astype(jnp.int32)
    return Evaluation(verdict, error, per_case, passed, program)


def make_cases(tests, n_args: int | None = None, n_cases: int | None = None) -> Cases:
    """Host helper: ``tests[b] = (entry, [(args, expected), ...])`` -> padded Cases arrays."""
    K = n_cases or max([len(t[1]) for t in tests] + [1])
    A = n_args or max([len(a) for t in tests for a, _ in t[1]] + [1])
    B = len(tests)
    entry = np.zeros(B, np.int32)
    args = np.zeros((B, K, A), np.int32)
    expected = np.zeros((B, K), np.int32)
    valid = np.zeros((B, K), bool)
    for b, (e, cs) in enumerate(tests):
        entry[b] = e
        for k, (a, want) in enumerate(cs):
            args[b, k, : len(a)] = a
            expected[b, k] = int(want)
            valid[b, k] = True
    return Cases(entry, args, expected, valid)


def evaluate_sources(
    sources,
    tests,
    limits: Limits = DEFAULT,
    *,
    timeout: float | None = None,
    optimize: int = False,
    passes: tuple | None = None,
    max_rounds: int | None = None,
    **options,
) -> Evaluation:
    """Host convenience: encode sources, build cases, compile on the device, run the
    cases in slices (jaxcc.driver), fetch the result.

    Without a timeout the Evaluation is ``evaluate``'s, bit for bit. ``timeout``:
    wall-clock seconds of run time (compiles not counted) after which cases still
    running stop with TimeoutError (their programs' verdict: RUNTIME_ERROR), so one
    runaway candidate cannot hold the batch. ``options``: the Driver's (slice_steps,
    compact, should_stop, ...). ``optimize``, ``passes``, ``max_rounds``: as evaluate's.
    """
    source, length = lexer.encode(sources, limits)
    cases = make_cases(tests)
    if optimize:
        passes, max_rounds = optimize_mod.level(optimize, passes, max_rounds)
    compiled = compiler.compile_arrays(source, length, limits, optimize, passes, max_rounds)
    program, error = compiled[0], compiled[1]
    _, per_case = driver.run_tests(program, cases.entry, cases.args, cases.expected, limits,
                                   _budget(error, cases, limits), timeout=timeout, **options)  # fmt: skip
    return jax.device_get(jax.jit(_judge)(program, error, per_case, cases))
