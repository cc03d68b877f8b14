"""CPython as the oracle for jaxcc: run a program under ``exec`` with jaxcc's int32 semantics.

``run(source, limits)`` returns ``(stdout, exception name or None)``; ``run_detailed`` also
gives the line of the error and whether it happened at compile time.

The program's AST is rewritten before it runs so that CPython behaves like the jaxcc
machine (isa.py) on the subset:

* every arithmetic result (BinOp, unary ``-``/``~``, augmented assignment, ``abs``) goes
  through a checker that raises OverflowError outside ``[-2**31, 2**31 - 1]``; ``**`` with a
  negative exponent and shifts by a negative count raise ValueError. ``**`` and ``<<`` are
  computed without building huge numbers (an overflow is detected before it is made).
* each call of a program function counts a frame; with the module body as frame 1, a call
  that would make more than ``limits.max_depth`` frames raises RecursionError (isa.py, CALL).
  jaxcc also raises RecursionError when the value stack is full; that depends on frame sizes
  the oracle does not know, so tests keep well-behaved programs shallow.
* ``print`` writes items the way ``isa.format_output`` does (ints, bools, a newline) and
  counts them against ``limits.max_output`` (OutputLimitError when an item does not fit).
* every loop iteration and call ticks a budget (``budget``); spending it raises TimeoutError.
  This is not jaxcc's instruction count: callers treat an oracle TimeoutError as
  "too long to compare", never as an expected result. A wall-clock alarm (main thread
  only) is a backstop for anything the budget does not count.

CPython's UnboundLocalError at module level is NameError, as CPython reports it.
"""

from __future__ import annotations

import ast
import signal
import sys
import threading
from typing import NamedTuple

from jaxcc.limits import DEFAULT, Limits

INT_MIN, INT_MAX = -(2**31), 2**31 - 1


class OutputLimitError(Exception):
    """The program printed more than ``limits.max_output`` items."""


class _Budget(Exception):
    """Raised by the tick counter; reported as TimeoutError."""


class _WallClock(Exception):
    """Raised by the alarm; reported as TimeoutError."""


class Outcome(NamedTuple):
    stdout: str
    error: str | None  # exception class name, or None
    line: int  # line of the error (0 when unknown or none)
    compile_time: bool  # the error came from compile(), before anything ran


def _chk(v):
    # bools pass unchanged (True & False stays a bool, as in CPython)
    if v.__class__ is bool:
        return v
    if v < INT_MIN or v > INT_MAX:
        raise OverflowError("integer result does not fit in 32 bits")
    return v


def _add(a, b):
    return _chk(a + b)


def _sub(a, b):
    return _chk(a - b)


def _mul(a, b):
    return _chk(a * b)


