"""Pass ``resolve_names``: scopes, slots, callees, loops, and the errors of the reference
compiler's phases 1-3 that the parser leaves (CPython's compile()-time SyntaxErrors, the
int-literal check, names), for ONE program's flat AST; the driver vmaps it.

Everything is parallel over the N nodes: prefix sums, pointer jumping and two sorts.
The tree and error helpers at the top are shared with the later passes.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from jaxcc import ops
from jaxcc.arrays import BIG, I32, gather
from jaxcc.errors import Code, Limit, Syntax, Unsupported
from jaxcc.ops import BUILTIN_ID, CALLABLE
from jaxcc.syntax import Ann, ConstKind, Ctx, Node, UnaryOp
from jaxcc.tokens import N_RESERVED_NAMES

INT_MIN = jnp.iinfo(jnp.int32).min
MAX_LOOP_NESTING = 20  # CPython's CO_MAXBLOCKS: "too many statically nested blocks"

# builtin codes of Scopes.builtin: 1 + the builtin's id (ops.BUILTIN_ID); 0: not a
# builtin call. Calls of the callable builtins (ops.CALLABLE) get theirs wherever they
# are; range only as the iterable of a `for`.
B_NONE = 0
B_PRINT, B_ABS, B_MIN, B_MAX, B_RANGE = (
    1 + BUILTIN_ID[n] for n in ("print", "abs", "min", "max", "range")
)


def builtin_codes(pred) -> tuple[int, ...]:
    """The builtin codes (in id order) of the callable builtins and range whose ops.py
    row satisfies ``pred``: the later stages select their rules by these groups."""
    called = ops.Place.CALL | ops.Place.FOR_ITER
    return tuple(1 + i for i, b in enumerate(ops.BUILTINS) if b.places & called and pred(b))


def _log2(n: int) -> int:
    return max(1, (max(n, 2) - 1).bit_length())


# -- tree helpers (post-order layout) --------------------------------------------------


def subtree_lo(parent, child_index, n_children):
    """lo[i]: the first node of i's subtree (its leftmost leaf); the subtree of i is
    the node range [lo[i], i].

    Sequential equivalent: ``for i in range(N): lo[i] = lo[first_child[i]] if it has
    children else i``. Here: pointer jumping along first-child pointers, log2 N rounds.
    """
    n = parent.shape[0]
    idx = jnp.arange(n, dtype=I32)
    tgt = jnp.where((child_index == 0) & (parent >= 0), parent, n)
    first = jnp.full((n,), -1, I32).at[tgt].set(idx, mode="drop")
    ptr = jnp.where((n_children > 0) & (first >= 0), first, idx)
    return lax.fori_loop(0, _log2(n), lambda _, p: p[p], ptr)


def nearest_marked_ancestor(parent, marked):
    """anc[i]: the nearest proper ancestor a of i with marked[a], or -1.

    Sequential equivalent (top-down, reverse post-order)::

        for i in reversed(range(N)):
            p = parent[i]
            anc[i] = -1 if p < 0 else (p if marked[p] else anc[p])

    Here: pointer jumping with the invariant "every node strictly between i and ptr[i]
    is unmarked", so an unmarked ptr[i] may jump to ptr[ptr[i]].
    """
    n = parent.shape[0]

    def jump(_, ptr):
        done = (ptr < 0) | gather(marked, ptr, True)
        return jnp.where(done, ptr, gather(ptr, ptr, -1))

    ptr = lax.fori_loop(0, _log2(n) + 1, jump, parent)
    done = (ptr < 0) | gather(marked, ptr, True)
    return jnp.where(done, ptr, -1)


def sum_over_ancestors(lo, x):
    """s[i] = sum of x[a] over the ancestors a of i, i itself included.

    Sequential equivalent: ``for i in reversed(range(N)): s[i] = x[i] + s[parent[i]]``.
    Here: x[a] covers the node range [lo[a], a] (a's subtree): a difference array
    (+x at lo[a], -x after a) and one prefix sum.
    """
    n = x.shape[0]
    idx = jnp.arange(n, dtype=I32)
    d = jnp.zeros((n + 1,), x.dtype).at[lo].add(x).at[idx + 1].add(-x)
    return jnp.cumsum(d)[:n]


def exclusive_cumsum(x):
    """p[k] = x[0] + ... + x[k-1], for k in [0, len(x)] (one longer than x)."""
    return jnp.concatenate([jnp.zeros((1,), x.dtype), jnp.cumsum(x)])


def child_table(parent, child_index, k: int = 3):
    """child[i, j]: the node index of i's j-th child (j < k), or -1."""
    n = parent.shape[0]
    idx = jnp.arange(n, dtype=I32)
    ok = (parent >= 0) & (child_index < k)
    flat = jnp.where(ok, parent * k + child_index, n * k)
    return jnp.full((n * k,), -1, I32).at[flat].set(idx, mode="drop").reshape(n, k)


def tree_fixpoint(step, init, max_rounds: int):
    """Iterate ``x = step(x)`` until it stops changing (bottom-up tree properties whose
    depth is data-dependent); a few rounds per loop test (notes: host sync per test)."""

    def cond(c):
        return c[1] & (c[2] < max_rounds)

    def body(c):
        x, _, k = c
        x = lax.fori_loop(0, 3, lambda _, v: step(v), x)
        y = step(x)
        return y, jnp.any(y != x), k + 4

    return lax.while_loop(cond, body, (init, jnp.bool_(True), jnp.int32(0)))[0]


# -- errors as data ----------------------------------------------------------------------


class Err(NamedTuple):
    """One program's error (code 0: none)."""

    code: object  # Int32[]
    line: object  # Int32[]
    col: object  # Int32[]
    detail: object  # Int32[]


def no_err() -> Err:
    z = jnp.int32(0)
    return Err(z, z, z, z)


class Cand(NamedTuple):
    """Candidate errors, one per node: where ``mask`` holds, an error ``code/detail`` at
    ``line/col``, ordered by ``keys = (rank, sub)``: the node's pre-order rank (source
    order of positions; at equal positions the outer construct first, as the reference
    orders ties by its pre-order walk) and a small tie-break among errors at one node."""

    mask: object  # Bool[N]
    code: int
    detail: object  # int or Int32[N]
    line: object  # Int32[N]
    col: object  # Int32[N]
    keys: tuple  # (Int32[N], int or Int32[N])


def pick(cands: list[Cand]) -> Err:
    """The candidate with the smallest key over all of them (first listed on ties)."""
    return pick_node(cands)[0]


def pick_node(cands: list[Cand]):
    """``pick``, and the node the chosen error is at (-1 when there is none)."""
    best = (jnp.int32(BIG), no_err(), jnp.int32(-1))
    for c in cands:
        n = c.mask.shape[0]
        key = jnp.where(c.mask, c.keys[0] * 64 + c.keys[1], BIG)
        j = jnp.argmin(key).astype(I32)
        k = key[j]
        det = jnp.broadcast_to(jnp.asarray(c.detail, I32), (n,))[j]
        e = Err(jnp.int32(c.code), c.line[j], c.col[j], det)
        take = k < best[0]
        best = (
            jnp.where(take, k, best[0]),
            Err(*(jnp.where(take, x, y) for x, y in zip(e, best[1], strict=True))),
            jnp.where(take, j, best[2]),
        )
    return best[1], best[2]


def first_of(*errs: Err) -> Err:
    """The first error that is set, in the order given (phase precedence)."""
    out = errs[-1]
    for e in reversed(errs[:-1]):
        out = Err(*(jnp.where(e.code != 0, a, b) for a, b in zip(e, out, strict=True)))
    return out


# -- the pass ----------------------------------------------------------------------------


class Scopes(NamedTuple):
    """What resolve_names finds. Per node [N] unless marked; functions are named by
    their def node (the root for the module body) and by their id (0 module, then the
    defs in source order)."""

    lo: object  # Int32[N]  first node of each subtree
    preorder: object  # Int32[N]  pre-order rank (source order of node starts)
    top: object  # Int32[N]  the top-level statement holding each node
    fn: object  # Int32[N]  function id of each node (0: module body)
    fdef: object  # Int32[N]  def node of each node's function (root: module)
    is_fn: object  # Bool[N]  a def node that is a function (or the root)
    fid: object  # Int32[N]  at function nodes: the function id
    child: object  # Int32[N, 3]  first three children
    rep: object  # Int32[N]  NAME/PARAM/CALL: the variable's first definer node, or -1
    slot: object  # Int32[N]  NAME/PARAM: local slot; else -1
    callee: object  # Int32[N]  CALL of a program function: its def node; else -1
    builtin: object  # Int32[N]  CALL of a builtin: B_*; else 0
    loop: object  # Int32[N]  nearest enclosing loop node, or -1
    nparams: object  # Int32[N]  at function nodes
    nvars: object  # Int32[N]  at function nodes: params + locals
    temp: object  # Int32[N]  at function nodes: the hidden temp's slot, or -1
    nlocals: object  # Int32[N]  at function nodes: params + locals + temp
    n_funcs: object  # Int32[]
    err_compile: Err  # CPython's compile()-time SyntaxErrors (phase 1)
    err_literal: Err  # phase 2
    err_names: Err  # phase 3


def resolve_names(ast, limits) -> Scopes:
    del limits  # node-indexed throughout: no limit applies here
    kind, op, value, parent, ci = ast.kind, ast.op, ast.value, ast.parent, ast.child_index
    n = kind.shape[0]
    idx = jnp.arange(n, dtype=I32)
    live = idx < ast.n_nodes
    root = jnp.maximum(ast.n_nodes - 1, 0)
    lo = subtree_lo(parent, ci, ast.n_children)
    depth = sum_over_ancestors(lo, live.astype(I32))
    preorder = jnp.argsort(jnp.where(live, lo * (n + 1) + depth, BIG)).astype(I32)
    preorder = jnp.zeros((n,), I32).at[preorder].set(idx)
    child = child_table(parent, ci)
    pkind = gather(kind, parent, -1)
    pop = gather(op, parent, -1)
    line, col = ast.line, ast.col

    # functions: top-level defs; a second def of a name is not a function (error below)
    is_top = live & (parent == root) & (idx != root)
    top = lax.cummin(jnp.where(is_top, idx, BIG), reverse=True)
    top = jnp.where(idx == root, root, jnp.clip(top, 0, n - 1))
    is_def = is_top & (kind == Node.FUNCTION_DEF)
    # by name: the first def of each name wins (sort by name, then node)
    dkey = jnp.where(is_def, value, BIG)
    sv, si = lax.sort((dkey, idx), num_keys=2)
    first_of_name = jnp.concatenate([jnp.ones((1,), bool), sv[1:] != sv[:-1]])
    dup_sorted = ~first_of_name & (sv != BIG)
    is_dup_def = jnp.zeros((n,), bool).at[si].set(dup_sorted)
    is_fdef = is_def & ~is_dup_def
    fnum = jnp.cumsum(is_fdef.astype(I32))  # id of each function def
    n_funcs = 1 + jnp.sum(is_fdef.astype(I32))
    in_def = is_def[top] & (idx != root) & live
    fdef = jnp.where(in_def, top, root)
    fn = jnp.where(in_def, jnp.where(is_fdef[top], fnum[top], -1), 0)
    is_fn = is_fdef | (idx == root)
    fid = jnp.where(is_fdef, fnum, 0)

    # loops
    is_loop = live & ((kind == Node.WHILE) | (kind == Node.FOR))
    loop = nearest_marked_ancestor(parent, is_loop)
    loop_depth = sum_over_ancestors(lo, is_loop.astype(I32))

    # -- phase 1: what CPython's compile() rejects after parsing -------------------------
    # variables: PARAMs and stored NAMEs define; loads and CALLs look up. Sort by
    # (name, function, definer first, node): each (name, function) group's first
    # element is its first definer if it has one; a name's module group comes first.
    is_param = live & (kind == Node.PARAM)
    is_store = live & (kind == Node.NAME) & (op == Ctx.Store)
    is_load = live & (kind == Node.NAME) & (op == Ctx.Load)
    is_call = live & (kind == Node.CALL)
    is_ref = is_param | is_store | is_load | is_call
    definer = is_param | is_store
    # every def is its own scope, a second def of a name too (fn == -1): CPython checks
    # its parameters for duplicates against each other, not against the module's names
    fkey = jnp.where(is_ref, jnp.where(in_def, fdef + 1, 0), BIG)
    nkey = jnp.where(is_ref, value, BIG)
    sn, sf, sd, si = lax.sort((nkey, fkey, jnp.where(definer, 0, 1), idx), num_keys=4)
    pos = jnp.arange(n, dtype=I32)
    new_grp = jnp.concatenate([jnp.ones((1,), bool), (sn[1:] != sn[:-1]) | (sf[1:] != sf[:-1])])
    new_name = jnp.concatenate([jnp.ones((1,), bool), sn[1:] != sn[:-1]])
    g0 = lax.cummax(jnp.where(new_grp, pos, 0))
    n0 = lax.cummax(jnp.where(new_name, pos, 0))
    rep_sorted = jnp.where((sd[g0] == 0) & (sn != BIG), si[g0], -1)
    mod_def_sorted = (sf[n0] == 0) & (sd[n0] == 0) & (sn != BIG)
    rep = jnp.zeros((n,), I32).at[si].set(rep_sorted)
    rep = jnp.where(is_ref, rep, -1)
    mod_var = jnp.zeros((n,), bool).at[si].set(mod_def_sorted) & is_ref
    is_rep = definer & (rep == idx)
    dup_param = is_param & (rep != idx)
    e_dup = [Cand(dup_param, Code.SYNTAX, Syntax.DUPLICATE_ARGUMENT, line, col, (preorder, 0))]
    bad_return = live & (kind == Node.RETURN) & (fdef == root)
    bad_break = live & (kind == Node.BREAK) & (loop < 0)
    bad_cont = live & (kind == Node.CONTINUE) & (loop < 0)
    bad_nest = is_loop & (loop_depth > MAX_LOOP_NESTING)
    e_order = [
        Cand(bad_return, Code.SYNTAX, Syntax.RETURN_OUTSIDE_FUNCTION, line, col, (preorder, 0)),
        Cand(bad_break, Code.SYNTAX, Syntax.BREAK_OUTSIDE_LOOP, line, col, (preorder, 0)),
        Cand(bad_cont, Code.SYNTAX, Syntax.CONTINUE_OUTSIDE_LOOP, line, col, (preorder, 0)),
        Cand(bad_nest, Code.SYNTAX, Syntax.INVALID, line, col, (preorder, 0)),
    ]
    err_compile = first_of(pick(e_dup), pick(e_order))

    # -- phase 2: 2**31 (stored as -2**31) only as the operand of unary minus -----------
    under_neg = (pkind == Node.UNARYOP) & (pop == UnaryOp.USub)
    is_min_lit = live & (kind == Node.CONSTANT) & (op == ConstKind.INT) & (value == INT_MIN)
    err_literal = pick(
        [Cand(is_min_lit & ~under_neg, Code.LIMIT, Limit.INT_LITERAL, line, col, (preorder, 0))]
    )

    # -- phase 3: names ------------------------------------------------------------------
    # slots: params first (they precede their body in post-order), then other locals
    # in order of first assignment; ranks by prefix sums within each function
    rep_in_def = (is_rep & (fn > 0)).astype(I32)
    rep_in_mod = (is_rep & (fn == 0)).astype(I32)
    c_def, c_mod = exclusive_cumsum(rep_in_def), exclusive_cumsum(rep_in_mod)
    slot_of_rep = jnp.where(fn > 0, c_def[idx] - c_def[lo[fdef]], c_mod[idx])
    slot = jnp.where((rep >= 0) & ~is_call, gather(slot_of_rep, rep, -1), -1)
    nvars = jnp.where(idx == root, c_mod[n], jnp.where(is_fdef, c_def[idx + 1] - c_def[lo], 0))
    nparams = jnp.where(
        is_fdef, jnp.zeros((n,), I32).at[jnp.where(is_param, fdef, n)].add(1, mode="drop"), 0
    )
    is_chain = live & (kind == Node.COMPARE) & (ast.n_children > 3)
    has_chain = jnp.zeros((n,), bool).at[jnp.where(is_chain, fdef, n)].set(True, mode="drop")
    temp = jnp.where(is_fn & has_chain, nvars, -1)
    nlocals = jnp.where(is_fn, nvars + has_chain.astype(I32), 0)

    # callees: the first def of the name
    ckey = jnp.where(is_fdef | is_call | is_load | is_store, value, BIG)
    cv, cd, ci2 = lax.sort((ckey, jnp.where(is_fdef, 0, 1), idx), num_keys=3)
    c0 = lax.cummax(jnp.where(jnp.concatenate([jnp.ones((1,), bool), cv[1:] != cv[:-1]]), pos, 0))
    fn_of_name_sorted = jnp.where((cd[c0] == 0) & (cv != BIG), ci2[c0], -1)
    def_of_name = jnp.zeros((n,), I32).at[ci2].set(fn_of_name_sorted)
    is_fn_name = def_of_name >= 0
    reserved = value < N_RESERVED_NAMES
    local_call = is_call & (rep >= 0)
    call_fn = is_call & ~local_call & is_fn_name
    callee = jnp.where(call_fn, def_of_name, -1)
    is_iter = live & (pkind == Node.FOR) & (ci == 1)
    range_iter = is_iter & is_call & (value == BUILTIN_ID["range"])  # never a local here
    builtin = jnp.select(
        [value == BUILTIN_ID[b] for b in CALLABLE] + [range_iter],
        [1 + BUILTIN_ID[b] for b in CALLABLE] + [B_RANGE],
        B_NONE,
    ).astype(I32)
    builtin = jnp.where(is_call & ~local_call & ~is_fn_name, builtin, B_NONE)

    # errors, ordered by (line, col, the reference's insertion order)
    def_line, def_col = line, col
    # (a) defs: reserved names, second defs; params: reserved names, `x: None`
    e = [
        Cand(
            is_def & reserved,
            Code.UNSUPPORTED,
            Unsupported.BUILTIN,
            def_line,
            def_col,
            (preorder, 0),
        ),
        Cand(
            is_dup_def,
            Code.UNSUPPORTED,
            Unsupported.REDEFINITION,
            def_line,
            def_col,
            (preorder, 1),
        ),
        Cand(
            is_param & reserved,
            Code.UNSUPPORTED,
            Unsupported.BUILTIN,
            line,
            col,
            (preorder, 2),
        ),
    ]
    # `x: None`: at the annotation, the param's last token `None` (4 columns)
    ann_none = is_param & (op == Ann.NONE)
    e.append(
        Cand(
            ann_none,
            Code.UNSUPPORTED,
            Unsupported.ANNOTATION,
            ast.end_line,
            ast.end_col - 4,
            (preorder, 3),
        )  # fmt: skip
    )
    # (b) assignment targets
    is_store = is_store & (fn >= 0)
    e.append(
        Cand(
            is_store & reserved,
            Code.UNSUPPORTED,
            Unsupported.BUILTIN,
            line,
            col,
            (preorder, 0),
        )
    )
    e.append(
        Cand(
            is_store & (fn == 0) & is_fn_name & ~reserved,
            Code.UNSUPPORTED,
            Unsupported.FUNCTION_VALUE,
            line,
            col,
            (preorder, 0),
        )  # fmt: skip
    )
    # (c) loads, calls and for loops, in walk order
    in_fn = fn > 0
    unres = is_load & (rep < 0) & (fn >= 0)
    w4 = (preorder, 5)
    e += [
        Cand(unres & in_fn & mod_var, Code.UNSUPPORTED, Unsupported.GLOBAL_VARIABLE, line, col, w4),
        Cand(
            unres & ~(in_fn & mod_var) & is_fn_name,
            Code.UNSUPPORTED,
            Unsupported.FUNCTION_VALUE,
            line,
            col,
            w4,
        ),
        Cand(
            unres & ~(in_fn & mod_var) & ~is_fn_name & reserved,
            Code.UNSUPPORTED,
            Unsupported.BUILTIN,
            line,
            col,
            w4,
        ),
        Cand(unres & ~(in_fn & mod_var) & ~is_fn_name & ~reserved, Code.NAME, 0, line, col, w4),
    ]
    calls = is_call & (fn >= 0)
    early = call_fn & (fn == 0) & (callee > idx)
    e += [
        Cand(calls & local_call, Code.UNSUPPORTED, Unsupported.CALL_TARGET, line, col, w4),
        Cand(early, Code.NAME, 0, line, col, w4),
        Cand(
            calls & ~local_call & ~is_fn_name & reserved & (builtin == B_NONE) & ~range_iter,
            Code.UNSUPPORTED,
            Unsupported.BUILTIN,
            line,
            col,
            w4,
        ),  # fmt: skip
        Cand(calls & ~local_call & ~is_fn_name & ~reserved, Code.NAME, 0, line, col, w4),
        Cand(
            is_iter & (fn >= 0) & ~range_iter,
            Code.UNSUPPORTED,
            Unsupported.FOR_TARGET,
            line,
            col,
            (preorder, 4),
        ),  # fmt: skip
    ]
    err_names = pick(e)
    return Scopes(
        lo=lo,
        preorder=preorder,
        top=top,
        fn=fn,
        fdef=fdef,
        is_fn=is_fn,
        fid=fid,
        child=child,
        rep=rep,
        slot=slot,
        callee=callee,
        builtin=builtin,
        loop=loop,
        nparams=nparams,
        nvars=nvars,
        temp=temp,
        nlocals=nlocals,
        n_funcs=n_funcs,
        err_compile=err_compile,
        err_literal=err_literal,
        err_names=err_names,
    )
