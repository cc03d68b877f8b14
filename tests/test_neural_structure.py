"""The decoding mask's structural rules (docs/neural.md section 3), checked against the
labeller's sequences and CPython's ``ast`` and ``tokenize``:

* ``Src.block_end`` and ``Src.stmt_end`` (from the tokens' layout) against the line
  extents of ``ast.If``, ``ast.While`` and ``ast.For``; ``Src.code_lines`` against the
  lines where ``ast`` nodes start and the lines ``tokenize`` finds no code on;
  ``Src.cond_lines`` and ``Src.multi_lines`` against ``tokenize``'s logical lines;
* the typed mask fixes each value print's depth and the ``POP_N`` after a print call's
  ``PRINT_NEWLINE`` (one allowed token where the labeller writes them, several without
  the front end's items);
* loop exits nest: while an inner loop's exit is pending, no outer loop's exit may be
  defined (the slip that made ``examples/gcd.py`` wrong);
* while a label that ends a statement is pending (a for loop's exit; an if's or while's
  jump past its body; an if's jump past its elif and else parts), the typed mask allows
  only line markers of that statement's lines, and never a line without code; between
  statements lines go forward (or back to the header of a body around them);
* a def's return type in the declarations is the front end's (``inputs.typing``);
* an expression statement's ``POP_TOP`` only on its logical line's lines
  (``Src.expr_lines``, checked against ``ast.Expr``); a return or an assert at most one
  value above the depth where the last new line was marked (or the statement depth);
  a body's implicit return only once its last statement's line is marked
  (``Src.body_last``, checked against ``ast``);
* conditional jumps go forward, and the label past a header's body is a new one or one
  whose statement ends with that body (the labeller's one name for both); ``return``, ``assert`` and an expression statement's pop
  take a value above the open loops' ranges, and a store just above them names a variable;
  inside ``and`` / ``or`` no statement-only op.

Every rule is checked at every place the labeller's sequences exercise it, and the test
counts the places, so a rule that never applies fails it.
"""

from __future__ import annotations

import ast
import collections
import glob
import io
import tokenize

import jax
import jax.numpy as jnp
import numpy as np

from jaxcc import isa, lexer
from jaxcc.neural import corpus
from jaxcc.neural import grammar as G
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import context, masks
from jaxcc.neural.inputs import source_features, typing
from jaxcc.neural.train import TRAIN_LIMITS

NL, NV = TRAIN_LIMITS, V.NEURAL_DEFAULT
PRINT_VALUE = {V.op_tok(isa.Op.PRINT_INT), V.op_tok(isa.Op.PRINT_BOOL)}
PRINT_NEWLINE, POP_N = V.op_tok(isa.Op.PRINT_NEWLINE), V.op_tok(isa.Op.POP_N)
FOR_RANGE = V.op_tok(isa.Op.FOR_RANGE)
POP_TOP = V.op_tok(isa.Op.POP_TOP)
RETURN, ASSERT = V.op_tok(isa.Op.RETURN_VALUE), V.op_tok(isa.Op.ASSERT)
LOAD_CONST = V.op_tok(isa.Op.LOAD_CONST)


def _sources() -> list[str]:
    srcs = [open(f).read() for f in sorted(glob.glob("examples/*.py"))]
    for level in (1, 3, 4):
        srcs += corpus.generate(corpus.HELDOUT_SEEDS[0] + 4242 + level, 10, level, split="heldout")
    # examples/syntax_error.py is not a program; some generated ones are over the limits
    return [s for s in srcs if _parses(s) and corpus.label(s, NL, NV).tokens is not None]


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _features(srcs):
    src, length = lexer.encode(srcs, NL)
    tokens, lex_error = jax.jit(lexer.lex, static_argnames="limits")(src, length, NL)
    pt, rt = jax.jit(typing, static_argnames="limits")(tokens, NL, lex_error)
    return source_features(tokens, NV), (pt, rt)


def _node_lines(nodes, with_pass: bool = False) -> list[int]:
    """Lines where a node starts (a ``pass`` only ``with_pass``: it makes no code)."""
    return [n.lineno for x in nodes for n in ast.walk(x)
            if hasattr(n, "lineno") and (with_pass or not isinstance(n, ast.Pass))]  # fmt: skip


