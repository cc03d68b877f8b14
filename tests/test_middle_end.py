"""The middle end (jaxcc.middle) against the reference compiler, on the host flattener's
ASTs: the same Error (code, line, col, detail) and the identical Program on hand-written
programs covering every template, every compile-error class and the limits; then running
both programs with the reference interpreter; batch isolation; jit vs eager; unbatched.

One jitted middle_end (one Limits, one batch size) is shared by every test, so it
compiles once (and the persistent cache keeps it between runs).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxcc import isa
from jaxcc.errors import Code, Error, Limit, Syntax
from jaxcc.middle import PASSES, middle_end
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.flatten import flatten, flatten_many
from jaxcc.reference.interp import run_program
from jaxcc.testing import seeded_program
from property_tests.limits import MIDDLE as LIMITS

BATCH = 32

CASES = [
    "def f(): return 1\ndef f(): return 2\nprint(f())\n",
    "def print(x): return x\n",
    "def f(range): return range\n",
    "def f(x: None): return 1\n",
    "print = 3\n",
    "def g(): return 1\ng = 4\n",
    "x = 1\ndef f():\n    return x\n",
    "def f():\n    return g\ndef g(): return 1\n",
    "print(abs)\n",
    "print(zz)\n",
    "def f():\n    y = 1\n    return y(2)\n",
    "print(h(1))\ndef h(a): return a\n",
    "int(3)\n",
    "x = range(3)\n",
    "for i in foo(3): pass\n",
    "for i in [1]: pass\n",
    "for i in 3: pass\n",
    "for i in range(): pass\n",
    "for i in range(1,2,3,4): pass\n",
    "def f(a, b): return a\nf(1)\n",
    "print(abs(1, 2))\n",
    "print(min(1))\n",
    "x = 1\nx = True\n",
    "def f(a): return a\nf(1)\nf(True)\n",
    "def f(a: int): return a\nf(True)\n",
    "def f():\n    return 1\n    return True\n",
    "def f() -> bool:\n    return 1\n",
    "def f(x):\n    if x:\n        return 1\n",
    "def f(x):\n    while True:\n        return 1\nprint(f(1))\n",
    "def f(x):\n    while True:\n        if x: break\n        return 1\n",
    "def f(x):\n    if x:\n        return 1\n    else:\n        return 2\nprint(f(0))\n",
    "def f(): print(1)\nx = f()\n",
    "def f(): print(1)\nprint(f() + 1)\n",
    "def f(): return print(1)\nf()\nprint(1 if f() else 2)\n",
    "print(1 and True)\n",
    "print((1 if True else False))\n",
    "print(max(1, True, 3))\n",
    "x = 2147483648\n",
    "x = -2147483648\nprint(x, -(2147483648))\n",
    "return 1\n",
    "break\n",
    "def f(a, a): return a\nreturn 5\n",
    "while True:\n    continue\n    break\n",
    "x = 0\nwhile x < 3:\n    x += 1\n    if x == 2:\n        break\nelse:\n    pass\n",
    "def f(a, b, c, d, e, f1, g, h, i): return a\n",
    "def a(): return 1\ndef b(): return 1\ndef c(): return 1\ndef d(): return 1\nprint(a())\n",
    "x = 1 < 2 < 3\ny = x and (1 < x < 3 < 4)\nprint(y)\n",
    "def f(n):\n    if n < 1:\n        return 0\n    return f(n - 1) + 1\nprint(f(5))\n",
    "def f(n):\n    return 1\n    x = ((((1 + 2) * 3) - (4 + (5 * (6 + (7 + 8))))) + 9)\nprint(f(3))\n",
    "for i in range(3):\n    for j in range(i, 5, 2):\n        if j == 3:\n            break\n        print(i, j)\n    else_ = 1\n",
    "x = True\nx &= False\nx |= True\ny = 3\ny ^= 5\nprint(x, y, not y, ~y, -y, +y)\n",
    "def f(a, b):\n    return a\nprint(f(1, f(True, 2)))\n",
    "def f(a, b):\n    return a\nprint(f(f(1, True), False))\n",
    "def g(x): return x\nprint(g(1) + g(True))\n",
    "def f(): return\nx = f()\n",
    "def f(a):\n    a = True\n    return a\nf(3)\n",
    "x = y = 1\n",
    "def f():\n    return z\nz = 1\n",
    "def f(a):\n    return a\nprint(f)\n",
    "print(1, True, None)\n",
    "print()\n",
    "assert 1 < 2, 3\n",
    "assert None\n",
    "if None: pass\n",
    "x = 1\nx += None\n",
    "def f(): pass\nf() + 1\n",
    "def f(): pass\nwhile f(): pass\n",
    "def f(): pass\nprint(-f())\n",
    "def f(): pass\nprint(f() < 1)\n",
    "def f(a, b): return a\ndef h(): pass\nf(h(), 2, 3)\n",
    "def f0(): return 0\ndef f1(): return 1\ndef f2(): return 2\ndef f3(): return 3\ndef f4(): return 4\nprint(f0())\n",
    "def f(a):\n    v0 = 0; v1 = 1; v2 = 2; v3 = 3; v4 = 4; v5 = 5; v6 = 6; v7 = 7; v8 = 8\n    return a\n",
    "v0 = 0; v1 = 1; v2 = 2; v3 = 3; v4 = 4; v5 = 5; v6 = 6; v7 = 7; v8 = 8\n",
    "v0 = 0; v1 = 1; v2 = 2; v3 = 3; v4 = 4; v5 = 5; v6 = 6\nprint(1 < v1 < 3)\n",
    "x = (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + 1))))))))))))))))))))))))))))))))))))))\n",
    "def f():\n    return 1\n    x = (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + 1))))))))))))))))))))))))))))))))))))))\nprint(f())\n",
    "x = (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + 1))))))))))))))))))))\n",
    "def f():\n    x = (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + (1 + 1))))))))))))))))))))\n    return x\n",
    "x = 0\nwhile x:\n while x:\n  while x:\n   while x:\n    while x:\n     while x:\n      while x:\n       while x:\n        while x:\n         while x:\n          while x:\n           while x:\n            while x:\n             while x:\n              while x:\n               while x:\n                while x:\n                 while x:\n                  while x:\n                   while x:\n                    while x:\n                     pass\n",
    "x = 0\nwhile x:\n while x:\n  while x:\n   while x:\n    while x:\n     while x:\n      while x:\n       while x:\n        while x:\n         while x:\n          while x:\n           while x:\n            while x:\n             while x:\n              while x:\n               while x:\n                while x:\n                 while x:\n                  while x:\n                   while x:\n                    pass\n",
    "for i in range(3):\n    break\n    x = (1 + (2 + (3 + 4)))\nprint(1)\n",
    "for i in range(3):\n    for j in range(2):\n        continue\n        y = 1\n    break\n",
    "def f(x):\n    if x:\n        return 1\n    else:\n        return 2\n    y = (1 + (2 + 3))\nprint(f(1))\n",
    "def f(x) -> None:\n    return\nf(1)\n",
    "def f(x) -> None:\n    return 1\n",
    "def f(x) -> int:\n    return\n",
    "def f(x) -> int:\n    pass\n",
    "x = zz + 1\nreturn 3\n",
    "def f(a, a): pass\nbreak\n",
    "x = 2147483648\ny = qq\n",
    "y = qq\nx = True\nx = 1\n",
    "x = True\nx = 1\ndef f(): return 1 if True else False\n",
    "def f(a): return a\nprint(f(1), f(True))\n",
    "def g(a, b): return a\ndef f(a): return g(g(a, 1), True)\nprint(f(1))\n",
    "def f():\n    while True:\n        pass\nprint(1)\n",
    "def f() -> int:\n    while True:\n        pass\n",
    "x = 1\nwhile True:\n    x += 1\n    if x > 5:\n        break\nprint(x)\n",
    "if 1:\n    pass\nelif 2:\n    x = 3\nelse:\n    if 4:\n        pass\n",
    "x = 1\nprint(x if x else x, x and x or x, not x)\n",
    "def f(n: int) -> bool:\n    return n > 0\nprint(f(3), f(-1) == False)\n",
    "print(-(5), - 2147483648, --3, ~-2147483648)\n",
    "def f(a):\n    return a\nx = f(f(f(3)))\nprint(x)\n",
    "def f(): return 1\nprint(f(), f() + 1)\nf()\n",
    "x = 3\nx //= 2\nx **= 2\nx <<= 1\nx >>= 1\nx %= 7\nx -= 1\nx *= 2\nprint(x)\n",
    "assert 1\nassert True and 1 < 2\n",
    "def f(a, b, c):\n    return min(a, b, c) + max(a, b) + abs(c)\nprint(f(1, 2, -3))\n",
    "def f(a):\n    print(a)\n    return\nf(1)\nprint(f(2) is None)\n",
    "x = 1 if True else None\n",
    "x = None\n",
    "def f(): return None\nx = f()\n",
    "def f(): return None\nf()\n",
    "print(print())\n",
    "def f(x): return x\nf(print())\n",
    "def f(x: bool): return x\nf(1)\nf(True)\n",
    "def f(x):\n    x = 1\n    x = True\n",
    "for i in range(3):\n    i = True\n",
    "def f():\n    return\n    return 1\n",
    "while 1 < 2 < 3:\n    break\n",
    "def f(a, b):\n    return a < b < 3 and b < a <= 2\nprint(f(1, 2))\n",
    # deep enough for Limit.STACK (nlocals + maxstack > 40)
    "x = " + "(1 + " * 45 + "1" + ")" * 45 + "\n",
]


@functools.cache
def _jitted():
    return jax.jit(lambda ast, err: middle_end(ast, None, LIMITS, err))


def compile_batch(sources):
    """(Program, Error, flatten's Error) as numpy, padded to BATCH programs per call."""
    progs, errs, ferrs = [], [], []
    for i in range(0, len(sources), BATCH):
        chunk = list(sources[i : i + BATCH])
        chunk += [""] * (BATCH - len(chunk))
        ast, _, ferr = flatten_many(chunk, LIMITS)
        p, e = _jitted()(ast, ferr)
        progs.append(jax.tree.map(np.asarray, p))
        errs.append(jax.tree.map(np.asarray, e))
        ferrs.append(ferr)

    def cat(xs):
        return type(xs[0])(*(np.concatenate(f)[: len(sources)] for f in zip(*xs, strict=True)))

    return cat(progs), cat(errs), cat(ferrs)


def _row(tree, b):
    return type(tree)(*(np.asarray(x)[b] for x in tree))


def _err(e):
    return tuple(int(x) for x in (e.code, e.line, e.col, e.detail))


@pytest.fixture(scope="module")
def compiled():
    return compile_batch(CASES)


def test_same_errors_and_bytecode_as_reference(compiled):
    progs, errs, ferrs = compiled
    checked = 0
    for b, src in enumerate(CASES):
        ref = compile_source(src, LIMITS)
        if int(ferrs.code[b]) != Code.OK:
            # the front end's error is kept as it came
            assert _err(_row(errs, b)) == _err(_row(ferrs, b)), src
            continue
        assert _err(_row(errs, b)) == _err(ref.error), src
        mine = _row(progs, b)
        for f in isa.Program._fields:
            np.testing.assert_array_equal(
                getattr(mine, f), np.asarray(getattr(ref.program, f)), err_msg=f + "\n" + src
            )
        checked += 1
    assert checked > 100


def test_cases_cover_every_error_class(compiled):
    _, errs, _ = compiled
    codes = {int(c) for c in errs.code}
    assert {Code.OK, Code.SYNTAX, Code.TYPE, Code.NAME, Code.UNSUPPORTED, Code.LIMIT} <= codes
    limits = {int(d) for c, d in zip(errs.code, errs.detail, strict=True) if c == Code.LIMIT}
    assert {Limit.FUNCTIONS, Limit.LOCALS, Limit.STACK, Limit.INT_LITERAL} <= limits


def test_runs_like_the_reference(compiled):
    progs, errs, _ = compiled
    ran = 0
    for b, src in enumerate(CASES):
        ref = compile_source(src, LIMITS)
        if int(errs.code[b]) != Code.OK or int(ref.error.code) != Code.OK:
            continue
        mine = run_program(_row(progs, b), LIMITS)
        theirs = run_program(ref.program, LIMITS)
        assert int(mine.status) == int(theirs.status), src
        assert int(mine.result) == int(theirs.result), src
        assert isa.format_output(mine.out_kind, mine.out_val, mine.n_out) == isa.format_output(
            theirs.out_kind, theirs.out_val, theirs.n_out
        ), src
        ran += 1
    assert ran > 30


def test_code_limit():
    # max_code is part of the shape: a second, small compile
    lim = LIMITS._replace(max_code=24)
    srcs = [c for c in CASES if len(c) > 60][:BATCH]
    srcs += [""] * (BATCH - len(srcs))
    ast, _, ferr = flatten_many(srcs, lim)
    p, e = jax.jit(lambda a, f: middle_end(a, None, lim, f))(ast, ferr)
    hit = 0
    for b, src in enumerate(srcs):
        if int(ferr.code[b]) != Code.OK:
            continue
        ref = compile_source(src, lim)
        assert _err(_row(e, b)) == _err(ref.error), src
        hit += int(ref.error.code) == Code.LIMIT and int(ref.error.detail) == Limit.CODE
    assert hit >= 3


def test_batch_isolation(compiled):
    progs, errs, _ = compiled
    # every program compiled alone (in a batch of empty programs) gives its own row
    order = list(range(len(CASES)))[::-1]
    progs2, errs2, _ = compile_batch([CASES[i] for i in order])
    for j, b in enumerate(order):
        assert _err(_row(errs2, j)) == _err(_row(errs, b))
        for f in isa.Program._fields:
            np.testing.assert_array_equal(getattr(_row(progs2, j), f), getattr(_row(progs, b), f))


def test_unbatched_matches_batched(compiled):
    progs, errs, _ = compiled
    for b in (CASES.index(c) for c in CASES if c.startswith("def f(n):\n    if n < 1")):
        ast, _, ferr = flatten(CASES[b], LIMITS)
        p1, e1 = jax.jit(lambda a: middle_end(a, None, LIMITS))(ast)
        for p, e in ((p1, e1),):
            assert _err(e) == _err(_row(errs, b))
            for f in isa.Program._fields:
                np.testing.assert_array_equal(np.asarray(getattr(p, f)), getattr(_row(progs, b), f))


def test_eager_matches_reference():
    # op by op, without jit (the jitted middle end is checked against the same oracle above)
    lim = LIMITS._replace(max_nodes=24, max_code=24, max_tokens=32)
    for src in ("x = 1 < 2 < 3\nprint(x, 3)\nx = 4\n",):
        ast, _, _ = flatten(src, lim)
        with jax.disable_jit():
            p, e = middle_end(ast, None, lim)
        ref = compile_source(src, lim)
        assert _err(e) == _err(ref.error)
        for f in isa.Program._fields:
            np.testing.assert_array_equal(
                np.asarray(getattr(p, f)), np.asarray(getattr(ref.program, f))
            )


def test_incoming_error_is_kept():
    srcs = ["print(1)\n", "x = 1\n"] + [""] * (BATCH - 2)
    ast, _, ferr = flatten_many(srcs, LIMITS)
    ferr = Error(*(np.array(x) for x in ferr))
    ferr.code[1], ferr.line[1], ferr.col[1], ferr.detail[1] = Code.SYNTAX, 7, 3, Syntax.INVALID
    p, e = _jitted()(ast, ferr)
    assert _err(_row(e, 1)) == (Code.SYNTAX, 7, 3, Syntax.INVALID)
    assert int(p.n_code[1]) == 0 and int(p.n_funcs[1]) == 0
    assert int(e.code[0]) == Code.OK and int(p.n_code[0]) > 0


def test_pass_list():
    assert [name for name, _ in PASSES] == ["resolve_names", "infer_types", "emit_code"]


def test_garbage_asts_terminate_and_keep_incoming_errors():
    # lanes behind a lexer/parser error may hold anything: every pass must still end
    rng = np.random.default_rng(0)
    n = LIMITS.max_nodes

    def rnd(hi, lo=0):
        return rng.integers(lo, hi, size=(BATCH, n)).astype(np.int32)

    ast = flatten_many([""] * BATCH, LIMITS)[0]._replace(
        kind=rnd(26), op=rnd(12), value=rnd(40, -3), parent=rnd(n, -1), child_index=rnd(4),
        n_children=rnd(4), line=rnd(20), col=rnd(20), end_line=rnd(20), end_col=rnd(20),
        n_nodes=rng.integers(0, n + 1, size=BATCH).astype(np.int32),
    )  # fmt: skip
    z = np.zeros(BATCH, np.int32)
    incoming = np.where(np.arange(BATCH) % 2 == 0, Code.SYNTAX, Code.OK).astype(np.int32)
    p, e = _jitted()(ast, Error(incoming, z + 3, z + 1, z))
    code = np.asarray(e.code)
    assert (code[::2] == Code.SYNTAX).all() and (np.asarray(e.line)[::2] == 3).all()
    assert (np.asarray(p.n_code)[::2] == 0).all()
    assert set(code.tolist()) <= set(int(c) for c in Code)


def test_run_passes_in_pieces_equals_the_middle_end():
    # the compiler's split compile runs the passes as three jits (middle.run_passes)
    from jaxcc import middle

    sources = ["x = 1\nprint(x + 2)\n", "def f(a: int) -> int:\n    return a * 2\nprint(f(3))\n",
               "print(y)\n", "def g(n):\n    return n\nprint(g(True) + 1)\n"]  # fmt: skip
    ast, _, err = flatten_many(sources, LIMITS)
    want = middle.middle_end_debug(ast, None, LIMITS, err)
    st = middle.initial_state(ast, err)
    for name, _ in PASSES:
        st = middle.run_passes(st, LIMITS, (name,))
    got = middle.outcome(st)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert int(np.asarray(got[1].code)[2]) != Code.OK  # the pieces still find errors
    with pytest.raises(ValueError, match="not consecutive"):
        middle.run_passes(middle.initial_state(ast, err), LIMITS, ("emit_code", "resolve_names"))


@functools.cache
def _overlap_jit():
    from jaxcc import codegen, middle

    def one(s):
        rules = codegen.instruction_rules(s.ast, s.scopes, s.types)[2]
        groups = codegen.rule_groups([r[0] for r in rules])
        per_group = [sum(rules[r][1].astype(np.int32) for r in g).max() for g in groups]
        return jax.numpy.stack(per_group).max()

    def batch(ast, err):
        st = middle.initial_state(ast, err)
        st = middle.run_passes(st, LIMITS, ("resolve_names", "infer_types"))
        return jax.vmap(one)(st)

    return jax.jit(batch)


def _rule_overlap(sources) -> int:
    """The most rules of one ``codegen.rule_groups`` group that apply to one node, over
    ``sources`` (emit_code merges each group into one, trusting it to be at most 1)."""
    ast, _, err = flatten_many(list(sources), LIMITS)
    return int(_overlap_jit()(ast, err).max())


def test_merged_code_rules_never_meet_on_a_node():
    """codegen merges rules that never apply to the same node into one scatter: on every
    template of CASES no node has two rules of one group; a rule that did would be lost."""
    from jaxcc import codegen

    assert len(codegen.rule_groups([("own", 1), ("own", 1), ("own", 2), ("parent", 1)])) == 3
    assert _rule_overlap(CASES) == 1


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=16, max_size=16))
def test_merged_code_rules_never_meet_on_generated_programs(seeds):
    """The same on 16 programs of jaxcc.testing's generator (``programs()``' defaults but
    its choices seeded, as tests/test_vm_pallas.py makes them: drawing 16 programs'
    choices through Hypothesis took most of the test's 120-180 s)."""
    sources = [seeded_program(s) for s in seeds]
    assert _rule_overlap(sources) <= 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_error_choice_is_the_smallest_key_candidate_node(data):
    """``resolve.smallest`` (all three of its forms) against a brute force over every
    (key, candidate, node): the first listed candidate wins ties of key, the first node
    ties of both; keys drawn from a small range so that ties happen."""
    from jaxcc.resolve import Cand, smallest

    n = data.draw(st.integers(1, 12))
    nc = data.draw(st.integers(1, 5))
    ints = lambda hi: st.lists(st.integers(0, hi), min_size=n, max_size=n)  # noqa: E731
    cands, brute = [], []
    for i in range(nc):
        mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        rank, sub = np.array(data.draw(ints(3)), np.int32), np.array(data.draw(ints(2)), np.int32)
        cands.append(Cand(mask, 1, 0, 0, 0, (rank, sub)))
        brute += [(64 * rank[x] + sub[x], i, x) for x in range(n) if mask[x]]
    for packed in ("node", True, False):
        ok, which, j = jax.jit(lambda c, p=packed: smallest(c, p))(cands)
        assert bool(ok) == bool(brute)
        if brute:
            assert (int(which), int(j)) == min(brute)[1:]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), st.integers(1, 70), st.integers(0, 2**31 - 1))