def _floordiv(a, b):
    return _chk(a // b)


def _mod(a, b):
    return _chk(a % b)


def _pow(a, b):
    if b < 0:
        raise ValueError("negative exponent")
    a, b = int(a), int(b)
    if a in (0, 1) or b == 0:
        return 1 if b == 0 else a
    if a == -1:
        return 1 if b % 2 == 0 else -1
    if b > 32:  # |a| >= 2, so |a| ** b >= 2 ** 33
        raise OverflowError("integer result does not fit in 32 bits")
    return _chk(a**b)


def _lshift(a, b):
    if b < 0:
        raise ValueError("negative shift count")
    a, b = int(a), int(b)
    if a == 0:
        return 0
    if b >= 32:
        raise OverflowError("integer result does not fit in 32 bits")
    return _chk(a << b)


def _rshift(a, b):
    if b < 0:
        raise ValueError("negative shift count")
    return _chk(a >> b)


def _bitand(a, b):
    return _chk(a & b)


def _bitor(a, b):
    return _chk(a | b)


def _bitxor(a, b):
    return _chk(a ^ b)


def _div(a, b):  # not in the subset; kept so that the oracle still runs such programs
    return a / b


def _matmul(a, b):
    return a @ b


def _neg(a):
    return _chk(-a)


def _invert(a):
    return _chk(~a)


def _pos(a):
    return +a


def _abs(a):
    return _chk(abs(a))


_BINOPS = {
    ast.Add: "_add",
    ast.Sub: "_sub",
    ast.Mult: "_mul",
    ast.FloorDiv: "_floordiv",
    ast.Mod: "_mod",
    ast.Pow: "_pow",
    ast.LShift: "_lshift",
    ast.RShift: "_rshift",
    ast.BitAnd: "_bitand",
    ast.BitOr: "_bitor",
    ast.BitXor: "_bitxor",
    ast.Div: "_div",
    ast.MatMult: "_matmul",
}
_UNOPS = {ast.USub: "_neg", ast.Invert: "_invert", ast.UAdd: "_pos"}
_PREFIX = "__jx"


def _helper(name: str, node: ast.AST) -> ast.Name:
    return ast.copy_location(ast.Name(_PREFIX + name, ast.Load()), node)


def _call(name: str, args: list[ast.expr], node: ast.AST) -> ast.Call:
    return ast.copy_location(ast.Call(_helper(name, node), args, []), node)


class _Int32(ast.NodeTransformer):
    """Rewrites arithmetic into checked helper calls and instruments loops and calls."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        return _call(_BINOPS[type(node.op)], [node.left, node.right], node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if type(node.op) in _UNOPS:
            return _call(_UNOPS[type(node.op)], [node.operand], node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        # x op= e  ->  x = op(x, e): CPython also loads x before evaluating e
        self.generic_visit(node)
        if not isinstance(node.target, ast.Name):
            return node
        load = ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target)
        value = _call(_BINOPS[type(node.op)], [load, node.value], node)
        return ast.copy_location(ast.Assign([node.target], value), node)

    def visit_While(self, node: ast.While) -> ast.AST:
        self.generic_visit(node)
        tick = ast.copy_location(ast.Expr(_call("_tick", [], node)), node)
        node.body.insert(0, tick)
        return node

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        node.iter = _call("_ticking", [node.iter], node.iter)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        # def f(..): body  ->  def f(..): enter(); try: body finally: leave()
        self.generic_visit(node)
        enter = ast.copy_location(ast.Expr(_call("_enter", [], node)), node)
        leave = ast.copy_location(ast.Expr(_call("_leave", [], node)), node)
        body = ast.copy_location(ast.Try(node.body, [], [], [leave]), node)
        node.body = [enter, body]
        return node


def _instrument(tree: ast.Module) -> ast.Module:
    tree = _Int32().visit(tree)
    return ast.fix_missing_locations(tree)


class _Machine:
    """The run-time state the helpers share: frames, budget and output items."""

    def __init__(self, limits: Limits, budget: int):
        self.limits = limits
        self.frames = 1  # the module body
        self.budget = budget
        self.items: list[str | None] = []  # printed values; None is a newline

    def tick(self):
        self.budget -= 1
        if self.budget < 0:
            raise _Budget

    def ticking(self, it):
        for v in it:
            self.tick()
            yield v

    def enter(self):
        self.tick()
        if self.frames + 1 > self.limits.max_depth:
            raise RecursionError("maximum recursion depth exceeded")
        self.frames += 1

    def leave(self):
        self.frames -= 1

    def _emit(self, item):
        if len(self.items) >= self.limits.max_output:
            raise OutputLimitError("output buffer full")
        self.items.append(item)

    def print(self, *args):
        for a in args:
            if a.__class__ is bool:
                self._emit("True" if a else "False")
            elif isinstance(a, int):
                self._emit(str(a))
            else:  # not in the subset (jaxcc rejects it at compile time)
                self._emit(str(a))
        self._emit(None)

    def stdout(self) -> str:
        out, line = [], []
        for item in self.items:
            if item is None:
                out.append(" ".join(line) + "\n")
                line = []
            else:
                line.append(item)
        if line:
            out.append(" ".join(line))
        return "".join(out)


def _namespace(m: _Machine) -> dict:
    ns = {"__name__": "__main__", "__builtins__": __builtins__, "print": m.print, "abs": _abs}
    for name in (*_BINOPS.values(), *_UNOPS.values()):
        ns[_PREFIX + name] = globals()[name]
    ns[_PREFIX + "_tick"] = m.tick
    ns[_PREFIX + "_ticking"] = m.ticking
    ns[_PREFIX + "_enter"] = m.enter
    ns[_PREFIX + "_leave"] = m.leave
    return ns


def _error_line(exc: BaseException, filename: str) -> int:
    tb = exc.__traceback__
    line = 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def run_detailed(
    source: str, limits: Limits = DEFAULT, budget: int = 1_000_000, timeout: float = 10.0
) -> Outcome:
    """Run ``source`` under CPython with jaxcc's semantics (see the module docstring)."""
    filename = "<jaxcc-oracle>"
    try:
        tree = ast.parse(source, filename)
        # compile() also finds the errors of the symbol table pass ('return' outside function)
        compile(source, filename, "exec")
    except SyntaxError as e:  # IndentationError and TabError are SyntaxErrors
        return Outcome("", type(e).__name__, e.lineno or 0, True)
    code = compile(_instrument(tree), filename, "exec")
    m = _Machine(limits, budget)
    ns = _namespace(m)
    error, line = None, 0
    old_limit = sys.getrecursionlimit()
    # each program frame costs a few Python frames (the helpers, try/finally)
    sys.setrecursionlimit(max(old_limit, 8 * limits.max_depth + 1000))
    alarm = threading.current_thread() is threading.main_thread() and timeout > 0
    if alarm:

        def _on_alarm(signum, frame):
            raise _WallClock

        old_handler = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        exec(code, ns)
    except (_Budget, _WallClock) as e:
        error, line = "TimeoutError", _error_line(e, filename)
    except Exception as e:
        error, line = type(e).__name__, _error_line(e, filename)
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
        sys.setrecursionlimit(old_limit)
    return Outcome(m.stdout(), error, line, False)


def run(source: str, limits: Limits = DEFAULT, **kw) -> tuple[str, str | None]:
    """``(stdout, exception name or None)`` of ``source`` under CPython with int32 semantics."""
    out = run_detailed(source, limits, **kw)
    return out.stdout, out.error
