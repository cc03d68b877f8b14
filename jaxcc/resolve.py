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
from jaxcc.arrays import BIG, I32, add_at, gather, index, next_pow2, set_at
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
    first = set_at(jnp.full((n,), -1, I32), tgt, idx)
    ptr = jnp.where((n_children > 0) & (first >= 0), first, idx)
    # unrolled: in a rolled loop each round's gather wrote a new array that XLA copied
    # back into the loop's buffer (a copy kernel per round on the GPU)
    return lax.fori_loop(0, _log2(n), lambda _, p: index(p, p), ptr, unroll=True)


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

    ptr = lax.fori_loop(0, _log2(n) + 1, jump, parent, unroll=True)  # subtree_lo's why
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
    # the zeros not added: n + 1 is past the end, dropped (on the GPU, atomic adds to the
    # few nodes that many share as their lo)
    nz = x != 0
    d = jnp.zeros((n + 1,), x.dtype)
    d = add_at(add_at(d, jnp.where(nz, lo, n + 1), x), jnp.where(nz, idx + 1, n + 1), -x)
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
    return set_at(jnp.full((n * k,), -1, I32), flat, idx).reshape(n, k)


def tree_fixpoint(step, init, max_rounds: int):
    """Iterate ``x = step(x)`` until it stops changing (bottom-up tree properties whose
    depth is data-dependent); a few rounds per loop test (notes: host sync per test)."""

    def cond(c):
        return c[1] & (c[2] < max_rounds)

    def body(c):
        x, _, k = c
        # four steps, keeping the last two to compare (unrolled: subtree_lo's why; the
        # middle end 0.5-0.8 ms faster per 65,536 small programs on an H200)
        x, y = lax.fori_loop(0, 4, lambda _, v: (v[1], step(v[1])), (x, x), unroll=True)
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


def _lex_min(a, b):
    """The lexicographically smaller of two (key, candidate, node) triples."""
    a_first = (a[0] < b[0]) | ((a[0] == b[0]) & ((a[1] < b[1]) | ((a[1] == b[1]) & (a[2] < b[2]))))
    return tuple(jnp.where(a_first, x, y) for x, y in zip(a, b, strict=True))


def _tree_min(x):
    """The minimum over the last axis of ``x`` (Int32[..., n], n >= 1), as halving
    elementwise minimums over a power-of-two width padded with ``BIG``. Why not
    ``jnp.min``: XLA fused that row reduction with dozens of the passes' elementwise
    outputs into one multi-output reduction kernel that ran at about a tenth of the
    loop fusions' bandwidth (5.3 ms a call for 65,536 medium programs on an H100);
    as slices and minimums it is a loop fusion (docs/benchmarks.md, twenty-third run)."""
    n = x.shape[-1]
    p = next_pow2(n)
    if p != n:
        x = jnp.concatenate([x, jnp.full(x.shape[:-1] + (p - n,), BIG, x.dtype)], axis=-1)
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = jnp.minimum(x[..., :h], x[..., h:])
    return x[..., 0]