def _extents(source: str) -> dict[int, tuple[int, int]]:
    """For each if / elif / while / for statement's line: (the last line of its header and
    body where a node starts, the same through its elif and else parts) (CPython's ast)."""
    out = {}
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, (ast.If, ast.While, ast.For)):
            head = [n.target, n.iter] if isinstance(n, ast.For) else [n.test]
            body = max([n.lineno] + _node_lines(head + n.body))
            out[n.lineno] = (body, max(_node_lines([n])) if isinstance(n, ast.If) else body)
    return out


def _no_code_lines(source: str) -> set[int]:
    """Lines where tokenize finds nothing but comments and layout."""
    code = {t.start[0] for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE,
                              tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)}  # fmt: skip
    return set(range(1, len(source.splitlines()) + 1)) - code


def _logical_lines(source: str) -> tuple[set[int], set[int]]:
    """(first lines of logical lines with a conditional expression, lines with a ``;`` or a
    ``:`` outside brackets followed by code) (CPython's tokenize)."""
    cond, multi = set(), set()
    first, depth, prev, prev_depth = None, 0, None, 0
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
            continue
        if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER):  # a ':' ending its line: none
            first, prev = None, None
            continue
        if prev is not None and prev.string == ":" and prev_depth == 0:
            multi.add(prev.start[0])
        if t.string == ";":
            multi.add(t.start[0])
        if first is None:
            first = t.start[0]
        elif t.type == tokenize.NAME and t.string == "if":
            cond.add(first)
        prev_depth = depth
        depth += (t.string == "(") - (t.string == ")")
        prev = t
    return cond, multi


def _expr_lines(source: str) -> set[int]:
    """The lines (with a token) of each logical line where an expression statement other
    than a ``print`` call starts (CPython's ast and tokenize)."""
    starts = {n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Expr)
              and not (isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                       and n.value.func.id == "print")}  # fmt: skip
    out: set[int] = set()
    here: set[int] = set()
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            out |= here if here & starts else set()
            here = set()
        elif t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
            here.add(t.start[0])
    return out


def _body_last(source: str) -> dict[int, int]:
    """For each line with a token: the first line of the last statement with code (not
    ``pass``) of its body, the module's or a def's (CPython's ast and tokenize)."""
    tree = ast.parse(source)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]

    def last(nodes):
        return max([n.lineno for x in nodes for n in ast.walk(x)
                    if isinstance(n, ast.stmt) and not isinstance(n, (ast.Pass, ast.FunctionDef))]
                   or [0])  # fmt: skip

    module = last([n for n in tree.body if not isinstance(n, ast.FunctionDef)])
    out = {}
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                      tokenize.DEDENT, tokenize.ENDMARKER):  # fmt: skip
            continue
        ln = t.start[0]
        own = [f for f in defs if f.lineno <= ln <= f.end_lineno]
        out[ln] = last(own[0].body) if own else module
    return out


def test_blocks_and_code_lines_match_the_ast():
    srcs = _sources()
    feats, _ = _features(srcs)
    be, se, cl = (np.asarray(x) for x in (feats.block_end, feats.stmt_end, feats.code_lines))
    cd, ml = np.asarray(feats.cond_lines), np.asarray(feats.multi_lines)
    ex, bl = np.asarray(feats.expr_lines), np.asarray(feats.body_last)
    seen = collections.Counter()
    for j, s in enumerate(srcs):
        want_bl = np.zeros(V.N_LINES + 1, np.int32)
        for line, v in _body_last(s).items():
            want_bl[line] = v
        np.testing.assert_array_equal(bl[j], want_bl, err_msg=s)
        seen["body_last"] += int((want_bl > 0).sum())
        want_ex = _expr_lines(s)
        np.testing.assert_array_equal(np.flatnonzero(ex[j]), sorted(want_ex), err_msg=s)
        seen["expr"] += len(want_ex)
        cond, multi = _logical_lines(s)
        np.testing.assert_array_equal(np.flatnonzero(cd[j]), sorted(cond), err_msg=s)
        np.testing.assert_array_equal(np.flatnonzero(ml[j]), sorted(multi), err_msg=s)
        seen["cond"] += len(cond)
        seen["multi"] += len(multi)
        ext = _extents(s)
        for line in range(1, V.N_LINES + 1):
            want = ext.get(line, (0, 0))
            assert (be[j, line], se[j, line]) == want, (s, line, want)
            seen["ifs" if want[1] > want[0] else "blocks"] += want[0] > 0
        for line in _node_lines(ast.parse(s).body, with_pass=True):
            assert cl[j, line] == 1, (s, line)  # every line a node starts on may be marked
        for line in _no_code_lines(s):
            assert cl[j, line] == 0, (s, line)
            seen["no_code"] += 1
    assert seen["blocks"] >= 50 and seen["ifs"] >= 10 and seen["no_code"] >= 50, seen
    assert seen["cond"] >= 20 and seen["multi"] >= 20 and seen["expr"] >= 20, seen
    assert seen["body_last"] >= 500, seen


