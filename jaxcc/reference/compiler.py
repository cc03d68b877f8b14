"""The reference compiler: plain Python on the host, source text to jaxcc bytecode.

It is the oracle every later stage is tested against (the JAX middle end must give the
same errors and, program by program, bytecode that behaves the same), so it is written
for exactness, not speed. docs/language.md is its specification; the phases are

1. front end: the source size; CPython's ``compile()``: its SyntaxError/IndentationError
   at CPython's position, detail from its message (so 'return' outside function, 'break'
   outside loop and duplicate arguments too); then ``reference.flatten``'s errors
   (host_lex's: unsupported tokens, int literals over 2**31, token limit; then the
   constructs outside the subset; then Limit.NODES);
2. ``check_literals``: an int literal of 2**31 is only valid under unary minus;
3. ``resolve_names``: scopes, locals and slots, NameError and the scope-related
   Unsupported errors (GLOBAL_VARIABLE, FUNCTION_VALUE, BUILTIN, CALL_TARGET, FOR_TARGET);
4. ``infer_types``: a least fixpoint over {int, bool, none} for variables, parameters and
   returns, then ``check_types``: TypeErrors;
5. ``emit_code``: fixed templates per construct (no optimisation, so the JAX code
   generator can emit the identical sequence), then the limits (functions, locals,
   code size, stack).

Within one phase, of all errors found the one reported is the one at the smallest
(line, col); at equal positions the outermost construct's.

Code templates (``e`` is an expression's code, ``L:`` a label; every instruction carries
the line of the node that emits it):

* module / function body: ``body; LOAD_CONST 0; RETURN_VALUE`` (always, even where the end
  is unreachable).
* ``x = e``: ``e; STORE_VAR x``. ``x op= e``: ``LOAD_VAR x; e; OP; STORE_VAR x``.
* ``if t: A else: B``: ``t; JUMP_IF_FALSE Le; A; JUMP Lend; Le: B; Lend:`` (without else:
  ``t; JUMP_IF_FALSE Lend; A; Lend:``; ``elif`` is a nested if in the else part).
* ``while t: A``: ``Ltop: t; JUMP_IF_FALSE Lend; A; JUMP Ltop; Lend:``; break ``JUMP Lend``,
  continue ``JUMP Ltop``.
* ``for i in range(a, b, c): A``: ``a; b; c; Lh: FOR_RANGE Lx; STORE_VAR i; A; JUMP Lh; Lx:``
  (range(n): ``LOAD_CONST 0; n; LOAD_CONST 1``; range(a, b): ``a; b; LOAD_CONST 1``);
  break ``POP_N 3; JUMP Lx``, continue ``JUMP Lh``.
* ``return e``: ``e; RETURN_VALUE``; ``return``: ``LOAD_CONST 0; RETURN_VALUE``.
* ``assert e``: ``e; ASSERT``. ``pass``: nothing.
* expression statement: ``e; POP_TOP``, except a print call: just its code.
* ``print(a1..an)``: ``a1..an; PRINT_x n; PRINT_x n-1 .. PRINT_x 1; PRINT_NEWLINE; POP_N n``
  (PRINT_BOOL for bool-typed items). ``return print(..)``: that, then ``LOAD_CONST 0``.
* constants: ``LOAD_CONST v`` (True 1, False 0, None 0; ``-2147483648`` is one constant).
* ``-e``: ``e; NEG``; ``+e``: ``e``; ``~e``: ``e; INVERT``; ``not e``: ``e; NOT``.
* ``a OP b``: ``a; b; OP``. ``a and b and c``: ``a; JUMP_IF_FALSE_OR_POP L; b;
  JUMP_IF_FALSE_OR_POP L; c; L:`` (``or``: JUMP_IF_TRUE_OR_POP).
* ``a < b``: ``a; b; LT``. ``a < b < c``: ``a; b; STORE_VAR t; LOAD_VAR t; LT;
  JUMP_IF_FALSE_OR_POP L; LOAD_VAR t; c; LT; L:`` (longer chains repeat the middle part;
  ``t`` is the function's one hidden temporary, its last slot: it is live only from the
  STORE to the second LOAD, with no evaluation in between, so one slot serves all chains).
* ``b if t else o``: ``t; JUMP_IF_FALSE Le; b; JUMP Lend; Le: o; Lend:``.
* ``f(a1..an)``: ``a1..an; CALL f``. ``abs(e)``: ``e; ABS``. ``min(a, b, c)``:
  ``a; b; MIN; c; MIN`` (max: MAX).

Slots: parameters 0..nparams-1, then the other locals in order of their first assignment
in source order, then the temporary (only in functions with a comparison chain).
Functions: 0 is the module body, then the defs in source order; code is laid out in that
order. fn_maxstack is the exact maximum operand depth over the reachable instructions.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
import warnings
from typing import NamedTuple

import numpy as np

from jaxcc import isa, ops
from jaxcc.debuginfo import ITEM_NEWLINE, MAX_PRINTS, PRINT_FUNCS, TEMP_NAME, DebugInfo
from jaxcc.errors import (
    SYNTAX_MESSAGES,
    Code,
    Error,
    Limit,
    Syntax,
    Type,
    Unsupported,
    source_lines,
    without_bom,
)
from jaxcc.isa import T_BOOL, T_INT, T_NONE, Op
from jaxcc.limits import DEFAULT, Limits
from jaxcc.reference.flatten import flatten

# Type lattice of the checker: BOT (nothing known yet) < int, bool, none < TOP (conflict).
BOT, TOP = 3, 4
TYPE_NAMES = {T_INT: "int", T_BOOL: "bool", T_NONE: "None", BOT: "?", TOP: "conflict"}


class Compiled(NamedTuple):
    program: isa.Program  # numpy int32, unbatched, padded to limits.max_code / max_funcs
    error: Error  # python ints; Code.OK when it compiled
    debug: DebugInfo


class CompileError(Exception):
    def __init__(self, code, line, col, detail=0, text=""):
        super().__init__(text)
        self.code, self.line, self.col, self.detail = int(code), int(line), int(col), int(detail)
        self.text = text


# --- small helpers ----------------------------------------------------------------------

# Python ast class -> opcode (ops.py); unary + emits nothing
_BINOPS = {r.py_ast: r.opcode for r in ops.BINARY}
_BITWISE = tuple(r.py_ast for r in ops.BINARY if r.typing == ops.Typing.BITWISE)
_CMPOPS = {r.py_ast: r.opcode for r in ops.COMPARE}
_UNARY = {r.py_ast: r.opcode for r in ops.UNARY if r.opcode is not None}
_ANNOTATIONS = {"int": T_INT, "bool": T_BOOL}
RESERVED = frozenset(ops.RESERVED_NAMES)
_EXPR_BUILTINS = ops.CALLABLE


def _pos(node) -> tuple[int, int]:
    return getattr(node, "lineno", 0) or 0, getattr(node, "col_offset", 0) or 0


def join(a: int, b: int) -> int:
    if a == BOT:
        return b
    if b == BOT or a == b:
        return a
    return TOP


def _is_int_const(e) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is int


def _is_min_literal(e) -> bool:
    """``-2147483648``: unary minus directly on the literal 2**31 (one constant)."""
    return (
        isinstance(e, ast.UnaryOp)
        and isinstance(e.op, ast.USub)
        and _is_int_const(e.operand)
        and e.operand.value == 2**31
    )


class _Errors:
    """Collects a phase's errors; ``first()`` raises the one at the smallest position."""

    def __init__(self):
        self.items: list[tuple[int, int, int, CompileError]] = []

    def add(self, code, node_or_pos, detail=0, text=""):
        line, col = node_or_pos if isinstance(node_or_pos, tuple) else _pos(node_or_pos)
        self.items.append((line, col, len(self.items), CompileError(code, line, col, detail, text)))

    def raise_first(self):
        if self.items:
            raise min(self.items, key=lambda t: t[:3])[3]


