"""Pass ``emit_code``: bytecode for ONE program (the driver vmaps it), with the reference
compiler's templates instruction for instruction, and its phase-5 limit errors.

How, in parallel (Pareas' scheme, adapted to code whose order is not post-order):

1. Each node owns a few instructions: ``pre`` (before its children's code), ``tail``
   (after them) and ``aft`` (emitted by its parent right after this child's code:
   jumps between children, a BOOLOP's JUMP_IF_*_OR_POP, a chain comparison's middle).
2. A subtree's code size is the sum of ``pre + tail + aft`` over its node range
   ``[lo, i]``: one prefix sum over the nodes.
3. A node's start = (sizes of the code of everything before its subtree in post-order)
   + (the ``pre`` of its ancestors) + (IFEXP's reordering: the test's code goes before
   the body's); the ancestor sums are one difference array and one prefix sum.
4. Functions are laid out one after the other (module body first), so a node's address
   is its function's entry plus its offset inside the function.
5. Every instruction is produced by a rule of the form (nodes, address, op, arg, line),
   the rules that never apply to the same node merged (``rule_groups``: rules keyed by
   the node kind or the parent kind they apply to), and each merged rule scattered into
   the code arrays in turn (they own disjoint addresses): 11 merged rules, never a
   [rules x nodes] array (most of this pass's memory when they were concatenated).
   Jump targets are the start or end addresses of related nodes (the loop of a break,
   the else block).
6. fn_maxstack: the operand depth before each instruction is a prefix sum of stack
   effects along the code (each unconditional JUMP given the effect that makes the sum
   right at the next instruction); its maximum over each function's reachable
   instructions (statements after a return / break / continue in their block are not),
   all per address.

Sequential equivalent: the reference's ``_Emitter`` walk and ``max_stack``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxcc import isa, ops
from jaxcc.arrays import index, max_at, min_at, set_at
from jaxcc.errors import Code, Limit
from jaxcc.isa import Op
from jaxcc.resolve import (
    B_PRINT,
    B_RANGE,
    BIG,
    I32,
    INT_MIN,
    Err,
    builtin_codes,
    exclusive_cumsum,
    gather,
    sum_over_ancestors,
    tree_fixpoint,
)
from jaxcc.syntax import BoolOp, ConstKind, Ctx, Node, UnaryOp
from jaxcc.typecheck import M_BOOL, mask_to_type

# opcode per AST sub-kind (index = BinOp / UnaryOp / CmpOp value), from ops.py; unary +
# emits nothing (its NOP entry is never used: the rule below skips UAdd). NumPy, not jnp:
# a jnp array made at import time inside a trace (a first import from a jitted function)
# would be that trace's tracer
_BINOP_OP = np.array(ops.opcode_table(Node.BINOP), np.int32)
_UNARY_OP = np.array(ops.opcode_table(Node.UNARYOP), np.int32)
_CMP_OP = np.array(ops.opcode_table(Node.CMPOP), np.int32)
# builtins that are one instruction: after their one argument (abs), or between every
# two arguments, a fold (min, max); (builtin code, opcode) in id order
_B_UNARY = tuple(
    (c, ops.BUILTINS[c - 1].opcode)
    for c in builtin_codes(lambda b: b.sem is not None and ops.SEMANTICS[b.opcode].arity == 1)
)
_B_FOLD = tuple(
    (c, ops.BUILTINS[c - 1].opcode)
    for c in builtin_codes(lambda b: b.sem is not None and ops.SEMANTICS[b.opcode].arity == 2)
)


def _fold_opcode(pbuiltin):
    """The fold opcode of the builtin call each node is an argument of (_B_FOLD's)."""
    out = _B_FOLD[-1][1]
    for c, op in reversed(_B_FOLD[:-1]):
        out = jnp.where(pbuiltin == c, op, out)
    return out


def _tbl(t, i):
    return jnp.asarray(t)[jnp.clip(i, 0, t.shape[0] - 1)]


class Code_(NamedTuple):
    program: isa.Program
    err: Err


class _Facts(NamedTuple):
    """Per-node facts that every step of ``emit_code`` reads (all ``[n]`` unless noted)."""

    n: int  # nodes (static)
    idx: object  # node index
    live: object  # a node of this program
    root: object  # () the module node
    kind: object
    op: object
    value: object
    parent: object
    ci: object  # child index
    nch: object  # number of children
    line: object
    lo: object  # first node of the subtree (post-order range [lo, i])
    c0: object  # children 0..2 (-1: none)
    c1: object
    c2: object
    pkind: object  # the parent's kind, number of children, op, line
    pnch: object
    pop: object
    pline: object
    code_node: object  # a node that emits code (inside a function or the module body)
    builtin: object  # builtin code of a CALL, and of the parent
    pbuiltin: object
    is_print: object
    print_stmt: object  # a print(...) whose value is not used
    child_print: object
    is_range: object
    is_user: object  # a call of a user function
    min_lit: object  # the literal 2147483648 under a unary minus
    neg_min: object  # -2147483648 (one LOAD_CONST)
    loop: object  # the innermost loop of a break / continue
    loop_is_for: object
    in_chain: object  # inside a chained comparison (a < b < c)
    n_cmp: object
    is_operand: object  # an operand of a comparison after the first
    k_of: object
    is_minmax_arg: object
    temp: object  # the function's comparison temporary slot

    def K(self, k):
        return self.code_node & (self.kind == k)

    def PK(self, k):
        return self.code_node & (self.pkind == k)


def _facts(ast, sc) -> _Facts:
    kind, op, value, parent = ast.kind, ast.op, ast.value, ast.parent
    ci, nch = ast.child_index, ast.n_children
    n = kind.shape[0]
    idx = jnp.arange(n, dtype=I32)
    live = idx < ast.n_nodes
    root = jnp.maximum(ast.n_nodes - 1, 0)
    c0, c1, c2 = sc.child[:, 0], sc.child[:, 1], sc.child[:, 2]
    pkind = gather(kind, parent, -1)
    pnch = gather(nch, parent, 0)
    pop = gather(op, parent, 0)
    pline = gather(ast.line, parent, 0)
    code_node = live & (sc.fn >= 0)
    K = lambda k: code_node & (kind == k)  # noqa: E731
    PK = lambda k: code_node & (pkind == k)  # noqa: E731
    builtin = sc.builtin
    pbuiltin = gather(builtin, parent, 0)
    is_print = K(Node.CALL) & (builtin == B_PRINT)
    print_stmt = is_print & ((pkind == Node.EXPR_STMT) | (pkind == Node.RETURN))
    child_print = gather(print_stmt, c0, False)
    is_range = K(Node.CALL) & (builtin == B_RANGE)
    is_user = K(Node.CALL) & (sc.callee >= 0)
    min_lit = (
        K(Node.CONSTANT)
        & (op == ConstKind.INT)
        & (value == INT_MIN)
        & (pkind == Node.UNARYOP)
        & (pop == UnaryOp.USub)
    )
    neg_min = K(Node.UNARYOP) & gather(min_lit, c0, False)
    loop = sc.loop
    loop_is_for = gather(kind, loop, 0) == Node.FOR
    in_chain = PK(Node.COMPARE) & (pnch > 3)
    n_cmp = (pnch - 1) // 2
    is_operand = PK(Node.COMPARE) & (kind != Node.CMPOP) & (ci >= 2)
    k_of = ci // 2
    is_minmax_arg = PK(Node.CALL) & ops.is_any(pbuiltin, [c for c, _ in _B_FOLD]) & (ci >= 1)
    temp = gather(sc.temp, sc.fdef, 0)
    return _Facts(
        n, idx, live, root, kind, op, value, parent, ci, nch, ast.line, sc.lo, c0, c1, c2, pkind, pnch, pop, pline, code_node, builtin,
        pbuiltin, is_print, print_stmt, child_print, is_range, is_user, min_lit, neg_min,
        loop, loop_is_for, in_chain, n_cmp, is_operand, k_of, is_minmax_arg, temp,
    )  # fmt: skip


def _counts(f: _Facts):
    """Step 1: how many instructions each node emits before its children (``pre``), after
    them (``tail``) and, for its parent, right after its own code (``aft``)."""
    K, PK, op, nch, ci = f.K, f.PK, f.op, f.nch, f.ci
    pre = jnp.select(
        [
            K(Node.CONSTANT)
            | (K(Node.NAME) & (op == Ctx.Load))
            | K(Node.AUG_ASSIGN)
            | K(Node.CONTINUE),
            K(Node.BREAK),
            K(Node.RETURN) & (nch == 0),
            K(Node.CMPOP) & f.in_chain & (ci >= 3),
            f.is_range & (nch == 1),
        ],
        [1, jnp.where(f.loop_is_for, 2, 1), 2, 1, 1],
        0,
    ).astype(I32)
    tail = jnp.select(
        [
            K(Node.BINOP)
            | (f.is_user | (K(Node.CALL) & ops.is_any(f.builtin, [c for c, _ in _B_UNARY])))
            | K(Node.ASSIGN)
            | K(Node.ASSERT),
            K(Node.UNARYOP),
            f.is_print,
            f.is_range,
            K(Node.AUG_ASSIGN),
            K(Node.RETURN) & (nch > 0),
            K(Node.EXPR_STMT),
            K(Node.WHILE) | K(Node.FOR),
            K(Node.FUNCTION_DEF) | (f.live & (f.idx == f.root)),
        ],
        [
            1,
            jnp.where((op == UnaryOp.UAdd) | f.neg_min, 0, 1),
            nch + 2 + jnp.where(f.print_stmt, 0, 1),
            jnp.where(nch <= 2, 1, 0),
            2,
            jnp.where(f.child_print, 2, 1),
            jnp.where(f.child_print, 0, 1),
            1,
            2,
        ],
        0,
    ).astype(I32)
    aft = jnp.select(
        [
            PK(Node.BOOLOP) & (ci < f.pnch - 1),
            f.is_operand,
            PK(Node.IFEXP) & (ci <= 1),
            f.is_minmax_arg,
            PK(Node.IF) & ((ci == 0) | ((ci == 1) & (f.pnch == 3))),
            PK(Node.WHILE) & (ci == 0),
            PK(Node.FOR) & (ci == 1),
        ],
        [1, jnp.where(f.k_of < f.n_cmp, 4, 1), 1, 1, 1, 1, 2],
        0,
    ).astype(I32)
    return pre, tail, aft


class _Addr(NamedTuple):
    """Where each node's code goes (``_addresses``)."""

    S: object  # the node's first instruction
    TS: object  # its tail's first instruction
    TE: object  # one past its tail
    AS: object  # its ``aft`` instructions (= TE)
    size_incl: object  # its subtree's code size, aft included
    entry_of_def: object  # a FUNCTION_DEF's entry
    n_code: object  # () the program's code length


def _addresses(f: _Facts, sc, pre, tail, aft) -> _Addr:
    """Steps 2-4: subtree sizes and starts in tree order (prefix sums), then the
    functions laid out one after the other, module body first."""
    idx, root, lo, parent, ci, PK = f.idx, f.root, f.lo, f.parent, f.ci, f.PK
    own = jnp.where(f.code_node, pre + tail + aft, 0)
    p_all = exclusive_cumsum(own)
    size_incl = p_all[1:] - index(p_all, lo)
    size_excl = size_incl - aft
    body_sz = gather(size_incl, gather(f.c0, parent, -1), 0)  # IFEXP: the body's code
    test_sz = gather(size_incl, gather(f.c1, parent, -1), 0)
    corr = jnp.where(
        PK(Node.IFEXP) & (ci == 0), test_sz, jnp.where(PK(Node.IFEXP) & (ci == 1), -body_sz, 0)
    )
    anc = sum_over_ancestors(lo, pre + corr) - pre
    start_tree = index(p_all, lo) + anc
    in_fn = sc.fn > 0
    p_def = exclusive_cumsum(jnp.where(in_fn, own, 0))
    # sizes from the prefix sums' last words, not jnp.sums (XLA fused those reductions
    # with this pass's elementwise outputs into slow reduction kernels: docs/benchmarks.md,
    # twenty-fourth run). own is 0 off the code nodes (live, fn >= 0), so the module's
    # code (fn == 0) is the whole less the functions' (fn > 0)
    msize = p_all[-1] - p_def[-1]
    fdef = sc.fdef
    p_def_lo = index(p_def, lo)
    entry_of_def = msize + p_def_lo  # valid at def nodes
    local = jnp.where(in_fn, start_tree - gather(start_tree, fdef, 0), start_tree - p_def_lo)
    S = jnp.where(in_fn, gather(entry_of_def, fdef, 0), 0) + local
    S = jnp.where(idx == root, 0, S)
    TE = S + jnp.where(idx == root, msize, size_excl)
    TS = TE - tail
    n_code = p_all[-1]  # the module's code and every function's, one after the other
    return _Addr(S, TS, TE, TE, size_incl, entry_of_def, n_code)


def _completes(f: _Facts):
    """Which statements can complete normally (``cn``) and which are reachable: the
    statements after a return / break / continue in their block are not (for
    fn_maxstack)."""
    n, live, kind, parent, ci = f.n, f.live, f.kind, f.parent, f.ci
    is_block = live & ((kind == Node.BLOCK) | (f.idx == f.root))
    no_complete = live & ((kind == Node.RETURN) | (kind == Node.BREAK) | (kind == Node.CONTINUE))
    is_if = live & (kind == Node.IF)

    def cn_step(cn):
        # n: past the end, dropped (typecheck.or_into's why)
        bad_child = set_at(
            jnp.zeros((n,), bool), jnp.where(live & ~cn & (parent >= 0), parent, n), True
        )
        if_cn = (f.nch < 3) | gather(cn, f.c1, True) | gather(cn, f.c2, True)
        return ~no_complete & jnp.where(is_if, if_cn, jnp.where(is_block, ~bad_child, True))

    cn = tree_fixpoint(cn_step, ~no_complete, 4 * n + 16)
    first_nc = min_at(  # n: past the end, dropped (typecheck.or_into's why)
        jnp.full((n,), BIG, I32), jnp.where(live & ~cn & (parent >= 0), parent, n), ci
    )
    dead_here = live & gather(is_block, parent, False) & (ci > gather(first_nc, parent, BIG))
    reach = sum_over_ancestors(f.lo, dead_here.astype(I32)) == 0
    return cn, reach


def _rules(f: _Facts, sc, ty, a: _Addr, cn, reach) -> list:
    """Step 5: every instruction as a rule (nodes, address, opcode, argument, line, the
    stack effect a JUMP stands for, reachable), in the reference's templates."""
    n, K, PK, op, nch, ci, line, pline = f.n, f.K, f.PK, f.op, f.nch, f.ci, f.line, f.pline
    c0, c1, c2, parent, loop = f.c0, f.c1, f.c2, f.parent, f.loop
    S, TS, TE, AS = a.S, a.TS, a.TE, a.AS
    rules = []
    # a rule's key: which nodes it can apply to, so that _emit_rules can merge rules that
    # never apply to the same node: ("own", kind[, callee class]) rules apply only to
    # nodes of that kind (and CALLs of that builtin code, -1 a user function, whose
    # masks exclude each other), ("parent", kind) rules only to children of that kind
    own = lambda *k: ("own", *k)  # noqa: E731
    parent_ = lambda k: ("parent", k)  # noqa: E731

    def rule(key, mask, at, opc, arg=0, ln=None, jeff=0, rch=None):
        b = lambda x, t=I32: jnp.broadcast_to(jnp.asarray(x, t), (n,))  # noqa: E731
        rch = reach if rch is None else rch
        rules.append(
            (
                key,
                b(mask & f.code_node, bool),
                b(at),
                b(opc),
                b(arg),
                b(line if ln is None else ln),
                b(jeff),
                b(rch, bool),
            )
        )

    slot0 = gather(sc.slot, c0, 0)
    # leaves
    const_val = jnp.where(op == ConstKind.NONE, 0, f.value)
    rule(
        own(Node.CONSTANT),
        K(Node.CONSTANT),
        S,
        Op.LOAD_CONST,
        const_val,
        ln=jnp.where(f.min_lit, pline, line),
    )
    rule(own(Node.NAME), K(Node.NAME) & (op == Ctx.Load), S, Op.LOAD_VAR, sc.slot)
    # statements
    rule(own(Node.ASSIGN), K(Node.ASSIGN), TS, Op.STORE_VAR, slot0)
    aug = K(Node.AUG_ASSIGN)
    rule(own(Node.AUG_ASSIGN), aug, S, Op.LOAD_VAR, slot0)
    rule(own(Node.AUG_ASSIGN), aug, TS, _tbl(_BINOP_OP, op))
    rule(own(Node.AUG_ASSIGN), aug, TS + 1, Op.STORE_VAR, slot0)
    has_else = nch == 3
    rule(
        own(Node.IF),
        K(Node.IF),
        gather(AS, c0, 0),
        Op.JUMP_IF_FALSE,
        jnp.where(has_else, gather(S, c2, 0), TE),
    )
    rule(
        own(Node.IF),
        K(Node.IF) & has_else,
        gather(AS, c1, 0),
        Op.JUMP,
        TE,
        rch=reach & gather(cn, c1, True),
    )
    rule(own(Node.WHILE), K(Node.WHILE), gather(AS, c0, 0), Op.JUMP_IF_FALSE, TE)
    rule(own(Node.WHILE), K(Node.WHILE), TS, Op.JUMP, S, rch=reach & gather(cn, c1, True))
    head = gather(AS, c1, 0)  # a for loop's FOR_RANGE
    rule(own(Node.FOR), K(Node.FOR), head, Op.FOR_RANGE, TE)
    rule(own(Node.FOR), K(Node.FOR), head + 1, Op.STORE_VAR, slot0)
    rule(own(Node.FOR), K(Node.FOR), TS, Op.JUMP, head, jeff=-3, rch=reach & gather(cn, c2, True))
    rule(own(Node.CALL, B_RANGE), f.is_range & (nch == 1), S, Op.LOAD_CONST, 0)
    rule(own(Node.CALL, B_RANGE), f.is_range & (nch <= 2), TS, Op.LOAD_CONST, 1)
    brk = K(Node.BREAK)
    loop_is_for = f.loop_is_for
    loop_end = gather(TE, loop, 0)
    rule(own(Node.BREAK), brk & loop_is_for, S, Op.POP_N, 3)
    rule(
        own(Node.BREAK),
        brk,
        S + jnp.where(loop_is_for, 1, 0),
        Op.JUMP,
        loop_end,
        jeff=jnp.where(loop_is_for, 3, 0),
    )
    loop_head = jnp.where(loop_is_for, gather(head, loop, 0), gather(S, loop, 0))
    rule(own(Node.CONTINUE), K(Node.CONTINUE), S, Op.JUMP, loop_head)
    ret = K(Node.RETURN)
    child_print = f.child_print
    rule(own(Node.RETURN), ret & (nch == 0), S, Op.LOAD_CONST, 0)
    rule(own(Node.RETURN), ret & (nch == 0), S + 1, Op.RETURN_VALUE)
    rule(own(Node.RETURN), ret & (nch > 0) & child_print, TS, Op.LOAD_CONST, 0)
    rule(own(Node.RETURN), ret & (nch > 0), TE - 1, Op.RETURN_VALUE)
    rule(own(Node.ASSERT), K(Node.ASSERT), TS, Op.ASSERT)
    rule(own(Node.EXPR_STMT), K(Node.EXPR_STMT) & ~child_print, TS, Op.POP_TOP)
    # function ends: LOAD_CONST 0; RETURN_VALUE at the last statement's line
    idx, root, live = f.idx, f.root, f.live
    is_mod_stmt = live & (parent == root) & (idx != root) & (f.kind != Node.FUNCTION_DEF)
    last_mod = jnp.max(jnp.where(is_mod_stmt, idx, -1))
    mod_line = jnp.where(last_mod >= 0, gather(line, last_mod, 1), 1)
    body_last_line = gather(line, gather(c1, idx, -1) - 1, 0)
    # a function's def node, and the root (the module; after a front-end error the last
    # node, of any kind: a key of its own keeps it out of the merged groups)
    ends = ((own(Node.FUNCTION_DEF), K(Node.FUNCTION_DEF) & sc.is_fn & (idx != root)),
            (("root",), live & (idx == root)))  # fmt: skip
    end_line = jnp.where(idx == root, mod_line, body_last_line)
    end_reach = jnp.where(idx == root, cn, gather(cn, c1, True))
    for key, fend in ends:
        rule(key, fend, TS, Op.LOAD_CONST, 0, ln=end_line, rch=end_reach)
        rule(key, fend, TS + 1, Op.RETURN_VALUE, ln=end_line, rch=end_reach)
    # expressions
    rule(own(Node.BINOP), K(Node.BINOP), TS, _tbl(_BINOP_OP, op))
    rule(
        own(Node.UNARYOP),
        K(Node.UNARYOP) & (op != UnaryOp.UAdd) & ~f.neg_min,
        TS,
        _tbl(_UNARY_OP, op),
    )
    boolj = jnp.where(f.pop == BoolOp.And, Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP)
    rule(
        parent_(Node.BOOLOP),
        PK(Node.BOOLOP) & (ci < f.pnch - 1),
        AS,
        boolj,
        gather(TE, parent, 0),
        ln=pline,
    )
    rule(own(Node.CMPOP), K(Node.CMPOP) & f.in_chain & (ci >= 3), S, Op.LOAD_VAR, f.temp, ln=pline)
    cmp_op = _tbl(_CMP_OP, gather(op, f.lo - 1, 0))  # the CMPOP just before this operand
    mid = f.is_operand & (f.k_of < f.n_cmp)
    tmp = f.temp
    rule(parent_(Node.COMPARE), mid, AS, Op.STORE_VAR, tmp, ln=pline)
    rule(parent_(Node.COMPARE), mid, AS + 1, Op.LOAD_VAR, tmp, ln=pline)
    rule(parent_(Node.COMPARE), mid, AS + 2, cmp_op, ln=pline)
    rule(
        parent_(Node.COMPARE), mid, AS + 3, Op.JUMP_IF_FALSE_OR_POP, gather(TE, parent, 0), ln=pline
    )
    rule(parent_(Node.COMPARE), f.is_operand & (f.k_of == f.n_cmp), AS, cmp_op, ln=pline)
    ifx = K(Node.IFEXP)
    rule(own(Node.IFEXP), ifx, gather(AS, c1, 0), Op.JUMP_IF_FALSE, gather(S, c2, 0))
    rule(own(Node.IFEXP), ifx, gather(AS, c0, 0), Op.JUMP, TE, jeff=-1)
    callee_np = gather(sc.nparams, sc.callee, 0)
    rule(
        own(Node.CALL, -1), f.is_user, TS, Op.CALL, gather(sc.fid, sc.callee, 0), jeff=1 - callee_np
    )
    for c, opc in _B_UNARY:
        rule(own(Node.CALL, c), K(Node.CALL) & (f.builtin == c), TS, opc)
    rule(parent_(Node.CALL), f.is_minmax_arg, AS, _fold_opcode(f.pbuiltin), ln=pline)
    print_arg = PK(Node.CALL) & (f.pbuiltin == B_PRINT)
    rule(
        parent_(Node.CALL),
        print_arg,
        gather(TS, parent, 0) + ci,
        jnp.where(ty.t == M_BOOL, Op.PRINT_BOOL, Op.PRINT_INT),
        f.pnch - ci,
        ln=pline,
    )
    is_print = f.is_print
    rule(own(Node.CALL, B_PRINT), is_print, TS + nch, Op.PRINT_NEWLINE)
    rule(own(Node.CALL, B_PRINT), is_print, TS + nch + 1, Op.POP_N, nch)
    rule(own(Node.CALL, B_PRINT), is_print & ~f.print_stmt, TS + nch + 2, Op.LOAD_CONST, 0)
    return rules


def rule_groups(keys: list) -> list[list[int]]:
    """Rules (by index, given their ``_rules`` keys) in groups of rules that never apply
    to the same node: the i-th rule of every ``own`` key in one group, the i-th rule of
    every ``parent`` key in another (an own rule and a parent rule can meet on a node),
    and so on for any other class of keys (``("root",)``)."""
    groups: dict = {}
    seen: dict = {}
    for r, key in enumerate(keys):
        i = seen.get(key, 0)
        seen[key] = i + 1
        groups.setdefault((key[0], i), []).append(r)
    return list(groups.values())


def _merged(rules):
    """The rules of each ``rule_groups`` group merged into one (their masks exclude each
    other, so each node takes its columns from the one rule that applies to it): 11
    scatters of each code array instead of one per rule (about 55)."""
    out = []
    for grp in rule_groups([r[0] for r in rules]):
        cols = [rules[r][1:] for r in grp]
        merged = list(cols[-1])
        for c in reversed(cols[:-1]):
            rest = [jnp.where(c[0], x, y) for x, y in zip(c[1:], merged[1:], strict=True)]
            merged = [c[0] | merged[0], *rest]
        out.append(tuple(merged))
    return out


def _emit_rules(rules, NI: int):
    """Step 5's scatter: each merged rule's instructions (``_merged``) into the code
    arrays, one after the other (the rules own disjoint addresses; concatenating them
    first held [rules x nodes] columns: most of the pass's memory). Returns op, arg, line (Int32[NI]), the stack effect a JUMP / CALL
    stands for, reachable and filled per address (``_max_stack``'s inputs) and the line
    of the first instruction at address NI (the code-length error's line)."""
    # slot NI: the instruction at address NI (there is at most one: addresses are
    # disjoint), whose line the code-length error reports; its line comes out of the
    # same scatter. Every node a rule does not place goes to NI + 1, past the end, and is
    # dropped (a spare slot there had every such node of a lane store to one address).
    # (The line at NI was a max over every rule's nodes: on the GPU, very likely the one
    # reduction kernel that also computed the packed words, 9.3 of emit_code's 18.7 ms
    # per 65,536 small programs on an H100; docs/benchmarks.md, "Kernel by kernel")
    # columns: opcode | reachable << 8 | filled << 9 | jeff << 10, the argument, the line
    # (one scatter of three columns per merged rule, not three)
    code = jnp.zeros((NI + 1, 3), I32)
    for mask, at, opc, arg, ln, jeff, rch in _merged(rules):
        ok = mask & (at >= 0) & (at <= NI)
        tgt = jnp.where(ok, at, NI + 1)
        w = opc | (rch.astype(I32) << 8) | (1 << 9) | (jeff << 10)
        cols = jnp.stack(jnp.broadcast_arrays(w, arg, ln), axis=-1).astype(I32)
        code = set_at(code, tgt, cols)
    line_at_limit = code[NI, 2]
    word, arg_a, line_a = code[:NI, 0], code[:NI, 1], code[:NI, 2]
    return (word & 0xFF, arg_a, line_a, word >> 10, (word & (1 << 8)) != 0,
            (word & (1 << 9)) != 0, line_at_limit)  # fmt: skip


def _max_stack(n: int, op, arg, jeff, rch, filled, entry_node, NI: int):
    """Step 6: each function's deepest operand stack over its reachable instructions
    (the depth before each instruction is a prefix sum of stack effects), per
    function's def node (Int32[n]). Per address: ``op``/``arg``/``jeff``/``rch``/
    ``filled`` from ``_emit_rules``; ``entry_node`` Int32[NI]: the def node + 1 of the
    function entered at each address, 0 elsewhere (functions are laid out one after
    the other, so an instruction is in the last function entered at or before it)."""
    pops = jnp.asarray(isa.decode_tables()["pops"], I32)
    pushes = jnp.asarray(isa.decode_tables()["pushes"], I32)
    fall = _tbl(pushes, op) - _tbl(pops, op)
    fall = jnp.where(op == Op.POP_N, -arg, fall)
    fall = jnp.where(op == Op.CALL, jeff, fall)
    fall = jnp.where(op == Op.JUMP, 0, fall)
    lin = jnp.where(op == Op.JUMP, jeff, fall)
    depth_before = exclusive_cumsum(jnp.where(filled, lin, 0))[:NI]
    on = filled & rch
    peak = jnp.where(on, jnp.maximum(depth_before, depth_before + fall), 0)
    addr = jnp.arange(NI, dtype=I32)
    last_entry = lax.cummax(jnp.where(entry_node > 0, addr, 0))
    fn_node = index(entry_node, last_entry) - 1
    # n: past the end, dropped (typecheck.or_into's why)
    return max_at(jnp.zeros((n,), I32), jnp.where(on & (fn_node >= 0), fn_node, n), peak)


def _limit_errors(f: _Facts, ast, sc, fid, maxstack_node, n_code, line_at_limit, limits):
    """The phase-5 limit errors, the first in the reference's order: functions, locals,
    code length, stack."""
    NI, F = limits.max_code, limits.max_funcs
    fnl = f.live & sc.is_fn
    fline = jnp.where(f.idx == f.root, 1, f.line)
    fcol = jnp.where(f.idx == f.root, 0, ast.col)
    z = jnp.int32(0)

    def at_fn(mask, detail):
        j = jnp.argmin(jnp.where(mask, fid, BIG))
        return Err(
            jnp.where(jnp.any(mask), Code.LIMIT, 0).astype(I32),
            index(fline, j),
            index(fcol, j),
            jnp.int32(detail),
        )

    e_funcs = at_fn(fnl & (fid == F), Limit.FUNCTIONS)
    e_locals = at_fn(fnl & (sc.nlocals > limits.max_locals), Limit.LOCALS)
    e_code = Err(
        jnp.where(n_code > NI, Code.LIMIT, 0).astype(I32), line_at_limit, z, jnp.int32(Limit.CODE)
    )
    e_stack = at_fn(fnl & (sc.nlocals + maxstack_node > limits.max_stack), Limit.STACK)
    err = e_funcs
    for e in (e_locals, e_code, e_stack):
        err = Err(*(jnp.where(err.code != 0, a, b) for a, b in zip(err, e, strict=True)))
    return err


def instruction_rules(ast, sc, ty):
    """Steps 1-5 up to the rules: (``_Facts``, ``_Addr``, the keyed rules of ``_rules``)."""
    f = _facts(ast, sc)
    a = _addresses(f, sc, *_counts(f))
    return f, a, _rules(f, sc, ty, a, *_completes(f))


def emit_code(ast, sc, ty, limits) -> Code_:
    """Bytecode and the phase-5 limit errors of one program, in the steps of the module
    docstring: ``instruction_rules`` (``_facts``, ``_counts`` (1), ``_addresses`` (2-4),
    ``_completes``, ``_rules`` (5)), ``_emit_rules`` (their scatter), ``_max_stack`` (6), the
    function table and ``_limit_errors``."""
    NI, F = limits.max_code, limits.max_funcs
    f, a, rules = instruction_rules(ast, sc, ty)
    code_op, code_arg, code_line, jeff, rch, filled, line_at_limit = _emit_rules(rules, NI)

    # the function table
    idx, root = f.idx, f.root
    fid = jnp.where(idx == root, 0, sc.fid)
    fslot = jnp.where(f.live & sc.is_fn, fid, F)
    entry = jnp.where(idx == root, 0, a.entry_of_def)
    at_entry = jnp.where(f.live & sc.is_fn & (entry >= 0) & (entry < NI), entry, NI)
    entry_node = set_at(jnp.zeros((NI,), I32), at_entry, idx + 1)  # NI: dropped
    maxstack_node = _max_stack(f.n, code_op, code_arg, jeff, rch, filled, entry_node, NI)
    table = lambda x: set_at(jnp.zeros((F,), I32), fslot, x)  # noqa: E731  (F: dropped)
    rettype = jnp.where(idx == root, isa.T_NONE, mask_to_type(ty.ret))
    prog = isa.Program(
        op=code_op,
        arg=code_arg,
        line=code_line,
        n_code=a.n_code.astype(I32),
        fn_entry=table(entry),
        fn_nparams=table(sc.nparams),
        fn_nlocals=table(sc.nlocals),
        fn_maxstack=table(maxstack_node),
        fn_rettype=table(rettype),
        n_funcs=sc.n_funcs.astype(I32),
    )
    err = _limit_errors(f, ast, sc, fid, maxstack_node, a.n_code, line_at_limit, limits)
    return Code_(prog, err)
