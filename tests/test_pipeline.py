"""Tests of jaxcc.pipeline: evaluate's verdicts and per-case codes against running the
reference pipeline (reference.compiler + reference.interp) case by case, batch isolation,
jit against op-by-op execution, and compiler.compile_many's shape tiers.

XLA compiles of the pipeline take minutes on a small CPU: the file uses ONE Limits (the
same as property_tests/test_pipeline_vs_reference.py, so compile_arrays at (LIMITS, B)
is shared through the persistent cache) and ONE batch of B programs x K cases x A args.
"""

from __future__ import annotations

import functools
import os
import random

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from jaxcc import compiler, isa, lexer, middle, parser, pipeline
from jaxcc import optimize as opt
from jaxcc.errors import Code, Unsupported
from jaxcc.pipeline import Verdict
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.interp import run_program
from jaxcc.testing import programs
from property_tests.limits import PIPELINE as LIMITS

SLOW = os.environ.get("JAXCC_SLOW") == "1"
SCALE = 10 if SLOW else 1

B, K, A = 64, 4, 3  # programs, cases per program, arguments per case
FILLER = "pass\n"  # padding program (no valid cases)


def evaluate(tests, fn=None):
    """tests: [(source, entry, [(args, expected), ...])], at most B; padded to (B, K, A)."""
    assert len(tests) <= B
    tests = list(tests) + [(FILLER, 0, [])] * (B - len(tests))
    source, length = lexer.encode([t[0] for t in tests], LIMITS)
    cases = pipeline.make_cases([(e, cs) for _, e, cs in tests], n_args=A, n_cases=K)
    go = fn or functools.partial(pipeline.evaluate, limits=LIMITS)
    return jax.device_get(go(source, length, cases))


def lane(ev, i):
    """Program i's verdict, compile error code and line, per_case codes, passed count."""
    return (
        int(ev.verdict[i]),
        int(ev.error.code[i]),
        int(ev.error.line[i]),
        [int(x) for x in ev.per_case[i]],
        int(ev.passed[i]),
    )


def reference(source, entry, cases):
    """The same as lane(), computed with the reference pipeline case by case."""
    c = compile_source(source, LIMITS)
    code = int(c.error.code)
    if code != Code.OK:
        return (Verdict.COMPILE_ERROR, code, int(c.error.line), [code] * K, 0)
    per_case = [int(Code.OK)] * K
    for k, (args, want) in enumerate(cases):
        r = run_program(c.program, LIMITS, entry, list(args))
        if int(r.status) != Code.OK:
            per_case[k] = int(r.status)
        elif int(r.result) != int(want):
            per_case[k] = -1  # vm.WRONG_RESULT
    runtime = any(p not in (Code.OK, -1) for p in per_case)
    verdict = (
        Verdict.RUNTIME_ERROR
        if runtime
        else Verdict.PASS
        if all(p == Code.OK for p in per_case)
        else Verdict.WRONG_ANSWER
    )
    passed = sum(p == Code.OK for p in per_case[: len(cases)])
    return (int(verdict), code, 0, per_case, passed)


SQUARE = "def sq(x):\n    return x * x\n"
TWICE = "def sq(x):\n    return x + x\n"
DIVIDE = "def f(x):\n    return 100 // x\n"
SECOND = "def f(a):\n    return a\ndef g(a, b):\n    return a - b\n"
EVEN = "def even(n):\n    return n % 2 == 0\n"
LOOP = "def f(n):\n    while True:\n        n += 1\n"
DEEP = "def f(n):\n    return f(n + 1) + 1\n"
BIG = "def f(n):\n    return n * 65536\n"
MODULE_FAILS = "print(1 // 0)\ndef f(n):\n    return n\n"  # the module body never runs

