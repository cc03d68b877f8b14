"""The language's operators and builtins: one table, read by every stage that needs them.

Each operator row (``OPERATORS``) gives the source spelling, the token kind (and the
augmented-assignment token), the AST node it makes (its ``Group``; the op-field enums
``BinOp``/``UnaryOp``/``CmpOp``/``BoolOp`` are built here from the rows, member names
those of Python's ``ast`` classes), its grammar alternative and rule alias, the opcode,
the typing rule, the run-time checks and the int32 semantic function. Each builtin row
(``BUILTINS``) gives the reserved name (its index is its interned id,
``tokens.RESERVED_NAMES``), where it may appear, its arity and arity message, its argument
types, its typing rule, its opcode, checks and semantic function.

tokens.py and syntax.py read this module, so it names token kinds and node kinds by
string and looks them up only when asked (``Operator.tok``, ``Operator.node``).

The semantic functions (``Operator.sem``, ``Builtin.sem``) are written once and run on
Python ints (the reference side, the tests) and on ``jnp`` int32 arrays (elementwise): they
use only operators both support plus the three helpers ``where``, ``wrap`` and ``clip``
below. Inputs are int32 values; the result is the int32 value the machine pushes when no
check fires (meaningless when one does). ``evaluate`` applies the row's checks, in order,
and returns ``(value, code, detail)`` with code ``Code.OK`` when none fires.

Which places read the table, which keep a copy that tests/test_ops.py compares with it,
and how to add an operator or a builtin: docs/extending.md.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable
from typing import NamedTuple

from jaxcc.errors import Code, Value
from jaxcc.isa import T_BOOL, T_INT, T_NONE, Op

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1

# ----------------------------------------------------------------------------------------
# helpers that make one function body work on Python ints and on jnp int32 arrays


def _is_py(x) -> bool:
    return isinstance(x, int)  # bool is an int


def where(c, x, y):
    """``x if c else y``, elementwise on arrays (both branches are evaluated)."""
    if _is_py(c):
        return x if c else y
    import jax.numpy as jnp  # only array callers pay for jax

    return jnp.where(c, x, y)


def wrap(x):
    """x reduced to int32 (two's complement). Arrays are int32 already: their arithmetic
    wraps by itself, so they pass unchanged."""
    if _is_py(x):
        return ((x - INT_MIN) & 0xFFFFFFFF) + INT_MIN
    return x


def clip(x, lo: int, hi: int):
    """x clamped to [lo, hi]."""
    if _is_py(x):
        return min(max(x, lo), hi)
    import jax.numpy as jnp

    return jnp.clip(x, lo, hi)


def _not(c):
    """Logical not (Python's ``~`` on a bool is an int, not its negation)."""
    return (not c) if _is_py(c) else ~c


def _tdiv(a, b):
    """a / b truncated toward zero, for b != 0 and no overflow (C's division)."""
    if _is_py(a):
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    from jax import lax

    return lax.div(a, b)


# ----------------------------------------------------------------------------------------
# the int32 semantic functions (value only; the checks are in the rows)


def _pow_max() -> tuple[int, ...]:
    """_POW_MAX[e]: the largest m with m ** e <= 2**31 - 1, for e = 2 .. 32 (0 and 1 unused)."""
    t = [0, 0]
    for e in range(2, 33):
        m = 1
        while (m + 1) ** e <= INT_MAX:
            m += 1
        t.append(m)
    return tuple(t)


_POW_MAX = _pow_max()


def _pow_limit(b):
    """_POW_MAX[clip(b, 2, 32)] as a Python int or an int32 array."""
    i = clip(b, 2, 32)
    if _is_py(i):
        return _POW_MAX[i]
    import jax.numpy as jnp

    return jnp.asarray(_POW_MAX, jnp.int32)[i]


def _pow(a, b):
    """a ** b for b >= 0 by square-and-multiply on wrapping int32: exact whenever the
    result fits (arithmetic mod 2**32 agrees with it). b >= 32 only fits for |a| <= 1,
    where b's parity is all that matters."""
    e = where(b >= 32, 30 + (b & 1), b)
    res, base = 1 + 0 * a, a
    for i in range(5):  # e < 32
        res = where(((e >> i) & 1) == 1, wrap(res * base), res)
        base = wrap(base * base)
    return res


def _pow_ovf(a, b, r):
    m = _pow_limit(b)
    return (b >= 2) & ((a > m) | (a < -m)) & _not((a == -2) & (b == 31))


def _mul_ovf(a, b, r):
    # classic wrap test: r / a == b unless the product wrapped; -1 * INT_MIN wraps to
    # INT_MIN whose division by -1 itself overflows, so it is tested apart
    safe_a = where(a == 0, 1, a)
    return where(a == -1, b == INT_MIN, (a != 0) & (_tdiv(r, safe_a) != b))


def _div_safe(a, b):
    """b, or 1 where the division is an error (b == 0, INT_MIN // -1): the checks report
    those, and Python ints must not raise."""
    return where((b == 0) | ((a == INT_MIN) & (b == -1)), 1, b)


def _lshift(a, b):
    return wrap(a << clip(b, 0, 31))


def _lshift_ovf(a, b, r):
    return where(b >= 32, a != 0, (r >> clip(b, 0, 31)) != a)


# ----------------------------------------------------------------------------------------
# checks


class Check(NamedTuple):
    """A run-time check: when ``fires(*operands, result)`` is true, the instruction
    stops the program with ``code`` (and ``detail``, an errors.Value for Code.VALUE)."""

    code: Code
    detail: int
    fires: Callable


ZERO_DIVISION = Check(Code.ZERO_DIVISION, 0, lambda a, b, r: b == 0)
NEGATIVE_SHIFT = Check(Code.VALUE, Value.NEGATIVE_SHIFT, lambda a, b, r: b < 0)
NEGATIVE_POWER = Check(Code.VALUE, Value.NEGATIVE_POWER, lambda a, b, r: b < 0)


def overflow(fires: Callable) -> Check:
    """OverflowError when the exact result leaves int32 (``fires`` says when)."""
    return Check(Code.OVERFLOW, 0, fires)


# the overflow tests of add/sub: the wrapped result has the wrong sign
_ADD_OVF = overflow(lambda a, b, r: ((a ^ r) & (b ^ r)) < 0)
_SUB_OVF = overflow(lambda a, b, r: ((a ^ b) & (a ^ r)) < 0)
_NEG_OVF = overflow(lambda a, r: a == INT_MIN)

# ----------------------------------------------------------------------------------------
# types and typing rules


class Type(enum.IntEnum):
    """Static types (the checker's codes, isa's fn_rettype). A new type (list, str, tuple)
    is a new member here, with its own operator and builtin rows."""

    INT = T_INT
    BOOL = T_BOOL
    NONE = T_NONE


VALUE = frozenset({Type.INT, Type.BOOL})  # "operand int or bool" (language.md 3.1)


class Typing(enum.Enum):
    """How a row's result type follows from its operand types (docs/language.md 3.1)."""

    INT = "int"  # operands int or bool -> int
    BITWISE = "bool if every operand is bool, else int"
    BOOL = "bool"  # operands int or bool -> bool (not, comparisons)
    SAME = "the operands' type; all the same (else MIXED)"  # and, or, min, max
    NONE = "None"  # print


# ----------------------------------------------------------------------------------------
# operators


class Group(enum.Enum):
    """The AST node an operator makes (syntax.Node) and the enum of its op field, which
    this module defines from the rows (syntax.py re-exports them)."""

    BINARY = "BinOp"  # Node.BINOP
    UNARY = "UnaryOp"  # Node.UNARYOP
    COMPARE = "CmpOp"  # a Node.CMPOP inside a Node.COMPARE chain
    BOOLEAN = "BoolOp"  # Node.BOOLOP


class Operator(NamedTuple):
    name: str  # the grammar rule alias (jaxcc/grammar.py); also the row's identifier
    spelling: str  # source text
    tok_name: str  # its token kind's name (jaxcc.tokens.Tok)
    aug_tok_name: str | None  # the augmented assignment's token (`+=`), if any
    group: Group
    grammar: tuple[str, str]  # (nonterminal, production): its alternative in grammar.py
    py_ast: type  # Python's ast class; its name is the op field's member name
    opcode: Op | None  # what it compiles to (None: no instruction, or control flow)
    typing: Typing
    operands: frozenset  # allowed operand types
    checks: tuple[Check, ...]  # in the order the machine tests them
    sem: Callable | None  # the int32 semantic function (None: control flow)

    @property
    def sub(self) -> int:
        """The AST's op field (BinOp / UnaryOp / CmpOp / BoolOp member)."""
        return _ENUMS[self.group][self.py_ast.__name__]

    @property
    def node(self):
        """The syntax.Node kind it makes."""
        from jaxcc.syntax import Node

        return Node[_NODE_OF[self.group]]

    @property
    def tok(self):
        """Its token kind (jaxcc.tokens.Tok)."""
        from jaxcc.tokens import Tok

        return Tok[self.tok_name]

    @property
    def aug_tok(self):
        """Its augmented assignment's token kind, or None."""
        from jaxcc.tokens import Tok

        return None if self.aug_tok_name is None else Tok[self.aug_tok_name]


# Grammar productions: a binary operator at precedence level L is `L TOK operand`, left
# associative, except ** (right associative, binds tighter than unary minus on its left);
# unary operators are `TOK factor`; comparisons are one token of a cmp_op.
def _bin(name, spelling, tok, aug, rule, py, op, typing, sem, checks=()):
    return Operator(
        name, spelling, tok, aug, Group.BINARY, rule, py, op, typing, VALUE, checks, sem
    )


def _un(name, spelling, tok, rule, py, op, typing, sem, checks=()):
    return Operator(
        name, spelling, tok, None, Group.UNARY, rule, py, op, typing, VALUE, checks, sem
    )


def _cmp(name, spelling, tok, py, op, sem):
    rule = ("cmp_op", tok)
    return Operator(
        name, spelling, tok, None, Group.COMPARE, rule, py, op, Typing.BOOL, VALUE, (), sem
    )


def _truth(c):
    return where(c, 1, 0)


# Binary operators in BinOp order (the AST's op numbering), then unary, comparison and
# boolean operators in theirs.
OPERATORS: tuple[Operator, ...] = (
    _bin("add", "+", "PLUS", "PLUSEQUAL", ("arith", "arith PLUS term"),
         ast.Add, Op.ADD, Typing.INT, lambda a, b: wrap(a + b), (_ADD_OVF,)),
    _bin("sub", "-", "MINUS", "MINEQUAL", ("arith", "arith MINUS term"),
         ast.Sub, Op.SUB, Typing.INT, lambda a, b: wrap(a - b), (_SUB_OVF,)),
    _bin("mult", "*", "STAR", "STAREQUAL", ("term", "term STAR factor"),
         ast.Mult, Op.MUL, Typing.INT, lambda a, b: wrap(a * b), (overflow(_mul_ovf),)),
    _bin("floordiv", "//", "DOUBLESLASH", "DOUBLESLASHEQUAL", ("term", "term DOUBLESLASH factor"),
         ast.FloorDiv, Op.FLOORDIV, Typing.INT, lambda a, b: a // _div_safe(a, b),
         (ZERO_DIVISION, overflow(lambda a, b, r: (a == INT_MIN) & (b == -1)))),
    _bin("mod", "%", "PERCENT", "PERCENTEQUAL", ("term", "term PERCENT factor"),
         ast.Mod, Op.MOD, Typing.INT, lambda a, b: a % _div_safe(a, b), (ZERO_DIVISION,)),
    _bin("pow", "**", "DOUBLESTAR", "DOUBLESTAREQUAL", ("power", "atom_expr DOUBLESTAR factor"),
         ast.Pow, Op.POW, Typing.INT, _pow, (NEGATIVE_POWER, overflow(_pow_ovf))),
    _bin("lshift", "<<", "LEFTSHIFT", "LEFTSHIFTEQUAL", ("shift_expr", "shift_expr LEFTSHIFT arith"),
         ast.LShift, Op.LSHIFT, Typing.INT, _lshift, (NEGATIVE_SHIFT, overflow(_lshift_ovf))),
    _bin("rshift", ">>", "RIGHTSHIFT", "RIGHTSHIFTEQUAL", ("shift_expr", "shift_expr RIGHTSHIFT arith"),
         ast.RShift, Op.RSHIFT, Typing.INT, lambda a, b: a >> clip(b, 0, 31), (NEGATIVE_SHIFT,)),
    _bin("bitand", "&", "AMPER", "AMPEREQUAL", ("and_expr", "and_expr AMPER shift_expr"),
         ast.BitAnd, Op.AND, Typing.BITWISE, lambda a, b: a & b),
    _bin("bitor", "|", "VBAR", "VBAREQUAL", ("expr", "expr VBAR xor_expr"),
         ast.BitOr, Op.OR, Typing.BITWISE, lambda a, b: a | b),
    _bin("bitxor", "^", "CIRCUMFLEX", "CIRCUMFLEXEQUAL", ("xor_expr", "xor_expr CIRCUMFLEX and_expr"),
         ast.BitXor, Op.XOR, Typing.BITWISE, lambda a, b: a ^ b),
    _un("usub", "-", "MINUS", ("factor", "MINUS factor"),
        ast.USub, Op.NEG, Typing.INT, lambda a: wrap(-a), (_NEG_OVF,)),
    _un("uadd", "+", "PLUS", ("factor", "PLUS factor"),
        ast.UAdd, None, Typing.INT, lambda a: a),
    _un("invert", "~", "TILDE", ("factor", "TILDE factor"),
        ast.Invert, Op.INVERT, Typing.INT, lambda a: ~a),
    _un("not_", "not", "KW_NOT", ("not_test", "KW_NOT not_test"),
        ast.Not, Op.NOT, Typing.BOOL, lambda a: _truth(a == 0)),
    _cmp("lt", "<", "LESS", ast.Lt, Op.LT, lambda a, b: _truth(a < b)),
    _cmp("lte", "<=", "LESSEQUAL", ast.LtE, Op.LE, lambda a, b: _truth(a <= b)),
    _cmp("gt", ">", "GREATER", ast.Gt, Op.GT, lambda a, b: _truth(a > b)),
    _cmp("gte", ">=", "GREATEREQUAL", ast.GtE, Op.GE, lambda a, b: _truth(a >= b)),
    _cmp("eq", "==", "EQEQUAL", ast.Eq, Op.EQ, lambda a, b: _truth(a == b)),
    _cmp("not_eq", "!=", "NOTEQUAL", ast.NotEq, Op.NE, lambda a, b: _truth(a != b)),
    # short-circuit chains (grammar.py's and_chain / or_chain), compiled to jumps
    # (JUMP_IF_FALSE_OR_POP / JUMP_IF_TRUE_OR_POP) by the code generators
    Operator("bool_and", "and", "KW_AND", None, Group.BOOLEAN, ("and_test", "and_chain"),
             ast.And, None, Typing.SAME, VALUE, (), None),
    Operator("bool_or", "or", "KW_OR", None, Group.BOOLEAN, ("or_test", "or_chain"),
             ast.Or, None, Typing.SAME, VALUE, (), None),
)  # fmt: skip


def _op_enum(group: Group) -> type[enum.IntEnum]:
    """The op-field enum of a group: its rows' ast class names, numbered in table order
    (the numbering is part of the flat AST's encoding: append rows, never reorder)."""
    members = [(r.py_ast.__name__, i) for i, r in enumerate(_in(group))]
    e = enum.IntEnum(group.value, members)
    e.__doc__ = f"{group.value} op field values (jaxcc/ops.py's rows; names as in Python's ast)."
    e.__module__ = __name__
    return e


def _in(group: Group) -> tuple[Operator, ...]:
    return tuple(r for r in OPERATORS if r.group == group)


_ENUMS = {g: _op_enum(g) for g in Group}
BinOp, UnaryOp, CmpOp, BoolOp = (_ENUMS[g] for g in Group)
_NODE_OF = {Group.BINARY: "BINOP", Group.UNARY: "UNARYOP", Group.COMPARE: "CMPOP",
            Group.BOOLEAN: "BOOLOP"}  # fmt: skip

BINARY, UNARY, COMPARE, BOOLEAN = (_in(g) for g in Group)


def rows(node) -> tuple[Operator, ...]:
    """The operator rows that make one syntax.Node kind, in the order of their op values."""
    return next(_in(g) for g in Group if _NODE_OF[g] == node.name)


def subs(node, typing: Typing) -> tuple[int, ...]:
    """The sub-kinds of ``node`` whose rows have this typing rule."""
    return tuple(r.sub for r in rows(node) if r.typing == typing)


def is_any(x, values):
    """``x == values[0] | x == values[1] | ...`` (elementwise; False for no values).
    Left to right, so a traced caller gets the same expression it would write by hand."""
    out = x == values[0] if values else x != x
    for v in values[1:]:
        out = out | (x == v)
    return out


def opcode_table(node) -> tuple[Op, ...]:
    """Opcode per sub-kind of ``node`` (index = BinOp/UnaryOp/CmpOp value); NOP where the
    operator emits no instruction (unary +)."""
    return tuple(Op.NOP if r.opcode is None else r.opcode for r in rows(node))


def py_ast_map(node) -> dict[type, int]:
    """Python ast class -> sub-kind, for one AST kind (flatten's direction)."""
    return {r.py_ast: r.sub for r in rows(node)}


# ----------------------------------------------------------------------------------------
# builtins


class Place(enum.Flag):
    """Where a reserved name may appear (anywhere else it is UnsupportedError BUILTIN)."""

    CALL = enum.auto()  # called in an expression
    FOR_ITER = enum.auto()  # as the iterable of a `for` (range)
    ANNOTATION = enum.auto()  # as a parameter or return annotation (int, bool)


class Builtin(NamedTuple):
    name: str  # the reserved name; its index in BUILTINS is its interned id
    places: Place
    min_args: int
    max_args: int | None  # None: any number
    arity_message: str | None  # TypeError BUILTIN_ARITY text; {n}: the count given
    params: frozenset  # the type each argument may have
    typing: Typing | None  # result type (None: not callable as an expression)
    opcode: Op | None  # the instruction applied to the arguments (min/max: per extra one)
    checks: tuple[Check, ...]
    sem: Callable | None  # int32 semantics of ``opcode`` (one argument, or two for min/max)


_NO = frozenset()
# In interned-id order: the ids are part of the token arrays' encoding (append only).
BUILTINS: tuple[Builtin, ...] = (
    Builtin("print", Place.CALL, 0, None, None, VALUE, Typing.NONE, None, (), None),
    Builtin("abs", Place.CALL, 1, 1, "abs() takes exactly one argument ({n} given)", VALUE,
            Typing.INT, Op.ABS, (_NEG_OVF,), lambda a: where(a < 0, wrap(-a), a)),
    Builtin("min", Place.CALL, 2, None, "min() needs at least 2 arguments in jaxcc", VALUE,
            Typing.SAME, Op.MIN, (), lambda a, b: where(a <= b, a, b)),
    Builtin("max", Place.CALL, 2, None, "max() needs at least 2 arguments in jaxcc", VALUE,
            Typing.SAME, Op.MAX, (), lambda a, b: where(a >= b, a, b)),
    Builtin("range", Place.FOR_ITER, 1, 3, "range expected 1 to 3 arguments, got {n}",
            frozenset({Type.INT}), None, Op.FOR_RANGE, (), None),
    Builtin("int", Place.ANNOTATION, 0, 0, None, _NO, None, None, (), None),
    Builtin("bool", Place.ANNOTATION, 0, 0, None, _NO, None, None, (), None),
)  # fmt: skip

BUILTIN_ID: dict[str, int] = {b.name: i for i, b in enumerate(BUILTINS)}


def builtin(name: str) -> Builtin:
    """The row of a reserved name."""
    return BUILTINS[BUILTIN_ID[name]]


def arity_error(b: Builtin, n: int) -> str | None:
    """The BUILTIN_ARITY message for a call of ``b`` with n arguments, None if n is fine."""
    if b.min_args <= n and (b.max_args is None or n <= b.max_args):
        return None
    return b.arity_message.format(n=n)


RESERVED_NAMES: tuple[str, ...] = tuple(b.name for b in BUILTINS)
# builtins called as expressions (the others are only legal in their places)
CALLABLE: tuple[str, ...] = tuple(b.name for b in BUILTINS if Place.CALL in b.places)


# ----------------------------------------------------------------------------------------
# semantics by opcode


class Semantics(NamedTuple):
    """What an arithmetic opcode does: operands popped, checks, value."""

    arity: int  # operands (the semantic function's parameters)
    checks: tuple[Check, ...]
    sem: Callable


def _by_opcode() -> dict[Op, Semantics]:
    """The semantics of every row with an opcode and a semantic function, by opcode."""
    out: dict[Op, Semantics] = {}
    for r in (*OPERATORS, *BUILTINS):
        if r.opcode is not None and r.sem is not None:
            sem = Semantics(r.sem.__code__.co_argcount, r.checks, r.sem)
            # a builtin may share an operator's opcode (pow and **), not redefine it
            assert out.get(r.opcode, sem) == sem, f"two semantics for {r.opcode.name}"
            out[r.opcode] = sem
    return out


SEMANTICS: dict[Op, Semantics] = _by_opcode()


def evaluate(op: Op, *args):
    """``(value, code, detail)`` of one arithmetic opcode on int32 operands (Python ints,
    or int32 arrays elementwise). code and detail are those of the first check that
    fires, in row order, else Code.OK and 0; value is the semantic function's result
    (meaningful only when code is OK)."""
    s = SEMANTICS[op]
    r = s.sem(*args)
    code, detail = Code.OK + 0 * r, 0 * r
    for c in reversed(s.checks):  # the first check wins: apply the last one first
        fired = c.fires(*args, r)
        code = where(fired, int(c.code), code)
        detail = where(fired, int(c.detail), detail)
    return r, code, detail