# --- phase 1: the front end ---------------------------------------------------------------

_SYNTAX_DETAILS = (
    ("inconsistent use of tabs", Syntax.INCONSISTENT_TABS),
    ("unindent does not match", Syntax.UNINDENT_MISMATCH),
    ("expected an indented block", Syntax.EXPECTED_INDENT),
    ("unexpected indent", Syntax.UNEXPECTED_INDENT),
    ("invalid character", Syntax.INVALID_CHARACTER),
    ("invalid non-printable character", Syntax.INVALID_CHARACTER),
    ("leading zeros", Syntax.INVALID_DECIMAL),
    ("was never closed", Syntax.UNEXPECTED_EOF),
    ("unexpected EOF while parsing", Syntax.UNEXPECTED_EOF),
    ("unmatched", Syntax.UNMATCHED_PAREN),
    ("does not match opening parenthesis", Syntax.UNMATCHED_PAREN),
    ("'return' outside function", Syntax.RETURN_OUTSIDE_FUNCTION),
    ("'break' outside loop", Syntax.BREAK_OUTSIDE_LOOP),
    ("'continue' not properly in loop", Syntax.CONTINUE_OUTSIDE_LOOP),
    ("expected ':'", Syntax.EXPECTED_COLON),
    ("unexpected character after line continuation", Syntax.BAD_CONTINUATION),
    ("duplicate argument", Syntax.DUPLICATE_ARGUMENT),
    ("cannot assign to", Syntax.CANNOT_ASSIGN),
    ("illegal expression for augmented assignment", Syntax.CANNOT_ASSIGN),
    ("multi-line statement", Syntax.EOF_IN_MULTILINE),
    ("cannot contain null bytes", Syntax.NULL_BYTES),
    ("too many nested parentheses", Syntax.TOO_MANY_PARENS),
    ("too many levels of indentation", Syntax.TOO_DEEP),
    ("for integer string conversion", Syntax.INT_MAX_STR_DIGITS),
)


def syntax_detail(msg: str) -> Syntax:
    """The errors.Syntax member closest to a CPython SyntaxError message."""
    for key, detail in _SYNTAX_DETAILS:
        if key in msg:
            return detail
    if msg.startswith("invalid") and "literal" in msg:
        return Syntax.INVALID_NUMBER
    return Syntax.INVALID


def _cpython_error(data: bytes, mode: str):
    """CPython's SyntaxError for ``data`` (ast.parse or compile), or None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if mode == "parse":
                ast.parse(data)
            else:
                compile(data, "<jaxcc>", "exec", dont_inherit=True)
        except SyntaxError as e:
            return e
        except (ValueError, RecursionError, MemoryError):
            return None
    return None


def _byte_col(e: SyntaxError) -> int:
    """CPython's 1-based character offset as a 0-based byte column."""
    col = max((e.offset or 1) - 1, 0)
    if e.text:
        col = len(e.text[:col].encode("utf-8", "surrogateescape"))
    return col


# `python FILE` reads a file line by line and raises "source code cannot contain null
# bytes" when it reads the first line holding one: after the errors of the lines before,
# as an error of its tokenizer (so before a SyntaxError of its parser). compile() of a
# string instead rejects any NUL up front. That line and the rest replaced by one control
# character, which the tokenizer rejects in the same way at the same place, make
# compile() say what `python FILE` says, in the stand-in's words.
_NUL_STANDIN = b"\x01\n"
_NUL_STANDIN_MESSAGE = "invalid non-printable character U+0001"


def _null_as_tokenizer_error(data: bytes) -> bytes:
    if b"\0" not in data:
        return data
    return data[: data.rfind(b"\n", 0, data.index(b"\0")) + 1] + _NUL_STANDIN


def _nul_line(data: bytes) -> int:
    """The line of the stand-in, counted as CPython counts lines."""
    prefix = data[: data.rfind(b"\n", 0, data.index(b"\0")) + 1]
    return len(source_lines(prefix.decode("utf-8", "replace"))) + 1