# (source, entry, cases, verdict, per_case) with per_case for the K cases
FIXED = [
    (SQUARE, 1, [([3], 9), ([-4], 16)], Verdict.PASS, [0, 0, 0, 0]),
    (TWICE, 1, [([3], 9), ([2], 4)], Verdict.WRONG_ANSWER, [-1, 0, 0, 0]),
    (
        DIVIDE,
        1,
        [([5], 20), ([0], 0), ([7], 1)],
        Verdict.RUNTIME_ERROR,
        [0, Code.ZERO_DIVISION, -1, 0],
    ),  # fmt: skip
    (SECOND, 2, [([5, 3], 2), ([0, 1], -1)], Verdict.PASS, [0, 0, 0, 0]),
    (EVEN, 1, [([4], 1), ([3], 0), ([3], 1)], Verdict.WRONG_ANSWER, [0, 0, -1, 0]),
    (LOOP, 1, [([0], 0)], Verdict.RUNTIME_ERROR, [Code.TIMEOUT, 0, 0, 0]),
    (DEEP, 1, [([0], 0)], Verdict.RUNTIME_ERROR, [Code.RECURSION, 0, 0, 0]),
    (BIG, 1, [([2], 131072), ([65536], 0)], Verdict.RUNTIME_ERROR, [0, Code.OVERFLOW, 0, 0]),
    (MODULE_FAILS, 1, [([7], 7)], Verdict.PASS, [0, 0, 0, 0]),
    ("def f(x):\n    return x +\n", 1, [([1], 1)], Verdict.COMPILE_ERROR, [Code.SYNTAX] * 4),
    ("def f(x):\n    return y\n", 1, [([1], 1)], Verdict.COMPILE_ERROR, [Code.NAME] * 4),
    (
        "def f(x):\n    y = x\n    y = True\n    return y\n",
        1,
        [],
        Verdict.COMPILE_ERROR,
        [Code.TYPE] * 4,
    ),  # fmt: skip
    (SQUARE, 1, [], Verdict.PASS, [0, 0, 0, 0]),  # no cases: vacuously passes
    # a program that (wrongly) ends with a syntax error in the module still fails
    (SQUARE + "x = (\n", 1, [([3], 9)], Verdict.COMPILE_ERROR, [Code.SYNTAX] * 4),
]


# hostile neighbours: run forever, recurse, overflow output, fail to compile, garbage
_rng = random.Random(1234)
HOSTILE = [
    ("while True:\n    pass\n", 0, [([], 0)]),
    ("def f(n):\n    while True:\n        n += 1\n", 1, [([0], 0)] * K),
    ("def f(n):\n    return f(n + 1)\n", 1, [([0], 0)] * K),
    ("def f(n):\n    while True:\n        print(n, n, n)\n", 1, [([1], 0)] * K),
    ("def f(n):\n    return n\n" + "x = ((((((\n", 1, [([1], 1)]),
    ("def f(x):\n  return x\n    y = 1\n", 1, [([1], 1)]),
    ("x = " + "-" * 300 + "1\n", 0, [([], 0)]),
    ("def f(" + "a, " * 40 + "b):\n    return b\n", 1, [([1, 2, 3], 3)]),
    ("def f(n):\n    return n\n" * 20, 3, [([1], 1)]),
    ("\t \t\n" * 500, 1, [([1], 1)]),
    ("x = 1\n" * 400, 0, [([], 0)]),  # over max_source_bytes
    *[
        (bytes(_rng.randrange(256) for _ in range(_rng.randrange(1, 200))), 1, [([1, 2], 3)])
        for _ in range(8)
    ],  # fmt: skip
    *[
        ("def f(a, b):\n    return a // b\n", 1, [([_rng.randrange(-9, 9), 0], 0)] * K)
        for _ in range(4)
    ],  # fmt: skip
    (b"def f(x):\n    return x\n\xff\xfe\n", 1, [([1], 1)]),
    (b"def f(x):\n    return x\x00\n", 1, [([1], 1)]),
]


@functools.cache
def fixed_alone():
    """Each FIXED program alone in a batch of fillers (one jitted call per program)."""
    return [lane(evaluate([(s, e, cs)]), 0) for s, e, cs, _, _ in FIXED]


@functools.cache
def fixed_in_batch():
    """All FIXED programs in one batch, interleaved with the hostile ones."""
    mixed, where = [], []
    hostile = iter(HOSTILE)
    for s, e, cs, _, _ in FIXED:
        mixed.append(next(hostile, (FILLER, 0, [])))
        where.append(len(mixed))
        mixed.append((s, e, cs))
    mixed += list(hostile)
    ev = evaluate(mixed[:B])
    return [lane(ev, i) for i in where], ev, mixed[:B]


def test_fixed_verdicts():
    for (s, _, cs, verdict, per_case), got in zip(FIXED, fixed_in_batch()[0], strict=True):
        assert (got[0], got[3]) == (int(verdict), [int(p) for p in per_case]), s
        assert got[4] == sum(p == 0 for p in per_case[: len(cs)]), s


