"""Hypothesis strategies for fuzzing tools that read jaxcc's subset of Python.

* ``programs()``: well-typed, terminating programs of the subset (as source text).
* ``near_misses()``: programs with exactly one error of a chosen class, each paired with
  the exception name jaxcc reports for it.

Programs are built as Python ``ast`` trees, rendered with ``ast.unparse`` and then given
formatting variety by a post-pass that keeps the token stream (so the AST) unchanged:
random spacing, comments, blank lines, line breaks inside brackets, backslash
continuations, hex/octal/binary/underscore spellings of literals, one-line bodies, ``;``.
Every choice is drawn from Hypothesis, so failing examples shrink toward smaller programs.
This module needs ``hypothesis`` (the ``test`` extra); nothing else in jaxcc imports it.

Example::

    from hypothesis import given
    from jaxcc.testing import programs

    @given(programs())
    def test_my_tool(src):
        my_tool(src)
"""

from __future__ import annotations

import ast
import io
import random
import tokenize
from typing import NamedTuple

import hypothesis.strategies as st

from jaxcc import ops

__all__ = ["programs", "near_misses", "ERROR_CLASSES"]

INT, BOOL, NONE = "int", "bool", "none"
INT_MAX = 2**31 - 1

# Upper bound (in AST nodes executed, roughly VM instructions / 3) on what one call site
# may cost, and on the product of enclosing loop trip counts: keeps every generated
# program far below jaxcc's step budget and CPython's timeout.
_CALL_BUDGET = 4000
_LOOP_BUDGET = 60
_MAX_REC_DEPTH = 4  # literal depth passed to recursive functions from outside

_KEYWORDISH = ("iff", "nota", "orr", "andy", "elsewhere", "inx", "isx", "returns", "passed",
               "True_", "None_", "_", "printer", "ranger", "absx", "defx", "forx", "whilex",
               "breakx", "l", "O", "int_", "bool_", "maxi", "lambda_", "classy")  # fmt: skip
_CMP_OPS = tuple(r.py_ast for r in ops.COMPARE)  # CmpOp order (generated programs depend on it)
_COMMENTS = (
    "note",
    "TODO: nothing",
    "x = 1 / 0 is not code",
    "it's 'quoted'",
    'say "hi"',
    "ends in a backslash \\",
    "#",
    "  spaced   out  ",
    "print(1)",
    "",
)