def front_end(data: bytes, limits: Limits) -> ast.Module:
    """Phase 1: the source size; CPython's SyntaxError (from compile(), so 'return'
    outside function and the like too) at CPython's position; then flatten's errors
    (unsupported tokens and constructs, Limit.NODES, ...)."""
    if len(data) > limits.max_source_bytes:
        raise CompileError(Code.LIMIT, 1, 0, Limit.SOURCE_BYTES,
                           f"source longer than {limits.max_source_bytes} bytes")  # fmt: skip
    e = _cpython_error(_null_as_tokenizer_error(data), "compile")
    if e is not None:
        if b"\0" in data and e.msg == _NUL_STANDIN_MESSAGE and e.lineno == _nul_line(data):
            e = SyntaxError(SYNTAX_MESSAGES[Syntax.NULL_BYTES], ("<jaxcc>", e.lineno, 1, ""))
        code = Code.INDENTATION if isinstance(e, IndentationError) else Code.SYNTAX
        raise CompileError(code, e.lineno or 0, _byte_col(e), syntax_detail(e.msg), e.msg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings of ast.parse: compile() had them
        _, _, err = flatten(data, limits)
        if int(err.code) != Code.OK:
            raise CompileError(int(err.code), int(err.line), int(err.col), int(err.detail))
        _check_indent_depth(data, limits)
        return ast.parse(data)


def _check_indent_depth(data: bytes, limits: Limits) -> None:
    """Limit.INDENT_DEPTH at the first token of the first line nested deeper than
    max_indent (the lexer's indentation stack; host_lex does not check it)."""
    depth = 0
    for t in tokenize.tokenize(io.BytesIO(data).readline):
        if t.type == tokenize.INDENT:
            depth += 1
            if depth > limits.max_indent:
                raise CompileError(Code.LIMIT, t.end[0], t.end[1], Limit.INDENT_DEPTH,
                                   f"blocks nested deeper than {limits.max_indent} (limit max_indent)")  # fmt: skip
        elif t.type == tokenize.DEDENT:
            depth -= 1


# --- phase 2: literals ------------------------------------------------------------------


def check_literals(tree: ast.Module) -> None:
    """2147483648 is valid only as the operand of unary minus (that is -2**31)."""
    errs = _Errors()
    allowed = {id(n.operand) for n in ast.walk(tree) if _is_min_literal(n)}
    for n in ast.walk(tree):
        if _is_int_const(n) and n.value > 2**31 - 1 and id(n) not in allowed:
            errs.add(Code.LIMIT, n, Limit.INT_LITERAL, "integer literal does not fit in 32 bits")
    errs.raise_first()


# --- phase 3: names -----------------------------------------------------------------------


class Fn:
    """One function (id 0: the module body) and what the later phases learn about it."""

    def __init__(self, fid: int, name: str, node, params: list[str]):
        self.id, self.name, self.node = fid, name, node
        self.params = params
        self.slots: dict[str, int] = {p: i for i, p in enumerate(params)}
        self.local_names: list[str] = list(params)
        self.param_ann: list[int | None] = []
        self.ret_ann: int | None = None
        self.has_chain = False
        self.temp = -1

    @property
    def body(self):
        return self.node.body

    @property
    def line(self) -> int:
        return 1 if self.id == 0 else self.node.lineno


def _stmts_in_order(stmts):
    """Pre-order walk of statements and expressions (source order), no nested defs."""
    for s in stmts:
        yield from _walk(s)


def _walk(node):
    """Pre-order (a node, then its children in source order); iterative, because nested
    generators cost O(depth) per item on deep operator chains."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(_children(n)))


def _children(node):
    """Child nodes in source order (ast.iter_child_nodes is not, for IfExp)."""
    if isinstance(node, ast.IfExp):
        return [node.body, node.test, node.orelse]
    if isinstance(node, ast.FunctionDef):
        return list(node.body)
    if isinstance(node, ast.Call):
        return list(node.args)
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.AugAssign):
        return [node.target, node.value]
    return [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt | ast.expr)]


def _targets(stmt) -> list[ast.Name]:
    if isinstance(stmt, ast.Assign):
        return [stmt.targets[0]]
    if isinstance(stmt, ast.AugAssign | ast.For):
        return [stmt.target]
    return []


class Scopes(NamedTuple):
    fns: list  # list[Fn]
    by_name: dict  # function name -> Fn
    name_slot: dict  # id(Name load node) -> slot
    callee: dict  # id(Call node) -> Fn id, or a builtin name
    owner: dict  # id(stmt/expr) -> Fn (for every node inside a function)


def resolve_names(tree: ast.Module) -> Scopes:
    errs = _Errors()
    module = Fn(0, "<module>", tree, [])
    fns = [module]
    by_name: dict[str, Fn] = {}
    def_index: dict[str, int] = {}  # function name -> index of its def in the module body
    for i, s in enumerate(tree.body):
        if not isinstance(s, ast.FunctionDef):
            continue
        if s.name in RESERVED:
            errs.add(Code.UNSUPPORTED, s, Unsupported.BUILTIN, f"cannot redefine '{s.name}'")
        if s.name in by_name:
            errs.add(
                Code.UNSUPPORTED, s, Unsupported.REDEFINITION, f"function '{s.name}' defined twice"
            )
            continue
        f = Fn(len(fns), s.name, s, [a.arg for a in s.args.args])
        for a in s.args.args:
            if a.arg in RESERVED:
                errs.add(Code.UNSUPPORTED, a, Unsupported.BUILTIN, f"cannot redefine '{a.arg}'")
            ann = a.annotation
            if ann is None:
                f.param_ann.append(None)
            elif isinstance(ann, ast.Name) and ann.id in _ANNOTATIONS:
                f.param_ann.append(_ANNOTATIONS[ann.id])
            else:  # `x: None`: a parameter that can hold no value
                errs.add(Code.UNSUPPORTED, ann, Unsupported.ANNOTATION, "parameter annotated None")
                f.param_ann.append(None)
        r = s.returns
        if r is not None:
            f.ret_ann = T_NONE if isinstance(r, ast.Constant) else _ANNOTATIONS[r.id]
        fns.append(f)
        by_name[s.name] = f
        def_index[s.name] = i

    # locals: every assignment target, in source order of first assignment
    owner: dict[int, Fn] = {}
    for f in fns:
        stmts = [s for s in f.body if not isinstance(s, ast.FunctionDef)] if f.id == 0 else f.body
        for n in _stmts_in_order(stmts):
            owner[id(n)] = f
            for t in _targets(n):
                if t.id in RESERVED:
                    errs.add(Code.UNSUPPORTED, t, Unsupported.BUILTIN, f"cannot assign to '{t.id}'")
                elif f.id == 0 and t.id in by_name:
                    errs.add(Code.UNSUPPORTED, t, Unsupported.FUNCTION_VALUE,
                             f"cannot assign to function '{t.id}'")  # fmt: skip
                if t.id not in f.slots:
                    f.slots[t.id] = len(f.local_names)
                    f.local_names.append(t.id)
    module_vars = set(module.slots)

    name_slot: dict[int, int] = {}
    callee: dict[int, object] = {}
    for f in fns:
        stmts = [s for s in f.body if not isinstance(s, ast.FunctionDef)] if f.id == 0 else f.body
        for s in stmts:
            index = tree.body.index(s) if f.id == 0 else -1
            for n in _walk(s):
                if isinstance(n, ast.Compare) and len(n.ops) > 1:
                    f.has_chain = True
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    _resolve_load(n, f, by_name, module_vars, name_slot, errs)
                elif isinstance(n, ast.Call):
                    _resolve_call(n, f, by_name, def_index, index, callee, errs)
                elif isinstance(n, ast.For):
                    it = n.iter
                    if not (
                        isinstance(it, ast.Call)
                        and isinstance(it.func, ast.Name)
                        and it.func.id == "range"
                        and "range" not in f.slots
                    ):
                        errs.add(Code.UNSUPPORTED, it, Unsupported.FOR_TARGET,
                                 "for loops other than 'for NAME in range(...)'")  # fmt: skip
                    else:
                        callee[id(it)] = "range"
    errs.raise_first()
    for f in fns:
        if f.has_chain:
            f.temp = len(f.local_names)
            f.local_names.append(TEMP_NAME)
    return Scopes(fns, by_name, name_slot, callee, owner)


def _resolve_load(n, f, by_name, module_vars, name_slot, errs):
    name = n.id
    if name in f.slots:
        name_slot[id(n)] = f.slots[name]
    elif name in module_vars:
        errs.add(Code.UNSUPPORTED, n, Unsupported.GLOBAL_VARIABLE,
                 f"function '{f.name}' reads the module-level variable '{name}'")  # fmt: skip
    elif name in by_name:
        errs.add(
            Code.UNSUPPORTED, n, Unsupported.FUNCTION_VALUE, f"function '{name}' used as a value"
        )
    elif name in RESERVED:
        errs.add(Code.UNSUPPORTED, n, Unsupported.BUILTIN, f"builtin '{name}' used as a value")
    else:
        errs.add(Code.NAME, n, 0, f"name '{name}' is not defined")


def _resolve_call(n, f, by_name, def_index, stmt_index, callee, errs):
    func = n.func  # flatten guarantees a plain Name
    name = func.id
    if name in f.slots:
        errs.add(
            Code.UNSUPPORTED,
            func,
            Unsupported.CALL_TARGET,
            f"'{name}' is a variable, not a function",
        )
    elif name in by_name:
        if f.id == 0 and def_index[name] > stmt_index:
            errs.add(Code.NAME, func, 0, f"name '{name}' is not defined (called before its def)")
        callee[id(n)] = by_name[name].id
    elif name in _EXPR_BUILTINS:
        callee[id(n)] = name
    elif name in RESERVED:  # range (outside a for), int, bool
        if not (name == "range" and id(n) in callee):
            errs.add(Code.UNSUPPORTED, func, Unsupported.BUILTIN, f"unsupported builtin '{name}'")
    else:
        errs.add(Code.NAME, func, 0, f"name '{name}' is not defined")


# --- phase 4: types -------------------------------------------------------------------


class Types(NamedTuple):
    var: list  # per function: {name: type}
    ret: list  # per function: return type
    expr: dict  # id(expr node) -> final type


class _Typer:
    """Least fixpoint of the typing equations, then the checks (docs/language.md, 'Types')."""

    def __init__(self, scopes: Scopes):
        self.s = scopes
        fns = scopes.fns
        self.var = [{n: BOT for n in f.local_names if n != TEMP_NAME} for f in fns]
        self.ret = [BOT] * len(fns)
        self.seed_var: list[dict[str, int]] = [{} for _ in fns]
        self.seed_ret: dict[int, int] = {}
        for f in fns:
            for i, p in enumerate(f.params):
                if f.param_ann[i] is not None:
                    self.seed_var[f.id][p] = f.param_ann[i]
            if f.ret_ann is not None:
                self.seed_ret[f.id] = f.ret_ann
        # the sites: assignments, call arguments, returns (each with its function)
        self.assigns, self.calls, self.returns = [], [], []
        self.has_return = [False] * len(fns)
        for f in fns:
            stmts = (
                [s for s in f.body if not isinstance(s, ast.FunctionDef)] if f.id == 0 else f.body
            )
            for n in _stmts_in_order(stmts):
                if isinstance(n, ast.Assign | ast.AugAssign | ast.For):
                    self.assigns.append((f, n))
                elif isinstance(n, ast.Call) and isinstance(scopes.callee.get(id(n)), int):
                    g = fns[scopes.callee[id(n)]]
                    if len(n.args) == len(g.params):
                        self.calls.append((f, n, g))
                elif isinstance(n, ast.Return):
                    self.returns.append((f, n))
                    self.has_return[f.id] = True

    def etype(self, e, f: Fn) -> int:
        if isinstance(e, ast.Constant):
            v = e.value
            return T_NONE if v is None else T_BOOL if type(v) is bool else T_INT
        if isinstance(e, ast.Name):
            return self.var[f.id][e.id]
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, _BITWISE):
                return self.bitwise(self.etype(e.left, f), self.etype(e.right, f))
            return T_INT
        if isinstance(e, ast.UnaryOp):
            return T_BOOL if isinstance(e.op, ast.Not) else T_INT
        if isinstance(e, ast.Compare):
            return T_BOOL
        if isinstance(e, ast.BoolOp):
            t = BOT
            for v in e.values:
                t = join(t, self.etype(v, f))
            return t
        if isinstance(e, ast.IfExp):
            return join(self.etype(e.body, f), self.etype(e.orelse, f))
        if isinstance(e, ast.Call):
            c = self.s.callee.get(id(e))
            if not isinstance(c, str):
                return self.ret[c]
            typing = ops.builtin(c).typing  # range (a for's iterable) has none: None
            if typing == ops.Typing.INT:
                return T_INT
            if typing == ops.Typing.SAME:
                t = BOT
                for a in e.args:
                    t = join(t, self.etype(a, f))
                return t
            return T_NONE
        raise AssertionError(type(e))

    @staticmethod
    def bitwise(a: int, b: int) -> int:
        if TOP in (a, b):
            return TOP
        if BOT in (a, b):
            return BOT
        return T_BOOL if a == b == T_BOOL else T_INT

    def site_type(self, f: Fn, n) -> int:
        """The type an assignment site gives its variable."""
        if isinstance(n, ast.For):
            return T_INT
        if isinstance(n, ast.AugAssign):
            if isinstance(n.op, _BITWISE):
                return self.bitwise(self.var[f.id][n.target.id], self.etype(n.value, f))
            return T_INT
        return self.etype(n.value, f)

    def fixpoint(self) -> None:
        changed = True
        while changed:
            changed = False
            var = [dict(self.seed_var[f.id]) for f in self.s.fns]
            ret = [self.seed_ret.get(f.id, BOT) for f in self.s.fns]
            for f in self.s.fns:
                if not self.has_return[f.id] and f.ret_ann is None:
                    ret[f.id] = T_NONE
            for f, n in self.assigns:
                t = n.target.id if not isinstance(n, ast.Assign) else n.targets[0].id
                var[f.id][t] = join(var[f.id].get(t, BOT), self.site_type(f, n))
            for f, n, g in self.calls:
                for p, a in zip(g.params, n.args, strict=True):
                    if g.param_ann[g.params.index(p)] is None:
                        var[g.id][p] = join(var[g.id].get(p, BOT), self.etype(a, f))
            for f, n in self.returns:
                if f.ret_ann is None:
                    t = T_NONE if n.value is None else self.etype(n.value, f)
                    ret[f.id] = join(ret[f.id], t)
            for f in self.s.fns:
                new = {k: var[f.id].get(k, BOT) for k in self.var[f.id]}
                if new != self.var[f.id]:
                    self.var[f.id] = new
                    changed = True
            if ret != self.ret:
                self.ret = ret
                changed = True

    def solve(self) -> None:
        """Fixpoint; then unknowns default to int (parameters first, then returns, then
        variables), each default followed by a new fixpoint."""
        self.fixpoint()
        for kind in ("param", "ret", "var"):
            while True:
                seeded = False
                for f in self.s.fns:
                    if kind == "ret":
                        if self.ret[f.id] == BOT:
                            self.seed_ret[f.id] = T_INT
                            seeded = True
                        continue
                    names = f.params if kind == "param" else list(self.var[f.id])
                    for p in names:
                        if self.var[f.id][p] == BOT:
                            self.seed_var[f.id][p] = T_INT
                            seeded = True
                if not seeded:
                    break
                self.fixpoint()


def _terminates(stmts) -> bool:
    """A statement list terminates: it holds a return, an if/else whose two branches
    terminate, or a `while True:` with no break of its own."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and s.orelse and _terminates(s.body) and _terminates(s.orelse):
            return True
        if (
            isinstance(s, ast.While)
            and isinstance(s.test, ast.Constant)
            and s.test.value is True
            and not _has_own_break(s.body)
        ):
            return True
    return False


def _has_own_break(stmts) -> bool:
    for s in stmts:
        if isinstance(s, ast.Break):
            return True
        if isinstance(s, ast.If) and (_has_own_break(s.body) or _has_own_break(s.orelse)):
            return True
    return False


def _source_order(tree: ast.Module, fns: list):
    """(Fn, node) for every statement and expression, in source order (pre-order)."""
    of_def = {id(f.node): f for f in fns[1:]}
    for s in tree.body:
        if isinstance(s, ast.FunctionDef):
            f = of_def[id(s)]
            for n in _stmts_in_order(s.body):
                yield f, n
        else:
            for n in _walk(s):
                yield fns[0], n


def check_types(tree: ast.Module, scopes: Scopes) -> Types:
    ty = _Typer(scopes)
    ty.solve()
    errs = _Errors()
    fns = scopes.fns
    expr_types: dict[int, int] = {}
    # "first definite type seen" per variable and per function's returns (walk order)
    first_var = [dict(ty.seed_var[f.id]) for f in fns]
    for f in fns:  # defaults are not sites; annotations are
        for i, p in enumerate(f.params):
            if f.param_ann[i] is None:
                first_var[f.id].pop(p, None)
    first_ret = {f.id: f.ret_ann for f in fns if f.ret_ann is not None}

    def none_used(e, f, what="a value of type None is used"):
        t = ty.etype(e, f)
        if t == T_NONE:
            errs.add(Code.TYPE, e, Type.NONE_VALUE, what)
            return True
        return False

    def flow(store: dict, key, t: int, node, detail_mixed, annotated: bool, what: str):
        """One input of a join: the first definite type fixes it, others must agree."""
        if t in (BOT, TOP):
            return
        if key not in store:
            store[key] = t
        elif store[key] != t:
            detail = Type.ANNOTATION_MISMATCH if annotated else detail_mixed
            errs.add(Code.TYPE, node, detail,
                     f"{what} is {TYPE_NAMES[store[key]]} but this is {TYPE_NAMES[t]}")  # fmt: skip

    def check_join(node, parts, f):
        ts = [ty.etype(p, f) for p in parts]
        bad = False
        for p, t in zip(parts, ts, strict=True):
            if t == T_NONE:
                errs.add(Code.TYPE, p, Type.NONE_VALUE, "a value of type None is used")
                bad = True
        definite = {t for t in ts if t in (T_INT, T_BOOL)}
        if not bad and len(definite) > 1:
            errs.add(
                Code.TYPE, node, Type.MIXED, "operands would be sometimes int and sometimes bool"
            )

    for f in fns[1:]:
        rt = ty.ret[f.id]
        if rt in (T_INT, T_BOOL) and not _terminates(f.body):
            errs.add(Code.TYPE, f.node, Type.RETURN_MISMATCH,
                     f"function '{f.name}' returns {TYPE_NAMES[rt]} but can reach its end")  # fmt: skip
    # the walk is in source order: "first" below means first in the source
    for f, n in _source_order(tree, fns):
        if isinstance(n, ast.expr):
            expr_types[id(n)] = ty.etype(n, f)
        if isinstance(n, ast.Assign | ast.AugAssign | ast.For):
            tgt = n.targets[0] if isinstance(n, ast.Assign) else n.target
            if isinstance(n, ast.Assign) and none_used(n.value, f):
                continue
            if isinstance(n, ast.AugAssign) and none_used(n.value, f):
                continue
            ann = tgt.id in f.params and f.param_ann[f.params.index(tgt.id)] is not None
            t = ty.site_type(f, n)
            if isinstance(n, ast.AugAssign) and isinstance(n.op, _BITWISE):
                # `x &= e` reads x: with the type x has so far (its first definite one)
                cur = first_var[f.id].get(tgt.id, ty.var[f.id][tgt.id])
                t = ty.bitwise(cur, ty.etype(n.value, f))
            flow(first_var[f.id], tgt.id, t, tgt, Type.MIXED, ann, f"variable '{tgt.id}'")
            if isinstance(n, ast.For):
                it = n.iter
                msg = ops.arity_error(ops.builtin("range"), len(it.args))
                if msg is not None:
                    errs.add(Code.TYPE, it, Type.BUILTIN_ARITY, msg)
                for a in it.args:
                    none_used(a, f)
                expr_types[id(it)] = T_NONE
        elif isinstance(n, ast.Return):
            t = T_NONE if n.value is None else ty.etype(n.value, f)
            flow(first_ret, f.id, t, n, Type.RETURN_MISMATCH, f.ret_ann is not None,
                 f"the return type of '{f.name}'")  # fmt: skip
        elif isinstance(n, ast.If | ast.While | ast.Assert):
            none_used(n.test, f)
        elif isinstance(n, ast.BinOp):
            none_used(n.left, f)
            none_used(n.right, f)
        elif isinstance(n, ast.UnaryOp):
            none_used(n.operand, f)
        elif isinstance(n, ast.Compare):
            for p in [n.left, *n.comparators]:
                none_used(p, f)
        elif isinstance(n, ast.BoolOp):
            check_join(n, n.values, f)
        elif isinstance(n, ast.IfExp):
            none_used(n.test, f)
            check_join(n, [n.body, n.orelse], f)
        elif isinstance(n, ast.Call):
            c = scopes.callee.get(id(n))
            if c in ops.CALLABLE:  # range's arguments are checked at its `for`
                b = ops.builtin(c)
                msg = ops.arity_error(b, len(n.args))
                if msg is not None:
                    errs.add(Code.TYPE, n, Type.BUILTIN_ARITY, msg)
                if b.typing == ops.Typing.SAME:
                    check_join(n, n.args, f)
                else:
                    for a in n.args:
                        none_used(a, f)
            elif isinstance(c, int):
                g = fns[c]
                if len(n.args) != len(g.params):
                    errs.add(Code.TYPE, n, Type.ARITY,
                             f"{g.name}() takes {len(g.params)} arguments but "
                             f"{len(n.args)} were given")  # fmt: skip
                    for a in n.args:
                        none_used(a, f)
                    continue
                for i, (p, a) in enumerate(zip(g.params, n.args, strict=True)):
                    if none_used(a, f):
                        continue
                    flow(first_var[g.id], p, ty.etype(a, f), a, Type.MIXED,
                         g.param_ann[i] is not None, f"parameter '{p}' of '{g.name}'")  # fmt: skip
        # none-typed values are fine as whole expression statements and return values;
        # everywhere else the checks above report them
    errs.raise_first()
    # a safety net: a conflict with no site to blame (cannot happen, see docs/language.md)
    for f in fns:
        bad = [k for k, v in ty.var[f.id].items() if v == TOP]
        if bad or ty.ret[f.id] == TOP:
            raise CompileError(Code.TYPE, f.line, 0, Type.MIXED, "conflicting types")
    for f in fns:  # return `print(...)` in a none function is fine; others must be values
        if ty.ret[f.id] == BOT:
            ty.ret[f.id] = T_INT
    return Types(ty.var, ty.ret, expr_types)


# --- phase 5: code ----------------------------------------------------------------------


class _Emitter:
    def __init__(self, scopes: Scopes, types: Types):
        self.s, self.t = scopes, types
        self.op: list[int] = []
        self.arg: list[int] = []
        self.line: list[int] = []
        self.loops: list[tuple[str, int, list[int]]] = []  # (kind, continue target, break jumps)

    def emit(self, op: Op, arg: int, line: int) -> int:
        self.op.append(int(op))
        self.arg.append(int(arg))
        self.line.append(int(line))
        return len(self.op) - 1

    def here(self) -> int:
        return len(self.op)

    def patch(self, at: int, target: int | None = None) -> None:
        self.arg[at] = self.here() if target is None else target

    # statements
    def function(self, f: Fn) -> None:
        self.f = f
        stmts = [s for s in f.body if not isinstance(s, ast.FunctionDef)] if f.id == 0 else f.body
        for s in stmts:
            self.stmt(s)
        last = f.body[-1].lineno if f.body else 1
        if f.id == 0:
            last = stmts[-1].lineno if stmts else 1
        self.emit(Op.LOAD_CONST, 0, last)
        self.emit(Op.RETURN_VALUE, 0, last)

    def block(self, stmts) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s) -> None:
        ln = s.lineno
        f = self.f
        if isinstance(s, ast.Assign):
            self.expr(s.value)
            self.emit(Op.STORE_VAR, f.slots[s.targets[0].id], ln)
        elif isinstance(s, ast.AugAssign):
            slot = f.slots[s.target.id]
            self.emit(Op.LOAD_VAR, slot, ln)
            self.expr(s.value)
            self.emit(_BINOPS[type(s.op)], 0, ln)
            self.emit(Op.STORE_VAR, slot, ln)
        elif isinstance(s, ast.If):
            self.expr(s.test)
            j = self.emit(Op.JUMP_IF_FALSE, 0, ln)
            self.block(s.body)
            if s.orelse:
                k = self.emit(Op.JUMP, 0, ln)
                self.patch(j)
                self.block(s.orelse)
                self.patch(k)
            else:
                self.patch(j)
        elif isinstance(s, ast.While):
            top = self.here()
            self.expr(s.test)
            j = self.emit(Op.JUMP_IF_FALSE, 0, ln)
            self.loops.append(("while", top, []))
            self.block(s.body)
            self.emit(Op.JUMP, top, ln)
            _, _, breaks = self.loops.pop()
            self.patch(j)
            for b in breaks:
                self.patch(b)
        elif isinstance(s, ast.For):
            args = s.iter.args
            iln = s.iter.lineno
            if len(args) == 1:
                self.emit(Op.LOAD_CONST, 0, iln)
                self.expr(args[0])
                self.emit(Op.LOAD_CONST, 1, iln)
            else:
                self.expr(args[0])
                self.expr(args[1])
                if len(args) == 3:
                    self.expr(args[2])
                else:
                    self.emit(Op.LOAD_CONST, 1, iln)
            head = self.emit(Op.FOR_RANGE, 0, ln)
            self.emit(Op.STORE_VAR, f.slots[s.target.id], ln)
            self.loops.append(("for", head, []))
            self.block(s.body)
            self.emit(Op.JUMP, head, ln)
            _, _, breaks = self.loops.pop()
            self.patch(head)
            for b in breaks:
                self.patch(b)
        elif isinstance(s, ast.Break):
            kind, _, breaks = self.loops[-1]
            if kind == "for":
                self.emit(Op.POP_N, 3, ln)
            breaks.append(self.emit(Op.JUMP, 0, ln))
        elif isinstance(s, ast.Continue):
            self.emit(Op.JUMP, self.loops[-1][1], ln)
        elif isinstance(s, ast.Return):
            if s.value is None:
                self.emit(Op.LOAD_CONST, 0, ln)
            elif self.is_print(s.value):
                self.print_call(s.value)
                self.emit(Op.LOAD_CONST, 0, ln)
            else:
                self.expr(s.value)
            self.emit(Op.RETURN_VALUE, 0, ln)
        elif isinstance(s, ast.Assert):
            self.expr(s.test)
            self.emit(Op.ASSERT, 0, ln)
        elif isinstance(s, ast.Expr):
            if self.is_print(s.value):
                self.print_call(s.value)
            else:
                self.expr(s.value)
                self.emit(Op.POP_TOP, 0, ln)
        elif isinstance(s, ast.Pass):
            pass
        else:
            raise AssertionError(type(s))

    def is_print(self, e) -> bool:
        return isinstance(e, ast.Call) and self.s.callee.get(id(e)) == "print"

    def print_call(self, e) -> None:
        ln = e.lineno
        for a in e.args:
            self.expr(a)
        n = len(e.args)
        for i, a in enumerate(e.args):
            op = Op.PRINT_BOOL if self.t.expr[id(a)] == T_BOOL else Op.PRINT_INT
            self.emit(op, n - i, ln)
        self.emit(Op.PRINT_NEWLINE, 0, ln)
        self.emit(Op.POP_N, n, ln)

    # expressions
    def expr(self, e) -> None:
        ln = e.lineno
        if isinstance(e, ast.Constant):
            v = e.value
            self.emit(Op.LOAD_CONST, 0 if v is None else int(v), ln)
        elif isinstance(e, ast.Name):
            self.emit(Op.LOAD_VAR, self.f.slots[e.id], ln)
        elif _is_min_literal(e):
            self.emit(Op.LOAD_CONST, -(2**31), ln)
        elif isinstance(e, ast.UnaryOp):
            self.expr(e.operand)
            if not isinstance(e.op, ast.UAdd):
                self.emit(_UNARY[type(e.op)], 0, ln)
        elif isinstance(e, ast.BinOp):
            self.expr(e.left)
            self.expr(e.right)
            self.emit(_BINOPS[type(e.op)], 0, ln)
        elif isinstance(e, ast.BoolOp):
            op = Op.JUMP_IF_FALSE_OR_POP if isinstance(e.op, ast.And) else Op.JUMP_IF_TRUE_OR_POP
            jumps = []
            for v in e.values[:-1]:
                self.expr(v)
                jumps.append(self.emit(op, 0, ln))
            self.expr(e.values[-1])
            for j in jumps:
                self.patch(j)
        elif isinstance(e, ast.Compare):
            self.expr(e.left)
            if len(e.ops) == 1:
                self.expr(e.comparators[0])
                self.emit(_CMPOPS[type(e.ops[0])], 0, ln)
                return
            t = self.f.temp
            jumps = []
            for k, (op, right) in enumerate(zip(e.ops, e.comparators, strict=True)):
                if k > 0:
                    self.emit(Op.LOAD_VAR, t, ln)
                self.expr(right)
                if k < len(e.ops) - 1:
                    self.emit(Op.STORE_VAR, t, ln)
                    self.emit(Op.LOAD_VAR, t, ln)
                    self.emit(_CMPOPS[type(op)], 0, ln)
                    jumps.append(self.emit(Op.JUMP_IF_FALSE_OR_POP, 0, ln))
                else:
                    self.emit(_CMPOPS[type(op)], 0, ln)
            for j in jumps:
                self.patch(j)
        elif isinstance(e, ast.IfExp):
            self.expr(e.test)
            j = self.emit(Op.JUMP_IF_FALSE, 0, ln)
            self.expr(e.body)
            k = self.emit(Op.JUMP, 0, ln)
            self.patch(j)
            self.expr(e.orelse)
            self.patch(k)
        elif isinstance(e, ast.Call):
            c = self.s.callee[id(e)]
            if c == "print":  # only reachable through checked code paths: value 0
                self.print_call(e)
                self.emit(Op.LOAD_CONST, 0, ln)
                return
            b = ops.builtin(c) if c in ops.CALLABLE else None
            if b is not None and ops.SEMANTICS[b.opcode].arity == 2:  # min, max: a fold
                self.expr(e.args[0])
                for a in e.args[1:]:
                    self.expr(a)
                    self.emit(b.opcode, 0, ln)
                return
            for a in e.args:
                self.expr(a)
            self.emit(Op.CALL if b is None else b.opcode, c if b is None else 0, ln)
        else:
            raise AssertionError(type(e))