def _labelled(srcs):
    rows = []
    for s in srcs:
        lb = corpus.label(s, NL, NV)
        if lb.tokens is not None:
            rows.append((s, list(lb.tokens)))
    return rows


def _states(seq, feats):
    """(depth, dead, statement depth) before each token of each sequence (the mask's
    own bookkeeping, read to know where the labeller's code is reachable)."""
    ctx = G.broadcast(context(feats, NL, NV), seq.shape[0])

    def one(toks, c):
        def body(st, tok):
            return G.step(st, tok, c)[0], (st.depth, st.dead, G._statement_depth(st))

        return jax.lax.scan(body, G.init(), toks)[1]

    return [np.asarray(x) for x in jax.jit(jax.vmap(one))(jnp.asarray(seq), ctx)]


LABELS = np.arange(V.N_LABELS) + V.LAB_BASE
COND = {V.op_tok(o) for o in (isa.Op.JUMP_IF_FALSE, isa.Op.JUMP_IF_TRUE,
                              isa.Op.JUMP_IF_FALSE_OR_POP, isa.Op.JUMP_IF_TRUE_OR_POP)} | {FOR_RANGE}  # fmt: skip
OR_POP = {V.op_tok(isa.Op.JUMP_IF_FALSE_OR_POP), V.op_tok(isa.Op.JUMP_IF_TRUE_OR_POP)}
JIF, JUMP = V.op_tok(isa.Op.JUMP_IF_FALSE), V.op_tok(isa.Op.JUMP)
AT_STMT = [V.op_tok(o) for o in (isa.Op.RETURN_VALUE, isa.Op.POP_TOP, isa.Op.ASSERT)]
STMT_ONLY = AT_STMT + [V.op_tok(o) for o in (isa.Op.PRINT_INT, isa.Op.PRINT_BOOL, isa.Op.POP_N,
                                             isa.Op.PRINT_NEWLINE, isa.Op.FOR_RANGE)]  # fmt: skip
STORE = V.op_tok(isa.Op.STORE_VAR)
OPS = set(range(V.OP_BASE, V.OP_BASE + V.N_TOKEN_OPS))


def test_the_constant_min_int_is_negated_only_where_the_source_negates_it_again():
    srcs = ["x = -2147483648\nprint(x, -x, 2147483647)\n",
            "x = -2147483648\nprint(- -2147483648, x)\n",
            "x = -2147483648\nprint(-(-2147483648))\n",
            "print(-2147483648 - 1 + -   \\\n  2147483648, ~-2147483648)\n"]  # fmt: skip
    feats, (items, rets) = _features(srcs)
    lm, lits = np.asarray(feats.lit_min), np.asarray(feats.lits)
    n = np.asarray(feats.n_lits)
    for j, again in enumerate([False, True, True, False]):  # ...negated again in the source
        slots = np.arange(V.N_LITS) < n[j]
        np.testing.assert_array_equal(lm[j] > 0, slots & (lits[j] == -(2**31)) & (not again))
    assert [int(lm[j].sum()) for j in range(4)] == [1, 0, 0, 3]
    # the labeller's NEG of x (a variable) stays allowed; none right after the constant
    rows = _labelled(srcs)
    seq = np.zeros((len(rows), NV.max_out), np.int32)
    for i, (_, t) in enumerate(rows):
        seq[i, : len(t)] = t
    tfeats = feats._replace(print_items=items, ret_types=rets)
    typed = np.asarray(masks(jnp.asarray(seq), tfeats, NL, NV))
    untyped = np.asarray(masks(jnp.asarray(seq), feats, NL, NV))
    neg, seen = V.op_tok(isa.Op.NEG), collections.Counter()
    for i, (_, t) in enumerate(rows):
        for p, tok in enumerate(t):
            assert typed[i, p, tok]
            if p >= 2 and t[p - 2] == LOAD_CONST and t[p - 1] >= V.LIT_BASE:
                after_min = lits[i][t[p - 1] - V.LIT_BASE] == -(2**31)
                if after_min and lm[i].any():
                    assert not typed[i, p, neg] and untyped[i, p, neg]
                    seen["excluded"] += 1
                elif after_min:
                    assert typed[i, p, neg]
                    seen["allowed"] += 1
    assert seen["excluded"] >= 3 and seen["allowed"] >= 2, seen


