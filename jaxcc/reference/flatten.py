"""The flat AST made on the host from CPython's ``ast``: the parser's oracle, and the
middle end's input in tests before (and besides) the JAX parser.

``flatten(source, limits)`` returns ``(Ast, Tokens, Error)`` of numpy arrays for ONE
program, in exactly the layout of ``jaxcc.syntax.Ast`` (padded to ``limits.max_nodes``)
and ``jaxcc.tokens.Tokens`` (from ``host_lex``). ``flatten_many`` stacks a list.

Choices where CPython's ast has no answer (docs/middle_end.md, section 1, lists them):

* Positions and token spans of nodes CPython gives positions to are CPython's; the
  token span is the first token starting at (line, col) and the last token ending at
  (end_line, end_col) (zero-width, INDENT, DEDENT, NEWLINE, NL and COMMENT tokens never
  count).
* BLOCK: the span of its first to its last statement.
* PARAMS: the span of the def's ``(`` to its ``)``.
* CMPOP: the span of its operator token.
* MODULE: line 1 col 0 to the ENDMARKER's position; tokens 0 to n_tokens - 1.
* ``elif``: the nested If of CPython's orelse is the IF's third child directly; an
  ``else:`` whose body is one ``if`` statement is a BLOCK holding that IF (told apart by
  the token at the nested If's position: ``elif`` or not).
* A CONSTANT's value is the token's int32 value (``2147483648`` is stored as -2**31).

Errors: host_lex's first; then CPython's SyntaxError (Code.SYNTAX, detail INVALID, or
IndentationError); then the first construct outside the subset in source order
(Code.UNSUPPORTED at that node); then Limit.NODES at the first node that does not fit.
On an error the arrays hold whatever was built (possibly nothing).
"""

from __future__ import annotations

import ast
from typing import NamedTuple

import numpy as np

from jaxcc import ops
from jaxcc.errors import Code, Error, Limit, Syntax, Unsupported
from jaxcc.limits import DEFAULT, Limits
from jaxcc.reference.host_lex import host_lex
from jaxcc.syntax import Ann, Ast, ConstKind, Ctx, Node
from jaxcc.tokens import Tok, Tokens

# Python ast class -> the flat AST's op field, and a comparison's token (ops.py)
_BINOP = ops.py_ast_map(Node.BINOP)
_UNARY = ops.py_ast_map(Node.UNARYOP)
_BOOL = ops.py_ast_map(Node.BOOLOP)
_CMP = ops.py_ast_map(Node.CMPOP)
_CMP_TOK = {r.sub: r.tok for r in ops.COMPARE}
_UNSUPPORTED_EXPR = {
    ast.Tuple: Unsupported.TUPLE,
    ast.List: Unsupported.SUBSCRIPT,
    ast.Subscript: Unsupported.SUBSCRIPT,
    ast.Slice: Unsupported.SUBSCRIPT,
    ast.ListComp: Unsupported.SUBSCRIPT,
    ast.Attribute: Unsupported.ATTRIBUTE,
    ast.Dict: Unsupported.DICT_SET,
    ast.Set: Unsupported.DICT_SET,
    ast.DictComp: Unsupported.DICT_SET,
    ast.SetComp: Unsupported.DICT_SET,
    ast.NamedExpr: Unsupported.WALRUS,
    ast.Starred: Unsupported.STAR_ARGUMENT,
}
_SKIP = (Tok.INDENT, Tok.DEDENT, Tok.NEWLINE, Tok.NL, Tok.COMMENT, Tok.ENDMARKER)


class _Fail(Exception):
    def __init__(self, code, detail, line, col):
        super().__init__()
        self.err = (int(code), int(line), int(col), int(detail))


class _Pos(NamedTuple):
    lineno: int
    col_offset: int


def _unsupported(detail, node):
    return _Fail(
        Code.UNSUPPORTED, detail, getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
    )