class _R:
    """Random choices drawn from Hypothesis; each shrinks toward its first/zero option."""

    def __init__(self, draw):
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def chance(self, pct: int) -> bool:
        """True with probability pct/100 (shrinks to False)."""
        # Hypothesis draws an integer range's upper end far more often than the
        # others: 100 is mapped to False so that pct stays close to the real frequency
        return pct > 0 and 100 - pct <= self.draw(st.integers(0, 100)) < 100

    def pick(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def weighted(self, pairs):
        """pairs: [(weight, item)] with weight >= 0; shrinks toward the first item."""
        pairs = [(w, x) for w, x in pairs if w > 0]
        total = sum(w for w, _ in pairs)
        k = self.int(0, total) % total  # the (over-drawn) upper end counts as the first
        for w, x in pairs:
            if k < w:
                return x
            k -= w
        raise AssertionError("unreachable")


class _Seeded(_R):
    """_R's choices from a seeded random.Random (they do not shrink)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def chance(self, pct: int) -> bool:
        return self.rng.randrange(100) < pct


class _Fn(NamedTuple):
    name: str
    params: tuple  # parameter types
    ret: str  # INT / BOOL / NONE
    recursive: bool  # first parameter is a decreasing depth
    cost: int  # upper bound on the work of one call


class _Scope:
    """What the generator knows at one point of one function (or the module body)."""

    def __init__(self, fn: _Fn | None, funcs: list[_Fn]):
        self.fn = fn
        self.funcs = funcs  # callable functions (defined earlier)
        self.types: dict[str, str] = {}  # every variable assigned so far -> its one type
        self.assigned: dict[str, None] = {}  # definitely assigned here (ordered set)
        self.protected: set[str] = set()  # loop counters and depth params: never assigned
        self.loops = 0  # enclosing loops
        self.mult = 1  # product of the enclosing loops' trip bounds
        self.self_calls = 0

    def declare(self, name: str, ty: str):
        self.types[name] = ty
        self.assigned[name] = None


def _name(n: str, ctx=None) -> ast.Name:
    return ast.Name(n, ctx or ast.Load())


def _const(v) -> ast.expr:
    if isinstance(v, int) and not isinstance(v, bool) and v < 0:
        return ast.UnaryOp(ast.USub(), ast.Constant(-v))
    return ast.Constant(v)


def _call(name: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(_name(name), args, [])


class _Gen:
    """Builds one program's AST from Hypothesis draws."""

    def __init__(
        self,
        r: _R,
        max_functions: int,
        fuel: int,
        depth: int,
        max_statements: int,
        unbound_reads: bool,
    ):
        self.r = r
        self.fuel_stmt = depth
        self.max_functions = max_functions
        self.fuel = fuel
        self.max_statements = max_statements
        self.unbound_reads = unbound_reads
        self.counter = 0
        # loop node -> trip bound (for costs). Keyed by the node itself, which keeps it
        # alive: keyed by id(), a dropped loop's id was reused by a later node, whose cost
        # then depended on the process's allocation history (what it had imported)
        self.trips: dict[ast.AST, int] = {}
        self.called: set[str] = set()  # functions with at least one call site
        self.style = 0  # how fresh names look
        self.top: _Scope | None = None  # the module body's scope

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        n = self.counter
        if self.style == 1:  # names that start like keywords or builtins
            return f"{_KEYWORDISH[(n * 7 + len(prefix)) % len(_KEYWORDISH)]}{n}"
        if self.style == 2:
            return f"_{prefix}_{n}"
        if self.style == 3:
            return f"{prefix.upper()}{n}"
        return f"{prefix}{n}"

    # ---------------------------------------------------------------- expressions

    def literal(self, ty: str) -> ast.expr:
        r = self.r
        if ty == BOOL:
            return ast.Constant(r.chance(50))
        v = r.weighted(
            [
                (60, lambda: r.int(0, 9)),
                (25, lambda: r.int(10, 1000)),
                (5, lambda: r.pick((INT_MAX, 2**30, 65535, 65536, 46340, 46341, -(2**31)))),
                (10, lambda: r.int(0, INT_MAX)),
            ]
        )()
        if v == -(2**31):  # the one literal allowed only under unary minus
            return ast.UnaryOp(ast.USub(), ast.Constant(2**31))
        return ast.Constant(v)

    def leaf(self, sc: _Scope, ty: str) -> ast.expr:
        r = self.r
        if self.unbound_reads:
            maybe = [n for n, t in sc.types.items() if t == ty and n not in sc.assigned]
            if maybe and r.chance(4):
                return _name(r.pick(maybe))
        names = [n for n in sc.assigned if sc.types[n] == ty]
        if names and r.chance(60):
            return _name(r.pick(names))
        return self.literal(ty)

    def operand_type(self) -> str:
        return BOOL if self.r.chance(12) else INT

    def callable_fns(self, sc: _Scope, ret: str) -> list[_Fn]:
        fns = [f for f in sc.funcs if f.ret == ret and sc.mult * f.cost <= _CALL_BUDGET]
        if sc.fn is not None and sc.fn.recursive and sc.fn.ret == ret:
            if sc.loops == 0 and sc.self_calls < 2:
                fns.append(sc.fn)
        return fns

    def call(self, sc: _Scope, fn: _Fn, fuel: int) -> ast.Call:
        r = self.r
        args = [self.expr(sc, t, fuel - 1) for t in fn.params]
        if fn is not sc.fn:  # a self-call passing a parameter on is not a typed input
            self.called.add(fn.name)
        if fn.recursive:
            if fn is sc.fn:
                sc.self_calls += 1
                # the depth argument strictly decreases
                args[0] = ast.BinOp(_name("n"), ast.Sub(), ast.Constant(r.int(1, 2)))
            else:
                args[0] = _const(r.int(-1, _MAX_REC_DEPTH))
        return _call(fn.name, args)

    def small(self, sc: _Scope, k: int, fuel: int) -> ast.expr:
        """An int expression with a value in [0, k): `e % k` or a literal."""
        r = self.r
        if r.chance(50):
            return ast.Constant(r.int(0, k - 1))
        return ast.BinOp(self.expr(sc, INT, fuel - 1), ast.Mod(), ast.Constant(k))

    def divisor(self, sc: _Scope, fuel: int) -> ast.expr:
        """Mostly never zero: a non-zero literal or `(e or k)`; sometimes unguarded."""
        r = self.r
        kind = r.weighted([(45, "lit"), (45, "or"), (10, "raw")])
        if kind == "lit":
            return _const(r.pick((1, 2, 3, 7, 10, -1, -2, -3, 16, 1000)))
        e = self.expr(sc, INT, fuel - 1)
        if kind == "or":
            return ast.BoolOp(ast.Or(), [e, _const(r.pick((1, 3, -2)))])
        return e

    def expr(self, sc: _Scope, ty: str, fuel: int) -> ast.expr:
        """A well-typed expression of type ty (INT or BOOL) with at most `fuel` levels."""
        r = self.r
        if fuel <= 0:
            return self.leaf(sc, ty)
        f = r.int(0, fuel - 1) + 1  # fuel for this node's children is < f
        calls = self.callable_fns(sc, ty)
        if ty == INT:
            kind = r.weighted(
                [
                    (14, "leaf"),
                    (8, "unary"),
                    (20, "arith"),
                    (8, "div"),
                    (3, "pow"),
                    (5, "shift"),
                    (6, "bits"),
                    (3, "abs"),
                    (4, "minmax"),
                    (10 if calls else 0, "call"),
                    (5, "ifexp"),
                    (5, "boolop"),
                ]
            )
        else:
            kind = r.weighted(
                [
                    (14, "leaf"),
                    (8, "not"),
                    (24, "compare"),
                    (8, "boolop"),
                    (5, "bits"),
                    (4, "ifexp"),
                    (2, "minmax"),
                    (10 if calls else 0, "call"),
                ]
            )
        if kind == "leaf":
            return self.leaf(sc, ty)
        if kind == "unary":
            op = r.pick((ast.USub, ast.UAdd, ast.Invert))()
            return ast.UnaryOp(op, self.expr(sc, self.operand_type(), f - 1))
        if kind == "arith":
            op = r.pick((ast.Add, ast.Sub, ast.Mult))()
            a = self.expr(sc, self.operand_type(), f - 1)
            return ast.BinOp(a, op, self.expr(sc, self.operand_type(), f - 1))
        if kind == "div":
            op = r.pick((ast.FloorDiv, ast.Mod))()
            return ast.BinOp(self.expr(sc, self.operand_type(), f - 1), op, self.divisor(sc, f))
        if kind == "pow":
            base = self.expr(sc, INT, f - 1)
            if r.chance(5):  # may be negative: ValueError
                exp = self.expr(sc, INT, f - 1)
            else:
                exp = self.small(sc, 4, f)
            return ast.BinOp(base, ast.Pow(), exp)
        if kind == "shift":
            left = r.chance(50)
            a = self.expr(sc, INT, f - 1)
            if r.chance(4):  # may be negative: ValueError
                k = self.expr(sc, INT, f - 1)
            else:
                k = self.small(sc, 12 if left else 40, f)
            return ast.BinOp(a, ast.LShift() if left else ast.RShift(), k)
        if kind == "bits":
            op = r.pick((ast.BitAnd, ast.BitOr, ast.BitXor))()
            if ty == BOOL:
                return ast.BinOp(self.expr(sc, BOOL, f - 1), op, self.expr(sc, BOOL, f - 1))
            ta, tb = r.pick(((INT, INT), (INT, INT), (INT, BOOL), (BOOL, INT)))
            return ast.BinOp(self.expr(sc, ta, f - 1), op, self.expr(sc, tb, f - 1))
        if kind == "abs":
            return _call("abs", [self.expr(sc, self.operand_type(), f - 1)])
        if kind == "minmax":
            n = r.int(2, 3)
            return _call(r.pick(("min", "max")), [self.expr(sc, ty, f - 1) for _ in range(n)])
        if kind == "call":
            return self.call(sc, r.pick(calls), f)
        if kind == "ifexp":
            test = self.expr(sc, self.operand_type(), f - 1)
            return ast.IfExp(test, self.expr(sc, ty, f - 1), self.expr(sc, ty, f - 1))
        if kind == "boolop":
            op = r.pick((ast.And, ast.Or))()
            return ast.BoolOp(op, [self.expr(sc, ty, f - 1) for _ in range(r.int(2, 3))])
        if kind == "not":
            return ast.UnaryOp(ast.Not(), self.expr(sc, self.operand_type(), f - 1))
        if kind == "compare":
            n = r.weighted([(70, 1), (22, 2), (8, 3)])
            t = INT if r.chance(90) else BOOL
            mixed = r.chance(10)  # int and bool operands may be compared
            left = self.expr(sc, self.operand_type() if mixed else t, f - 1)
            ops = [r.pick(_CMP_OPS)() for _ in range(n)]
            rest = [self.expr(sc, self.operand_type() if mixed else t, f - 1) for _ in range(n)]
            return ast.Compare(left, ops, rest)
        raise AssertionError(kind)

    # ---------------------------------------------------------------- statements

    def block(self, sc: _Scope, fuel: int) -> list[ast.stmt]:
        n = self.r.int(1, self.max_statements)
        return [self.stmt(sc, fuel) for _ in range(n)]

    def assignable(self, sc: _Scope, ty: str | None = None) -> list[str]:
        return [n for n, t in sc.types.items() if n not in sc.protected and (ty is None or t == ty)]

    def augmentable(self, sc: _Scope) -> list[str]:
        """Names `x op= e` may target: definitely assigned ones (any, with unbound_reads)."""
        names = self.assignable(sc)
        return names if self.unbound_reads else [n for n in names if n in sc.assigned]

    def stmt(self, sc: _Scope, fuel: int) -> ast.stmt:
        r = self.r
        ef = self.fuel
        in_fn = sc.fn is not None
        stmt_calls = [f for f in sc.funcs if sc.mult * f.cost <= _CALL_BUDGET]
        kind = r.weighted(
            [
                (20, "new"),
                (10 if self.assignable(sc) else 0, "assign"),
                (10 if self.augmentable(sc) else 0, "aug"),
                (15, "print"),
                (7 if stmt_calls else 0, "callstmt"),
                (2, "exprstmt"),
                (3, "assert"),
                (1, "pass"),
                (10 if fuel > 0 else 0, "if"),
                (7 if fuel > 0 and sc.mult * 2 <= _LOOP_BUDGET else 0, "for"),
                (4 if fuel > 0 and sc.mult * 2 <= _LOOP_BUDGET else 0, "while"),
                (4 if sc.loops else 0, "jump"),
                (3 if in_fn else 0, "return"),
            ]
        )
        if kind == "new":
            ty = self.operand_type()
            value = self.expr(sc, ty, ef)
            name = self.fresh("v" if in_fn else "g")
            if in_fn and self.top is not None and r.chance(12):
                # a local may reuse a module variable's name (it is a new local)
                shadow = [n for n in self.top.types if n not in sc.types]
                if shadow:
                    name = r.pick(shadow)
            sc.declare(name, ty)
            return ast.Assign([_name(name, ast.Store())], value)
        if kind == "assign":
            name = r.pick(self.assignable(sc))
            value = self.expr(sc, sc.types[name], ef)
            sc.assigned[name] = None
            return ast.Assign([_name(name, ast.Store())], value)
        if kind == "aug":
            names = self.augmentable(sc)
            done = [n for n in names if n in sc.assigned]
            if done and not (self.unbound_reads and r.chance(5)):
                names = done
            name = r.pick(names)
            if sc.types[name] == BOOL:  # & | ^ with a bool keep a bool
                op = r.pick((ast.BitAnd, ast.BitOr, ast.BitXor))()
                value = self.expr(sc, BOOL, ef)
            else:
                op = r.pick(
                    (
                        ast.Add,
                        ast.Sub,
                        ast.Mult,
                        ast.FloorDiv,
                        ast.Mod,
                        ast.Pow,
                        ast.LShift,
                        ast.RShift,
                        ast.BitAnd,
                        ast.BitOr,
                        ast.BitXor,
                    )
                )()
                if isinstance(op, (ast.FloorDiv, ast.Mod)):
                    value = self.divisor(sc, ef)
                elif isinstance(op, ast.Pow):
                    value = self.small(sc, 3, ef)
                elif isinstance(op, (ast.LShift, ast.RShift)):
                    value = self.small(sc, 8 if isinstance(op, ast.LShift) else 40, ef)
                else:
                    value = self.expr(sc, self.operand_type(), ef)
            return ast.AugAssign(_name(name, ast.Store()), op, value)
        if kind == "print":
            n = r.weighted([(10, 0), (50, 1), (30, 2), (10, 3)])
            return ast.Expr(
                _call("print", [self.expr(sc, self.operand_type(), ef) for _ in range(n)])
            )
        if kind == "callstmt":
            fn = r.pick(stmt_calls)
            return ast.Expr(self.call(sc, fn, ef))
        if kind == "exprstmt":
            return ast.Expr(self.expr(sc, self.operand_type(), ef))
        if kind == "assert":
            ty = self.operand_type()
            e = self.expr(sc, ty, ef)
            if r.chance(75):  # mostly true: `assert e or True` (`e or 1`)
                e = ast.BoolOp(ast.Or(), [e, ast.Constant(True if ty == BOOL else 1)])
            return ast.Assert(e, None)
        if kind == "pass":
            return ast.Pass()
        if kind == "jump":
            j = ast.Break() if r.chance(50) else ast.Continue()
            if r.chance(70):
                return ast.If(self.expr(sc, self.operand_type(), ef), [j], [])
            return j
        if kind == "return":
            return self.ret(sc)
        if kind == "if":
            return self.if_stmt(sc, fuel)
        if kind == "for":
            return self.for_stmt(sc, fuel)
        if kind == "while":
            return self.while_stmt(sc, fuel)
        raise AssertionError(kind)

    def ret(self, sc: _Scope) -> ast.Return:
        r = self.r
        if sc.fn.ret == NONE:
            # `return`, `return None`, or `return` of a None-typed call
            kind = r.weighted([(70, "bare"), (10, "none"), (10, "print"), (10, "call")])
            if kind == "none":
                return ast.Return(ast.Constant(None))
            if kind == "print":
                n = r.int(0, 2)
                args = [self.expr(sc, self.operand_type(), self.fuel - 1) for _ in range(n)]
                return ast.Return(_call("print", args))
            calls = self.callable_fns(sc, NONE)
            if kind == "call" and calls:
                return ast.Return(self.call(sc, r.pick(calls), self.fuel))
            return ast.Return(None)
        return ast.Return(self.expr(sc, sc.fn.ret, self.fuel))

    def if_stmt(self, sc: _Scope, fuel: int) -> ast.If:
        r = self.r
        test = self.expr(sc, self.operand_type(), self.fuel)
        before = dict(sc.assigned)
        body = self.block(sc, fuel - 1)
        after_body = sc.assigned
        sc.assigned = dict(before)
        orelse: list[ast.stmt] = []
        kind = r.weighted([(45, "none"), (35, "else"), (20, "elif")])
        if kind == "else":
            orelse = self.block(sc, fuel - 1)
        elif kind == "elif":
            orelse = [self.if_stmt(sc, fuel - 1)]
        if kind == "none":
            sc.assigned = before
        else:  # definitely assigned after: assigned on both paths
            sc.assigned = {n: None for n in after_body if n in sc.assigned}
        return ast.If(test, body, orelse)

    def range_args(self, sc: _Scope) -> tuple[list[ast.expr], int]:
        """range() arguments with a known bound on the trip count."""
        r = self.r

        def bound(lo: int, hi: int) -> tuple[ast.expr, int, int]:
            # a literal in [lo, hi], or `e % k + lo` with values in [lo, lo + k - 1]
            if r.chance(65):
                v = r.int(lo, hi)
                return _const(v), v, v
            k = r.int(1, hi - lo + 1)
            e = ast.BinOp(self.expr(sc, INT, self.fuel - 1), ast.Mod(), ast.Constant(k))
            if lo:
                e = ast.BinOp(e, ast.Add() if lo > 0 else ast.Sub(), ast.Constant(abs(lo)))
            return e, lo, lo + k - 1

        form = r.weighted([(50, 1), (30, 2), (20, 3)])
        if form == 1:
            stop, _, hi = bound(0, 6)
            return [stop], hi
        start, slo, shi = bound(-3, 4)
        stop, tlo, thi = bound(-3, 8)
        if form == 2:
            return [start, stop], max(0, thi - slo)
        if r.chance(6):  # step 0: ValueError
            return [start, stop, ast.Constant(0)], 0
        step = r.pick((1, 2, 3, -1, -2, -3))
        if step > 0:
            trips = -(-max(0, thi - slo) // step)
        else:
            trips = -(-max(0, shi - tlo) // -step)
        return [start, stop, _const(step)], trips

    def loop_body(self, sc: _Scope, fuel: int, trips: int, loop_var: str | None) -> list[ast.stmt]:
        before = dict(sc.assigned)
        if loop_var is not None:
            sc.assigned[loop_var] = None
        sc.loops += 1
        sc.mult *= max(trips, 1)
        body = self.block(sc, fuel - 1)
        sc.mult //= max(trips, 1)
        sc.loops -= 1
        sc.assigned = before  # the body may not run
        return body

    def for_stmt(self, sc: _Scope, fuel: int) -> ast.For:
        args, trips = self.range_args(sc)
        trips = min(trips, max(1, _LOOP_BUDGET // sc.mult))
        if len(args) == 1 and isinstance(args[0], ast.Constant):
            args[0] = ast.Constant(min(args[0].value, trips))
        elif trips * sc.mult > _LOOP_BUDGET:  # too many: clamp the stop with min()
            args = [
                ast.Constant(0),
                _call("min", [args[-1] if len(args) < 3 else args[1], ast.Constant(trips)]),
            ]
        name = self.fresh("i")
        sc.types.setdefault(name, INT)
        body = self.loop_body(sc, fuel, trips, name)
        node = ast.For(_name(name, ast.Store()), _call("range", args), body, [])
        self.trips[node] = trips
        return node

    def while_stmt(self, sc: _Scope, fuel: int) -> ast.stmt:
        r = self.r
        k = r.int(0, min(6, _LOOP_BUDGET // sc.mult))
        c = self.fresh("c")
        sc.declare(c, INT)
        sc.protected.add(c)
        inc = ast.AugAssign(_name(c, ast.Store()), ast.Add(), ast.Constant(1))
        if r.chance(30):  # while True: with its own break
            stop = ast.If(ast.Compare(_name(c), [ast.Gt()], [ast.Constant(k)]), [ast.Break()], [])
            body = [inc, stop, *self.loop_body(sc, fuel, k, None)]
            node = ast.While(ast.Constant(True), body, [])
        else:
            test: ast.expr = ast.Compare(_name(c), [ast.Lt()], [ast.Constant(k)])
            if r.chance(25):
                extra = self.expr(sc, BOOL, self.fuel - 1)
                test = ast.BoolOp(ast.And(), [test, extra])
            node = ast.While(test, [inc, *self.loop_body(sc, fuel, k, None)], [])
        self.trips[node] = k + 1
        init = ast.Assign([_name(c, ast.Store())], ast.Constant(0))
        return _Seq([init, node])

    # ---------------------------------------------------------------- functions

    def function(self, funcs: list[_Fn]) -> tuple[ast.FunctionDef, _Fn]:
        r = self.r
        name = self.fresh("f")
        recursive = r.chance(25)
        nparams = r.int(1 if recursive else 0, 3)
        ptypes = tuple(
            INT if (recursive and i == 0) else self.operand_type() for i in range(nparams)
        )
        ret = r.weighted([(50, INT), (25, BOOL), (25, NONE)])
        fn = _Fn(name, ptypes, ret, recursive, 0)
        sc = _Scope(fn, funcs)
        pnames = []
        args = []
        for i, t in enumerate(ptypes):
            pn = "n" if (recursive and i == 0) else self.fresh("p")
            pnames.append(pn)
            sc.declare(pn, t)
            ann = ast.Name(t) if r.chance(35) else None
            args.append(ast.arg(pn, ann))
        if recursive:
            sc.protected.add("n")
        body: list[ast.stmt] = []
        if recursive:
            test = ast.Compare(_name("n"), [r.pick((ast.LtE, ast.Lt))()], [ast.Constant(0)])
            if isinstance(test.ops[0], ast.Lt):
                test.comparators[0] = ast.Constant(1)
            sc.self_calls = 2  # the base case never recurses
            body.append(ast.If(test, [self.ret(sc)], []))
            sc.self_calls = 0
        body += self.block(sc, self.fuel_stmt)
        body += self.ending(sc)
        returns = None
        if r.chance(25):
            returns = ast.Constant(None) if ret == NONE else ast.Name(ret)
        node = ast.FunctionDef(
            name, ast.arguments([], args, None, [], [], None, []), body, [], returns
        )
        cost = self.cost(body, {f.name: f.cost for f in funcs})
        if recursive:
            s = max(1, sc.self_calls)
            cost *= sum(s**d for d in range(_MAX_REC_DEPTH + 2))
        return node, fn._replace(cost=max(cost, 1))

    def ending(self, sc: _Scope) -> list[ast.stmt]:
        """The end of a function: value-returning functions never fall off their end."""
        r = self.r
        fn = sc.fn
        tail: list[ast.stmt] = []
        if fn.recursive and sc.self_calls == 0:
            call = self.call(sc, fn, self.fuel)
            if fn.ret == NONE:
                tail.append(ast.Expr(call))
            elif fn.ret == INT:
                op = r.pick((ast.Add, ast.Sub, ast.BitXor))()
                tail.append(ast.Return(ast.BinOp(call, op, self.expr(sc, INT, self.fuel - 1))))
                return tail
            else:
                tail.append(
                    ast.Return(r.pick((lambda: ast.UnaryOp(ast.Not(), call), lambda: call))())
                )
                return tail
        if fn.ret == NONE:
            if r.chance(30):
                tail.append(ast.Return(None))
            return tail
        kind = r.weighted([(70, "return"), (20, "ifelse"), (10, "whiletrue")])
        if kind == "return":
            tail.append(self.ret(sc))
        elif kind == "ifelse":
            test = self.expr(sc, self.operand_type(), self.fuel)
            tail.append(ast.If(test, [self.ret(sc)], [self.ret(sc)]))
        else:  # `while True:` with no break of its own terminates
            c = self.fresh("c")
            sc.declare(c, INT)
            k = r.int(0, 5)
            inc = ast.AugAssign(_name(c, ast.Store()), ast.Add(), ast.Constant(1))
            done = ast.If(ast.Compare(_name(c), [ast.Gt()], [ast.Constant(k)]), [self.ret(sc)], [])
            node = ast.While(ast.Constant(True), [inc, done], [])
            self.trips[node] = k + 2
            tail += [ast.Assign([_name(c, ast.Store())], ast.Constant(0)), node]
        return tail

    def cost(self, node, costs: dict[str, int]) -> int:
        """Upper bound on the nodes executed (loops multiply, calls add the callee's)."""
        if isinstance(node, list):
            return sum(self.cost(x, costs) for x in node) + 1
        if isinstance(node, (ast.For, ast.While)):
            inner = self.cost(node.body, costs) + 2
            head = self.cost(node.iter if isinstance(node, ast.For) else node.test, costs)
            return self.trips.get(node, 1) * (inner + head) + head
        total = 1
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            total += costs.get(node.func.id, 0)
        for child in ast.iter_child_nodes(node):
            total += self.cost(child, costs)
        return total

    def module(self) -> ast.Module:
        r = self.r
        funcs: list[_Fn] = []
        top = _Scope(None, funcs)
        body: list[ast.stmt] = []
        self.top = top
        self.style = r.weighted([(70, 0), (10, 1), (10, 2), (10, 3)])
        n_fn = r.int(0, self.max_functions)
        fn_types: dict[str, tuple] = {}
        # defs first, in any order: a function may call one defined later in the source
        # (every module statement runs after all defs, so CPython agrees)
        defs_first = n_fn > 1 and r.chance(20)
        if r.chance(30) and not defs_first:
            body += self.block(top, self.fuel_stmt)
        defs = []
        for _ in range(n_fn):
            node, fn = self.function(list(funcs))
            funcs.append(fn)
            fn_types[fn.name] = fn.params
            top.funcs = funcs
            if defs_first:
                defs.append(node)
                continue
            body.append(node)
            if r.chance(50):
                body += self.block(top, self.fuel_stmt)
        while defs:
            body.append(defs.pop(r.int(0, len(defs) - 1)))
        body += self.block(top, self.fuel_stmt)
        for node in body:
            # a parameter without call sites is an int: annotate bool ones
            if isinstance(node, ast.FunctionDef) and node.name not in self.called:
                for a, t in zip(node.args.args, fn_types[node.name], strict=True):
                    if t == BOOL and a.annotation is None:
                        a.annotation = ast.Name(BOOL)
        return ast.fix_missing_locations(ast.Module(_flatten(body), []))


class _Seq(ast.stmt):
    """Several statements generated as one (flattened before rendering)."""

    _fields = ("stmts",)

    def __init__(self, stmts):
        super().__init__()
        self.stmts = stmts


def _flatten(stmts: list) -> list[ast.stmt]:
    """Expands _Seq nodes, in every nested statement list."""
    out: list[ast.stmt] = []
    for s in stmts:
        if isinstance(s, _Seq):
            out += _flatten(s.stmts)
            continue
        for field in ("body", "orelse"):
            if isinstance(getattr(s, field, None), list):
                setattr(s, field, _flatten(getattr(s, field)))
        out.append(s)
    return out


# ------------------------------------------------------------------------ rendering

_SIMPLE = (
    ast.Assign,
    ast.AugAssign,
    ast.Expr,
    ast.Assert,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.Return,
)


def _header(s: ast.stmt, kw: str = "if") -> str:
    if isinstance(s, ast.If):
        return f"{kw} {ast.unparse(s.test)}:"
    if isinstance(s, ast.While):
        return f"while {ast.unparse(s.test)}:"
    if isinstance(s, ast.For):
        return f"for {ast.unparse(s.target)} in {ast.unparse(s.iter)}:"
    if isinstance(s, ast.FunctionDef):
        params = ", ".join(ast.unparse(a) for a in s.args.args)
        ret = f" -> {ast.unparse(s.returns)}" if s.returns is not None else ""
        return f"def {s.name}({params}){ret}:"
    raise AssertionError(type(s))


class _Render:
    """Source text for a module, with formatting variety that keeps the AST unchanged.

    ``messy`` (0-3) scales how often each kind of variety is used.
    """

    def __init__(self, r: _R, messy: int):
        self.r = r
        self.messy = messy
        self.tabs = messy > 0 and r.chance(8)

    def p(self, pct: int) -> bool:
        return self.messy > 0 and self.r.chance(min(95, pct * self.messy))

    def unit(self) -> str:
        if self.tabs:
            return "\t" * (1 + self.p(5))
        if not self.p(10):
            return "    "
        return " " * self.r.pick((1, 2, 3, 5, 8, 4))

    def module(self, mod: ast.Module) -> str:
        lines: list[str] = []
        self.block(mod.body, "", lines)
        self.filler("", lines)
        text = "\n".join(lines)
        while text.endswith("\n") or text.endswith(" "):  # no whitespace-only last line
            text = text.rstrip("\n").rstrip(" ")
        return text if self.p(2) else text + "\n"

    def filler(self, indent: str, lines: list[str]):
        """Blank lines and comment-only lines (any indentation: they never change it)."""
        r = self.r
        while self.p(6):
            if r.chance(50):
                lines.append(" " * r.int(0, 3) if r.chance(20) else "")
            else:
                ind = indent if r.chance(60) else " " * r.int(0, 9)
                lines.append(f"{ind}# {r.pick(_COMMENTS)}")

    def block(self, stmts: list[ast.stmt], indent: str, lines: list[str]):
        i = 0
        while i < len(stmts):
            self.filler(indent, lines)
            s = stmts[i]
            if isinstance(s, _SIMPLE):
                group = [s]
                while i + 1 < len(stmts) and isinstance(stmts[i + 1], _SIMPLE) and self.p(8):
                    i += 1
                    group.append(stmts[i])
                lines.append(self.line(indent, self.simple(group)))
            else:
                self.compound(s, indent, lines)
            i += 1

    def simple(self, group: list[ast.stmt]) -> str:
        text = "; ".join(ast.unparse(s) for s in group)
        return text + ";" if self.p(2) else text

    def body(self, header: str, body: list[ast.stmt], indent: str, lines: list[str]):
        if all(isinstance(s, _SIMPLE) for s in body) and len(body) <= 3 and self.p(10):
            lines.append(self.line(indent, header + " " + self.simple(body)))
            return
        lines.append(self.line(indent, header))
        self.block(body, indent + self.unit(), lines)

    def compound(self, s: ast.stmt, indent: str, lines: list[str], kw: str = "if"):
        self.body(_header(s, kw), s.body, indent, lines)
        orelse = getattr(s, "orelse", [])
        if not orelse:
            return
        if len(orelse) == 1 and isinstance(orelse[0], ast.If) and not self.p(10):
            self.filler(indent, lines)
            self.compound(orelse[0], indent, lines, "elif")
            return
        self.filler(indent, lines)
        self.body("else:", orelse, indent, lines)

    def number(self, v: int) -> str:
        r = self.r
        if not self.p(8):
            return str(v)
        base = r.pick((10, 16, 8, 2))
        if base == 10:
            digits, prefix = str(v), ""
        elif base == 16:
            digits = format(v, "x" if r.chance(50) else "X")
            prefix = r.pick(("0x", "0X"))
        elif base == 8:
            digits, prefix = format(v, "o"), r.pick(("0o", "0O"))
        else:
            digits, prefix = format(v, "b"), r.pick(("0b", "0B"))
        out = prefix + ("_" if prefix and r.chance(15) else "") + digits[0]
        for d in digits[1:]:
            out += ("_" if r.chance(15) else "") + d
        return out

    def gap(self, prev: tokenize.TokenInfo, tok: tokenize.TokenInfo, depth: int) -> str:
        r = self.r
        words = (tokenize.NAME, tokenize.NUMBER)
        need = prev.type in words and tok.type in words
        orig = " " * (tok.start[1] - prev.end[1])
        if depth > 0 and self.p(4):  # a line break inside brackets, maybe after a comment
            comment = f"  # {r.pick(_COMMENTS)}" if r.chance(30) else ""
            return " " * r.int(0, 2) + comment + "\n" + " " * r.int(0, 12)
        if self.p(1):  # backslash continuation
            return " " * r.int(need, 2) + "\\\n" + " " * r.int(0, 8)
        if self.p(4):
            return " " * r.int(1 if need else 0, 3)
        return orig

    def line(self, indent: str, text: str) -> str:
        """One logical line (its tokens respaced, maybe spread over physical lines)."""
        r = self.r
        skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT)
        toks = [
            t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in skip
        ]
        out = [indent]
        depth = 0
        prev = None
        for t in toks:
            s = t.string
            if t.type == tokenize.NUMBER and s.isdigit():
                s = self.number(int(s))
            if prev is not None:
                out.append(self.gap(prev, t, depth))
            out.append(s)
            if s in "([{" and t.type == tokenize.OP:
                depth += 1
            elif s in ")]}" and t.type == tokenize.OP:
                depth -= 1
            prev = t
        if self.p(5):
            out.append(" " * r.int(0, 3) + f"  # {r.pick(_COMMENTS)}")
        elif self.p(2):
            out.append(" " * r.int(1, 3))
        return "".join(out)


@st.composite
def _programs(draw, max_functions, fuel, depth, max_statements, unbound_reads, formatting):
    r = _R(draw)
    gen = _Gen(r, max_functions, fuel, depth, max_statements, unbound_reads)
    mod = gen.module()
    plain = ast.unparse(mod)
    if not formatting:
        return plain + "\n"
    # formatting choices come from a seeded generator (drawing each from Hypothesis
    # doubles the generation time); messiness 0 (what failures shrink to) is plain text
    messy = r.int(0, 3)
    text = _Render(_Seeded(r.int(0, 2**32 - 1)), messy).module(mod)
    # the formatting pass must never change the program
    if ast.dump(ast.parse(text)) != ast.dump(ast.parse(plain)):
        raise AssertionError(f"formatting changed the program:\n{plain}\n----\n{text}")
    return text


def programs(
    max_functions: int = 3,
    fuel: int = 3,
    depth: int = 2,
    max_statements: int = 4,
    unbound_reads: bool = True,
    formatting: bool = True,
) -> st.SearchStrategy[str]:
    """Source text of well-typed, terminating programs of jaxcc's subset.

    Each program has up to ``max_functions`` functions (0-3 int/bool parameters, some
    annotated, bool ones always when the function has no other caller; int, bool or no
    return value, sometimes annotated) and module-level statements. Usually defs and
    module statements interleave and a function calls only earlier ones; sometimes all
    defs come first, in shuffled order, and a function may call one defined later
    (module statements run only after every def). A recursive function's first
    parameter ``n`` is a depth that every self-call decreases (``f(n - 1, ...)`` or
    ``n - 2``) and that its first statement checks (``if n <= 0: return ...``); calls
    from elsewhere pass a literal depth from -1 to 4. Loops are ``for NAME in
    range(...)`` with bounded trip counts (1-3 arguments, negative steps, empty
    ranges) and ``while`` loops driven by a counter (``c < K``, maybe ``and e``, or
    ``while True:`` with ``if c > K: break``); value-returning functions end in a
    ``return``, an ``if``/``else`` returning on both sides, or a ``while True:`` that
    returns. The product of nested trip counts and the cost of calls inside loops are
    bounded, so programs run for at most some tens of thousands of VM steps.

    Expressions (at most ``fuel`` levels deep) use every operator of the subset on int
    and bool operands, chained comparisons, ``and``/``or`` (with side-effecting calls),
    conditional expressions, ``abs``/``min``/``max``; literals are mostly small, some at
    the int32 edges (``2147483647``, ``-2147483648``). Divisors are mostly guarded (a
    non-zero literal or ``e or k``), ``**`` exponents and shift counts are mostly
    ``e % k``, so values stay mostly inside int32 while some programs overflow, divide by
    zero, shift by a negative count, fail an ``assert`` or use a ``range`` step of 0 on
    purpose. Statements: assignment (a local may reuse a module variable's name),
    augmented assignment (bool variables only with ``&= |= ^=``), ``print`` of 0-3 ints
    and bools, calls as statements, bare expressions, ``assert``, ``pass``, ``if``/
    ``elif``/``else``, loops, ``break``/``continue``, ``return`` (``return None`` and
    ``return print(...)`` in functions without a value). Variables keep one type and are
    read only when definitely assigned, except (with ``unbound_reads``) a few deliberate
    reads of maybe-unassigned names that raise UnboundLocalError (NameError at module
    level). Names come in one of a few styles per program (``v3``, ``_v_3``, ``V3``, or
    keyword-like prefixes such as ``iff3``, ``None_3``). Compound statements nest at most
    ``depth`` levels; blocks have 1 to ``max_statements`` statements.

    With ``formatting``, the text gets random spacing, comments (also inside brackets and
    on their own lines at any indentation), blank lines, line breaks inside brackets,
    backslash continuations, hexadecimal/octal/binary and ``_`` spellings of literals,
    one-line bodies, ``;``-joined statements and a trailing ``;``, indentation widths
    other than 4 (or tabs), and sometimes no final newline; how much is drawn per program
    (shrinking to none), the choices themselves from a seeded RNG. The post-pass is
    checked to leave the AST unchanged. Without ``formatting`` the text is exactly
    ``ast.unparse`` of the program plus a newline.
    """
    return _programs(max_functions, fuel, depth, max_statements, unbound_reads, formatting)


def seeded_program(seed: int) -> str:
    """``programs()``' kind of program (its default sizes, no formatting: ``ast.unparse``
    plus a newline) with its choices from ``random.Random(seed)`` instead of Hypothesis:
    the same text for a seed in any process, and far cheaper to make in bulk (nothing
    shrinks)."""
    return ast.unparse(_Gen(_Seeded(seed), 3, 3, 2, 4, True).module()) + "\n"


# ------------------------------------------------------------------------ near misses

# The error classes near_misses() can make, with the exception name jaxcc reports.
ERROR_CLASSES = {
    "syntax": "SyntaxError",
    "indentation": "IndentationError",
    "type": "TypeError",
    "name": "NameError",
    "unsupported": "UnsupportedError",
    "zero_division": "ZeroDivisionError",
    "overflow": "OverflowError",
    "value": "ValueError",
    "recursion": "RecursionError",
    "unbound_local": "UnboundLocalError",
    "unbound_global": "NameError",  # CPython's UnboundLocalError at module level
    "assertion": "AssertionError",
}

_VAR_NAMES = ("x", "y", "z", "total", "count", "acc", "flag", "value", "k", "m")
_FN_NAMES = ("f", "g", "h", "step", "fib", "work", "helper", "calc")


def _syntax(r: _R, x: str, y: str, f: str, k: int) -> list[str]:
    return r.pick(
        (
            # missing colon
            lambda: [f"{x} = {k}", f"if {x} > 1", f"    print({x})"],
            lambda: [f"{x} = {k}", f"while {x} < {k}", f"    {x} += 1"],
            lambda: [f"for {x} in range({k})", f"    print({x})"],
            lambda: [f"def {f}({x})", f"    return {x}"],
            lambda: [f"{x} = {k}", f"if {x}:", "    pass", "else", "    pass"],
            # unbalanced parentheses
            lambda: [f"{x} = ({k} + 1))"],
            lambda: [f"print({k}))"],
            lambda: [f"{x} = {k}", f"print(({x} + 1)"],
            # stray tokens
            lambda: [f"{x} = {k} {k + 1}"],
            lambda: [f"{x} = {k} +"],
            lambda: [f"{x} = {k}", f"print({x}) {x}"],
            lambda: [f"{x} {y} = {k}"],
            lambda: [f"{x} = {k}", f"print({x},, 1)"],
            lambda: [f"{x} = {k} if {k}"],
            lambda: [f"{x} = {k} $ 2"],
            lambda: [f"{x} = 0{k % 9 + 1}"],
            # bad assignment targets
            lambda: [f"{k} = {x}"],
            lambda: [f"{x} = {k}", f"{x} + 1 = {k}"],
            lambda: [f"{x} = {k}", f"({x} + 1) += 1"],
            lambda: [f"def {f}({x}):", f"    return {x}", f"{f}({k}) = 3"],
            lambda: ["True = 1"],
            # statements out of place
            lambda: [f"return {k}"],
            lambda: [f"{x} = {k}", "if 1:", "    break"],
            lambda: ["continue"],
            lambda: [f"def {f}({x}):", "    continue", f"print({f}(1))"],
            lambda: [f"def {f}({x}, {x}):", f"    return {x}"],
        )
    )()


def _indentation(r: _R, x: str, y: str, f: str, k: int) -> list[str]:
    return r.pick(
        (
            lambda: [f"{x} = {k}", f"    {y} = {k}"],
            lambda: [f"if {k}:", f"    {x} = 1", f"        {y} = 2"],
            lambda: [f"if {k}:", f"        {x} = 1", f"    {y} = 2"],
            lambda: [f"def {f}({x}):", f"        {y} = {x}", f"    return {y}"],
            lambda: [f"if {k}:", f"print({k})"],
            lambda: [f"def {f}():", f"return {k}"],
            lambda: [f"for {x} in range({k}):", f"{y} = {x}"],
            lambda: ["while False:", "pass"],
        )
    )()


def _type(r: _R, x: str, y: str, f: str, k: int) -> list[str]:
    b = r.pick(("True", "False"))
    return r.pick(
        (
            lambda: [f"{x} = {k}", f"{x} = {b}"],
            lambda: [f"{x} = {b}", f"{x} += {k}"],
            lambda: [f"{x} = {k}", f"{y} = {k} if {x} else {b}"],
            lambda: [f"{x} = {k}", f"{y} = {x} or {b}"],
            lambda: [f"print(min({k}, {b}))"],
            lambda: [f"def {f}({x}):", f"    return {x}", f"print({f}({k}))", f"print({f}({b}))"],
            lambda: [f"def {f}({x}: bool):", f"    return {x}", f"print({f}({k}))"],
            lambda: [f"def {f}({x}) -> bool:", f"    return {x} + 1", f"print({f}({k}))"],
            lambda: [
                f"def {f}({x}):",
                f"    if {x} > 0:",
                f"        return {k}",
                f"    return {b}",
            ],
            lambda: [
                f"def {f}({x}):",
                f"    if {x} > 0:",
                f"        return {x}",
                f"print({f}({k}))",
            ],
            lambda: [f"def {f}():", f"    print({k})", f"{x} = {f}()"],
            lambda: [f"def {f}():", f"    print({k})", f"{x} = {f}() + 1"],
            lambda: [f"def {f}():", "    return", f"if {f}():", f"    print({k})"],
            lambda: [f"def {f}({x}):", f"    return {x}", f"print({f}({k}, {k}))"],
            lambda: [f"def {f}({x}, {y}):", f"    return {x}", f"print({f}({k}))"],
            lambda: [f"print(abs({k}, 2))"],
            lambda: [f"print(max({k}))"],
        )
    )()


def _name_error(r: _R, x: str, y: str, f: str, k: int) -> list[str]:
    return r.pick(
        (
            lambda: [f"print({y})"],
            lambda: [f"{x} = {y} + {k}"],
            lambda: [f"print({f}({k}))", f"def {f}({x}):", f"    return {x}"],
            lambda: [f"{f}({k})"],
            lambda: [f"def {f}({x}):", f"    return {x} + {y}", f"print({f}({k}))"],
        )
    )()


def _unsupported(r: _R, x: str, y: str, f: str, k: int) -> list[str]:
    return r.pick(
        (
            lambda: [f"{x} = 'abc'"],
            lambda: [f'print("{k}")'],
            lambda: [f"{x} = {k}.5"],
            lambda: [f"{x} = {k}j"],
            lambda: [f"{x} = {k} / 2"],
            lambda: [f"{x} = [{k}, 2]"],
            lambda: [f"{x} = {k}", f"print({x}.real)"],
            lambda: [f"{x} = {{{k}: 2}}"],
            lambda: ["class C:", "    pass"],
            lambda: [f"{f} = lambda {x}: {x}"],
            lambda: ["import math"],
            lambda: ["from math import gcd"],
            lambda: [f"def {f}({x}):", f"    return {x}", f"print({f}({x}={k}))"],
            lambda: [f"print({k}, flush=True)"],
            lambda: [f"{x}, {y} = {k}, 2"],
            lambda: [f"{x} = {y} = {k}"],
            lambda: [f"{x} = {k}", f"def {f}():", f"    return {x}", f"print({f}())"],
            lambda: [f"{x}: int = {k}"],
            lambda: [f"for {x} in [1, 2]:", f"    print({x})"],
            lambda: [f"for {x} in range({k}):", "    pass", "else:", "    pass"],
            lambda: [f"def {f}({x}={k}):", f"    return {x}"],
            lambda: [f"def {f}(*{x}):", "    return 1"],
            lambda: [f"def {f}({x}):", f"    def {y}():", "        return 1", f"    return {x}"],
            lambda: [f"print(({x} := {k}))"],
            lambda: [f"{x} = {k}", f"print({x} is {x})"],
            lambda: [f"{x} = {k}", f"print({x} in {x})"],
            lambda: [f"{x} = {k}", f"del {x}"],
            lambda: ["try:", f"    print({k})", "except:", "    pass"],
            lambda: [f"global {x}", f"{x} = {k}"],
            lambda: [f"{x} = {k}", f"{x} = {x} @ 2"],
            lambda: ["..."],
            lambda: [f"print({k})", "raise"],
        )
    )()


def _runtime(kind: str, r: _R, x: str, y: str, f: str, k: int) -> list[str]:
    k1 = k + 1
    table = {
        "zero_division": (
            lambda: [f"{x} = {k}", f"{y} = {x} - {k}", f"print({k1} // {y})"],
            lambda: [f"{x} = {k}", f"print({x} % ({x} - {x}))"],
            lambda: [f"def {f}({x}):", f"    return {k} // {x}", f"print({f}(0))"],
            lambda: [f"{x} = {k}", f"{x} //= 0"],
        ),
        "overflow": (
            lambda: [f"{x} = 2147483647 - {k}", f"{x} += {k1}"],
            lambda: [f"{x} = 65536", f"print({x} * {x})"],
            lambda: [f"print({k1} << 31)"],
            lambda: ["print(2 ** 31)"],
            lambda: [f"{x} = -2147483647 - 1", f"print(-{x})"],
            lambda: [f"{x} = -2147483647 - 1", f"print(abs({x}))"],
            lambda: [f"{x} = -2147483647 - 1", f"print({x} // -1)"],
            lambda: [f"{x} = -2147483647", f"print({x} - {k1} - 1)"],
            lambda: [f"{x} = {k1}", "while True:", f"    {x} *= 3"],
        ),
        "value": (
            lambda: [f"print({k} << -{k1})"],
            lambda: [f"{x} = {k}", f"print({x} >> ({x} - {k1}))"],
            lambda: [f"print({k} ** -{k1})"],
            lambda: [f"{x} = {k}", f"for {y} in range(0, 5, {x} - {x}):", f"    print({y})"],
        ),
        "recursion": (
            lambda: [f"def {f}({x}):", f"    return {f}({x} + 1)", f"print({f}({k}))"],
            lambda: [
                f"def {f}({x}):",
                f"    if {x} == 0:",
                "        return 0",
                f"    return {f}({x} - 1) + 1",
                f"print({f}(-{k1}))",
            ],
            lambda: [f"def {f}({x}):", f"    {f}({x})", f"{f}({k})"],
        ),
        "unbound_local": (
            lambda: [
                f"def {f}({x}):",
                f"    if {x} > {k + 100}:",
                f"        {y} = 1",
                f"    return {y}",
                f"print({f}({k}))",
            ],
            lambda: [
                f"def {f}():",
                f"    for {x} in range(0):",
                "        pass",
                f"    return {x}",
                f"print({f}())",
            ],
            lambda: [f"def {f}({x}):", f"    {y} += {x}", f"    {y} = 0", f"{f}({k})"],
        ),
        "unbound_global": (
            lambda: [f"{x} = {k}", f"if {x} > {k + 100}:", f"    {y} = 1", f"print({y})"],
            lambda: [f"for {x} in range(0):", "    pass", f"print({x})"],
            lambda: ["while False:", f"    {x} = 1", f"print({x} + 1)"],
        ),
        "assertion": (
            lambda: [f"{x} = {k}", f"assert {x} == {x} + 1"],
            lambda: ["assert False"],
            lambda: ["assert 0"],
            lambda: [f"{x} = {k}", f"assert {x} < 0 or {x} > {k1}"],
        ),
    }
    return r.pick(table[kind])()


_SAFE = (
    lambda q, k: [f"{q} = {k}"],
    lambda q, k: [f"print({k}, {k % 2 == 0})"],
    lambda q, k: [f"def {q}(a):", f"    return a + {k}", f"print({q}({k}))"],
    lambda q, k: [f"if {k} > 3:", f"    print({k})", "else:", "    print(False)"],
    lambda q, k: [f"for {q} in range({k % 4}):", f"    print({q})"],
    lambda q, k: ["pass"],
)


def _filler(r: _R, tag: str) -> list[str]:
    out: list[str] = []
    for i in range(r.int(0, 2)):
        out += r.pick(_SAFE)(f"q{tag}{i}", r.int(0, 99))
    return out


@st.composite
def _near_misses(draw, classes, context):
    r = _R(draw)
    cls = r.pick(classes)
    x, y = r.pick(_VAR_NAMES), r.pick(_VAR_NAMES)
    if y == x:
        y = x + "2"
    f = r.pick(_FN_NAMES)
    k = r.int(0, 50)
    if cls == "syntax":
        lines = _syntax(r, x, y, f, k)
    elif cls == "indentation":
        lines = _indentation(r, x, y, f, k)
    elif cls == "type":
        lines = _type(r, x, y, f, k)
    elif cls == "name":
        lines = _name_error(r, x, y, f, k)
    elif cls == "unsupported":
        lines = _unsupported(r, x, y, f, k)
    else:
        lines = _runtime(cls, r, x, y, f, k)
    before = _filler(r, "a")
    # an unclosed bracket or an unfinished block swallows what follows: nothing after it
    unfinished = cls in ("syntax", "indentation") and (
        lines[-1].endswith(":") or lines[-1].count("(") > lines[-1].count(")")
    )
    after = [] if unfinished else _filler(r, "b")
    snippet = "\n".join(before + lines + after) + "\n"
    if context:
        snippet = _in_context(r, draw(programs(max_functions=2, unbound_reads=False)), snippet,
                              "first" if cls in _RUN_TIME_IN_CPYTHON else "last" if unfinished else "any")  # fmt: skip
    return snippet, ERROR_CLASSES[cls]


_COMPILE_TIME = ("syntax", "indentation", "type", "name", "unsupported")
# CPython raises NameError only when the line runs, so an earlier run-time error in the
# context program (say a negative shift count) would win there: put it first, like these.
_RUN_TIME_IN_CPYTHON = tuple(c for c in ERROR_CLASSES if c not in _COMPILE_TIME) + ("name",)


def _in_context(r: _R, program: str, snippet: str, where: str) -> str:
    """The snippet inserted between two top-level statements of a valid program.

    where: "first" (a run-time error must come before anything else can fail), "last"
    (an unclosed bracket or unfinished block), or "any".
    """
    if not program.endswith("\n"):
        program += "\n"
    lines = program.splitlines(keepends=True)
    # a top-level statement that begins a logical line: its first token follows a NEWLINE
    # token (not one after `;`, nor one at column 0 after `x = 1; \` and a newline)
    after_newline, prev = set(), tokenize.NEWLINE
    for t in tokenize.generate_tokens(io.StringIO(program).readline):
        if t.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        if prev == tokenize.NEWLINE:
            after_newline.add(t.start)
        prev = t.type
    body = ast.parse(program).body
    starts = [s.lineno - 1 for s in body if s.col_offset == 0 and (s.lineno, 0) in after_newline]
    starts.append(len(lines))
    at = 0 if where == "first" else len(lines) if where == "last" else r.pick(starts)
    return "".join(lines[:at]) + snippet + "".join(lines[at:])


def near_misses(classes=None, context: bool = False) -> st.SearchStrategy[tuple[str, str]]:
    """``(source, exception name)`` pairs: programs with exactly one error each.

    ``classes`` is a list of keys of ``ERROR_CLASSES`` (default: all of them); each example
    picks one class, then one template of it with random names and numbers, between up to
    two error-free filler statements before and after (none after an unclosed bracket or
    an unfinished block). With ``context``, that snippet is then put between two top-level
    statements of a (formatted, error-prone but never-reached) ``programs()`` example: at
    the start for run-time errors, at the end after an unclosed bracket or block, anywhere
    for the other compile-time errors. The name is the exception jaxcc reports:

    * ``syntax`` (SyntaxError): a missing ``:``, unbalanced parentheses, stray tokens, a
      leading-zero literal, an invalid character, a bad assignment target, ``return``
      outside a function, ``break``/``continue`` outside a loop, a duplicate parameter.
    * ``indentation`` (IndentationError): unexpected indent, unindent mismatch, expected
      an indented block.
    * ``type`` (TypeError, at compile time): int/bool mixed in one variable, conditional
      expression, ``and``/``or``, ``min``/``max``, parameter or annotation; a value of a
      function without return value used; arity of a call or of ``abs``/``max``; return
      types that disagree or a value-returning function that can fall off its end.
    * ``name`` (NameError, at compile time): an unknown name, a call before the ``def``.
    * ``unsupported`` (UnsupportedError): strings, floats, imaginary numbers, ``/``,
      lists, dicts, attributes, ``class``, ``lambda``, ``import``, keyword arguments,
      tuple unpacking, chained assignment, a module variable read in a function,
      annotated assignment, ``for`` over a list, loop ``else``, default and star
      parameters, nested functions, ``:=``, ``is``, ``in``, ``del``, ``try``, ``global``,
      ``@``, ``...``, ``raise``.
    * run time: ``zero_division``, ``overflow`` (int32), ``value`` (negative shift count or
      exponent, ``range`` step 0), ``recursion`` (unbounded), ``unbound_local`` (in a
      function: UnboundLocalError), ``unbound_global`` (at module level: NameError),
      ``assertion``. The error is reached on every run; no other error comes first.
    """
    classes = list(ERROR_CLASSES) if classes is None else list(classes)
    unknown = set(classes) - set(ERROR_CLASSES)
    if unknown:
        raise ValueError(f"unknown error classes: {sorted(unknown)}")
    return _near_misses(classes, context)