def smallest(cands: list[Cand], packed: bool | str | None = None):
    """(ok, which, j): whether any candidate holds, and the smallest (key, candidate,
    node) triple's candidate and node (``ok`` False: ``which`` and ``j`` are arbitrary).

    One reduction over the nodes, after the elementwise minimum over the candidates.
    Three forms; the default is the first whose packed word fits an int32:

    - ``packed="node"`` (``64 * N * len(cands) * N`` fits): key, candidate and node in
      one word, its minimum by halving (``_tree_min``: no argmin's two-operand reduce,
      no gather after it, no reduction for XLA to fuse the passes' elementwise work
      into; docs/benchmarks.md, "twenty-third run");
    - ``packed=True`` (``64 * N * len(cands)`` fits): ``key * len(cands) + candidate``
      and an argmin;
    - ``packed=False``: the lexicographic minimum of the triples in one ``lax.reduce``.

    Why one reduction: a min, a second min and an argmax in sequence each recomputed
    every candidate's key, three kernels of about 1.2 ms each in resolve_names for
    65,536 small programs on an H200; the three-operand reduce everywhere made
    infer_types, whose keys are cheap, 0.2-0.4 ms slower (docs/benchmarks.md, "GPU
    results, thirteenth run")."""
    nc, n = len(cands), cands[0].mask.shape[0]
    if packed is None:
        packed = "node" if 64 * n * nc * n < BIG else 64 * n * nc < BIG
    if packed:
        node = jnp.arange(n, dtype=I32) if packed == "node" else None
        best = None
        for i, c in enumerate(cands):
            word = (c.keys[0] * 64 + c.keys[1]) * nc + i
            key = jnp.where(c.mask, word if node is None else word * n + node, BIG)
            best = key if best is None else jnp.minimum(best, key)
        if node is not None:
            kw = _tree_min(best)
            return kw < BIG, (kw // n) % nc, kw % n
        j = jnp.argmin(best).astype(I32)
        kw = best[j]
        return kw < BIG, kw % nc, j
    best = w = None
    for i, c in enumerate(cands):
        key = jnp.where(c.mask, c.keys[0] * 64 + c.keys[1], BIG)
        if best is None:
            best, w = key, jnp.zeros(key.shape, I32)
        else:
            less = key < best
            best, w = jnp.where(less, key, best), jnp.where(less, i, w)
    k, which, j = lax.reduce(
        (best, w, jnp.arange(n, dtype=I32)),
        (jnp.int32(BIG), jnp.int32(nc), jnp.int32(BIG)),
        _lex_min,
        (0,),
    )
    return k < BIG, which, j


def pick_node(cands: list[Cand]):
    """``pick``, and the node the chosen error is at (-1 when there is none): the
    smallest (key, candidate, node) (``smallest``), the same choice as one argmin per
    candidate, and no [candidates, N] array."""
    ok, which, j = smallest(cands)

    def choose(vals):
        """vals[which] (0 when there is no error): one int or Int32[N] per candidate,
        each distinct array read once, at node j."""
        seen: dict[int, object] = {}
        col = []
        for v in vals:
            if id(v) not in seen:
                x = jnp.asarray(v, I32)
                seen[id(v)] = x if x.ndim == 0 else x[j]
            col.append(seen[id(v)])
        x = col[0] if len(col) == 1 else jnp.stack(col)[which]
        return jnp.where(ok, x, 0)

    # Cand fields code, line, col, detail
    err = Err(*(choose([c[f] for c in cands]) for f in (1, 3, 4, 2)))
    return err, jnp.where(ok, j, -1)


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


class _Tree(NamedTuple):
    """Per-node facts of the flat AST that every step of ``resolve_names`` reads (all
    ``[n]`` unless noted)."""

    n: int  # nodes (static)
    idx: object  # node index
    live: object  # a node of this program
    root: object  # () the module node
    kind: object
    op: object
    value: object  # names: the name's id; CONSTANT: its value
    parent: object
    ci: object  # child index
    nch: object  # number of children
    line: object
    col: object
    end_line: object
    end_col: object
    lo: object  # first node of the subtree (post-order range [lo, i])
    preorder: object  # pre-order rank (source order of node starts)
    child: object  # Int32[n, 3]  first three children
    pkind: object  # the parent's kind and op
    pop: object


def _tree(ast) -> _Tree:
    """The layout: subtree ranges, pre-order ranks (nodes sorted by (lo, depth)), the
    child table, the parents' kind and op."""
    kind, op, value, parent, ci = ast.kind, ast.op, ast.value, ast.parent, ast.child_index
    n = kind.shape[0]
    idx = jnp.arange(n, dtype=I32)
    live = idx < ast.n_nodes
    root = jnp.maximum(ast.n_nodes - 1, 0)
    lo = subtree_lo(parent, ci, ast.n_children)
    depth = sum_over_ancestors(lo, live.astype(I32))
    preorder = jnp.argsort(jnp.where(live, lo * (n + 1) + depth, BIG)).astype(I32)
    preorder = set_at(jnp.zeros((n,), I32), preorder, idx)
    child = child_table(parent, ci)
    pkind = gather(kind, parent, -1)
    pop = gather(op, parent, -1)
    return _Tree(
        n, idx, live, root, kind, op, value, parent, ci, ast.n_children, ast.line, ast.col,
        ast.end_line, ast.end_col, lo, preorder, child, pkind, pop,
    )  # fmt: skip


class _Funcs(NamedTuple):
    """Which function each node is in (``_functions``)."""

    top: object  # the top-level statement holding each node (the root: itself)
    is_def: object  # a top-level def
    is_dup_def: object  # ... that is a second def of its name (an error, no function)
    is_fdef: object  # ... that is a function (the first def of its name)
    n_funcs: object  # () functions, the module body included
    in_def: object  # inside a top-level def, the def itself included
    fdef: object  # def node of each node's function (root: module)
    fn: object  # function id of each node (0: module body, -1: inside a second def)
    is_fn: object  # a function's def node, or the root
    fid: object  # at function nodes: the function id


def _functions(t: _Tree) -> _Funcs:
    """Functions: the top-level defs in source order; of several defs of a name the
    first wins (the reference's loop over ``tree.body`` that fills ``by_name``), found by
    sorting the defs by (name, node)."""
    n, idx, live, root = t.n, t.idx, t.live, t.root
    is_top = live & (t.parent == root) & (idx != root)
    top = lax.cummin(jnp.where(is_top, idx, BIG), reverse=True)
    top = jnp.where(idx == root, root, jnp.clip(top, 0, n - 1))
    is_def = is_top & (t.kind == Node.FUNCTION_DEF)
    dkey = jnp.where(is_def, t.value, BIG)
    sv, si = lax.sort((dkey, idx), num_keys=2)
    first_of_name = jnp.concatenate([jnp.ones((1,), bool), sv[1:] != sv[:-1]])
    dup_sorted = ~first_of_name & (sv != BIG)
    is_dup_def = set_at(jnp.zeros((n,), bool), si, dup_sorted)
    is_fdef = is_def & ~is_dup_def
    fnum = jnp.cumsum(is_fdef.astype(I32))  # id of each function def
    # the count from the prefix sum, not a jnp.sum: XLA fused that reduction with the
    # pass's elementwise outputs into a slow reduction kernel (docs/benchmarks.md,
    # twenty-fourth run)
    n_funcs = 1 + fnum[-1]
    # jnp's batched gathers: arrays.index here made resolve_names 8.7 -> 10.5 ms per
    # 65,536 small programs on an H100 (docs/benchmarks.md, seventh run)
    in_def = is_def[top] & (idx != root) & live
    fdef = jnp.where(in_def, top, root)
    fn = jnp.where(in_def, jnp.where(is_fdef[top], fnum[top], -1), 0)
    is_fn = is_fdef | (idx == root)
    fid = jnp.where(is_fdef, fnum, 0)
    return _Funcs(top, is_def, is_dup_def, is_fdef, n_funcs, in_def, fdef, fn, is_fn, fid)


def _loops(t: _Tree):
    """Loops: (is_loop, each node's innermost enclosing loop or -1 (for break and
    continue), how many loops enclose each node (CPython's static block limit))."""
    is_loop = t.live & ((t.kind == Node.WHILE) | (t.kind == Node.FOR))
    loop = nearest_marked_ancestor(t.parent, is_loop)
    loop_depth = sum_over_ancestors(t.lo, is_loop.astype(I32))
    return is_loop, loop, loop_depth


class _Vars(NamedTuple):
    """Names and the variables they are (``_variables``)."""

    is_param: object
    is_store: object  # a stored NAME
    is_load: object  # a loaded NAME
    is_call: object
    pos: object  # 0..n-1: positions in a sorted order
    rep: object  # NAME/PARAM/CALL: its name's first definer in its function, or -1
    mod_var: object  # NAME/PARAM/CALL: its name is a module-level variable
    is_rep: object  # a variable's first definer


def _variables(t: _Tree, fu: _Funcs) -> _Vars:
    """Variables: PARAMs and stored NAMEs define; loads and CALLs look up. Sort by
    (name, function, definer first, node): each (name, function) group's first element
    is its first definer if it has one; a name's module group comes first. (The
    reference's ``f.slots`` per function and ``module_vars``.)"""
    n, idx, live, kind, op = t.n, t.idx, t.live, t.kind, t.op
    is_param = live & (kind == Node.PARAM)
    is_store = live & (kind == Node.NAME) & (op == Ctx.Store)
    is_load = live & (kind == Node.NAME) & (op == Ctx.Load)
    is_call = live & (kind == Node.CALL)
    is_ref = is_param | is_store | is_load | is_call
    definer = is_param | is_store
    # every def is its own scope, a second def of a name too (fn == -1): CPython checks
    # its parameters for duplicates against each other, not against the module's names
    fkey = jnp.where(is_ref, jnp.where(fu.in_def, fu.fdef + 1, 0), BIG)
    nkey = jnp.where(is_ref, t.value, BIG)
    sn, sf, sd, si = lax.sort((nkey, fkey, jnp.where(definer, 0, 1), idx), num_keys=4)
    pos = jnp.arange(n, dtype=I32)
    new_grp = jnp.concatenate([jnp.ones((1,), bool), (sn[1:] != sn[:-1]) | (sf[1:] != sf[:-1])])
    new_name = jnp.concatenate([jnp.ones((1,), bool), sn[1:] != sn[:-1]])
    g0 = lax.cummax(jnp.where(new_grp, pos, 0))
    n0 = lax.cummax(jnp.where(new_name, pos, 0))
    rep_sorted = jnp.where((sd[g0] == 0) & (sn != BIG), si[g0], -1)
    mod_def_sorted = (sf[n0] == 0) & (sd[n0] == 0) & (sn != BIG)
    rep = set_at(jnp.zeros((n,), I32), si, rep_sorted)
    rep = jnp.where(is_ref, rep, -1)
    mod_var = set_at(jnp.zeros((n,), bool), si, mod_def_sorted) & is_ref
    is_rep = definer & (rep == idx)
    return _Vars(is_param, is_store, is_load, is_call, pos, rep, mod_var, is_rep)


def _compile_errors(t: _Tree, fu: _Funcs, v: _Vars, is_loop, loop, loop_depth) -> Err:
    """Phase 1: what CPython's compile() rejects after parsing (the reference runs it):
    a duplicate parameter first, then return / break / continue outside their construct
    and too deeply nested loops, in source order."""
    line, col, preorder = t.line, t.col, t.preorder
    dup_param = v.is_param & (v.rep != t.idx)
    e_dup = [Cand(dup_param, Code.SYNTAX, Syntax.DUPLICATE_ARGUMENT, line, col, (preorder, 0))]
    bad_return = t.live & (t.kind == Node.RETURN) & (fu.fdef == t.root)
    bad_break = t.live & (t.kind == Node.BREAK) & (loop < 0)
    bad_cont = t.live & (t.kind == Node.CONTINUE) & (loop < 0)
    bad_nest = is_loop & (loop_depth > MAX_LOOP_NESTING)
    e_order = [
        Cand(bad_return, Code.SYNTAX, Syntax.RETURN_OUTSIDE_FUNCTION, line, col, (preorder, 0)),
        Cand(bad_break, Code.SYNTAX, Syntax.BREAK_OUTSIDE_LOOP, line, col, (preorder, 0)),
        Cand(bad_cont, Code.SYNTAX, Syntax.CONTINUE_OUTSIDE_LOOP, line, col, (preorder, 0)),
        Cand(bad_nest, Code.SYNTAX, Syntax.INVALID, line, col, (preorder, 0)),
    ]
    return first_of(pick(e_dup), pick(e_order))


def _literal_error(t: _Tree) -> Err:
    """Phase 2 (the reference's ``check_literals``): 2**31 (stored as -2**31) only as the
    operand of unary minus."""
    under_neg = (t.pkind == Node.UNARYOP) & (t.pop == UnaryOp.USub)
    is_min_lit = t.live & (t.kind == Node.CONSTANT) & (t.op == ConstKind.INT)
    is_min_lit = is_min_lit & (t.value == INT_MIN)
    bad = is_min_lit & ~under_neg
    return pick([Cand(bad, Code.LIMIT, Limit.INT_LITERAL, t.line, t.col, (t.preorder, 0))])


class _Slots(NamedTuple):
    """Local slots and frame sizes (``_slots``)."""

    slot: object  # NAME/PARAM: local slot; else -1
    nvars: object  # at function nodes: params + locals
    nparams: object  # at function nodes
    temp: object  # at function nodes: the hidden temp's slot, or -1
    nlocals: object  # at function nodes: params + locals + temp


def _slots(t: _Tree, fu: _Funcs, v: _Vars) -> _Slots:
    """Phase 3's slots: params first (they precede their body in post-order), then the
    other locals in order of first assignment, ranked by prefix sums within each
    function; a function with a chained comparison gets a hidden temp after them (the
    reference's ``f.slots``, ``f.local_names`` and ``f.temp``)."""
    n, idx, root, lo, fn, fdef = t.n, t.idx, t.root, t.lo, fu.fn, fu.fdef
    rep_in_def = (v.is_rep & (fn > 0)).astype(I32)
    rep_in_mod = (v.is_rep & (fn == 0)).astype(I32)
    c_def, c_mod = exclusive_cumsum(rep_in_def), exclusive_cumsum(rep_in_mod)
    slot_of_rep = jnp.where(fn > 0, c_def[idx] - c_def[lo[fdef]], c_mod[idx])
    slot = jnp.where((v.rep >= 0) & ~v.is_call, gather(slot_of_rep, v.rep, -1), -1)
    nvars = jnp.where(idx == root, c_mod[n], jnp.where(fu.is_fdef, c_def[idx + 1] - c_def[lo], 0))
    n_params = add_at(jnp.zeros((n,), I32), jnp.where(v.is_param, fdef, n), 1)
    nparams = jnp.where(fu.is_fdef, n_params, 0)
    is_chain = t.live & (t.kind == Node.COMPARE) & (t.nch > 3)
    has_chain = set_at(jnp.zeros((n,), bool), jnp.where(is_chain, fdef, n), True)
    temp = jnp.where(fu.is_fn & has_chain, nvars, -1)
    nlocals = jnp.where(fu.is_fn, nvars + has_chain.astype(I32), 0)
    return _Slots(slot, nvars, nparams, temp, nlocals)


class _Calls(NamedTuple):
    """What each name refers to beyond variables (``_callees``)."""

    is_fn_name: object  # names: a function of the program has this name
    reserved: object  # names: a reserved name (builtins, int, bool, ...)
    local_call: object  # a CALL of a variable
    call_fn: object  # a CALL of a program function
    callee: object  # ... its def node; else -1
    is_iter: object  # a for loop's iterable
    range_iter: object  # ... that is a call of range
    builtin: object  # a CALL of a builtin: B_*; else 0


def _callees(t: _Tree, fu: _Funcs, v: _Vars) -> _Calls:
    """Callees (the reference's ``_resolve_call``): a variable of the caller's, else the
    first def of the name (sort by (name, def first, node)), else a builtin; range only
    as the iterable of a for."""
    n, idx, value, pos = t.n, t.idx, t.value, v.pos
    ckey = jnp.where(fu.is_fdef | v.is_call | v.is_load | v.is_store, value, BIG)
    cv, cd, ci2 = lax.sort((ckey, jnp.where(fu.is_fdef, 0, 1), idx), num_keys=3)
    c0 = lax.cummax(jnp.where(jnp.concatenate([jnp.ones((1,), bool), cv[1:] != cv[:-1]]), pos, 0))
    fn_of_name_sorted = jnp.where((cd[c0] == 0) & (cv != BIG), ci2[c0], -1)
    def_of_name = set_at(jnp.zeros((n,), I32), ci2, fn_of_name_sorted)
    is_fn_name = def_of_name >= 0
    reserved = value < N_RESERVED_NAMES
    local_call = v.is_call & (v.rep >= 0)
    call_fn = v.is_call & ~local_call & is_fn_name
    callee = jnp.where(call_fn, def_of_name, -1)
    is_iter = t.live & (t.pkind == Node.FOR) & (t.ci == 1)
    range_iter = is_iter & v.is_call & (value == BUILTIN_ID["range"])  # never a local here
    builtin = jnp.select(
        [value == BUILTIN_ID[b] for b in CALLABLE] + [range_iter],
        [1 + BUILTIN_ID[b] for b in CALLABLE] + [B_RANGE],
        B_NONE,
    ).astype(I32)
    builtin = jnp.where(v.is_call & ~local_call & ~is_fn_name, builtin, B_NONE)
    return _Calls(is_fn_name, reserved, local_call, call_fn, callee, is_iter, range_iter, builtin)


def _def_errors(t: _Tree, fu: _Funcs, v: _Vars, c: _Calls) -> list:
    """Name errors (a), the reference's loop over the defs: defs of reserved names,
    second defs; params of reserved names, `x: None`."""
    line, col, preorder = t.line, t.col, t.preorder
    U = Unsupported
    e = [
        Cand(fu.is_def & c.reserved, Code.UNSUPPORTED, U.BUILTIN, line, col, (preorder, 0)),
        Cand(fu.is_dup_def, Code.UNSUPPORTED, U.REDEFINITION, line, col, (preorder, 1)),
        Cand(v.is_param & c.reserved, Code.UNSUPPORTED, U.BUILTIN, line, col, (preorder, 2)),
    ]
    # `x: None`: at the annotation, the param's last token `None` (4 columns)
    ann_none = v.is_param & (t.op == Ann.NONE)
    at_ann = (t.end_line, t.end_col - 4)
    e.append(Cand(ann_none, Code.UNSUPPORTED, U.ANNOTATION, *at_ann, (preorder, 3)))
    return e


def _target_errors(t: _Tree, fu: _Funcs, v: _Vars, c: _Calls) -> list:
    """Name errors (b), the reference's locals loop: assignments to reserved names and,
    at module level, to a function's name."""
    line, col, w = t.line, t.col, (t.preorder, 0)
    is_store = v.is_store & (fu.fn >= 0)
    builtin = is_store & c.reserved
    fn_value = is_store & (fu.fn == 0) & c.is_fn_name & ~c.reserved
    return [
        Cand(builtin, Code.UNSUPPORTED, Unsupported.BUILTIN, line, col, w),
        Cand(fn_value, Code.UNSUPPORTED, Unsupported.FUNCTION_VALUE, line, col, w),
    ]


def _load_errors(t: _Tree, fu: _Funcs, v: _Vars, c: _Calls) -> list:
    """Name errors (c), loads (the reference's ``_resolve_load``): a name that is no
    variable of its function is a module variable read in a function, a function, a
    builtin, or undefined."""
    line, col, w, U = t.line, t.col, (t.preorder, 5), Unsupported
    in_fn = fu.fn > 0
    unres = v.is_load & (v.rep < 0) & (fu.fn >= 0)
    glob = unres & in_fn & v.mod_var
    fn_value = unres & ~(in_fn & v.mod_var) & c.is_fn_name
    builtin = unres & ~(in_fn & v.mod_var) & ~c.is_fn_name & c.reserved
    undefined = unres & ~(in_fn & v.mod_var) & ~c.is_fn_name & ~c.reserved
    return [
        Cand(glob, Code.UNSUPPORTED, U.GLOBAL_VARIABLE, line, col, w),
        Cand(fn_value, Code.UNSUPPORTED, U.FUNCTION_VALUE, line, col, w),
        Cand(builtin, Code.UNSUPPORTED, U.BUILTIN, line, col, w),
        Cand(undefined, Code.NAME, 0, line, col, w),
    ]


def _call_errors(t: _Tree, fu: _Funcs, v: _Vars, c: _Calls) -> list:
    """Name errors (c), calls (the reference's ``_resolve_call``: a variable called, a
    module-level call before its def, an unsupported builtin, an undefined name) and
    for loops that are not ``for NAME in range(...)``."""
    line, col, w, U = t.line, t.col, (t.preorder, 5), Unsupported
    calls = v.is_call & (fu.fn >= 0)
    early = c.call_fn & (fu.fn == 0) & (c.callee > t.idx)
    local = calls & c.local_call
    builtin = calls & ~c.local_call & ~c.is_fn_name & c.reserved
    builtin = builtin & (c.builtin == B_NONE) & ~c.range_iter
    undefined = calls & ~c.local_call & ~c.is_fn_name & ~c.reserved
    bad_for = c.is_iter & (fu.fn >= 0) & ~c.range_iter
    return [
        Cand(local, Code.UNSUPPORTED, U.CALL_TARGET, line, col, w),
        Cand(early, Code.NAME, 0, line, col, w),
        Cand(builtin, Code.UNSUPPORTED, U.BUILTIN, line, col, w),
        Cand(undefined, Code.NAME, 0, line, col, w),
        Cand(bad_for, Code.UNSUPPORTED, U.FOR_TARGET, line, col, (t.preorder, 4)),
    ]


def resolve_names(ast, limits) -> Scopes:
    """Scopes and the errors of phases 1-3 of one program: ``_tree``, ``_functions``,
    ``_loops``, ``_variables``, phase 1 (``_compile_errors``), phase 2
    (``_literal_error``), phase 3 (``_slots``, ``_callees``, then the name errors)."""
    del limits  # node-indexed throughout: no limit applies here
    t = _tree(ast)
    fu = _functions(t)
    is_loop, loop, loop_depth = _loops(t)
    v = _variables(t, fu)
    err_compile = _compile_errors(t, fu, v, is_loop, loop, loop_depth)
    err_literal = _literal_error(t)
    s = _slots(t, fu, v)
    c = _callees(t, fu, v)
    # name errors, ordered by (line, col, the reference's insertion order)
    e = _def_errors(t, fu, v, c) + _target_errors(t, fu, v, c)
    e += _load_errors(t, fu, v, c) + _call_errors(t, fu, v, c)
    return Scopes(
        lo=t.lo,
        preorder=t.preorder,
        top=fu.top,
        fn=fu.fn,
        fdef=fu.fdef,
        is_fn=fu.is_fn,
        fid=fu.fid,
        child=t.child,
        rep=v.rep,
        slot=s.slot,
        callee=c.callee,
        builtin=c.builtin,
        loop=loop,
        nparams=s.nparams,
        nvars=s.nvars,
        temp=s.temp,
        nlocals=s.nlocals,
        n_funcs=fu.n_funcs,
        err_compile=err_compile,
        err_literal=err_literal,
        err_names=pick(e),
    )