def test_fixed_match_reference():
    for (s, e, cs, _, _), got in zip(FIXED, fixed_in_batch()[0], strict=True):
        want = reference(s, e, cs)
        assert got[:2] == want[:2] and got[3:] == want[3:], (s, got, want)
        if want[1] != Code.OK:
            assert got[2] == compile_source(s, LIMITS).error.line, s


def test_batch_isolation():
    # a program's whole result is the same alone and beside hostile programs
    assert fixed_in_batch()[0] == fixed_alone()


def _first_bad_byte(s) -> tuple[int, int, int] | None:
    """(code, line, col) the JAX lexer gives a source with a byte >= 0x80 or a NUL.

    Deliberate difference (docs/language.md section 6): the JAX lexer rejects any byte
    >= 0x80 before everything else (UNSUPPORTED NON_ASCII at the first one) and a NUL
    as an invalid character where it stands; the reference follows CPython, whose
    decode errors and "source code string cannot contain null bytes" come first.
    """
    data = s if isinstance(s, bytes) else s.encode()
    if len(data) > LIMITS.max_source_bytes:
        return None
    i = next((k for k, b in enumerate(data) if b >= 0x80), None)
    if i is not None:
        code = Code.UNSUPPORTED
    elif 0 in data:
        i, code = data.index(0), Code.SYNTAX
    else:
        return None
    line = data.count(b"\n", 0, i) + 1
    return int(code), line, i - (data.rfind(b"\n", 0, i) + 1)


def test_hostile_programs_match_reference():
    _, ev, mixed = fixed_in_batch()
    n_bad = 0
    for i, (s, e, cs) in enumerate(mixed):
        got, want = lane(ev, i), reference(s, e, cs)
        bad = _first_bad_byte(s)
        if bad is None:
            assert got[:2] == want[:2] and got[3:] == want[3:], (s, got, want)
            continue
        n_bad += 1
        # both reject it; the JAX pipeline at the first non-ASCII byte (or at a NUL,
        # or at an earlier invalid character on the way to it)
        assert got[0] == want[0] == Verdict.COMPILE_ERROR, (s, got, want)
        code, line, col = bad
        if code == Code.UNSUPPORTED:
            assert got[1:3] == (code, line) and int(ev.error.col[i]) == col, (s, got)
            assert int(ev.error.detail[i]) == Unsupported.NON_ASCII
        else:
            assert got[1] == code and (got[2], int(ev.error.col[i])) <= (line, col), (s, got)
    assert n_bad >= 8  # the random byte strings and the two hand-made ones are here


def test_unused_cases_are_ignored():
    # invalid cases with crashing arguments and absurd expectations change nothing
    src, entry, cs = DIVIDE, 1, [([5], 20), ([4], 25)]
    tests = [(src, entry, cs)]
    source, length = lexer.encode([src] + [FILLER] * (B - 1), LIMITS)
    cases = pipeline.make_cases([(entry, cs)] + [(0, [])] * (B - 1), n_args=A, n_cases=K)
    args = np.array(cases.args)
    expected = np.array(cases.expected)
    args[0, 2:, 0] = 0  # 100 // 0 if it ran
    expected[0, 2:] = 12345
    cases = cases._replace(args=args, expected=expected)
    ev = jax.device_get(pipeline.evaluate(source, length, cases, LIMITS))
    assert lane(ev, 0) == lane(evaluate(tests), 0) == (Verdict.PASS, 0, 0, [0] * K, 2)


def test_jit_and_op_by_op_agree():
    # the un-jitted body runs each op (and the inner jitted stages) on its own
    _, ev, mixed = fixed_in_batch()
    body = pipeline.evaluate.__wrapped__
    eager = evaluate(mixed, fn=functools.partial(body, limits=LIMITS))
    for a, b in zip(jax.tree.leaves(ev), jax.tree.leaves(eager), strict=True):
        np.testing.assert_array_equal(a, b)


