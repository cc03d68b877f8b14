"""Pass ``infer_types``: the static type of every expression, variable, parameter and
function result of ONE program (the driver vmaps it), and the TypeErrors: the
reference compiler's phase 4 (``_Typer`` and ``check_types``), in parallel.

Types are bit masks: BOT 0 (nothing known yet), INT 1, BOOL 2, NONE 4, TOP 7 (a
conflict); ``join`` is OR (any two bits make TOP). The reference solves its equations
for variables and results by Jacobi iteration, computing each expression's type
recursively; here every expression node is an unknown too, so one round updates every
node, variable (indexed by its first definer node) and result (indexed by its def node),
each part from the newest values of the others. Both iterations climb to the same least
fixpoint. Sequential equivalent of ``_solve``'s rounds::

    while changed:
        t[i] = rule(i, t[children of i], var, ret)    for every node i
        var[v] = seed[v] | OR(site types of v)         for every variable v   (new t)
        ret[f] = seed[f] | OR(return types of f)       for every function f   (new t)
        t[i] = rule(i, var, ret)                       for NAME and CALL nodes (new var, ret)
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from jaxcc import isa, ops
from jaxcc.arrays import add_at, index, max_at, min_at, set_at
from jaxcc.errors import TYPE_SITE, Code, Type
from jaxcc.resolve import (
    B_RANGE,
    BIG,
    I32,
    Cand,
    Err,
    builtin_codes,
    gather,
    pick_node,
    tree_fixpoint,
)
from jaxcc.syntax import Ann, ConstKind, Ctx, Node

# the typing rules of ops.py that are not "int": & | ^ (bool if both are) and `not` (bool)
_BITWISE = ops.subs(Node.BINOP, ops.Typing.BITWISE)
_BOOL_UNARY = ops.subs(Node.UNARYOP, ops.Typing.BOOL)
# builtin calls by their typing rule (ops.BUILTINS): None (print; range, which is no
# value), int (abs), the arguments' joined type (min, max)
_B_NONE_RESULT = builtin_codes(lambda b: b.typing in (ops.Typing.NONE, None))
_B_INT_RESULT = builtin_codes(lambda b: b.typing == ops.Typing.INT)
_B_JOINED = builtin_codes(lambda b: b.typing == ops.Typing.SAME)


def _arity_groups() -> tuple[tuple[int, int | None, tuple[int, ...]], ...]:
    """(min_args, max_args, builtin codes) per distinct arity, in id order of first use."""
    out: dict[tuple, tuple[int, ...]] = {}
    for b in ops.BUILTINS:
        if b.arity_message is not None:
            key = (b.min_args, b.max_args)
            out[key] = out.get(key, ()) + builtin_codes(lambda r, b=b: r is b)
    return tuple((lo, hi, codes) for (lo, hi), codes in out.items())


_ARITIES = _arity_groups()


def _arity_bad(nch, lo: int, hi: int | None):
    """nch outside [lo, hi] (hi None: no upper bound)."""
    if lo == hi:
        return nch != lo
    if hi is None:
        return nch < lo
    return (nch < lo) | (nch > hi)


BOT, M_INT, M_BOOL, M_NONE, TOP = 0, 1, 2, 4, 7


def norm(m):
    """Two or more bits -> TOP (in m's dtype)."""
    return jnp.where((m & (m - 1)) != 0, TOP, m).astype(m.dtype)


def bitwise(a, b):
    """& | ^: TOP if either is, BOT if either is, bool if both are, else int (in a's
    dtype)."""
    return jnp.where(
        (a == TOP) | (b == TOP),
        TOP,
        jnp.where(
            (a == BOT) | (b == BOT), BOT, jnp.where((a == M_BOOL) & (b == M_BOOL), M_BOOL, M_INT)
        ),
    ).astype(a.dtype)


def mask_to_type(m):
    """A mask to isa.T_* (BOT and TOP give T_INT)."""
    return jnp.where(m == M_BOOL, isa.T_BOOL, jnp.where(m == M_NONE, isa.T_NONE, isa.T_INT)).astype(
        I32
    )


def _ann_mask(ann):
    return jnp.select(
        [ann == Ann.INT, ann == Ann.BOOL, ann == Ann.NONE], [M_INT, M_BOOL, M_NONE], BOT
    ).astype(I32)


def or_into(n, target, valid, m):
    """out[j] = OR of m[i] over the i with valid[i] and target[i] == j (an OR scatter).
    With fewer than 1024 sources: one add-scatter of each source's three bits as counts
    in 10-bit fields (a count never reaches 1024); else one max-scatter per bit."""
    # n (past the end): dropped, not summed into a spare slot, where on the GPU every
    # other node of a lane would add atomically to one address
    at = jnp.where(valid & (target >= 0), target, n)
    m = m.astype(I32)  # the packed fields need 30 bits
    if m.shape[0] < 1024:
        packed = (m & 1) | ((m & 2) << 9) | ((m & 4) << 18)
        acc = add_at(jnp.zeros((n,), I32), at, packed)
        bit = lambda i: (((acc >> (10 * i)) & 0x3FF) != 0).astype(I32) << i  # noqa: E731
        return bit(0) | bit(1) | bit(2)
    bits = (m[:, None] >> jnp.arange(3, dtype=I32)[None, :]) & 1
    acc = max_at(jnp.zeros((n, 3), I32), at, bits)
    return acc[:, 0] | (acc[:, 1] << 1) | (acc[:, 2] << 2)


class Types(NamedTuple):
    t: object  # Int32[N]  type mask of each expression node (final)
    var: object  # Int32[N]  at first-definer nodes: the variable's mask
    ret: object  # Int32[N]  at function nodes: the result mask (BOT resolved to INT)
    terminates: object  # Bool[N]  statements / blocks that "terminate" (the return rule)
    err: Err
    err_args: object = None  # Int32[3]  the error's message parameters (see TYPE_SITE)


class _Facts(NamedTuple):
    """Per-node facts that every step of ``infer_types`` reads (all ``[n]`` unless noted):
    what the reference's ``_Typer.__init__`` collects (seeds and sites), per node."""

    n: int  # nodes (static)
    idx: object  # node index
    kind: object
    op: object
    parent: object
    ci: object  # child index
    nch: object  # number of children
    c0: object  # children 0 and 1 (-1: none)
    c1: object
    line: object
    col: object
    walk: object  # pre-order rank: the reference checks in source order
    pkind: object  # the parent's kind
    ok: object  # a node the reference walks (not in a second def's body)
    builtin: object  # builtin code of a CALL, and of the parent
    pbuiltin: object
    is_call: object
    is_ret: object
    is_param: object
    is_store: object  # a stored NAME
    is_load: object  # a loaded NAME that is a variable
    is_fdef: object  # a function's def node (not the module)
    bit: object  # a bitwise BINOP (& | ^)
    const_m: object  # a CONSTANT's mask
    ann_param: object  # an annotated PARAM
    seed_var0: object  # its annotation's mask (the reference's seed_var)
    ann_ret: object  # a def with a result annotation
    seed_ret0: object  # the annotation's mask, or None for a function with no return
    callee: object  # a CALL's def node (-1: none)
    call_ok: object  # a call of a program function with the right arity
    is_arg: object  # an argument of such a call
    arg_param: object  # the PARAM it is passed to
    feeds: object  # ... when that PARAM is unannotated (the reference's self.calls)
    joins: object  # a child joined by its parent's type (BOOLOP, IFEXP, min/max)
    store_rep: object  # a stored NAME's variable (-1: not a store)
    pbit: object  # the parent is bitwise (a stored NAME's `x &= e`)
    value_child: object  # a stored NAME's statement's value
    is_var_rep: object  # a variable's first definer (stage 2 defaults these)


def _facts(ast, sc) -> _Facts:
    """The per-node facts: node classes, the seeds (annotated params and results) and the
    sites (stores, call arguments, joined operands), as the reference's ``_Typer``
    collects them before solving."""
    kind, op, parent = ast.kind, ast.op, ast.parent
    n = kind.shape[0]
    idx = jnp.arange(n, dtype=I32)
    live = idx < ast.n_nodes
    ci, nch = ast.child_index, ast.n_children
    c0, c1 = sc.child[:, 0], sc.child[:, 1]
    pkind = gather(kind, parent, -1)
    ok = live & (sc.fn >= 0)  # nodes the reference walks (not a second def's body)
    builtin = sc.builtin
    pbuiltin = gather(builtin, parent, 0)
    is_call, is_ret = ok & (kind == Node.CALL), ok & (kind == Node.RETURN)
    is_param = ok & (kind == Node.PARAM)
    is_store = ok & (kind == Node.NAME) & (op == Ctx.Store)
    is_load = ok & (kind == Node.NAME) & (op == Ctx.Load) & (sc.rep >= 0)
    is_fdef = sc.is_fn & (idx != jnp.maximum(ast.n_nodes - 1, 0))
    bit = ops.is_any(op, _BITWISE)
    const_m = jnp.select(
        [op == ConstKind.INT, op == ConstKind.BOOL], [M_INT, M_BOOL], M_NONE
    ).astype(I32)
    # seeds: annotated params and results
    ann_param = is_param & (op != Ann.ABSENT)
    seed_var0 = jnp.where(ann_param, _ann_mask(op), BOT)
    ann_ret = is_fdef & (op != Ann.ABSENT)
    has_return = set_at(jnp.zeros((n,), bool), jnp.where(is_ret, sc.fdef, n), True)
    seed_ret0 = jnp.where(ann_ret, _ann_mask(op), jnp.where(sc.is_fn & ~has_return, M_NONE, BOT))
    # call sites with the right arity feed their callee's unannotated params
    callee = sc.callee
    call_ok = is_call & (callee >= 0) & (nch == gather(sc.nparams, callee, -1))
    is_arg = ok & (pkind == Node.CALL) & gather(call_ok, parent, False)
    arg_param = gather(sc.lo, gather(callee, parent, 0), 0) + ci  # PARAMs lead the def's subtree
    feeds = is_arg & (gather(op, arg_param, 0) == Ann.ABSENT)
    # children joined by the node's own type
    joins = ok & (
        (pkind == Node.BOOLOP)
        | ((pkind == Node.IFEXP) & (ci != 1))
        | ((pkind == Node.CALL) & ops.is_any(pbuiltin, _B_JOINED))
    )
    store_rep = jnp.where(is_store, sc.rep, -1)
    pop = gather(op, parent, 0)
    pbit = ops.is_any(pop, _BITWISE)
    value_child = gather(sc.child[:, 1], parent, -1)  # a stored NAME's statement's value
    is_var_rep = ok & (is_param | is_store) & (sc.rep == idx)
    return _Facts(
        n, idx, kind, op, parent, ci, nch, c0, c1, ast.line, ast.col, sc.preorder, pkind, ok,
        builtin, pbuiltin, is_call, is_ret, is_param, is_store, is_load, is_fdef, bit, const_m,
        ann_param, seed_var0, ann_ret, seed_ret0, callee, call_ok, is_arg, arg_param, feeds,
        joins, store_rep, pbit, value_child, is_var_rep,
    )  # fmt: skip


M8 = jnp.int8  # the type masks inside _solve's loop (3 bits)


class _Loop(NamedTuple):
    """What each round of ``_solve`` reads, made once before its loop from ``_Facts``
    and the scopes, as narrow as the values allow: the loop's rounds are bandwidth-bound
    on the GPU, and a round read about twenty Int32[N] columns. Node classes become one
    Int8 code per rule, node indices Int16 where N fits (an index outside [0, N) is -1:
    ``gather`` gives its fill and a scatter drops it either way), masks Int8. All ``[n]``."""

    n: int
    rule: object  # new_t's rule: 0 none (or not walked), 1 CONSTANT, 2 NAME, 3 BINOP,
    #               4 UNARYOP, 5 COMPARE, 6 BOOLOP / IFEXP, 7 CALL
    const_m: object  # a CONSTANT's mask
    unary_m: object  # a UNARYOP's mask
    bit: object  # a bitwise BINOP
    is_load: object
    call: object  # a CALL's builtin rule: 1 None result, 2 int, 3 joined, 0 a user call
    c0: object
    c1: object
    parent: object
    joins: object
    rep: object  # sc.rep
    callee: object
    site: object  # Int16[2n]: the variable each store and each fed argument assigns (n: none)
    value_child: object
    store_rep: object
    site_kind: object  # a stored NAME's statement: 1 ASSIGN, 2 AUG_ASSIGN, 3 FOR, 0 other
    pbit: object
    has_child: object  # nch > 0
    fdef: object  # sc.fdef
    is_ret: object
    ann_ret: object
    is_fn: object  # sc.is_fn
    is_param: object
    is_var_rep: object


def _loop_facts(f: _Facts, sc) -> _Loop:
    n = f.n
    it = jnp.int16 if n + 1 < (1 << 15) else I32

    def node(i):
        return jnp.where((i >= 0) & (i < n), i, -1).astype(it)

    def code(conds):  # 1 + the index of the first true condition, else 0
        return jnp.select(conds, list(range(1, len(conds) + 1)), 0).astype(M8)

    kind, ok = f.kind, f.ok
    b_none, b_int = ops.is_any(f.builtin, _B_NONE_RESULT), ops.is_any(f.builtin, _B_INT_RESULT)
    b_joined = ops.is_any(f.builtin, _B_JOINED)
    site = jnp.concatenate([jnp.where(f.is_store, sc.rep, n), jnp.where(f.feeds, f.arg_param, n)])
    return _Loop(
        n=n,
        rule=code([ok & (kind == k) for k in (Node.CONSTANT, Node.NAME, Node.BINOP,
                   Node.UNARYOP, Node.COMPARE)]
                  + [ok & ((kind == Node.BOOLOP) | (kind == Node.IFEXP)), ok & (kind == Node.CALL)]),
        const_m=f.const_m.astype(M8),
        unary_m=jnp.where(ops.is_any(f.op, _BOOL_UNARY), M_BOOL, M_INT).astype(M8),
        bit=f.bit,
        is_load=f.is_load,
        call=code([b_none, b_int, b_joined]),
        c0=node(f.c0),
        c1=node(f.c1),
        parent=node(f.parent),
        joins=f.joins,
        rep=node(sc.rep),
        callee=node(f.callee),
        site=jnp.where((site >= 0) & (site < n), site, n).astype(it),
        value_child=node(f.value_child),
        store_rep=node(f.store_rep),
        site_kind=code([f.pkind == Node.ASSIGN, f.pkind == Node.AUG_ASSIGN, f.pkind == Node.FOR]),
        pbit=f.pbit,
        has_child=f.nch > 0,
        fdef=node(sc.fdef),
        is_ret=f.is_ret,
        ann_ret=f.ann_ret,
        is_fn=sc.is_fn,
        is_param=f.is_param,
        is_var_rep=f.is_var_rep,
    )  # fmt: skip


def _assigned(t, var, value_child, store_rep, pbit, is_assign, is_aug, is_for):
    """The mask each stored NAME's statement assigns (the reference's ``site_type``), in
    t's dtype."""
    val = gather(t, value_child, BOT)
    cur = gather(var, store_rep, BOT)
    aug = jnp.where(pbit, bitwise(cur, val), M_INT)
    return jnp.select([is_assign, is_aug, is_for], [val, aug, M_INT], BOT).astype(t.dtype)


def _site_type(f: _Facts, t, var):
    """``_assigned`` from the facts."""
    k = f.pkind
    return _assigned(t, var, f.value_child, f.store_rep, f.pbit,
                     k == Node.ASSIGN, k == Node.AUG_ASSIGN, k == Node.FOR)  # fmt: skip


def _loop_site_type(lp: _Loop, t, var):
    """``_assigned`` from the loop's narrow columns."""
    k = lp.site_kind
    return _assigned(t, var, lp.value_child, lp.store_rep, lp.pbit, k == 1, k == 2, k == 3)


def _round(lp: _Loop, state, seeds):
    """One round, in three parts that each read the newest values (Gauss-Seidel order):
    every node's type from its children's and the previous variables and results (the
    reference's ``etype``); every variable and result from its sites (the body of
    ``fixpoint``) with those node types; then the NAME and CALL nodes again from the new
    variables and results. The reference's Jacobi rounds and these reach the same least
    fixpoint (the rules are monotone, and each part applies its own equations); a
    variable's or a result's type reaches its readers in the same round, which halves
    the rounds: 10 -> 5 for the slowest small corpus program, 16 -> 9 medium."""
    n, rule = lp.n, lp.rule
    t, var, ret = state
    seed_var, seed_ret = seeds
    joined = norm(or_into(n, lp.parent, lp.joins, t).astype(M8))
    callm = jnp.select(
        [lp.call == 1, lp.call == 2, lp.call == 3],
        [M_NONE, M_INT, joined],
        gather(ret, lp.callee, BOT),
    )
    new_t = jnp.select(
        [rule == k for k in range(1, 8)],
        [
            lp.const_m,
            jnp.where(lp.is_load, gather(var, lp.rep, BOT), BOT),
            jnp.where(lp.bit, bitwise(gather(t, lp.c0, BOT), gather(t, lp.c1, BOT)), M_INT),
            lp.unary_m,
            jnp.full((n,), M_BOOL, M8),
            joined,
            callm,
        ],
        BOT,
    ).astype(M8)
    # variables: store sites and arguments fed to unannotated params, in one OR scatter
    site_m = jnp.concatenate([_loop_site_type(lp, new_t, var), new_t])
    new_var = norm(seed_var | or_into(n, lp.site, lp.site < n, site_m).astype(M8))
    rm = jnp.where(lp.has_child, gather(new_t, lp.c0, BOT), M_NONE)
    rets = or_into(n, lp.fdef, lp.is_ret, rm).astype(M8)
    new_ret = jnp.where(lp.ann_ret, seed_ret, norm(seed_ret | jnp.where(lp.is_fn, rets, BOT)))
    new_ret = new_ret.astype(M8)
    # the NAME and CALL rules again, reading the variables and results just computed
    name_t = jnp.where(lp.is_load, gather(new_var, lp.rep, BOT), BOT)
    new_t = jnp.where(rule == 2, name_t, new_t)
    user_call = (rule == 7) & (lp.call == 0)
    new_t = jnp.where(user_call, gather(new_ret, lp.callee, BOT), new_t).astype(M8)
    return new_t, new_var, new_ret


def _step(lp: _Loop, c):
    """One round of ``_solve``'s loop: (state, seeds, stage, done) -> the same."""
    st, (sv, sr), stage, done = c
    # the barrier keeps XLA from fusing the round into the reductions below: on an H100
    # a step cost 2.7x a bare round without it, 1.2x with it (bench/infer_probe.py)
    new = lax.optimization_barrier(_round(lp, st, (sv, sr)))
    # one reduction, not three (all three are [N])
    changed = jnp.any((new[0] != st[0]) | (new[1] != st[1]) | (new[2] != st[2]))
    var, ret = new[1], new[2]
    # at a fixpoint, go straight to the first stage from here on that has unknowns
    # (a stage without any would only hand over after one more unchanged round,
    # computing the same state again): seed it, or finish
    has = (
        (stage <= 0) & jnp.any(lp.is_param & (var == BOT)),
        (stage <= 1) & jnp.any(lp.is_fn & (ret == BOT)),
        (stage <= 2) & jnp.any(lp.is_var_rep & (var == BOT)),
    )
    target = jnp.where(has[0], 0, jnp.where(has[1], 1, jnp.where(has[2], 2, 3)))
    target = jnp.where(changed | done, stage, target)
    seeding = ~changed & ~done & (target < 3)
    want_v = jnp.where(target == 0, lp.is_param, jnp.where(target == 2, lp.is_var_rep, False))
    want_v = seeding & want_v & (var == BOT)
    want_r = seeding & (target == 1) & lp.is_fn & (ret == BOT)
    sv = jnp.where(want_v, M_INT, sv).astype(M8)
    sr = jnp.where(want_r, M_INT, sr).astype(M8)
    return new, (sv, sr), target, done | (target >= 3)


def _solve(f: _Facts, sc):
    """The reference's ``solve()``: a fixpoint; then, in stages, unknown params, then
    unknown results, then unknown variables default to int, each time followed by a new
    fixpoint. One loop: when a round changes nothing, the first stage from the current
    one that has unknowns seeds them (stages without any are passed over; none left:
    done). Returns the final (t, var, ret) and seeds (seed_var, seed_ret), Int32."""
    n = f.n
    lp = _loop_facts(f, sc)

    def body(c):  # one round per check of the predicate (a host sync on a GPU): lanes
        c, k = c  # end after 2-9 rounds, a batch waits for its slowest one, and on an H100
        return _step(lp, c), k + 1  # two rounds per check ran 28% slower (18.1 -> 14.1 ms)

    zero = jnp.zeros((n,), M8)
    seeds0 = (f.seed_var0.astype(M8), f.seed_ret0.astype(M8))
    init = ((zero, zero, zero), seeds0, jnp.int32(0), jnp.bool_(False))
    # monotone, so it ends; the cap only guards against a malformed AST (an error lane)
    cap = 16 * n + 64
    (state, seeds, _, _), _ = lax.while_loop(
        lambda c: ~c[0][3] & (c[1] < cap), body, (init, jnp.int32(0))
    )
    return tuple(x.astype(I32) for x in state), tuple(x.astype(I32) for x in seeds)


def _first_seeds(f: _Facts, seed_var):
    """The type each variable's flow check starts with (check_types' ``first_var``): a
    param's annotation, or int where stage 2 defaulted a variable (params defaulted in
    stage 0 start with none: defaults are no sites)."""
    defaulted = f.is_var_rep & ~f.is_param & (seed_var == M_INT)  # only stage 2 seeds these
    return jnp.where(f.ann_param, f.seed_var0, jnp.where(defaulted, M_INT, BOT))


def _none_used(f: _Facts, t):
    """The reference's ``none_used``: a None value where a value is needed. A node is
    checked by its parent's visitor. Returns (is_none, the candidate)."""
    kind, pkind, ci, pbuiltin = f.kind, f.pkind, f.ci, f.pbuiltin
    is_none = t == M_NONE
    p_is = lambda k: pkind == k  # noqa: E731
    range_arg = f.ok & p_is(Node.CALL) & (pbuiltin == B_RANGE)
    checked = f.ok & (
        ((p_is(Node.ASSIGN) | p_is(Node.AUG_ASSIGN)) & (ci == 1))
        | ((p_is(Node.IF) | p_is(Node.WHILE)) & (ci == 0))
        | p_is(Node.ASSERT)
        | p_is(Node.BINOP)
        | p_is(Node.UNARYOP)
        | (p_is(Node.COMPARE) & (kind != Node.CMPOP))
        | p_is(Node.BOOLOP)
        | p_is(Node.IFEXP)
        | (p_is(Node.CALL) & (pbuiltin != B_RANGE))
        | range_arg
    )
    none_err = checked & is_none
    return is_none, Cand(none_err, Code.TYPE, Type.NONE_VALUE, f.line, f.col, (f.walk, 0))


def _check_join(f: _Facts, t, is_none):
    """The reference's ``check_join``: no part None, not both int and bool among the
    parts (BOOLOP, IFEXP, min/max). Returns (mixed, the candidate)."""
    n, kind, joins = f.n, f.kind, f.joins
    part_none = or_into(n, f.parent, joins & is_none, jnp.full((n,), 1, I32))
    part_bits = or_into(n, f.parent, joins & ((t == M_INT) | (t == M_BOOL)), t)
    join_node = f.ok & (
        (kind == Node.BOOLOP)
        | (kind == Node.IFEXP)
        | ((kind == Node.CALL) & ops.is_any(f.builtin, _B_JOINED))
    )
    mixed = join_node & (part_none == 0) & (part_bits == (M_INT | M_BOOL))
    return mixed, Cand(mixed, Code.TYPE, Type.MIXED, f.line, f.col, (f.walk, 2))


def _arity_checks(f: _Facts) -> list:
    """Calls with the wrong number of arguments: builtins (``ops.arity_error``) and
    program functions (check_types' ``Type.ARITY``)."""
    builtin, walk = f.builtin, f.walk
    bad = None
    for lo, hi, codes in _ARITIES:  # or-ed as they come (the order XLA gets them in)
        term = ops.is_any(builtin, codes) & _arity_bad(f.nch, lo, hi)
        bad = term if bad is None else bad | term
    bad_bi = f.is_call & bad
    detail_key = (walk, jnp.where(builtin == B_RANGE, 0, 1))
    bad_arity = f.is_call & (f.callee >= 0) & ~f.call_ok
    return [
        Cand(bad_bi, Code.TYPE, Type.BUILTIN_ARITY, f.line, f.col, detail_key),
        Cand(bad_arity, Code.TYPE, Type.ARITY, f.line, f.col, (walk, 1)),
    ]


def _definite(m):
    """A definite type (flow() ignores BOT and TOP)."""
    return (m == M_INT) | (m == M_BOOL) | (m == M_NONE)


class _Sites(NamedTuple):
    """The variables' sites in walk order (``_var_sites``): what the reference's
    ``flow()`` sees for variables and parameters."""

    s_site: object  # a stored NAME whose statement is a site (its value is not None)
    a_site: object  # an argument that is a site of its PARAM (it is not None)
    s_type: object  # the type a store site assigns (site_type)
    s_rep: object  # a store site's variable (n: not a site)
    a_rep: object  # an argument site's PARAM (n: not a site)
    s_key: object  # a store site's walk key
    first_key: object  # Int32[n + 1] per variable: the walk key of its first definite site
    first_m: object  # per variable: its first definite type (the seed where it has one)


def _var_sites(f: _Facts, sc, t, var, is_none, first_seed) -> _Sites:
    """flow()'s first definite type of each variable: the seed, else the type of its
    first definite site in walk order (a store's statement, or a call argument, ordered
    by their statement's pre-order rank and then the argument's position)."""
    n, pkind, parent, walk = f.n, f.pkind, f.parent, f.walk
    val_none = (pkind == Node.ASSIGN) | (pkind == Node.AUG_ASSIGN)
    val_none = val_none & (gather(t, f.value_child, BOT) == M_NONE)
    s_site = f.is_store & ~val_none
    a_site = f.is_arg & ~is_none  # annotated params are sites too (against their seed)
    s_type = _site_type(f, t, var)
    s_rep = jnp.where(s_site, sc.rep, n)
    a_rep = jnp.where(a_site, f.arg_param, n)
    s_key = gather(walk, parent, 0) * (n + 1)
    a_key = gather(walk, parent, 0) * (n + 1) + 1 + f.ci
    # non-sites at n + 1: past the end of first_key, dropped (or_into's why), so
    # first_key[n] stays BIG
    sites_rep = jnp.concatenate(
        [
            jnp.where(s_site & _definite(s_type), s_rep, n + 1),
            jnp.where(a_site & _definite(t), a_rep, n + 1),
        ]
    )
    sites_key = jnp.concatenate([s_key, a_key])
    sites_m = jnp.concatenate([s_type, t])
    first_key = min_at(jnp.full((n + 1,), BIG, I32), sites_rep, sites_key)
    is_first = (sites_rep < n) & (sites_key == index(first_key, sites_rep))
    first_m = set_at(jnp.zeros((n,), I32), jnp.where(is_first, sites_rep, n), sites_m)
    first_m = jnp.where(first_seed != BOT, first_seed, first_m)
    return _Sites(s_site, a_site, s_type, s_rep, a_rep, s_key, first_key, first_m)


class _VarFlow(NamedTuple):
    """The variables' conflicts (``_var_flow``)."""

    bad_s: object  # a store site whose type differs from its variable's first
    bad_a: object  # an argument site whose type differs from its PARAM's first
    s_type2: object  # the type a store site is checked with (`x &= e` retyped)
    cands: list  # the candidates: MIXED, or ANNOTATION_MISMATCH for annotated params


def _var_flow(f: _Facts, t, var, s: _Sites, first_seed) -> _VarFlow:
    """flow() for variables and parameters: every definite site must agree with the
    first definite type (check_types' ``for ... Assign | AugAssign | For`` and call
    arguments)."""
    n, line, col, walk = f.n, f.line, f.col, f.walk
    s_rep = s.s_rep
    # `x &= e` is checked with the type x has so far: the first one seen before it (the
    # seed, or the first definite site, which is also the first under cur = var), else
    # x's final type
    has_before = (gather(first_seed, s_rep, BOT) != BOT) | (
        gather(s.first_key, s_rep, BIG) < s.s_key
    )
    aug_bit = (f.pkind == Node.AUG_ASSIGN) & f.pbit
    cur = jnp.where(has_before, gather(s.first_m, s_rep, BOT), gather(var, s_rep, BOT))
    s_type2 = jnp.where(aug_bit, bitwise(cur, gather(t, f.value_child, BOT)), s.s_type)
    sites_rep = jnp.concatenate(
        [
            jnp.where(s.s_site & _definite(s_type2), s_rep, n),
            jnp.where(s.a_site & _definite(t), s.a_rep, n),
        ]
    )
    sites_m = jnp.concatenate([s_type2, t])
    bad = (sites_rep < n) & (sites_m != gather(s.first_m, sites_rep, BOT))
    annotated = gather(f.ann_param, sites_rep, False)
    bad_s, bad_a = bad[:n], bad[n:]
    ann_s, ann_a = annotated[:n], annotated[n:]
    cands = [
        Cand(bad_s & ~ann_s, Code.TYPE, Type.MIXED, line, col, (walk, 0)),
        Cand(bad_s & ann_s, Code.TYPE, Type.ANNOTATION_MISMATCH, line, col, (walk, 0)),
        Cand(bad_a & ~ann_a, Code.TYPE, Type.MIXED, line, col, (walk, 0)),
        Cand(bad_a & ann_a, Code.TYPE, Type.ANNOTATION_MISMATCH, line, col, (walk, 0)),
    ]
    return _VarFlow(bad_s, bad_a, s_type2, cands)


class _RetFlow(NamedTuple):
    """The results' conflicts (``_return_flow``)."""

    r_bad: object  # a RETURN whose type differs from its function's first
    r_m: object  # the type each RETURN returns
    r_first_m: object  # at function nodes: the first definite returned type (or annotation)
    cands: list  # RETURN_MISMATCH, or ANNOTATION_MISMATCH for annotated results


def _return_flow(f: _Facts, sc, t) -> _RetFlow:
    """flow() for results: check_types' ``Return`` branch, the same rule as for
    variables, per function."""
    n, line, col, walk = f.n, f.line, f.col, f.walk
    r_m = jnp.where(f.nch > 0, gather(t, f.c0, BOT), M_NONE)
    r_site = f.is_ret & _definite(r_m)
    r_f = jnp.where(r_site, sc.fdef, n + 1)  # n + 1: past the end, dropped (or_into's why)
    r_first_key = min_at(jnp.full((n + 1,), BIG, I32), r_f, walk)
    r_first_m = set_at(
        jnp.zeros((n,), I32), jnp.where(r_site & (walk == index(r_first_key, r_f)), r_f, n), r_m
    )
    r_first_m = jnp.where(f.ann_ret, f.seed_ret0, r_first_m)
    r_bad = r_site & (r_m != gather(r_first_m, sc.fdef, BOT))
    r_ann = gather(f.ann_ret, sc.fdef, False)
    cands = [
        Cand(r_bad & ~r_ann, Code.TYPE, Type.RETURN_MISMATCH, line, col, (walk, 1)),
        Cand(r_bad & r_ann, Code.TYPE, Type.ANNOTATION_MISMATCH, line, col, (walk, 1)),
    ]
    return _RetFlow(r_bad, r_m, r_first_m, cands)


def _falls_off(f: _Facts, ast, sc, ret):
    """A function returning int/bool must not reach its end (check_types' first loop,
    with ``_terminates``). Returns (term, falls, the candidate)."""
    term = terminates(ast, sc)
    body_term = gather(term, f.c1, False)
    falls = f.is_fdef & ((ret == M_INT) | (ret == M_BOOL)) & ~body_term
    return term, falls, Cand(falls, Code.TYPE, Type.RETURN_MISMATCH, f.line, f.col, (f.walk, 0))


def _err_args(f: _Facts, sc, t, ret, err, at, s: _Sites, v: _VarFlow, r: _RetFlow, falls, mixed):
    """The chosen error's message parameters (TYPE_SITE: which site, the first type, this
    type), read at the node ``at`` it is at; zeros unless it is a TypeError."""
    n = f.n
    T = mask_to_type
    sites = [
        (v.bad_s, TYPE_SITE["variable"], gather(s.first_m, s.s_rep, BOT), v.s_type2),
        (v.bad_a, TYPE_SITE["parameter"], gather(s.first_m, s.a_rep, BOT), t),
        (r.r_bad, TYPE_SITE["return"], gather(r.r_first_m, sc.fdef, BOT), r.r_m),
        (falls, TYPE_SITE["falls_off"], ret, ret),
        (mixed, TYPE_SITE["operands"], jnp.full((n,), M_INT, I32), jnp.full((n,), M_BOOL, I32)),
    ]
    site, first, this = (jnp.zeros((n,), I32) for _ in range(3))
    for mask, code, f_m, t_m in reversed(sites):  # the first listed wins at a node
        site = jnp.where(mask, code, site)
        first, this = jnp.where(mask, T(f_m), first), jnp.where(mask, T(t_m), this)
    j = jnp.clip(at, 0, n - 1)
    args = jnp.where(at >= 0, jnp.stack([site[j], first[j], this[j]]), 0).astype(I32)
    return jnp.where(err.code == Code.TYPE, args, 0)


def infer_types(ast, sc, limits) -> Types:
    """Types and the first TypeError of one program: ``_facts``, ``_solve`` (the
    reference's ``solve``), then check_types' checks as candidates: ``_none_used``,
    ``_check_join``, ``_arity_checks``, ``_var_sites`` and ``_var_flow``,
    ``_return_flow``, ``_falls_off``; the first in walk order wins, and ``_err_args``
    reads its message parameters."""
    del limits
    f = _facts(ast, sc)
    (t, var, ret), seeds = _solve(f, sc)
    first_seed = _first_seeds(f, seeds[0])
    is_none, c_none = _none_used(f, t)
    mixed, c_mixed = _check_join(f, t, is_none)
    c_arity = _arity_checks(f)
    s = _var_sites(f, sc, t, var, is_none, first_seed)
    v = _var_flow(f, t, var, s, first_seed)
    r = _return_flow(f, sc, t)
    term, falls, c_falls = _falls_off(f, ast, sc, ret)
    err, at = pick_node([c_none, c_mixed, *c_arity, *v.cands, *r.cands, c_falls])
    args = _err_args(f, sc, t, ret, err, at, s, v, r, falls, mixed)
    ret_final = jnp.where(ret == BOT, M_INT, ret)
    return Types(t=t, var=var, ret=ret_final, terminates=term, err=err, err_args=args)


def terminates(ast, sc):
    """term[i]: the statement (or statement list) i terminates, the reference's
    ``_terminates``: a return; an if/else whose two branches terminate; ``while True:``
    with no break of its own; a BLOCK holding such a statement.

    Sequential equivalent: one post-order pass; here rounds of the parallel rule until
    nothing changes (as many as the statement nesting depth).
    """
    kind, parent = ast.kind, ast.parent
    n = kind.shape[0]
    idx = jnp.arange(n, dtype=I32)
    live = idx < ast.n_nodes
    c0, c1, c2 = sc.child[:, 0], sc.child[:, 1], sc.child[:, 2]
    own_break = set_at(
        jnp.zeros((n,), bool), jnp.where(live & (kind == Node.BREAK), sc.loop, n), True
    )
    t0 = c0
    true_test = (
        (gather(kind, t0, 0) == Node.CONSTANT)
        & (gather(ast.op, t0, 0) == ConstKind.BOOL)
        & (gather(ast.value, t0, 0) == 1)
    )
    always = live & ((kind == Node.RETURN) | ((kind == Node.WHILE) & true_test & ~own_break))
    is_if3 = live & (kind == Node.IF) & (ast.n_children == 3)
    is_block = live & (kind == Node.BLOCK)

    def step(term):
        at = jnp.where(live & term & (parent >= 0), parent, n)  # n: dropped (or_into's why)
        any_child = set_at(jnp.zeros((n,), bool), at, True)
        return (
            always
            | (is_if3 & gather(term, c1, False) & gather(term, c2, False))
            | (is_block & any_child)
        )

    return tree_fixpoint(step, always, 4 * n + 16)
