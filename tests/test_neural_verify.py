"""The three verification levels on candidates made from the deterministic compiler's
code and deliberate mutations of it (docs/neural.md, "Verification")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcc import pipeline
from jaxcc.isa import Op
from jaxcc.limits import Limits
from jaxcc.neural import verify
from jaxcc.neural.verify import Reason
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.host_lex import host_lex_many

LIM = Limits(max_source_bytes=512, max_tokens=256, max_code=96, max_funcs=6, max_locals=16,
             max_stack=128, max_depth=16, max_output=16, max_steps=3000)  # fmt: skip
SRC = [
    "def f(a, b):\n    if a < 10:\n        return a + b\n    return a - b\nprint(f(1, 2))\n",
    "def g(n):\n    t = 0\n    while n > 0:\n        t += n\n        n -= 1\n    return t\nprint(g(4))\n",
]


def _progs():
    ps = [compile_source(s, LIM).program for s in SRC]
    return [jax.tree.map(np.asarray, p) for p in ps]


def _mutate(p, **kw):
    q = jax.tree.map(np.copy, p)
    for field, (i, v) in kw.items():
        getattr(q, field)[i] = v
    return q


def _first(p, op):
    return int(np.nonzero(p.op == op)[0][0])


def _candidates():
    """Per program: [exact, ADD->SUB, threshold 10->11, bad jump, module prints more]."""
    out = []
    for p in _progs():
        add = _first(p, Op.ADD) if Op.ADD in p.op else _first(p, Op.SUB)
        lit = [i for i in range(int(p.n_code)) if p.op[i] == Op.LOAD_CONST and p.arg[i] > 1]
        jmp = _first(p, Op.JUMP_IF_FALSE)
        pr = _first(p, Op.PRINT_INT)
        out.append([
            p,
            _mutate(p, op=(add, Op.SUB if p.op[add] == Op.ADD else Op.ADD)),
            _mutate(p, arg=(lit[-1], int(p.arg[lit[-1]]) + 1)),
            _mutate(p, arg=(jmp, 10_000)),
            _mutate(p, op=(pr, Op.PRINT_BOOL)),
        ])  # fmt: skip
    stack = lambda xs: jax.tree.map(lambda *a: np.stack(a), *xs)  # noqa: E731
    return stack([stack(c) for c in out]), stack(_progs())


@pytest.fixture(scope="module")
def setup():
    cands, ref = _candidates()
    toks, _ = host_lex_many(SRC, LIM)
    probes = verify.make_probes(toks, ref.fn_nparams, jax.random.key(0), 24)
    return cands, ref, probes


def test_probes_cover_boundaries_and_literal_neighbours(setup):
    _, _, probes = setup
    a = np.asarray(probes.args)
    assert a.shape == (2, verify.N_FUNCS, 24, 8)
    for v in (0, 1, -1, 2**31 - 1, -(2**31), 9, 10, 11):
        assert (a[0] == v).any(), v


def test_level3_accepts_only_the_exact_behaviour(setup):
    cands, ref, probes = setup
    v = verify.verify_against(cands, ref, probes, LIM)
    r = np.asarray(v.reason)
    assert r[:, 0].tolist() == [Reason.ACCEPTED] * 2
    assert (
        r[0, 1] == Reason.MODULE_OUTPUT and r[1, 1] == Reason.MODULE_OUTPUT
    )  # prints differ first
    assert r[0, 2] == Reason.FUNCTION_RESULT  # 10 -> 11: only the literal probes catch it
    assert r[0, 3] == Reason.MALFORMED and r[1, 3] == Reason.MALFORMED
    assert r[0, 4] == Reason.MODULE_OUTPUT
    assert np.asarray(v.best).tolist() == [0, 0]


def test_level2_majority_and_isolation(setup):
    cands, ref, probes = setup
    # three copies of the wrong ADD->SUB version outvote one correct candidate
    pick = np.array([1, 1, 0, 1, 3])
    c = jax.tree.map(lambda x: x[:, pick], cands)
    v = jax.jit(verify.cluster, static_argnames="limits")(c, probes, LIM)
    assert np.asarray(v.size)[0].tolist() == [3, 3, 1, 3, 0]
    assert int(v.best[0]) == 0 and np.asarray(v.reason)[0, 4] == Reason.MALFORMED
    # program 0's verdict does not depend on program 1's candidates
    other = jax.tree.map(lambda x: x.copy(), c)
    other = jax.tree.map(lambda x, y: x.at[1].set(y[1, ::-1]) if hasattr(x, "at") else
                         np.concatenate([x[:1], y[1:, ::-1]]), other, c)  # fmt: skip
    w = verify.cluster(other, probes, LIM)
    assert np.asarray(w.size)[0].tolist() == np.asarray(v.size)[0].tolist()


def test_level1_tests_and_fastest(setup):
    cands, ref, probes = setup
    cases = pipeline.make_cases([(1, [((1, 2), 3), ((12, 2), 10)]), (1, [((4,), 10)])])
    v = verify.verify_tests(cands, cases, LIM)
    acc = np.asarray(v.accepted)
    assert acc[0].tolist() == [True, False, True, False, True]  # weak tests accept 2 and 4
    assert acc[1, 0] and not acc[1, 1]
    assert int(v.best[0]) in (0, 2, 4)
    assert np.asarray(v.steps)[0, 0] > 0
    assert int(jnp.sum(v.found)) == 2