class _Builder:
    def __init__(self, toks: Tokens):
        n = int(toks.n_tokens)
        self.tk = toks
        self.n_tokens = n
        self.start: dict[tuple[int, int], int] = {}
        self.end: dict[tuple[int, int], int] = {}
        for i in range(n):
            k = int(toks.kind[i])
            if k in _SKIP or toks.start[i] == toks.end[i]:
                continue
            self.start.setdefault((int(toks.line[i]), int(toks.col[i])), i)
            self.end[(int(toks.end_line[i]), int(toks.end_col[i]))] = i
        self.rows: list[list[int]] = []  # kind op value parent ci nch ft lt line col eline ecol

    # -- records ---------------------------------------------------------------
    def _add(self, kind, op, value, children, span):
        idx = len(self.rows)
        line, col, eline, ecol, ft, lt = span
        self.rows.append(
            [int(kind), int(op), int(value), -1, 0, len(children), ft, lt, line, col, eline, ecol]
        )
        for ci, c in enumerate(children):
            self.rows[c][3] = idx
            self.rows[c][4] = ci
        return idx

    def _span(self, node):
        a = (node.lineno, node.col_offset)
        b = (node.end_lineno, node.end_col_offset)
        return (a[0], a[1], b[0], b[1], self.start.get(a, 0), self.end.get(b, 0))

    def _loop_else(self, s):
        """Where the `else` of a loop is (the error points there, as the JAX parser does)."""
        o = s.orelse[0]
        i = self.start.get((o.lineno, o.col_offset), 0)
        while i > 0 and int(self.tk.kind[i]) != Tok.KW_ELSE:
            i -= 1
        if int(self.tk.kind[i]) != Tok.KW_ELSE:
            return s
        return _Pos(int(self.tk.line[i]), int(self.tk.col[i]))

    def _span_of(self, first, last):
        f, la = self.rows[first], self.rows[last]
        return (f[8], f[9], la[10], la[11], f[6], la[7])

    def _tok_span(self, i):
        t = self.tk
        return (int(t.line[i]), int(t.col[i]), int(t.end_line[i]), int(t.end_col[i]), i, i)

    def _name_id(self, line, col):
        i = self.start.get((line, col))
        if i is None or int(self.tk.kind[i]) != Tok.NAME:
            return 0
        return int(self.tk.value[i])

    # -- statements ------------------------------------------------------------
    def module(self, mod: ast.Module):
        kids = [self.stmt(s, top=True) for s in mod.body]
        n = self.n_tokens
        last = n - 1
        el, ec = (int(self.tk.line[last]), int(self.tk.col[last])) if n else (1, 0)
        return self._add(Node.MODULE, 0, 0, kids, (1, 0, el, ec, 0, max(last, 0)))

    def block(self, stmts):
        kids = [self.stmt(s) for s in stmts]
        return self._add(Node.BLOCK, 0, 0, kids, self._span_of(kids[0], kids[-1]))

    def stmt(self, s, top=False):
        sp = self._span(s)
        if isinstance(s, ast.FunctionDef):
            if not top:
                raise _unsupported(Unsupported.NESTED_FUNCTION, s)
            return self.funcdef(s)
        if isinstance(s, ast.Return):
            kids = [] if s.value is None else [self.expr(s.value)]
            return self._add(Node.RETURN, 0, 0, kids, sp)
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise _unsupported(Unsupported.CHAINED_ASSIGNMENT, s)
            t = self.store(s.targets[0], Unsupported.ASSIGN_TARGET)
            return self._add(Node.ASSIGN, 0, 0, [t, self.expr(s.value)], sp)
        if isinstance(s, ast.AugAssign):
            t = self.store(s.target, Unsupported.ASSIGN_TARGET)
            op = self.binop(s.op, s)
            return self._add(Node.AUG_ASSIGN, op, 0, [t, self.expr(s.value)], sp)
        if isinstance(s, ast.AnnAssign):
            raise _unsupported(Unsupported.ANNOTATED_ASSIGNMENT, s)
        if isinstance(s, ast.If):
            kids = [self.expr(s.test), self.block(s.body)]
            if s.orelse:
                o = s.orelse[0]
                is_elif = (
                    len(s.orelse) == 1
                    and isinstance(o, ast.If)
                    and int(self.tk.kind[self.start.get((o.lineno, o.col_offset), 0)])
                    == Tok.KW_ELIF
                )
                kids.append(self.stmt(o) if is_elif else self.block(s.orelse))
            return self._add(Node.IF, 0, 0, kids, sp)
        if isinstance(s, ast.While):
            if s.orelse:
                raise _unsupported(Unsupported.LOOP_ELSE, self._loop_else(s))
            return self._add(Node.WHILE, 0, 0, [self.expr(s.test), self.block(s.body)], sp)
        if isinstance(s, ast.For):
            if s.orelse:
                raise _unsupported(Unsupported.LOOP_ELSE, self._loop_else(s))
            t = self.store(s.target, Unsupported.FOR_TARGET)
            return self._add(Node.FOR, 0, 0, [t, self.expr(s.iter), self.block(s.body)], sp)
        if isinstance(s, ast.Pass):
            return self._add(Node.PASS, 0, 0, [], sp)
        if isinstance(s, ast.Break):
            return self._add(Node.BREAK, 0, 0, [], sp)
        if isinstance(s, ast.Continue):
            return self._add(Node.CONTINUE, 0, 0, [], sp)
        if isinstance(s, ast.Assert):
            if s.msg is not None:
                raise _unsupported(Unsupported.TUPLE, s.msg)
            return self._add(Node.ASSERT, 0, 0, [self.expr(s.test)], sp)
        if isinstance(s, ast.Expr):
            return self._add(Node.EXPR_STMT, 0, 0, [self.expr(s.value)], sp)
        raise _unsupported(Unsupported.OTHER, s)

    def funcdef(self, f: ast.FunctionDef):
        if f.decorator_list:
            raise _unsupported(Unsupported.DECORATOR, f.decorator_list[0])
        a = f.args
        if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg:
            bad = (a.posonlyargs or a.kwonlyargs or [a.vararg or a.kwarg])[0]
            raise _unsupported(Unsupported.STAR_ARGUMENT, bad)
        if a.defaults:
            raise _unsupported(Unsupported.DEFAULT_ARGUMENT, a.defaults[0])
        ret = self.annotation(f.returns)
        # the def's name token follows `def`; its '(' follows the name
        def_tok = self.start[(f.lineno, f.col_offset)]
        name_tok = def_tok + 1
        lpar = name_tok + 1
        params = []
        for p in a.args:
            ann = self.annotation(p.annotation)
            params.append(
                self._add(Node.PARAM, ann, self._name_id(p.lineno, p.col_offset), [], self._span(p))
            )
        rpar = self._close_paren(lpar)
        pspan = self._tok_span(lpar)[:2] + self._tok_span(rpar)[2:4] + (lpar, rpar)
        pnode = self._add(Node.PARAMS, 0, 0, params, pspan)
        body = self.block(f.body)
        return self._add(
            Node.FUNCTION_DEF, ret, int(self.tk.value[name_tok]), [pnode, body], self._span(f)
        )

    def _close_paren(self, lpar):
        depth = 0
        for i in range(lpar, self.n_tokens):
            k = int(self.tk.kind[i])
            depth += (k == Tok.LPAR) - (k == Tok.RPAR)
            if depth == 0:
                return i
        return lpar

    def annotation(self, a):
        if a is None:
            return Ann.ABSENT
        if isinstance(a, ast.Name) and a.id == "int":
            return Ann.INT
        if isinstance(a, ast.Name) and a.id == "bool":
            return Ann.BOOL
        if isinstance(a, ast.Constant) and a.value is None:
            return Ann.NONE
        raise _unsupported(Unsupported.ANNOTATION, a)

    def store(self, t, detail):
        if isinstance(t, ast.Name):
            return self._add(
                Node.NAME, Ctx.Store, self._name_id(t.lineno, t.col_offset), [], self._span(t)
            )
        if isinstance(t, ast.Tuple) and detail == Unsupported.ASSIGN_TARGET:
            raise _unsupported(Unsupported.TUPLE, t)
        raise _unsupported(detail, t)

    def binop(self, op, node):
        if type(op) not in _BINOP:
            raise _unsupported(
                Unsupported.TRUE_DIVISION if isinstance(op, ast.Div) else Unsupported.MATMUL, node
            )
        return _BINOP[type(op)]

    # -- expressions -----------------------------------------------------------
    def expr(self, e):
        sp = self._span(e)
        if type(e) in _UNSUPPORTED_EXPR:
            raise _unsupported(_UNSUPPORTED_EXPR[type(e)], e)
        if isinstance(e, ast.BinOp):
            kids = [self.expr(e.left), self.expr(e.right)]
            return self._add(Node.BINOP, self.binop(e.op, e), 0, kids, sp)
        if isinstance(e, ast.UnaryOp):
            return self._add(Node.UNARYOP, _UNARY[type(e.op)], 0, [self.expr(e.operand)], sp)
        if isinstance(e, ast.BoolOp):
            kids = [self.expr(v) for v in e.values]
            return self._add(Node.BOOLOP, _BOOL[type(e.op)], 0, kids, sp)
        if isinstance(e, ast.Compare):
            kids = [self.expr(e.left)]
            for op, right in zip(e.ops, e.comparators, strict=True):
                if type(op) not in _CMP:
                    raise _unsupported(Unsupported.COMPARISON, e)
                cop = _CMP[type(op)]
                prev = self.rows[kids[-1]][
                    7
                ]  # the operator is the first token after the left operand's ...
                i = prev + 1
                while i < self.n_tokens and int(self.tk.kind[i]) != _CMP_TOK[cop]:
                    i += 1  # ... skipping its closing parentheses and NL/COMMENT inside brackets
                kids.append(self._add(Node.CMPOP, cop, 0, [], self._tok_span(i)))
                kids.append(self.expr(right))
            return self._add(Node.COMPARE, 0, 0, kids, sp)
        if isinstance(e, ast.IfExp):
            kids = [self.expr(e.body), self.expr(e.test), self.expr(e.orelse)]
            return self._add(Node.IFEXP, 0, 0, kids, sp)
        if isinstance(e, ast.Call):
            f = e.func
            if not isinstance(f, ast.Name) or (f.lineno, f.col_offset) != (e.lineno, e.col_offset):
                raise _unsupported(Unsupported.CALL_TARGET, f)
            if e.keywords:
                k = e.keywords[0]
                raise _unsupported(
                    Unsupported.STAR_ARGUMENT if k.arg is None else Unsupported.KEYWORD_ARGUMENT, k
                )
            kids = [self.expr(a) for a in e.args]
            return self._add(Node.CALL, 0, self._name_id(f.lineno, f.col_offset), kids, sp)
        if isinstance(e, ast.Name):
            return self._add(Node.NAME, Ctx.Load, self._name_id(e.lineno, e.col_offset), [], sp)
        if isinstance(e, ast.Constant):
            v = e.value
            if v is True or v is False:
                return self._add(Node.CONSTANT, ConstKind.BOOL, int(v), [], sp)
            if v is None:
                return self._add(Node.CONSTANT, ConstKind.NONE, 0, [], sp)
            if isinstance(v, int):
                i = self.start.get((e.lineno, e.col_offset), 0)
                return self._add(Node.CONSTANT, ConstKind.INT, int(self.tk.value[i]), [], sp)
            if isinstance(v, float):
                raise _unsupported(Unsupported.FLOAT, e)
            if isinstance(v, complex):
                raise _unsupported(Unsupported.IMAGINARY, e)
            if v is Ellipsis:
                raise _unsupported(Unsupported.ELLIPSIS, e)
            raise _unsupported(Unsupported.STRING, e)
        raise _unsupported(Unsupported.OTHER, e)