def test_typed_mask_fixes_prints_returns_labels_lines_and_statement_structure():
    rows = _labelled(_sources())
    srcs = [s for s, _ in rows]
    feats, (items, rets) = _features(srcs)
    tfeats = feats._replace(print_items=items, ret_types=rets)
    seq = np.zeros((len(rows), NV.max_out), np.int32)
    for i, (_, t) in enumerate(rows):
        seq[i, : len(t)] = t
    typed = np.asarray(masks(jnp.asarray(seq), tfeats, NL, NV))
    untyped = np.asarray(masks(jnp.asarray(seq), feats, NL, NV))
    depth, dead, sdepth = _states(seq, tfeats)
    seen = collections.Counter()
    for i, (s, t) in enumerate(rows):
        ext = _extents(s)
        no_code = _no_code_lines(s)
        cond, multi = _logical_lines(s)
        expr = _expr_lines(s)
        body_last = _body_last(s)
        top = 0
        ln_d = 0  # the depth where the last new line was marked
        stmt_from = 0  # the first line after those marked before this statement
        n_lines = len(s.splitlines())
        line = 0
        named: set[int] = set()  # labels of this body so far
        defined: set[int] = set()
        # label -> (a loop exit, an and/or jump's, lines of the statement it ends or None)
        pending: dict[int, tuple[bool, bool, tuple[int, int] | None]] = {}
        for p, tok in enumerate(t):
            m, mu = typed[i, p], untyped[i, p]
            assert m[tok], (s, p, V.name(tok))  # the labeller's sequence is never excluded
            prev = t[p - 1] if p else None
            live = not dead[i, p]
            d, sd = depth[i, p], sdepth[i, p]
            if prev in PRINT_VALUE:  # the depth operand: one choice, as written
                assert m.sum() == 1, (s, p)
                seen["depth"] += 1
                seen["depth_free"] += int(mu.sum() > 1)
            if prev == PRINT_NEWLINE and tok == POP_N:  # nothing but the pop...
                assert m.sum() == 1 and typed[i, p + 1].sum() == 1, (s, p)  # ...of all values
                seen["pop"] += 1
            if tok in (V.RET_INT, V.RET_BOOL, V.RET_NONE):  # the front end's type alone
                rets = [V.RET_INT, V.RET_BOOL, V.RET_NONE]
                assert m[rets].sum() == 1 and mu[rets].all(), (s, p)
                seen["ret"] += 1
            if tok in (V.BODY, V.END):
                pending, named, defined = {}, set(), set()
                top = ln_d = stmt_from = 0
            if live and tok in OPS and d > max(ln_d, sd) + 1:  # return, assert: one value
                assert not m[[RETURN, ASSERT]].any(), (s, p)
                seen["ret_depth"] += int(mu[[RETURN, ASSERT]].any())
            # the implicit return (a LOAD_CONST with no line marker of its own) comes once
            # the body's last statement's line is marked
            has_arg = lambda x: x in OPS and G._ARG_KIND[x - V.OP_BASE] != G.ArgKind.NONE  # noqa: E731
            last_ins = prev if prev in OPS else t[p - 2] if p >= 2 else None
            after_ins = (prev in OPS and not has_arg(prev)) or (p >= 2 and has_arg(t[p - 2]))
            if (live and d == sd and not pending and after_ins and last_ins != POP_N
                    and line not in multi and top < body_last.get(top, 0)):  # fmt: skip
                assert not m[LOAD_CONST], (s, p)
                seen["implicit"] += int(mu[LOAD_CONST])
            if live and prev in COND:  # conditional jumps go forward
                back = [V.LAB_BASE + k for k in defined]
                assert not m[back].any(), (s, p)
                seen["forward"] += int(mu[back].any())
            if live and tok in OPS and line not in expr:  # no pop off an expression statement
                assert not m[POP_TOP], (s, p)
                seen["expr_pop"] += int(mu[POP_TOP])
            if live and tok in OPS:
                if d < sd + 1:  # return, assert, pop take a value above the loops' ranges
                    assert not m[AT_STMT].any(), (s, p)
                    seen["stmt"] += int(mu[AT_STMT].any())
                if any(o for _, o, _ in pending.values()):  # inside and / or
                    assert not m[STMT_ONLY].any(), (s, p)
                    seen["and_or"] += int(mu[STMT_ONLY].any())
            if live and prev == STORE and d == sd + 1:  # a name there, never the temporary
                assert not m[V.TEMP] and m[V.VAR_BASE : V.VAR_BASE + V.N_VARS].any(), (s, p)
                seen["store"] += int(mu[V.TEMP])
            name = V.name(tok)
            if name.startswith("LN_"):
                line = int(name[3:])
                ln_d = d if line > top else ln_d
                if live and d == sd and all(sp for _, _, sp in pending.values()):
                    # between statements: forward, or to the header of a body around (or,
                    # after a print call's pop, to its statement's lines: ``return
                    # print(...)`` marks the return's line for the None)
                    back = [o for o in range(1, top) if o not in ext or not o <= top <= ext[o][0]]
                    if p >= 2 and t[p - 2] == POP_N:
                        back = [o for o in back if o < stmt_from]
                    if line > top:
                        stmt_from = top + 1
                    if pending:
                        assert not m[[V.ln_tok(o) for o in back]].any(), (s, p)
                        seen["back"] += int(mu[[V.ln_tok(o) for o in back]].any())
                top = max(top, line)
            if name.startswith("LAB_"):
                j = int(name[4:])
                if prev == V.LABEL and j in pending:
                    inner = max([k for k, (f, _, _) in pending.items() if f], default=-1)
                    # the labeller closes the innermost open loop first
                    assert j >= inner, "the labeller defines an outer label first"
                    del pending[j]
                    outer = [k for k in pending if k < inner]
                    for k in outer:  # nothing named before the inner loop's exit, here
                        assert not m[V.LAB_BASE + k] and not mu[V.LAB_BASE + k], (s, p, k)
                        seen["nest"] += 1
                dp = depth[i, p - 1]  # before the jump
                jif = prev == JIF and dp == sd + 1 and line not in cond
                if live and line in ext and (prev == FOR_RANGE or jif):
                    # a header's label: new, or one of a statement that ends with its body
                    other = [k for k, (_, _, sp) in pending.items()
                             if sp and sp[1] != ext[line][0]]  # fmt: skip
                    assert not m[[V.LAB_BASE + k for k in other]].any(), (s, p, other)
                    seen["own"] += int(mu[[V.LAB_BASE + k for k in other]].any())
                    seen["own_merged"] += j in pending  # the labeller reuses a label
                if prev != V.LABEL and j not in named:  # first named by a jump
                    span = None
                    if live and line in ext and (prev == FOR_RANGE or jif):
                        span = (line, ext[line][0])
                    elif live and line in ext and prev == JUMP and dp == sd:
                        span = (line, ext[line][1])
                    pending[j] = (prev == FOR_RANGE, prev in OR_POP, span)
                if prev == V.LABEL:
                    defined.add(j)
                named.add(j)
            if name.startswith("LN_"):  # only the lines of every statement a label ends
                spans = [sp for _, _, sp in pending.values() if sp]
                for o in range(1, n_lines + 1):
                    if o in no_code:
                        assert not m[V.ln_tok(o)], (s, p, o)
                        seen["no_code_free"] += int(mu[V.ln_tok(o)])
                    elif any(not lo <= o <= hi for lo, hi in spans):
                        assert not m[V.ln_tok(o)], (s, p, o)
                        seen["lines"] += 1
                        seen["lines_free"] += int(mu[V.ln_tok(o)])
                        seen["lines_if"] += int(any(not lo <= o <= hi for (f, _, (lo, hi))
                                                    in [v for v in pending.values() if v[2]]
                                                    if not f))  # fmt: skip
    # every rule applied, and each excluded tokens that the untyped mask allows
    assert seen["depth"] >= 50 and seen["depth_free"] >= 10, seen
    assert seen["pop"] >= 30 and seen["nest"] >= 3 and seen["ret"] >= 20, seen
    assert seen["lines"] >= 1000 and seen["lines_free"] >= 1000 and seen["lines_if"] >= 1000, seen
    assert seen["no_code_free"] >= 500 and seen["forward"] >= 50, seen
    assert seen["stmt"] >= 100 and seen["and_or"] >= 100 and seen["store"] >= 100, seen
    assert seen["expr_pop"] >= 1000 and seen["ret_depth"] >= 100 and seen["implicit"] >= 50, seen
    assert seen["back"] >= 100 and seen["own"] >= 5 and seen["own_merged"] >= 3, seen