def _collect(strategy, n):
    out = []

    @settings(max_examples=n, derandomize=not SLOW, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(strategy)
    def grab(x):
        out.append(x)

    grab()
    return out


def test_generated_programs_match_reference():
    """The first function of generated programs, called with random arguments; the
    expected values are the reference's results, some of them off by one."""
    rng = random.Random(7)
    tests = []
    for src in _collect(programs(), B * SCALE):
        c = compile_source(src, LIMITS)
        entry = 1 if int(c.program.n_funcs) > 1 else 0
        n = int(c.program.fn_nparams[entry]) if int(c.error.code) == Code.OK else 0
        cases = []
        for _ in range(rng.randrange(0, K + 1)):
            args = [rng.choice([0, 1, 2, -3, 5, 100]) for _ in range(min(n, A))]
            r = run_program(c.program, LIMITS, entry, args) if int(c.error.code) == 0 else None
            want = int(r.result) if r is not None else 0
            cases.append((args, want + (rng.random() < 0.2)))
        tests.append((src, entry, cases))
    verdicts = set()
    for i in range(0, len(tests), B):
        ev = evaluate(tests[i : i + B])
        for j, (s, e, cs) in enumerate(tests[i : i + B]):
            got, want = lane(ev, j), reference(s, e, cs)
            assert got[:2] == want[:2] and got[3:] == want[3:], (s, cs, got, want)
            verdicts.add(got[0])
    assert {Verdict.PASS, Verdict.WRONG_ANSWER} <= verdicts


# compile_many pads each source to the smallest shape tier that holds it and retries at
# the next tier when a tier's own size limit (here PARSE_DEPTH: 256 at the 1024-byte
# tier, 512 in LIMITS) stops it: the result must be that of compiling at LIMITS.
# Each list below is one tier group of exactly B sources (a group's size is a shape).
SMALL = [SQUARE, DIVIDE, SECOND, "print(1)\n", "x = (\n", "def f(x):\n    return y\n"]


def _deep(d: int) -> str:
    """Under 1024 bytes, but nested deeper than the first tier's parser stack."""
    return "x = " + "1 ** " * d + "1\nprint(x)\n"


DEEP = [_deep(d) for d in range(200 - B, 200)]
LONG = [  # over 1024 bytes: straight to the LIMITS tier (the last ones over LIMITS too)
    "def f(n):\n    return n\n" + "# padding\n" * (100 + 3 * i) + "print(f(3))\n" for i in range(B)
]


def test_compile_many_tiers_equal_full_limits():
    small = (SMALL * B)[:B]
    first_tier = compiler.tier(LIMITS, 1024)
    assert first_tier.max_parse_depth < LIMITS.max_parse_depth
    assert all(len(s) <= 1024 for s in DEEP) and all(len(s) > 1024 for s in LONG)
    for sources in (small, DEEP, LONG):
        prog, err, _ = compiler.compile_many(sources, LIMITS)
        source, length = lexer.encode(sources, LIMITS)
        full = jax.device_get(compiler.compile_arrays(source, length, LIMITS))
        for a, b in zip((*prog, *err), (*full.program, *full.error), strict=True):
            np.testing.assert_array_equal(a, b)
        codes = [int(c) for c in err.code]
        assert codes == [int(compile_source(s, LIMITS).error.code) for s in sources]
    assert {int(c) for c in err.code} == {Code.OK, Code.LIMIT}  # LONG: both kinds
    # the deep ones really needed the retry: at the first tier they hit PARSE_DEPTH
    source, length = lexer.encode(DEEP, first_tier)
    first = jax.device_get(compiler.compile_arrays(source, length, first_tier))
    assert list(first.error.code) == [Code.LIMIT] * B


def test_fast_compile_equals_compile_arrays_optimized():
    """compile_many on the CPU (a small batch: CPU_FAST_COMPILE, the front and middle end
    as three jits and the optimizer as a fourth, compiled on two threads) gives exactly
    compile_arrays' program and errors, optimizer included (LONG: the LIMITS tier, so
    compile_arrays' shape is the one this file compiles anyway)."""
    assert compiler.fast_compile(B) == (jax.default_backend() == "cpu")
    prog, err, _ = compiler.compile_many(LONG, LIMITS, optimize=True, fast=True)
    source, length = lexer.encode(LONG, LIMITS)
    full = jax.device_get(compiler.compile_arrays(source, length, LIMITS, optimize=True))
    for a, b in zip((*prog, *err), (*full.program, *full.error), strict=True):
        np.testing.assert_array_equal(a, b)
    assert {int(c) for c in err.code} == {Code.OK, Code.LIMIT}


def test_fast_compile_only_on_the_cpu_for_small_batches(monkeypatch):
    n = compiler.FAST_COMPILE_MAX_BATCH
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert compiler.fast_compile(1) and compiler.fast_compile(n)
    assert not compiler.fast_compile(n + 1)
    assert not compiler.fast_compile(1, fast=False) and compiler.fast_compile(4 * n, fast=True)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert not compiler.fast_compile(1)

    # compile_many goes by it: _compile_fast on the CPU, compile_arrays elsewhere
    class Called(Exception):
        pass

    def spy(name):
        def called(*args, **kwargs):
            raise Called(name)

        return called

    def fast_spy(*args, **kwargs):
        split = len(args) > 6 and args[6] is compiler._SPLIT_STAGES
        raise Called("split" if split else "fast")

    monkeypatch.setattr(compiler, "_compile_fast", fast_spy)
    monkeypatch.setattr(compiler, "compile_arrays", spy("full"))
    cases = (("cpu", None, "fast"), ("gpu", None, "split"), ("gpu", "0", "full"))
    for backend, env, want in cases:
        monkeypatch.setattr(jax, "default_backend", lambda b=backend: b)
        if env is None:
            monkeypatch.delenv("JAXCC_SPLIT_COMPILE", raising=False)
        else:
            monkeypatch.setenv("JAXCC_SPLIT_COMPILE", env)
        try:
            compiler.compile_many(["print(1)\n"], LIMITS)
        except Called as e:
            assert str(e) == want, backend
        else:
            raise AssertionError("compile_many compiled nothing")
    monkeypatch.delenv("JAXCC_SPLIT_COMPILE", raising=False)
    assert compiler.split_compile(n) and not compiler.split_compile(n + 1)
    assert not compiler.split_compile(1, fast=False)


def test_split_stages_equal_compile_arrays():
    """The split jits with XLA's default options (other backends' cold compile) give
    exactly compile_arrays' program and errors, optimizer included (run here on the CPU;
    the same jits on a GPU)."""
    source, length = lexer.encode(LONG, LIMITS)
    split = compiler._compile_fast(source, length, LIMITS, True, *opt.level(1),
                                   compiler._SPLIT_STAGES, 2)  # fmt: skip
    full = compiler.compile_arrays(source, length, LIMITS, optimize=True)
    split, full = jax.device_get((split, full))
    for a, b in zip((*split.program, *split.error), (*full.program, *full.error), strict=True):
        np.testing.assert_array_equal(a, b)


def test_evaluate_program_is_compile_arrays_program():
    _, ev, mixed = fixed_in_batch()
    sources = [m[0] for m in mixed] + [FILLER] * (B - len(mixed))  # evaluate's padding
    source, length = lexer.encode(sources, LIMITS)
    full = jax.device_get(compiler.compile_arrays(source, length, LIMITS))
    for a, b in zip((*ev.program, *ev.error), (*full.program, *full.error), strict=True):
        np.testing.assert_array_equal(a, b)
    assert isinstance(ev.program, isa.Program)


def test_loop_shrink_rule():
    # evaluate's VM shrinks once (by SHRINK_BY) from SHRINK_MIN_LANES lanes on; an
    # explicit shrink is used as given (the VM tests check that no result changes)
    n = pipeline.SHRINK_MIN_LANES
    assert pipeline.loop_shrink(None, n) == 1 and pipeline.loop_shrink(None, n - 1) == 0
    assert pipeline.loop_shrink(0, n) == 0 and pipeline.loop_shrink(3, 4) == 3
    assert pipeline.SHRINK_BY >= 2


def test_chunked_front_and_middle_equal_compile_arrays():
    """A batch larger than the lexer's and the middle end's ``chunk`` goes through them a
    chunk at a time (lax.map; 64 programs in chunks of 24: two whole chunks and a rest of
    16) with exactly compile_arrays' program and errors (one batch, no chunks)."""
    sources = (SMALL + DEEP + LONG) * B
    sources = [sources[i] for i in random.Random(7).sample(range(len(sources)), B)]

    def chunked(source, length):
        tokens, lex_error = lexer.lex(source, length, LIMITS, chunk=24)
        ast, parse_error = parser.parse(tokens, LIMITS, lex_error=lex_error)
        return middle.middle_end(ast, tokens, LIMITS, parse_error, chunk=24)

    opts = compiler.cpu_fast_compile() if jax.default_backend() == "cpu" else None
    source, length = lexer.encode(sources, LIMITS)
    prog, err = jax.device_get(jax.jit(chunked, compiler_options=opts)(source, length))
    full = jax.device_get(compiler.compile_arrays(source, length, LIMITS))
    for a, b in zip((*prog, *err), (*full.program, *full.error), strict=True):
        np.testing.assert_array_equal(a, b)
    assert {Code.OK, Code.LIMIT} < {int(c) for c in err.code}  # and other errors


def _two_width_tests():
    return fixed_in_batch()[2][: B - 8] + [(s, 1, [([3], 3)]) for s in LONG[:4] + DEEP[-4:]]


def test_evaluate_passes_tiers_to_both_stages():
    """``evaluate(tiers=...)`` reaches the lexer and the middle end: each adds a lax.cond
    (one width or two) to the trace. That each stage at two widths equals it at one is
    tested stage by stage (tests/test_lexer.py, tests/test_middle_end.py, the property
    tests and tests/test_sharding.py); the whole loop at both, below, with --slow."""
    tests = _two_width_tests()
    source, length = lexer.encode([t[0] for t in tests], LIMITS)
    cases = pipeline.make_cases([(e, cs) for _, e, cs in tests], n_args=A, n_cases=K)

    def conds(tiers):
        f = functools.partial(pipeline.evaluate, limits=LIMITS, tiers=tiers)
        return str(jax.make_jaxpr(f)(source, length, cases)).count(" cond[")

    assert conds(True) == conds(False) + 2


@pytest.mark.slow(
    reason="~2 min on 2 cores (the loop compiled at every width); the default run checks "
    "each stage at two widths and that evaluate passes tiers to both"
)
def test_evaluate_at_two_widths_equals_one_width():
    """``evaluate(tiers=True)`` (the lexer's and the middle end's two widths: the default on
    a GPU for a batch of at least 4,096 programs) gives the same Evaluation, field by
    field, as one width (the CPU's default): the fixed and hostile programs, with
    programs of more than N / 2 bytes (LONG) and of more than N / 2 nodes (DEEP) for the
    full width."""
    tests = _two_width_tests()
    source, length = lexer.encode([t[0] for t in tests], LIMITS)
    tokens, err = lexer.lex(source, length, LIMITS)
    n_nodes = np.asarray(parser.parse(tokens, LIMITS, err)[0].n_nodes)
    assert (length[-8:-4] > LIMITS.max_source_bytes // 2).all()
    assert (n_nodes[-4:] > LIMITS.max_nodes // 2).all(), n_nodes[-4:]
    want = evaluate(tests)
    got = evaluate(tests, functools.partial(pipeline.evaluate, limits=LIMITS, tiers=True))
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        np.testing.assert_array_equal(a, b)
    assert {Verdict.PASS, Verdict.COMPILE_ERROR} <= {int(v) for v in want.verdict}


def test_fast_compile_options_unknown_to_this_xla_are_dropped(monkeypatch):
    """An XLA without one of CPU_FAST_COMPILE's options (jax 0.11's XLA:CPU has no
    xla_cpu_use_fusion_emitters) fails every compile that names it: cpu_fast_compile
    keeps only the options this XLA knows."""
    if jax.default_backend() != "cpu":
        pytest.skip("these are XLA:CPU options; compile_many uses them only on the CPU")
    bogus = "xla_cpu_no_such_option_for_jaxcc"
    monkeypatch.setattr(compiler, "CPU_FAST_COMPILE", {**compiler.CPU_FAST_COMPILE, bogus: True})
    compiler.cpu_fast_compile.cache_clear()
    try:
        with pytest.raises(Exception, match=bogus):  # XLA refuses it
            jax.jit(lambda x: x * 2, compiler_options={bogus: True}).lower(1).compile()
        opts = compiler.cpu_fast_compile()
    finally:
        compiler.cpu_fast_compile.cache_clear()
    assert bogus not in opts and set(opts) <= set(compiler.CPU_FAST_COMPILE)
    assert "xla_backend_optimization_level" in opts


def test_the_suites_xla_flags_are_the_clis_fast_compile():
    """conftest.py spells compiler.CPU_FAST_COMPILE as XLA_FLAGS (it must set them before
    anything starts the backend, so it cannot import jaxcc first), less those this XLA
    does not know (as cpu_fast_compile drops them); OPTIMIZED undoes each."""
    from conftest import FAST_XLA_FLAGS, OPTIMIZED

    fast = compiler.cpu_fast_compile()
    flags = dict(f.removeprefix("--").split("=") for f in FAST_XLA_FLAGS.split())
    assert flags == {k: str(v).lower() for k, v in fast.items()}
    assert OPTIMIZED.keys() == fast.keys()
    assert all(OPTIMIZED[k] != v for k, v in fast.items())
    jax.jit(lambda x: x + 1, compiler_options=OPTIMIZED).lower(1).compile()  # all known