def stack_depths(op, arg, start: int, nparams_of) -> dict[int, int]:
    """Operand depth before each reachable instruction of a function (abstract walk).

    ``nparams_of(f)`` gives CALL's pops. Raises ValueError on an inconsistent merge or
    an underflow (the compiler's templates never produce either).
    """
    depth = {start: 0}
    work = [start]
    while work:
        pc = work.pop()
        d = depth[pc]
        o = Op(op[pc])
        a = arg[pc]
        info = isa.INFO[o]
        pops = nparams_of(a) if o == Op.CALL else a if o == Op.POP_N else info.pops
        if d < pops:
            raise ValueError(f"stack underflow at {pc}")
        succ: list[tuple[int, int]] = []
        if o == Op.RETURN_VALUE:
            pass
        elif o == Op.JUMP:
            succ = [(a, d)]
        elif o in (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE):
            succ = [(pc + 1, d - 1), (a, d - 1)]
        elif o in isa.COMPARE_JUMP_OPS:  # the optimizer's compare-and-branch
            succ = [(pc + 1, d - 2), (a, d - 2)]
        elif o in (Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP):
            succ = [(pc + 1, d - 1), (a, d)]
        elif o == Op.FOR_RANGE:
            succ = [(pc + 1, d + 1), (a, d - 3)]
        else:
            succ = [(pc + 1, d - pops + info.pushes)]
        for nxt, nd in succ:
            if nxt in depth:
                if depth[nxt] != nd:
                    raise ValueError(f"inconsistent stack depth at {nxt}")
            else:
                depth[nxt] = nd
                work.append(nxt)
    return depth


