"""Rebuild a CPython ``ast.Module`` from one program's flat AST (host side).

``to_python_ast(tree, tokens, source)`` is the inverse of the parser up to what the
flat AST leaves out (names and literal spellings come from the source bytes at the
tokens' start/end). For every valid program of the subset
``ast.dump(to_python_ast(...), include_attributes=True) == ast.dump(ast.parse(source), ...)``:
it is how the parser is tested against CPython, and what ``python -m jaxcc.parser`` prints.
"""

from __future__ import annotations

import ast

import numpy as np

from jaxcc import ops
from jaxcc.syntax import Ann, Ast, BinOp, BoolOp, CmpOp, ConstKind, Ctx, Node, UnaryOp
from jaxcc.tokens import Tok, Tokens

# the flat AST's op field -> Python's ast class (ops.py)
_BINOP = {r.sub: r.py_ast for r in ops.BINARY}
_UNARY = {r.sub: r.py_ast for r in ops.UNARY}
_BOOL = {r.sub: r.py_ast for r in ops.BOOLEAN}
_CMP = {r.sub: r.py_ast for r in ops.COMPARE}


def _int_literal(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:  # "00", "0_0": zeros that int(.., 0) refuses
        return int(text.replace("_", ""), 10)


class _Rebuild:
    def __init__(self, tree: Ast, tokens: Tokens, source: bytes):
        self.a = {f: np.asarray(getattr(tree, f)) for f in Ast._fields}
        self.t = {f: np.asarray(getattr(tokens, f)) for f in Tokens._fields}
        self.src = source
        n = int(self.a["n_nodes"])
        self.kids: list[list[int]] = [[] for _ in range(n)]
        for i in range(n):
            p = int(self.a["parent"][i])
            if p >= 0:
                self.kids[p].append(i)
        for k in self.kids:
            k.sort(key=lambda i: int(self.a["child_index"][i]))
        self.n = n

    # -- helpers ----------------------------------------------------------------
    def text(self, tok: int) -> str:
        s, e = int(self.t["start"][tok]), int(self.t["end"][tok])
        return self.src[s:e].decode("ascii")

    def pos(self, node, i: int):
        node.lineno = int(self.a["line"][i])
        node.col_offset = int(self.a["col"][i])
        node.end_lineno = int(self.a["end_line"][i])
        node.end_col_offset = int(self.a["end_col"][i])
        return node

    def tok_pos(self, node, tok: int):
        node.lineno = int(self.t["line"][tok])
        node.col_offset = int(self.t["col"][tok])
        node.end_lineno = int(self.t["end_line"][tok])
        node.end_col_offset = int(self.t["end_col"][tok])
        return node

    def annotation(self, code: int, tok: int):
        if code == Ann.ABSENT:
            return None
        if code == Ann.NONE:
            return self.tok_pos(ast.Constant(value=None, kind=None), tok)
        return self.tok_pos(ast.Name(id=self.text(tok), ctx=ast.Load()), tok)

    # -- nodes ------------------------------------------------------------------
    def module(self) -> ast.Module:
        root = self.n - 1
        return ast.Module(body=[self.stmt(k) for k in self.kids[root]], type_ignores=[])

    def block(self, i: int) -> list[ast.stmt]:
        assert self.a["kind"][i] == Node.BLOCK
        return [self.stmt(k) for k in self.kids[i]]

    def stmt(self, i: int) -> ast.stmt:
        k = Node(int(self.a["kind"][i]))
        op = int(self.a["op"][i])
        c = self.kids[i]
        if k == Node.FUNCTION_DEF:
            params, body = c
            args = []
            for p in self.kids[params]:
                ptok = int(self.a["first_token"][p])
                ann = self.annotation(int(self.a["op"][p]), int(self.a["last_token"][p]))
                args.append(
                    self.pos(ast.arg(arg=self.text(ptok), annotation=ann, type_comment=None), p)
                )
            rtok = int(self.a["last_token"][params]) + 2  # ')' '->' annotation
            node = ast.FunctionDef(
                name=self.text(int(self.a["first_token"][i]) + 1),
                args=ast.arguments(posonlyargs=[], args=args, vararg=None, kwonlyargs=[],
                                   kw_defaults=[], kwarg=None, defaults=[]),
                body=self.block(body),
                decorator_list=[],
                returns=self.annotation(op, rtok),
                type_comment=None,
            )  # fmt: skip
            if hasattr(ast.FunctionDef, "type_params") or "type_params" in ast.FunctionDef._fields:
                node.type_params = []
        elif k == Node.RETURN:
            node = ast.Return(value=self.expr(c[0]) if c else None)
        elif k == Node.ASSIGN:
            node = ast.Assign(targets=[self.expr(c[0])], value=self.expr(c[1]), type_comment=None)
        elif k == Node.AUG_ASSIGN:
            node = ast.AugAssign(
                target=self.expr(c[0]), op=_BINOP[BinOp(op)](), value=self.expr(c[1])
            )
        elif k == Node.IF:
            orelse = []
            if len(c) == 3:
                orelse = [self.stmt(c[2])] if self.a["kind"][c[2]] == Node.IF else self.block(c[2])
            node = ast.If(test=self.expr(c[0]), body=self.block(c[1]), orelse=orelse)
        elif k == Node.WHILE:
            node = ast.While(test=self.expr(c[0]), body=self.block(c[1]), orelse=[])
        elif k == Node.FOR:
            node = ast.For(target=self.expr(c[0]), iter=self.expr(c[1]), body=self.block(c[2]),
                           orelse=[], type_comment=None)  # fmt: skip
        elif k == Node.PASS:
            node = ast.Pass()
        elif k == Node.BREAK:
            node = ast.Break()
        elif k == Node.CONTINUE:
            node = ast.Continue()
        elif k == Node.ASSERT:
            node = ast.Assert(test=self.expr(c[0]), msg=None)
        elif k == Node.EXPR_STMT:
            node = ast.Expr(value=self.expr(c[0]))
        else:
            raise ValueError(f"node {i}: {k.name} is not a statement")
        return self.pos(node, i)

    def expr(self, i: int) -> ast.expr:
        k = Node(int(self.a["kind"][i]))
        op = int(self.a["op"][i])
        c = self.kids[i]
        first = int(self.a["first_token"][i])
        if k == Node.BINOP:
            node = ast.BinOp(left=self.expr(c[0]), op=_BINOP[BinOp(op)](), right=self.expr(c[1]))
        elif k == Node.UNARYOP:
            node = ast.UnaryOp(op=_UNARY[UnaryOp(op)](), operand=self.expr(c[0]))
        elif k == Node.BOOLOP:
            node = ast.BoolOp(op=_BOOL[BoolOp(op)](), values=[self.expr(x) for x in c])
        elif k == Node.COMPARE:
            node = ast.Compare(
                left=self.expr(c[0]),
                ops=[_CMP[CmpOp(int(self.a["op"][x]))]() for x in c[1::2]],
                comparators=[self.expr(x) for x in c[2::2]],
            )
        elif k == Node.IFEXP:
            node = ast.IfExp(test=self.expr(c[1]), body=self.expr(c[0]), orelse=self.expr(c[2]))
        elif k == Node.CALL:
            func = self.tok_pos(ast.Name(id=self.text(first), ctx=ast.Load()), first)
            node = ast.Call(func=func, args=[self.expr(x) for x in c], keywords=[])
        elif k == Node.NAME:
            ctx = ast.Store() if op == Ctx.Store else ast.Load()
            node = ast.Name(id=self.text(first), ctx=ctx)
        elif k == Node.CONSTANT:
            if op == ConstKind.INT:
                value = _int_literal(self.text(first))
            elif op == ConstKind.BOOL:
                value = bool(self.a["value"][i])
            else:
                value = None
            node = ast.Constant(value=value, kind=None)
        else:
            raise ValueError(f"node {i}: {k.name} is not an expression")
        return self.pos(node, i)


def to_python_ast(tree: Ast, tokens: Tokens, source: str | bytes) -> ast.Module:
    """CPython's ``ast.Module`` for one program's flat AST (arrays without batch axis)."""
    if isinstance(source, str):
        source = source.encode("utf-8", "surrogateescape")
    return _Rebuild(tree, tokens, source).module()


__all__ = ["to_python_ast", "Tok"]