def _pack(rows: list[list[int]], limits: Limits) -> Ast:
    N = limits.max_nodes
    a = np.zeros((12, N), np.int32)
    a[3, :] = -1
    rows = rows[:N]
    if rows:
        a[:, : len(rows)] = np.array(rows, np.int64).T.astype(np.int32)
    return Ast(*a, n_nodes=np.int32(len(rows)))


def flatten(source: str | bytes, limits: Limits = DEFAULT) -> tuple[Ast, Tokens, Error]:
    toks, err = host_lex(source, limits)
    empty = _pack([], limits)
    if int(err.code) != Code.OK:
        return empty, toks, err
    text = source.decode("ascii") if isinstance(source, bytes) else source
    try:
        mod = ast.parse(text)
    except IndentationError as e:
        detail = (
            Syntax.UNEXPECTED_INDENT
            if "unexpected indent" in e.msg
            else (
                Syntax.EXPECTED_INDENT
                if "expected an indented block" in e.msg
                else Syntax.UNINDENT_MISMATCH
            )
        )
        return (
            empty,
            toks,
            _error(Code.INDENTATION, detail, e.lineno or 0, max((e.offset or 1) - 1, 0)),
        )
    except SyntaxError as e:
        return (
            empty,
            toks,
            _error(Code.SYNTAX, Syntax.INVALID, e.lineno or 0, max((e.offset or 1) - 1, 0)),
        )
    b = _Builder(toks)
    try:
        b.module(mod)
    except _Fail as f:
        return _pack(b.rows, limits), toks, _error(f.err[0], f.err[3], f.err[1], f.err[2])
    if len(b.rows) > limits.max_nodes:
        r = b.rows[limits.max_nodes]
        return _pack(b.rows, limits), toks, _error(Code.LIMIT, Limit.NODES, r[8], r[9])
    return _pack(b.rows, limits), toks, _error(Code.OK, 0, 0, 0)


def _error(code, detail, line, col) -> Error:
    return Error(np.int32(code), np.int32(line), np.int32(col), np.int32(detail))


def flatten_many(sources, limits: Limits = DEFAULT) -> tuple[Ast, Tokens, Error]:
    """``flatten`` over a list, stacked along a leading batch axis."""
    triples = [flatten(s, limits) for s in sources]
    asts = Ast(*[np.stack([t[0][i] for t in triples]) for i in range(len(Ast._fields))])
    toks = Tokens(*[np.stack([t[1][i] for t in triples]) for i in range(len(Tokens._fields))])
    err = Error(*[np.array([t[2][i] for t in triples], np.int32) for i in range(4)])
    return asts, toks, err
