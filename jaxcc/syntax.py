"""The flat AST: node kinds, operators and the array layout (parser -> middle end).

A program's AST is a structure of arrays over N = max_nodes nodes, in post-order (the
order in which the parser's reductions create them: children before their parent,
siblings left to right, i.e. source order). The root Module is node ``n_nodes - 1``.
Chain and unit rules (parentheses, precedence levels) create no nodes. The children of
every node are in source order; ``child_index`` is a node's ordinal among them.

Children of each kind (fixed order; "*" = any number):

  MODULE       stmt*                          top-level statements and FUNCTION_DEFs
  FUNCTION_DEF PARAMS BLOCK                   value = name id; op = return annotation (Ann)
  PARAMS       PARAM*
  PARAM        -                              value = name id; op = annotation (Ann)
  BLOCK        stmt*                          a suite (indented block or one-line body)
  RETURN       [expr]                         0 or 1 children
  ASSIGN       NAME(store) expr
  AUG_ASSIGN   NAME(store) expr               op = BinOp
  IF           expr BLOCK [BLOCK | IF]        3rd child: the else BLOCK, or the IF of an elif
  WHILE        expr BLOCK
  FOR          NAME(store) expr BLOCK         expr: the iterable (a CALL of range, checked later)
  PASS, BREAK, CONTINUE  -
  ASSERT       expr
  EXPR_STMT    expr
  BINOP        expr expr                      op = BinOp
  UNARYOP      expr                           op = UnaryOp
  BOOLOP       expr expr expr*                op = BoolOp; n-ary as in Python's ast
  COMPARE      expr (CMPOP expr)+             a whole chain, a < b <= c
  CMPOP        -                              op = CmpOp
  IFEXP        expr expr expr                 source order: body, test, orelse
  CALL         expr*                          value = callee name id (builtins: tokens.NAME_*)
  NAME         -                              value = name id; op = Ctx
  CONSTANT     -                              value = the int; op = ConstKind

Positions: ``line``/``col`` are those CPython's ast gives the node (lineno, col_offset:
the start of the node's first token, parentheses that enclose a sub-expression count
for the enclosing node, as in CPython); ``end_line``/``end_col`` likewise.
``first_token``/``last_token`` index the token arrays (COMMENT and NL included).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from jaxcc import ops


class Node(enum.IntEnum):
    PAD = 0
    MODULE = 1
    FUNCTION_DEF = 2
    PARAMS = 3
    PARAM = 4
    BLOCK = 5
    RETURN = 6
    ASSIGN = 7
    AUG_ASSIGN = 8
    IF = 9
    WHILE = 10
    FOR = 11
    PASS = 12
    BREAK = 13
    CONTINUE = 14
    ASSERT = 15
    EXPR_STMT = 16
    BINOP = 17
    UNARYOP = 18
    BOOLOP = 19
    COMPARE = 20
    CMPOP = 21
    IFEXP = 22
    CALL = 23
    NAME = 24
    CONSTANT = 25


N_NODE_KINDS = len(Node)

STATEMENTS = (
    Node.FUNCTION_DEF,
    Node.RETURN,
    Node.ASSIGN,
    Node.AUG_ASSIGN,
    Node.IF,
    Node.WHILE,
    Node.FOR,
    Node.PASS,
    Node.BREAK,
    Node.CONTINUE,
    Node.ASSERT,
    Node.EXPR_STMT,
)
EXPRESSIONS = (
    Node.BINOP,
    Node.UNARYOP,
    Node.BOOLOP,
    Node.COMPARE,
    Node.IFEXP,
    Node.CALL,
    Node.NAME,
    Node.CONSTANT,
)


# The op fields of BINOP, UNARYOP, CMPOP and BOOLOP: defined by jaxcc/ops.py's rows.
BinOp = ops.BinOp
UnaryOp = ops.UnaryOp
CmpOp = ops.CmpOp
BoolOp = ops.BoolOp


class Ctx(enum.IntEnum):
    Load = 0
    Store = 1


class ConstKind(enum.IntEnum):
    INT = 0
    BOOL = 1  # True / False (value 1 / 0)
    NONE = 2


class Ann(enum.IntEnum):
    """Annotation codes of PARAM.op and FUNCTION_DEF.op."""

    ABSENT = 0
    INT = 1
    BOOL = 2
    NONE = 3


class Ast(NamedTuple):
    """Flat ASTs of a batch (leading axis B; none for one program). N = max_nodes.

    Padding beyond ``n_nodes``: kind PAD, parent -1, zeros elsewhere.
    """

    kind: object  # Int32[Array, "B N"]  Node
    op: object  # Int32[Array, "B N"]  BinOp / UnaryOp / BoolOp / CmpOp / Ctx / ConstKind / Ann
    value: object  # Int32[Array, "B N"]  name id (NAME, CALL, PARAM, FUNCTION_DEF) or int value (CONSTANT)
    parent: object  # Int32[Array, "B N"]  -1 for the root
    child_index: object  # Int32[Array, "B N"]  ordinal among the parent's children
    n_children: object  # Int32[Array, "B N"]
    first_token: object  # Int32[Array, "B N"]
    last_token: object  # Int32[Array, "B N"]
    line: object  # Int32[Array, "B N"]
    col: object  # Int32[Array, "B N"]
    end_line: object  # Int32[Array, "B N"]
    end_col: object  # Int32[Array, "B N"]
    n_nodes: object  # Int32[Array, "B"]
