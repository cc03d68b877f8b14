"""Generated programs in the style of small textbook exercises (curriculum level 4).

``jaxcc.testing``'s generator (levels 0-3) is a fuzzer: huge literals, odd operators,
unread variables. Programs people write look different: functions with meaningful
parameters that count, sum, search and reduce in loops (``for d in range(2, n)``,
``while n > 0: ... n //= 10``, Euclid's loop, early ``return``), recursion with a base
case, and a module body that prints calls of them. The neural compiler trained on
levels 0-3 alone compiled 39 of 83 hand-written programs correctly; this generator
supplies that idiom. It is written from the language's grammar and the usual exercise
patterns, not from the hand-written test programs (``tests/neural_holdout/``), which
are never trained on.

``program(seed) -> str`` is a pure function of the seed (``random.Random``). Programs
are well typed and mostly terminate quickly (loop bounds are small), but that is not
guaranteed: training only needs their bytecode, and the evaluation compares behaviour
with the deterministic compiler's code whatever it is.
"""

from __future__ import annotations

import random

INT, BOOL, NONE = "int", "bool", "None"
# 2 (stage 7): prints of up to six values, bool values printed, the self-check loop
# (a flag cleared when a call disagrees, then printed). 1: the generator stages 4-6
# trained on and evaluated with; kept so that their held-out level-4 programs regenerate.
VERSION = 2

_VARS = ("total", "count", "s", "acc", "result", "best", "k", "m", "t", "r", "x", "y", "z",
         "prod", "digits", "steps", "low", "high", "mid", "rem", "value", "cur", "prev",
         "nxt", "tmp", "found", "ok", "flag", "done", "sign", "p", "q", "w", "h", "c")  # fmt: skip
_PARAMS = ("n", "a", "b", "x", "y", "m", "k", "base", "limit", "start", "stop", "step",
           "lo", "hi", "num", "v", "p", "q", "e", "d", "width", "size", "seed")  # fmt: skip
_LOOP = ("i", "j", "d", "k", "t", "idx", "row", "col", "n", "e")
_VERBS = ("count", "sum", "is", "has", "digit", "max", "min", "find", "next", "step",
          "reverse", "power", "gcd", "lcm", "fib", "fact", "collatz", "tri", "square",
          "cube", "mod", "check", "score", "clamp", "sign", "mix", "bits", "pair", "walk")  # fmt: skip
_NOUNS = ("divisors", "digits", "prime", "even", "odd", "steps", "total", "value", "root",
          "sum", "len", "count", "pow", "mod", "range", "div", "number", "bits", "ones",
          "perfect", "square", "term", "gap", "run", "hash", "code", "level", "score")  # fmt: skip


class _Fn:
    def __init__(self, name: str, params: list[tuple[str, str]], ret: str, recursive: bool):
        self.name, self.params, self.ret, self.recursive = name, params, ret, recursive


class _Scope:
    def __init__(self, types: dict, ready: list, protected: set, fn: _Fn | None, loops: int):
        self.types = types  # shared by the whole function: one type per name
        self.ready = ready  # names definitely assigned here, in order
        self.protected = protected  # loop counters: never assigned in their loop
        self.fn = fn
        self.loops = loops

    def inner(self, loops: int = 0, protect: str | None = None) -> _Scope:
        prot = self.protected | ({protect} if protect else set())
        return _Scope(self.types, list(self.ready), prot, self.fn, self.loops + loops)

    def names(self, ty: str, writable: bool = False) -> list[str]:
        out = [n for n in self.ready if self.types[n] == ty]
        return [n for n in out if n not in self.protected] if writable else out