def max_stack(op, arg, start: int, nparams_of) -> int:
    """The largest operand depth any reachable instruction leaves (or needs: DUP, CALL)."""
    depth = stack_depths(op, arg, start, nparams_of)
    best = 0
    for pc, d in depth.items():
        o = Op(op[pc])
        if o == Op.CALL:
            d = d - nparams_of(arg[pc]) + 1
        elif o == Op.POP_N:
            d = d - arg[pc]
        elif o == Op.FOR_RANGE:
            d = d + 1
        elif o not in (Op.JUMP, Op.RETURN_VALUE):
            info = isa.INFO[o]
            d = d - info.pops + info.pushes
        best = max(best, d, depth[pc])
    return best


def emit_code(tree: ast.Module, scopes: Scopes, types: Types, limits: Limits):
    fns = scopes.fns
    if len(fns) > limits.max_funcs:
        f = fns[limits.max_funcs]
        raise CompileError(Code.LIMIT, *_pos(f.node), Limit.FUNCTIONS,
                           f"more than {limits.max_funcs} functions (limit max_funcs)")  # fmt: skip
    for f in fns:
        if len(f.local_names) > limits.max_locals:
            line, col = (f.line, 0) if f.id == 0 else _pos(f.node)
            raise CompileError(Code.LIMIT, line, col, Limit.LOCALS,
                               f"more than {limits.max_locals} local slots in '{f.name}' "
                               "(limit max_locals)")  # fmt: skip
    em = _Emitter(scopes, types)
    entries = []
    for f in fns:
        entries.append(em.here())
        em.function(f)
    n_code = em.here()
    if n_code > limits.max_code:
        raise CompileError(Code.LIMIT, em.line[limits.max_code], 0, Limit.CODE,
                           f"more than {limits.max_code} instructions (limit max_code)")  # fmt: skip
    nparams = [len(f.params) for f in fns]
    maxstack = []
    for f, start in zip(fns, entries, strict=True):
        ms = max_stack(em.op, em.arg, start, lambda g: nparams[g])
        if len(f.local_names) + ms > limits.max_stack:
            line, col = (f.line, 0) if f.id == 0 else _pos(f.node)
            raise CompileError(Code.LIMIT, line, col, Limit.STACK,
                               f"'{f.name}' needs a frame larger than max_stack")  # fmt: skip
        maxstack.append(ms)
    prog = _empty_program(limits)
    prog.op[:n_code] = em.op
    prog.arg[:n_code] = em.arg
    prog.line[:n_code] = em.line
    nf = len(fns)
    prog.fn_entry[:nf] = entries
    prog.fn_nparams[:nf] = nparams
    prog.fn_nlocals[:nf] = [len(f.local_names) for f in fns]
    prog.fn_maxstack[:nf] = maxstack
    prog.fn_rettype[:nf] = [T_NONE if f.id == 0 else types.ret[f.id] for f in fns]
    return prog._replace(n_code=np.int32(n_code), n_funcs=np.int32(nf))


