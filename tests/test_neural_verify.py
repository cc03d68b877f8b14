"""The three verification levels (jaxcc/neural/verify.py) on candidates made from the
deterministic compiler's code (``compiler.compile_arrays``) and deliberate mutations of it.

Program 0 is ``f(a, b)`` (a comparison against the literal 10, an ADD); program 1 is
``gcd`` (a loop). Each has k = 6 candidates; every test uses these shapes, so each level
compiles once (small Limits keep the XLA compiles short on a CPU).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcc import compiler, lexer, pipeline
from jaxcc.errors import Code
from jaxcc.isa import Op
from jaxcc.neural import verify
from jaxcc.neural.verify import Reason
from jaxcc.reference.host_lex import host_lex_many
from property_tests.limits import NEURAL_SMALL

LIM = NEURAL_SMALL
N_PROBES = 32

F_SRC = "def f(a, b):\n    if a < 10:\n        return a + b\n    return a - b\nprint(f(20, 2))\n"
GCD_SRC = (
    "def gcd(a, b):\n    while b != 0:\n        t = a % b\n        a = b\n        b = t\n"
    "    return a\nprint(gcd(12, 18))\n"
)
# the same behaviour as F_SRC (the same lines too), in more steps
F_SLOW = (
    "def f(a, b):\n    if a < 10 and a == a:\n        return a + b + 0\n    return a - b - 0\n"
    "print(f(20, 2))\n"
)
# loops forever (TimeoutError) for n < 0
G_SRC = "def g(n):\n    while n < 0:\n        n = n + 0\n    return n\nprint(g(3))\n"
SOURCES = [F_SRC, GCD_SRC]

# expected reasons at level 3, per candidate (see _candidates)
F_REASONS = [Reason.ACCEPTED, Reason.ACCEPTED, Reason.FUNCTION_RESULT, Reason.FUNCTION_RESULT,
             Reason.MALFORMED, Reason.MODULE_OUTPUT]  # fmt: skip
GCD_REASONS = [Reason.ACCEPTED, Reason.TIMEOUT, Reason.MALFORMED, Reason.FUNCTION_RESULT,
               Reason.MODULE_OUTPUT, Reason.ACCEPTED]  # fmt: skip


def _lane(program, i):
    return jax.tree.map(lambda x: np.array(x[i]), program)


def _at(p, op, nth=0):
    """Index of the nth instruction with opcode op."""
    return int(np.nonzero(p.op[: int(p.n_code)] == op)[0][nth])


def _mutate(p, field, i, value):
    q = jax.tree.map(np.copy, p)
    getattr(q, field)[i] = value
    return q


def _stack(progs):
    return jax.tree.map(lambda *xs: np.stack(xs), *progs)


def _candidates(compiled):
    f, gcd, slow = (_lane(compiled, i) for i in range(3))
    lt = _at(f, Op.LT)
    assert f.op[lt - 1] == Op.LOAD_CONST and f.arg[lt - 1] == 10
    f_cands = [
        slow,  # 0: correct, slower
        f,  # 1: the exact program
        _mutate(f, "op", _at(f, Op.ADD), Op.SUB),  # 2: a + b -> a - b (module path unaffected)
        _mutate(f, "arg", lt - 1, 11),  # 3: threshold 10 -> 11: only f(10, .) differs
        _mutate(f, "arg", _at(f, Op.JUMP_IF_FALSE), 1000),  # 4: jump target out of range
        _mutate(f, "arg", 0, 21),  # 5: the module prints f(21, 2)
    ]
    gcd_cands = [
        gcd,  # 0: exact
        _mutate(gcd, "arg", _at(gcd, Op.JUMP), _at(gcd, Op.JUMP)),  # 1: JUMP to itself: loops
        _mutate(gcd, "op", _at(gcd, Op.MOD), 99),  # 2: no such opcode
        _mutate(gcd, "op", _at(gcd, Op.NE), Op.GT),  # 3: while b > 0: wrong for b < 0
        _mutate(gcd, "op", _at(gcd, Op.PRINT_INT), Op.PRINT_BOOL),  # 4: prints True
        gcd,  # 5: exact again
    ]
    return _stack([_stack(f_cands), _stack(gcd_cands)]), _stack([f, gcd])


@pytest.fixture(scope="module")
def setup():
    src, length = lexer.encode([F_SRC, GCD_SRC, F_SLOW, G_SRC], LIM)
    compiled, err, _ = jax.device_get(compiler.compile_arrays(src, length, LIM))
    assert np.asarray(err.code).tolist() == [0, 0, 0, 0]
    cands, ref = _candidates(compiled)
    toks, lex_err = host_lex_many(SOURCES, LIM)
    assert np.asarray(lex_err.code).tolist() == [0, 0]
    probes = verify.make_probes(toks, ref.fn_nparams, jax.random.key(0), N_PROBES)
    return cands, ref, probes, toks, _lane(compiled, 3)


@functools.partial(jax.jit, static_argnames="limits")
def _verify_and_choose(cands, ref, probes, limits):
    """What the hybrid compiler does, inside the caller's own jit: level 3, then the chosen
    candidate, or the reference where none was accepted (nothing goes to the host)."""
    v = verify.verify_against(cands, ref, probes, limits)
    b = v.best.shape[0]
    take = lambda c, r: jnp.where(  # noqa: E731
        v.found.reshape((b,) + (1,) * (r.ndim - 1)), c[jnp.arange(b), jnp.maximum(v.best, 0)], r
    )
    return v, jax.tree.map(take, cands, ref)


def _pick(cands, per_program):
    """Candidates reordered per program: per_program[b] lists k indices."""
    idx = np.asarray(per_program)
    return jax.tree.map(lambda x: np.stack([x[b][idx[b]] for b in range(x.shape[0])]), cands)


def test_probes(setup):
    _, ref, probes, toks, _ = setup
    a = np.asarray(probes.args)
    assert a.shape == (2, LIM.max_funcs, N_PROBES, 8) and a.dtype == np.int32
    f1 = a[0, 1]  # f(a, b): two parameters
    assert (a[0, 0] == 0).all() and (a[0, 2] == 0).all()  # module body, absent function
    assert (f1[:, 2:] == 0).all()  # unused trailing arguments
    for v in verify.BOUNDARY:  # every boundary value in every used position
        assert (f1[:9, 0] == v).any() and (f1[:9, 1] == v).any()
    for v in (10, 9, 11, 20, 19, 21, -10, -11, -9):  # literals, neighbours, negated ones
        assert (f1[:, 0] == v).any() and (f1[:, 1] == v).any(), v
    assert ((f1[:, 0] == 10) & (f1[:, 1] != 0)).any()  # the threshold with a nonzero b
    assert (np.abs(f1[-8:]) > 2).any()  # random probes follow
    # with room for them, the int32 overflow edges each literal sets (x + 10, x - 10,
    # x * 10, x * 20): a constant off by one moves them
    wide = np.asarray(verify.make_probes(toks, ref.fn_nparams, jax.random.key(0), 128).args)
    edges = (2**31 - 1 - 10, 2**31 - 10, -(2**31) + 10, -(2**31) + 9,
             (2**31 - 1) // 10, (2**31 - 1) // 10 + 1, -(2**31) // 10, -(2**31) // 10 - 1,
             (2**31 - 1) // 20 + 1)  # fmt: skip
    for v in edges:
        assert (wide[0, 1, :, 0] == v).any(), v
    # deterministic, and program 0's probes do not depend on program 1
    again = verify.make_probes(toks, ref.fn_nparams, jax.random.key(0), N_PROBES)
    assert np.array_equal(np.asarray(again.args), a)
    other, _ = host_lex_many([F_SRC, "x = 12345\nprint(x)\n"], LIM)
    w = verify.make_probes(other, ref.fn_nparams, jax.random.key(0), N_PROBES)
    assert np.array_equal(np.asarray(w.args)[0], a[0])
    assert not np.array_equal(np.asarray(w.args)[1], a[1])


def test_level3_under_jit(setup):
    cands, ref, probes, _, _ = setup
    v, chosen = _verify_and_choose(cands, ref, probes, LIM)
    reason = np.asarray(v.reason)
    assert reason.tolist() == [F_REASONS, GCD_REASONS], verify.reason_counts(reason)
    assert np.asarray(v.accepted).tolist() == (reason == Reason.ACCEPTED).tolist()
    steps = np.asarray(v.steps)
    assert steps[0, 1] < steps[0, 0]  # the exact f is faster than the slow variant
    assert np.asarray(v.best).tolist() == [1, 0] and np.asarray(v.found).all()
    exact = _pick(cands, [[1], [0]])  # the chosen candidates
    for got, want in zip(chosen, exact, strict=True):
        assert np.array_equal(np.asarray(got), want[:, 0])
    assert verify.reason_counts(reason)["ACCEPTED"] == 4
    assert sum(verify.reason_counts(reason).values()) == 12

    # the threshold mutant passes probes without the literal section: literals matter
    n_b = len(verify.BOUNDARY)
    p, a = np.arange(N_PROBES)[:, None], np.arange(8)[None, :]
    only_boundary = np.asarray(verify.BOUNDARY, np.int32)[(p + a) % n_b]
    used = a[None, None] < np.asarray(ref.fn_nparams)[:, :, None, None]
    weak = verify.Probes(np.where(used, only_boundary[None, None], 0).astype(np.int32))
    w, _ = _verify_and_choose(cands, ref, weak, LIM)
    assert int(w.reason[0, 3]) == Reason.ACCEPTED and int(w.reason[0, 2]) != Reason.ACCEPTED

    # batch isolation: program 1's candidates (all looping, or reordered) change nothing
    # about program 0's verdict
    for other in ([[0] * 6, [1] * 6], [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]]):
        c2 = _pick(cands, [list(range(6)), other[1]])
        v2, _ = _verify_and_choose(c2, ref, probes, LIM)
        for field in verify.DiffVerdict._fields:
            assert np.array_equal(
                np.asarray(getattr(v2, field))[0], np.asarray(getattr(v, field))[0]
            )
    assert np.asarray(v2.reason)[1].tolist() == GCD_REASONS[::-1]


def test_level2_clusters(setup):
    cands, _, probes, _, _ = setup
    v = verify.cluster(cands, probes, LIM)  # called directly (no jit of ours around it)
    assert np.asarray(v.size).tolist() == [[2, 2, 1, 1, 0, 1], [2, 1, 0, 1, 1, 2]]
    assert np.asarray(v.best).tolist() == [1, 0]  # the faster member of {slow, exact}
    reason = np.asarray(v.reason)
    assert reason[0].tolist() == [0, 0, 9, 9, 1, 9] and reason[1].tolist() == [0, 9, 1, 9, 9, 0]

    # the majority wins even when it is wrong; ties go to the group with the lowest index
    maj = _pick(cands, [[2, 2, 1, 0, 2, 4], [3, 0, 3, 0, 1, 2]])
    m = verify.cluster(maj, probes, LIM)
    assert np.asarray(m.size).tolist() == [[3, 3, 2, 2, 3, 0], [2, 2, 2, 2, 1, 0]]
    assert np.asarray(m.best).tolist() == [0, 0]
    assert np.asarray(m.reason)[1].tolist() == [0, 9, 0, 9, 9, 1]

    # no candidate well-formed: nothing found
    bad = _pick(cands, [[4] * 6, [2] * 6])
    n = verify.cluster(bad, probes, LIM)
    assert not np.asarray(n.found).any() and np.asarray(n.best).tolist() == [-1, -1]
    assert (np.asarray(n.reason) == Reason.MALFORMED).all()
    # isolation: program 0 is judged the same next to program 1's malformed candidates
    iso = verify.cluster(_pick(cands, [list(range(6)), [2] * 6]), probes, LIM)
    for field in verify.ClusterVerdict._fields:
        assert np.array_equal(np.asarray(getattr(iso, field))[0], np.asarray(getattr(v, field))[0])


def test_level1_tests_pick_the_fastest(setup):
    cands, _, _, _, _ = setup
    cases = pipeline.make_cases([
        (1, [((1, 2), 3), ((12, 2), 10), ((10, 5), 5)]),
        (1, [((12, 18), 6), ((7, 0), 7), ((0, 5), 5)]),
    ])  # fmt: skip
    v = verify.verify_tests(cands, cases, LIM)
    reason = np.asarray(v.reason)
    assert reason[0].tolist() == [0, 0, Reason.TEST_FAILED, Reason.TEST_FAILED, 1, 0]
    # the module-output mutants pass: these tests call the function only
    assert reason[1].tolist() == [0, Reason.TIMEOUT, Reason.MALFORMED, 0, 0, 0]
    steps = np.asarray(v.steps)
    assert steps[0, 1] < steps[0, 0]
    assert np.asarray(v.best).tolist() == [1, 0] and np.asarray(v.found).all()
    # without valid cases every candidate passes (nothing runs), as pipeline.evaluate's PASS
    empty = pipeline.Cases(cases.entry, cases.args, cases.expected, np.zeros_like(cases.valid))
    e = verify.verify_tests(cands, empty, LIM)
    assert np.asarray(e.accepted).all() and (np.asarray(e.steps) == 0).all()


def test_behaviour_records_every_lane(setup):
    cands, ref, probes, _, _ = setup
    beh = verify.behaviour(ref, probes, LIM)
    assert beh.f_status.shape == (2, LIM.max_funcs - 1, N_PROBES)
    assert np.asarray(beh.status).tolist() == [0, 0] and np.asarray(beh.line).tolist() == [0, 0]
    assert np.asarray(beh.n_out).tolist() == [2, 2]  # "18\n" and "6\n"
    assert np.asarray(beh.out_val)[:, 0].tolist() == [18, 6]
    assert (np.asarray(beh.out_kind)[:, 2:] == 0).all()  # masked beyond n_out
    st, res, line = (np.asarray(x)[0, 0] for x in (beh.f_status, beh.f_result, beh.f_line))
    assert (np.asarray(beh.f_status)[:, 1] == verify.SKIPPED).all()  # no function 2
    # probe 1 is f(1, -1) = 0; probe 5 is f(INT_MAX, INT_MIN): OverflowError on line 4
    assert (st[1], res[1], line[1]) == (0, 0, 0)
    assert (st[5], res[5], line[5]) == (Code.OVERFLOW, 0, 4)
    assert not np.asarray(beh.malformed).any() and np.asarray(beh.complete).all()
    assert np.asarray(beh.nparams).tolist() == [[0, 2, 0], [0, 2, 0]]
    total = np.asarray(beh.steps) + np.asarray(beh.f_steps).sum(axis=(1, 2))
    assert np.array_equal(np.asarray(beh.total_steps), total)
    # the VM's shrink knob changes nothing
    plain = verify.behaviour(ref, probes, LIM, shrink=0)
    for got, want in zip(plain, beh, strict=True):
        assert np.array_equal(np.asarray(got), np.asarray(want))
    # candidates [B, k]: the same shapes with a k axis; fewer functions on request
    c = verify.behaviour(cands, probes, LIM, n_funcs=2)
    assert c.f_status.shape == (2, 6, 1, N_PROBES)
    assert np.asarray(c.malformed).tolist() == [[0, 0, 0, 0, 1, 0], [0, 0, 1, 0, 0, 0]]
    exact = np.asarray(c.f_result)[[0, 1], [1, 0], 0]  # f's candidate 1, gcd's candidate 0
    assert np.array_equal(exact, np.asarray(beh.f_result)[:, 0])


def test_level3_skips_probes_where_the_reference_times_out(setup):
    cands, ref, _, _, g = setup
    # g loops for n < 0; `while n < -1000000` is the same wherever g finishes, and
    # faster: it is accepted and chosen (the documented limit of level 3: it says nothing
    # about inputs on which the reference runs out of steps). `while n <= 0` loops at 0,
    # where g returns.
    lt = _at(g, Op.LT)
    assert g.op[lt - 1] == Op.LOAD_CONST and g.arg[lt - 1] == 0
    gt = _mutate(g, "arg", lt - 1, -1_000_000)
    loop = _mutate(g, "op", lt, Op.LE)
    g_cands = _stack([g, gt, loop, g, gt, g])
    cands = jax.tree.map(lambda a, c: np.stack([a, c[1]]), g_cands, cands)
    ref = jax.tree.map(lambda a, r: np.stack([a, r[1]]), g, ref)
    toks, _ = host_lex_many([G_SRC, GCD_SRC], LIM)
    probes = verify.make_probes(toks, ref.fn_nparams, jax.random.key(1), N_PROBES)
    v, _ = _verify_and_choose(cands, ref, probes, LIM)
    assert np.asarray(v.reason)[0].tolist() == [0, 0, Reason.TIMEOUT, 0, 0, 0]
    steps = np.asarray(v.steps)[0]
    assert steps[1] < steps[0] and int(v.best[0]) == 1
    assert np.asarray(v.reason)[1].tolist() == GCD_REASONS


def test_level2_hash_collisions_never_merge_behaviours(setup, monkeypatch):
    cands, _, probes, _, _ = setup
    # every vector hashes alike: the exact check against the bucket's first member keeps
    # the groups apart
    traced = []

    def zero_hash(x, seed):
        traced.append(seed)
        return jnp.zeros(x.shape[:-1], jnp.int32)

    monkeypatch.setattr(verify, "_hash", zero_hash)
    # a new function: jit's trace cache must not hand back cluster's earlier trace
    collide = jax.jit(lambda c, p: verify.cluster.__wrapped__(c, p, LIM))
    v = collide(cands, probes)
    assert 0x9E3779B9 in traced  # the grouping hash was the constant one
    assert np.asarray(v.size).tolist() == [[2, 2, 1, 1, 0, 1], [2, 1, 0, 1, 1, 2]]
    assert np.asarray(v.best).tolist() == [1, 0]


def test_saturating_step_sums():
    x = jnp.asarray([[2**30, 2**30, 5], [1, 2, 3]], jnp.int32)
    assert np.asarray(verify._sat_sum(x, axis=1)).tolist() == [2**31 - 1, 6]