class _Book:
    def __init__(self, seed: int, version: int = VERSION):
        self.r = random.Random(seed)
        self.version = version
        self.funcs: list[_Fn] = []
        self.lines: list[str] = []

    # ------------------------------------------------------------------ helpers
    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def emit(self, ind: int, text: str) -> None:
        if self.chance(0.04):
            self.lines.append("    " * ind + "# " + " ".join(self.pick(_NOUNS) for _ in range(3)))
        self.lines.append("    " * ind + text)

    def lit(self) -> str:
        r = self.r.random()
        if r < 0.55:
            return str(self.r.randint(0, 10))
        if r < 0.85:
            return str(self.r.randint(11, 100))
        if r < 0.95:
            return str(self.pick((1000, 255, 256, 1024, 9999, 100000, 65535, 12345)))
        return str(self.pick((1000000007, 2147483647, 998244353, 1000000, 31, 37)))

    def fresh_var(self, sc: _Scope, ty: str) -> str:
        for _ in range(20):
            n = self.pick(_VARS)
            if n not in sc.types and all(n != f.name for f in self.funcs):
                sc.types[n] = ty
                return n
        n = f"v{len(sc.types)}"
        sc.types[n] = ty
        return n

    # -------------------------------------------------------------- expressions
    def calls(self, sc: _Scope, ty: str) -> list[_Fn]:
        fs = [f for f in self.funcs if f.ret == ty]
        if sc.fn is not None and sc.fn.recursive and sc.fn.ret == ty and sc.loops == 0:
            fs.append(sc.fn)
        return fs

    def call(self, sc: _Scope, f: _Fn, fuel: int) -> str:
        args = [self.expr(sc, t, fuel - 1) for _, t in f.params]
        if f is sc.fn:  # a recursive call: the first parameter shrinks
            args[0] = f"{f.params[0][0]} - {self.pick(('1', '1', '2'))}"
        elif f.recursive:
            args[0] = str(self.r.randint(0, 12))
        return f"{f.name}({', '.join(args)})"

    def atom(self, sc: _Scope, ty: str) -> str:
        names = sc.names(ty)
        if ty == BOOL:
            if names and self.chance(0.7):
                return self.pick(names)
            return self.pick(("True", "False"))
        if names and self.chance(0.75):
            return self.pick(names)
        return self.lit()

    def expr(self, sc: _Scope, ty: str, fuel: int) -> str:
        if ty == BOOL:
            return self.cond(sc, fuel)
        if fuel <= 0:
            return self.atom(sc, INT)
        r = self.r.random()
        a = lambda: self.expr(sc, INT, fuel - 1)  # noqa: E731
        if r < 0.3:
            return self.atom(sc, INT)
        if r < 0.62:
            op = self.pick(
                ("+", "+", "-", "-", "*", "*", "//", "%", "**", "<<", ">>", "&", "|", "^")
            )
            if op in ("//", "%"):
                d = self.pick(("2", "10", "3", "7", "2", "10", self.atom(sc, INT)))
                return f"{self.paren(a())} {op} {d}"
            if op == "**":
                return f"{self.paren(self.atom(sc, INT))} ** {self.pick(('2', '2', '3'))}"
            if op in ("<<", ">>"):
                return f"{self.paren(a())} {op} {self.r.randint(1, 4)}"
            return f"{self.paren(a())} {op} {self.paren(a())}"
        if r < 0.72:
            fs = self.calls(sc, INT)
            if fs:
                return self.call(sc, self.pick(fs), fuel)
            return self.atom(sc, INT)
        if r < 0.8:
            b = self.pick(("abs", "min", "max"))
            n = 1 if b == "abs" else self.pick((2, 2, 2, 3))
            return f"{b}({', '.join(a() for _ in range(n))})"
        if r < 0.86:
            return f"-{self.paren(a())}"
        if r < 0.91:
            return f"({self.paren(a())} if {self.cond(sc, fuel - 1)} else {self.paren(a())})"
        return f"({a()})"

    def paren(self, e: str) -> str:
        return e if e.replace("_", "").isalnum() or e.startswith("(") else f"({e})"

    def cond(self, sc: _Scope, fuel: int) -> str:
        r = self.r.random()
        ints = sc.names(INT)
        x = self.pick(ints) if ints else self.lit()
        if fuel <= 0 or r < 0.4:
            op = self.pick(("<", "<=", ">", ">=", "==", "!=", "<", ">"))
            rhs = self.expr(sc, INT, min(fuel, 1)) if self.chance(0.6) else self.lit()
            return f"{x} {op} {rhs}"
        if r < 0.55:
            return f"{x} % {self.pick(('2', '3', '5', '7', '10', self.atom(sc, INT)))} == 0"
        if r < 0.62:
            return f"{self.lit()} <= {x} < {self.expr(sc, INT, 1)}"
        if r < 0.72:
            fs = self.calls(sc, BOOL)
            if fs:
                return self.call(sc, self.pick(fs), fuel)
            return self.atom(sc, BOOL)
        if r < 0.8:
            return f"not {self.paren(self.cond(sc, fuel - 1))}"
        if r < 0.92:
            op = self.pick(("and", "or"))
            return f"{self.cond(sc, fuel - 1)} {op} {self.cond(sc, fuel - 1)}"
        return self.atom(sc, BOOL)

    # --------------------------------------------------------------- statements
    def assign(self, sc: _Scope, ind: int, ty: str | None = None) -> None:
        ty = ty or (BOOL if self.chance(0.15) else INT)
        olds = sc.names(ty, writable=True)
        if olds and self.chance(0.6):
            n = self.pick(olds)
            if ty == INT and self.chance(0.6):
                op = self.pick(("+=", "+=", "-=", "*=", "//=", "%=", "+="))
                rhs = self.expr(sc, INT, self.r.randint(0, 2))
                if op in ("//=", "%="):
                    rhs = self.pick(("2", "10", "3", "1000000007"))
                self.emit(ind, f"{n} {op} {rhs}")
                return
            self.emit(ind, f"{n} = {self.expr(sc, ty, self.r.randint(1, 2))}")
            return
        e = self.expr(sc, ty, self.r.randint(0, 2))
        n = self.fresh_var(sc, ty)
        self.emit(ind, f"{n} = {e}")
        sc.ready.append(n)

    def block(self, sc: _Scope, ind: int, n: int, depth: int) -> None:
        for _ in range(n):
            self.stmt(sc, ind, depth)

    def range_args(self, sc: _Scope) -> str:
        ints = [v for v in sc.names(INT)]
        hi = self.pick(ints) if ints and self.chance(0.6) else str(self.r.randint(2, 30))
        r = self.r.random()
        if r < 0.35:
            return hi
        if r < 0.6:
            return f"{self.r.randint(0, 3)}, {hi}"
        if r < 0.75:
            return f"{self.r.randint(1, 2)}, {hi} + 1"
        if r < 0.85:
            return f"2, {self.paren(hi)} // 2 + 1"
        if r < 0.95:
            return f"{self.r.randint(0, 2)}, {hi}, {self.r.randint(2, 3)}"
        return f"{hi}, 0, -1"

    def stmt(self, sc: _Scope, ind: int, depth: int) -> None:
        r = self.r.random()
        in_fn = sc.fn is not None
        if r < 0.32 or depth <= 0:
            if not in_fn and self.chance(0.3):
                self.emit(ind, f"print({self.print_args(sc, 2)})")
                return
            self.assign(sc, ind)
            return
        if r < 0.55:  # for loop
            names = [v for v in _LOOP if v not in sc.types or sc.types[v] == INT]
            v = self.pick(names) if names else self.fresh_var(sc, INT)
            if v in sc.protected:
                v = self.fresh_var(sc, INT)
            sc.types[v] = INT
            self.emit(ind, f"for {v} in range({self.range_args(sc)}):")
            inner = sc.inner(1, protect=v)
            inner.ready.append(v)
            self.block(inner, ind + 1, self.r.randint(1, 2), depth - 1)
            return
        if r < 0.72:  # if / elif / else
            self.emit(ind, f"if {self.cond(sc, 2)}:")
            self.block(sc.inner(), ind + 1, self.r.randint(1, 2), depth - 1)
            if self.chance(0.25):
                self.emit(ind, f"elif {self.cond(sc, 2)}:")
                self.block(sc.inner(), ind + 1, 1, depth - 1)
            if self.chance(0.45):
                self.emit(ind, "else:")
                self.block(sc.inner(), ind + 1, self.r.randint(1, 2), depth - 1)
            return
        if r < 0.84:  # while loop with progress
            self.while_loop(sc, ind, depth)
            return
        if r < 0.92 and sc.loops > 0:
            self.emit(ind, f"if {self.cond(sc, 1)}:")
            self.emit(ind + 1, self.pick(("break", "continue", "break")))
            return
        if in_fn and sc.fn.ret != NONE and self.chance(0.6):
            self.emit(ind, f"if {self.cond(sc, 1)}:")
            self.emit(ind + 1, f"return {self.expr(sc, sc.fn.ret, 2)}")
            return
        if not in_fn or sc.fn.ret == NONE:
            self.emit(ind, f"print({self.print_args(sc)})")
            return
        self.assign(sc, ind)

    def while_loop(self, sc: _Scope, ind: int, depth: int) -> None:
        ints = sc.names(INT, writable=True)
        kind = self.r.randrange(4)
        if kind == 0 and ints:  # digits
            n = self.pick(ints)
            base = self.pick(("10", "10", "2", "8"))
            self.emit(ind, f"while {n} > 0:")
            inner = sc.inner(1, protect=n)
            d = self.fresh_var(inner, INT)
            self.emit(ind + 1, f"{d} = {n} % {base}")
            inner.ready.append(d)
            self.block(inner, ind + 1, self.r.randint(0, 2), depth - 1)
            self.emit(ind + 1, f"{n} //= {base}")
            return
        if kind == 1 and len(ints) >= 2:  # Euclid
            a, b = self.r.sample(ints, 2)
            t = self.fresh_var(sc, INT)
            self.emit(ind, f"while {b} != 0:")
            self.emit(ind + 1, f"{t} = {a} % {b}")
            self.emit(ind + 1, f"{a} = {b}")
            self.emit(ind + 1, f"{b} = {t}")
            return
        # a counter up to a bound
        i = self.fresh_var(sc, INT)
        self.emit(ind, f"{i} = {self.r.randint(0, 2)}")
        sc.ready.append(i)
        others = [v for v in sc.names(INT) if v != i]
        bound = self.pick(others) if others and self.chance(0.7) else str(self.r.randint(3, 40))
        test = self.pick((f"{i} < {bound}", f"{i} * {i} <= {bound}", f"{i} <= {bound}"))
        self.emit(ind, f"while {test}:")
        inner = sc.inner(1, protect=i)
        self.block(inner, ind + 1, self.r.randint(1, 2), depth - 1)
        self.emit(ind + 1, f"{i} += {self.pick(('1', '1', '2'))}")

    # ---------------------------------------------------------------- functions
    def function(self) -> None:
        names = {f.name for f in self.funcs}
        while True:
            name = f"{self.pick(_VERBS)}_{self.pick(_NOUNS)}"
            if name not in names:
                break
        recursive = self.chance(0.15)
        ret = self.pick((INT, INT, INT, BOOL, NONE)) if not recursive else INT
        pool = list(_PARAMS)
        self.r.shuffle(pool)
        params = [(p, BOOL if i > 0 and self.chance(0.1) else INT)
                  for i, p in enumerate(pool[: self.r.randint(1, 3)])]  # fmt: skip
        fn = _Fn(name, params, ret, recursive)
        ann = self.chance(0.75)
        ps = ", ".join(f"{p}: {t}" if ann else p for p, t in params)
        self.emit(0, f"def {name}({ps})" + (f" -> {ret}" if ann else "") + ":")
        types = dict(params)
        sc = _Scope(types, [p for p, _ in params], set(), fn, 0)
        if recursive:
            p0 = params[0][0]
            self.emit(1, f"if {p0} <= {self.r.randint(0, 2)}:")
            self.emit(2, f"return {self.expr(sc, INT, 1)}")
            rec = self.call(sc, fn, 2)
            other = self.call(sc, fn, 2) if self.chance(0.4) else self.expr(sc, INT, 1)
            self.emit(1, f"return {rec} {self.pick(('+', '*', '-', '+'))} {self.paren(other)}")
        else:
            for _ in range(self.pick((0, 1, 1, 2))):
                self.assign(sc, 1, self.pick((INT, INT, BOOL)))
            self.block(sc, 1, self.pick((1, 2, 2, 3)), self.r.randint(1, 2))
            if ret == BOOL and self.chance(0.3):
                v = self.pick(sc.names(INT)) if sc.names(INT) else params[0][0]
                d = next(
                    (c for c in ("d", "i", "j", "k") if sc.types.get(c, INT) == INT and c != v),
                    None,
                )
                if d is not None:
                    sc.types[d] = INT
                    self.emit(1, f"for {d} in range(2, {v}):")
                    self.emit(2, f"if {v} % {d} == 0:")
                    self.emit(3, "return False")
            if ret != NONE:
                self.emit(1, f"return {self.expr(sc, ret, 2)}")
        self.lines.append("")
        self.funcs.append(fn)

    def module(self) -> str:
        for _ in range(self.pick((1, 1, 2, 2, 3))):
            self.function()
            if self.chance(0.3):
                self.lines.append("")
        sc = _Scope({}, [], set(), None, 0)
        for _ in range(self.pick((1, 1, 2, 3))):
            self.print_calls(sc, 0)
            if self.chance(0.3):
                self.stmt(sc, 0, 1)
        return "\n".join(self.lines).rstrip() + "\n"

    def n_print(self, v1_max: int = 3) -> int:
        """How many values a ``print`` shows: people print up to half a dozen at once."""
        if self.version == 1:
            return self.r.randint(1, v1_max)
        return self.r.choices((1, 2, 3, 4, 5, 6), (35, 25, 15, 12, 8, 5))[0]

    def print_args(self, sc: _Scope, v1_max: int = 3) -> str:
        if self.version == 1:
            return ", ".join(self.expr(sc, INT, 2) for _ in range(self.n_print(v1_max)))
        return ", ".join(
            self.expr(sc, BOOL, 1) if self.chance(0.15) else self.expr(sc, INT, 2)
            for _ in range(self.n_print())
        )

    def counter(self, sc: _Scope) -> str:
        """An int variable for a module-level loop over calls: a usual name where it is
        free, else a fresh one."""
        v = self.pick(("n", "i", "x", "k"))
        if sc.types.get(v, INT) != INT or v in sc.protected:
            v = self.fresh_var(sc, INT)
        sc.types[v] = INT
        return v

    def check_loop(self, sc: _Scope, ind: int, f: _Fn) -> None:
        """The self-check idiom: a bool flag cleared when a call disagrees with a formula
        (or a predicate fails) over a range, then printed."""
        flag = self.fresh_var(sc, BOOL)
        v = self.counter(sc)
        self.emit(ind, f"{flag} = True")
        self.emit(ind, f"for {v} in range({self.r.randint(0, 3)}, {self.r.randint(8, 200)}):")
        inner = sc.inner(1, protect=v)
        inner.ready.append(v)
        args = ", ".join(
            v if i == 0 else (str(self.r.randint(0, 9)) if t == INT else "True")
            for i, (_, t) in enumerate(f.params)
        )
        if f.ret == BOOL:
            test = f"not {f.name}({args})" if self.chance(0.5) else f"{f.name}({args})"
        else:
            test = (
                f"{f.name}({args}) {self.pick(('!=', '<', '>', '=='))} {self.expr(inner, INT, 2)}"
            )
        self.emit(ind + 1, f"if {test}:")
        self.emit(ind + 2, f"{flag} = False")
        if self.chance(0.3):
            self.emit(ind + 2, "break")
        sc.ready.append(flag)
        self.emit(
            ind, f"print({flag})" if self.chance(0.6) else f"print({self.print_args(sc)}, {flag})"
        )

    def print_calls(self, sc: _Scope, ind: int) -> None:
        f = self.pick(self.funcs)
        r = self.r.random()
        args = lambda: ", ".join(  # noqa: E731
            str(self.r.randint(0, 30)) if t == INT else self.pick(("True", "False"))
            for _, t in f.params
        )
        if f.ret == NONE:
            self.emit(ind, f"{f.name}({args()})")
        elif r < 0.4:
            self.emit(
                ind, f"print({', '.join(f'{f.name}({args()})' for _ in range(self.n_print()))})"
            )
        elif r < 0.5 and f.params[0][1] == INT and self.version >= 2:
            self.check_loop(sc, ind, f)
        elif r < 0.7 and f.params[0][1] == INT:
            v = self.counter(sc)
            rest = ", ".join(
                str(self.r.randint(0, 9)) if t == INT else "True" for _, t in f.params[1:]
            )
            call = f"{f.name}({v}{', ' + rest if rest else ''})"
            self.emit(ind, f"for {v} in range({self.r.randint(0, 2)}, {self.r.randint(5, 40)}):")
            if f.ret == BOOL:
                self.emit(ind + 1, f"if {call}:")
                self.emit(ind + 2, f"print({v})")
            else:
                self.emit(ind + 1, f"print({v}, {call})")
        else:
            acc = self.fresh_var(sc, INT)
            self.emit(ind, f"{acc} = 0")
            self.emit(ind, f"for i in range({self.r.randint(1, 20)}):")
            sc.types.setdefault("i", INT)
            call = f"{f.name}({', '.join('i' if t == INT else 'True' for _, t in f.params)})"
            if f.ret == BOOL:
                self.emit(ind + 1, f"if {call}:")
                self.emit(ind + 2, f"{acc} += 1")
            else:
                self.emit(ind + 1, f"{acc} += {call}")
            self.emit(ind, f"print({acc})")
            sc.ready.append(acc)


def program(seed: int, version: int = VERSION) -> str:
    """One textbook-style program, a pure function of ``seed`` (and ``version``)."""
    return _Book(seed, version).module()