# --- entry points -------------------------------------------------------------------------


def _empty_program(limits: Limits) -> isa.Program:
    return isa.empty_program(limits.max_code, limits.max_funcs)


def _as_bytes(source: str | bytes) -> bytes:
    """The source's bytes, without a byte-order mark at the start (CPython skips it)."""
    source = without_bom(source)
    if isinstance(source, str):
        return source.encode("utf-8", "surrogateescape")
    return source


def compile_source(source: str | bytes, limits: Limits = DEFAULT) -> Compiled:
    """Compile one program. Never raises for bad input: errors are in ``error``."""
    data = _as_bytes(source)
    lines = tuple(source_lines(data.decode("utf-8", "replace")))
    scopes = None
    old_limit = sys.getrecursionlimit()
    # the passes recurse over the tree: deep left-nested operator chains (thousands of
    # terms, within max_nodes) need more than Python's default 1000 frames
    sys.setrecursionlimit(max(old_limit, 20_000 + 4 * limits.max_nodes))
    try:
        tree = front_end(data, limits)
        check_literals(tree)
        scopes = resolve_names(tree)
        types = check_types(tree, scopes)
        prog = emit_code(tree, scopes, types, limits)
    except (RecursionError, MemoryError):
        e = CompileError(Code.LIMIT, 1, 0, Limit.PARSE_DEPTH, "program nested too deeply")
        dbg = DebugInfo(("<module>",), (1,), ((),), ((),), lines, e.text)
        return Compiled(_empty_program(limits), Error(e.code, e.line, e.col, e.detail), dbg)
    except CompileError as e:
        dbg = DebugInfo(("<module>",), (1,), ((),), ((),), lines, e.text or "")
        return Compiled(_empty_program(limits), Error(e.code, e.line, e.col, e.detail), dbg)
    finally:
        sys.setrecursionlimit(old_limit)
    fns = scopes.fns
    dbg = DebugInfo(
        fn_names=tuple(f.name for f in fns),
        fn_lines=tuple(f.line for f in fns),
        local_names=tuple(tuple(f.local_names) for f in fns),
        param_types=tuple(tuple(types.var[f.id][p] for p in f.params) for f in fns),
        source_lines=lines,
        message="",
        print_items=_print_items(fns, scopes, types),
    )
    return Compiled(prog, Error(int(Code.OK), 0, 0, 0), dbg)