def test_tree_min_is_the_minimum_of_the_last_axis(rows, n, seed):
    """``resolve._tree_min`` (the error choice's minimum by halving) equals ``np.min``
    over the last axis, for widths that are and are not powers of two, BIG included."""
    from jaxcc.arrays import BIG
    from jaxcc.resolve import _tree_min

    rng = np.random.default_rng(seed)
    x = rng.integers(-5, 2**31 - 1, size=(rows, n), dtype=np.int64)
    x[rng.random((rows, n)) < 0.3] = int(BIG)
    x = x.astype(np.int32)
    assert np.array_equal(np.asarray(jax.jit(_tree_min)(x)), x.min(axis=-1))
    assert np.array_equal(np.asarray(jax.vmap(_tree_min)(x)), x.min(axis=-1))


def test_two_widths_equal_one_width():
    """``middle_end_debug(..., tiers=True)`` (the batch through the passes at the cheapest
    of 3 N / 8, N / 2 and N nodes, the programs too large for it again at N in chunks;
    ``arrays.by_width``) gives exactly the one-width Program, Error and Debug for each of
    the three plans: every error class of CASES, programs larger than the narrow width
    (several chunks of them, the last reaching back over small ones), and a batch with
    too few small programs for a narrow width."""
    from jaxcc import arrays, lexer, middle

    N = LIMITS.max_nodes
    large = ["x = 1 + 1 + 1\n" * k for k in range(19, 31)]
    large += ["def f(a: int) -> int:\n" + "    a = a + 1 * 2\n" * k + "    return a\nprint(f(1))\n"
              for k in range(14, 20)]  # fmt: skip
    mid = ["x = 1 + 1 + 1\n" * k for k in range(14, 19)]  # 99-127 nodes: 3 N / 8 < n <= N / 2
    f = jax.jit(middle.middle_end_debug, static_argnames=("limits", "chunk", "tiers"))
    B = 24
    large.append("x = 1 + 1 + 1\n" * 31)
    widths = lexer.narrow_widths(N, middle.TIER_MIN_NODES)
    assert widths == (3 * N // 8, N // 2)
    plans = {
        0: CASES[:18] + large[:6],  # 3 N / 8, then three chunks of 2 at N
        1: CASES[:16] + mid + large[:3],  # N / 2, all fit
        2: large + CASES[-5:],  # 5 of 24 small: N alone
    }
    for plan, sources in plans.items():
        assert len(sources) == B
        ast, _, err = flatten_many(sources, LIMITS)
        n = np.asarray(ast.n_nodes)
        assert (n > widths[0]).sum() >= 6 and (n <= N).all(), n
        k, _ = arrays.width_plan(ast.n_nodes, N, widths, 8 // 4)  # chunk=8: chunks of 2
        assert int(k) == plan, (plan, k, n)
        want = f(ast, None, LIMITS, err, chunk=8, tiers=False)
        got = f(ast, None, LIMITS, err, chunk=8, tiers=True)
        for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        if plan == 0:
            assert (np.asarray(got[1].code) != Code.OK).sum() >= 5  # the errors took part