def _print_items(fns, scopes: Scopes, types: Types) -> tuple:
    """DebugInfo.print_items: per function (the first PRINT_FUNCS), its print items (the
    first MAX_PRINTS) in the order the code prints them (``debuginfo.print_items``): a
    printed value's type, T_BOOL or T_INT, after everything inside it (post-order),
    arguments in order; ITEM_NEWLINE when a call of print ends, before its own value."""
    out = []
    for f in fns[:PRINT_FUNCS]:
        got: list[int] = []
        # post-order with an explicit stack (the trees can be thousands of levels deep):
        # (node, printed, children done)
        stack = [
            (st, False, False) for st in reversed(f.body) if not isinstance(st, ast.FunctionDef)
        ]
        while stack:
            node, printed, done = stack.pop()
            is_print = isinstance(node, ast.Call) and scopes.callee.get(id(node)) == "print"
            if not done:
                stack.append((node, printed, True))
                kids = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.FunctionDef)]
                stack += [(c, is_print and c in node.args, False) for c in reversed(kids)]
                continue
            if is_print:
                got.append(ITEM_NEWLINE)
            if printed:
                got.append(T_BOOL if types.expr[id(node)] == T_BOOL else T_INT)
        out.append(tuple(got[:MAX_PRINTS]))
    return tuple(out)


def compile_many(sources, limits: Limits = DEFAULT):
    """``compile_source`` over a list: (Program [B, ...], Error [B], list[DebugInfo])."""
    results = [compile_source(s, limits) for s in sources]
    if results:
        prog = isa.Program(*(np.stack([np.asarray(r.program[i]) for r in results])
                             for i in range(len(isa.Program._fields))))  # fmt: skip
    else:
        e = _empty_program(limits)
        prog = isa.Program(*(np.zeros((0, *np.shape(x)), np.int32) for x in e))
    err = Error(*(np.array([r.error[i] for r in results], np.int32).reshape(-1) for i in range(4)))
    return prog, err, [r.debug for r in results]
