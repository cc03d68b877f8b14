"""Fixed, seeded benchmark corpora: programs of three sizes plus examples/*.py, with tests.

Programs come from a small seeded generator of our own (``random.Random(seed)``), not
from Hypothesis: the same seed gives the same programs on every machine and every
Hypothesis version, so numbers taken on different days measure the same work.

Every generated program is a few functions ``def fK(a, b):`` over int locals (every
local assigned at the top of the function, so every read is definitely assigned), with
if/elif/else, bounded ``for ... in range`` and counter ``while`` loops, ``break``,
augmented assignments, ``and``/``or``, ternaries, min/max/abs, occasional prints, calls
of earlier functions (no recursion: everything terminates), and a module body that
prints the last function of a call. Values are kept small with ``% 10007`` so most runs
finish without OverflowError; the ones that do overflow keep it as their expected result.

Tests (the compile-run-test loop): each program has ``N_TESTS`` calls of its last
function with seeded arguments; the expected stdout, return value and error come from
CPython running the program with jaxcc's int32 semantics (property_tests.oracle).
Examples (examples/*.py) get one test: the module body (entry 0, no arguments).

Sizes, counted in ``tokenize`` tokens (NEWLINE, INDENT, DEDENT, ENDMARKER included):
small ~50, medium ~150, large ~600.
"""

from __future__ import annotations

import functools
import glob
import io
import json
import os
import random
import tokenize

from jaxcc import isa
from jaxcc.limits import Limits

SIZES = {"small": 50, "medium": 150, "large": 600}
N_TESTS = 4
CORPUS_VERSION = 1

# Limits sized for each corpus: the smallest powers of two that hold its programs
# (memory per lane in flight is what bounds the batch, so the benchmark does not pay
# for the bulk DEFAULT's 4 KB sources when programs are 300 bytes).
LIMITS = {
    "small": Limits(
        max_source_bytes=512, max_tokens=128, max_indent=8, max_parse_depth=64,
        max_nodes=128, max_code=128, max_funcs=8, max_locals=32, max_stack=256,
        max_depth=32, max_output=32, max_steps=100_000,
    ),
    "medium": Limits(
        max_source_bytes=1024, max_tokens=256, max_indent=8, max_parse_depth=128,
        max_nodes=256, max_code=256, max_funcs=8, max_locals=32, max_stack=256,
        max_depth=32, max_output=64, max_steps=200_000,
    ),
    "large": Limits(
        max_source_bytes=2048, max_tokens=1024, max_indent=16, max_parse_depth=256,
        max_nodes=1024, max_code=1024, max_funcs=32, max_locals=64, max_stack=512,
        max_depth=64, max_output=64, max_steps=1_000_000,
    ),
}  # fmt: skip


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def examples_limits(progs: list[dict]) -> Limits:
    """DEFAULT limits with the source and token sizes cut to fit examples/*.py (the
    bytes and tokens per program set the lexer's and parser's array sizes), and the
    steps raised: some examples run 1e6-2e7 instructions, as ordinary programs do."""
    if not progs:
        return Limits()
    return Limits(max_steps=50_000_000)._replace(
        max_source_bytes=max(256, _pow2(max(p["n_bytes"] for p in progs))),
        max_tokens=max(64, _pow2(max(p["n_tokens"] for p in progs) + 8)),
    )


def n_tokens(source: str) -> int:
    """Tokens as tokenize counts them (what the lexer produces); up to the error for a
    source tokenize rejects (examples/ has some)."""
    n = 0
    try:
        for _ in tokenize.generate_tokens(io.StringIO(source).readline):
            n += 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return n


# ------------------------------------------------------------------ the generator


class _Gen:
    """One program: functions f0..fK. ``budget`` is the statement count per function."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def const(self, lo=0, hi=20) -> str:
        return str(self.r.randint(lo, hi))

    def atom(self, names: list[str]) -> str:
        return self.r.choice(names) if self.r.random() < 0.75 else self.const()

    def expr(self, names: list[str], funcs: list[str], depth: int = 2) -> str:
        r = self.r
        if depth == 0:
            return self.atom(names)
        k = r.random()
        a = self.expr(names, funcs, depth - 1)
        b = self.expr(names, funcs, depth - 1)
        if k < 0.40:
            return f"{a} {r.choice(['+', '-', '+', '&', '|', '^'])} {b}"
        if k < 0.52:
            return f"({a}) * {self.const(1, 9)}"
        if k < 0.62:
            return f"({a}) {r.choice(['//', '%'])} {self.const(1, 13)}"
        if k < 0.70:
            return f"{r.choice(['min', 'max'])}({a}, {b})"
        if k < 0.75:
            return f"abs({a})"
        if k < 0.82:
            return f"{a} if {self.cond(names)} else {b}"
        if k < 0.90 and funcs:
            return f"{r.choice(funcs)}({a}, {b})"
        if k < 0.95:
            return f"-({a})"
        return f"(({a}) >> {self.const(0, 3)})"  # parenthesised: `x >> 1 - y` would shift by 1 - y

    def cond(self, names: list[str]) -> str:
        r = self.r
        c = f"{self.atom(names)} {r.choice(['<', '<=', '>', '>=', '==', '!='])} {self.atom(names)}"
        k = r.random()
        if k < 0.15:
            return f"{c} and {self.cond(names)}"
        if k < 0.25:
            return f"{c} or {self.cond(names)}"
        if k < 0.30:
            return f"not {c}"
        if k < 0.35:
            return f"{self.atom(names)} < {self.atom(names)} < {self.atom(names)}"
        return c

    def block(self, names, funcs, ind, budget, loop_vars, counters, in_loop, depth=0):
        """Statements at indentation ``ind`` (a string); at least one. ``depth``: loops
        around this block (at most 2, and calls only outside loops, so that every program
        finishes in a few thousand steps)."""
        r = self.r
        out: list[str] = []
        calls = funcs if depth == 0 else []
        scope = names + loop_vars
        for _ in range(max(1, budget)):
            k = r.random()
            pad = ind
            if k < 0.30:
                op = r.choice(["=", "=", "+=", "-=", "^="])
                rhs = self.expr(scope, calls)
                tgt = r.choice(names)
                if op == "=":
                    out.append(f"{pad}{tgt} = ({rhs}) % 10007")
                else:
                    out += [f"{pad}{tgt} {op} {rhs}", f"{pad}{tgt} = {tgt} % 10007"]
            elif k < 0.45:
                sub = (names, funcs, ind + "    ")
                out.append(f"{pad}if {self.cond(scope)}:")
                out += self.block(*sub, budget // 3, loop_vars, counters, in_loop, depth)
                if r.random() < 0.3:
                    out.append(f"{pad}elif {self.cond(scope)}:")
                    out += self.block(*sub, budget // 4, loop_vars, counters, in_loop, depth)
                if r.random() < 0.5:
                    out.append(f"{pad}else:")
                    out += self.block(*sub, budget // 4, loop_vars, counters, in_loop, depth)
            elif k < 0.60 and depth < 2:
                v = f"i{len(loop_vars)}"
                args = r.choice(
                    [f"{self.const(1, 8)}", f"{self.const(0, 3)}, {self.const(4, 9)}",
                     f"{self.const(6, 9)}, 0, -{self.const(1, 3)}"]
                )  # fmt: skip
                out.append(f"{pad}for {v} in range({args}):")
                out += self.block(names, funcs, ind + "    ", budget // 3, loop_vars + [v],
                                  counters, True, depth + 1)  # fmt: skip
            elif k < 0.68 and counters and depth < 2:
                c, rest = counters[0], counters[1:]
                out.append(f"{pad}{c} = 0")
                out.append(f"{pad}while {c} < {self.const(1, 6)}:")
                # no `continue` in while bodies: the counter's increment is the last line
                body = self.block(names, funcs, ind + "    ", budget // 3, loop_vars, rest,
                                  False, depth + 1)  # fmt: skip
                out += body + [f"{ind}    {c} += 1"]
            elif k < 0.74:
                out.append(f"{pad}print({self.expr(scope, calls, 1)})")
            elif k < 0.78 and in_loop:
                out.append(f"{pad}if {self.cond(scope)}:")
                out.append(f"{pad}    {r.choice(['break', 'continue'])}")
            elif k < 0.82:
                out.append(f"{pad}if {self.cond(scope)}:")
                out.append(f"{pad}    return {self.expr(scope, calls, 1)}")
            else:
                tgt = r.choice(names)
                out.append(f"{pad}{tgt} = {self.expr(scope, calls)}")
                out.append(f"{pad}{tgt} = {tgt} % 10007")
        return out

    def function(self, name: str, funcs: list[str], budget: int) -> list[str]:
        r = self.r
        locs = [f"v{j}" for j in range(r.randint(1, 3 if budget > 1 else 1))]
        counters = [f"w{j}" for j in range(2)]  # assigned just before each while loop
        lines = [f"def {name}(a, b):"]
        names = ["a", "b"]
        for v in locs:
            lines.append(f"    {v} = {self.expr(names, funcs, 1)}")
            names.append(v)
        lines += self.block(names, funcs, "    ", budget, [], counters, False)
        lines.append(f"    return {self.expr(names, funcs, 1)}")
        return lines


def _program(rng: random.Random, target: int) -> tuple[str, str, str]:
    """(source, defs, entry function name) of about ``target`` tokens. Only functions
    that call nothing may be called (leaves), so that costs add up instead of multiplying."""
    g = _Gen(rng)
    budget = 1 if target <= 60 else 2 if target <= 200 else 4
    while True:  # draw until the size is within 25% of the target (deterministic in rng)
        funcs: list[str] = []
        leaves: list[str] = []
        lines: list[str] = []
        while True:
            name = f"f{len(funcs)}"
            fl = g.function(name, list(leaves), rng.randint(1, budget))
            lines += fl
            funcs.append(name)
            if not any(f + "(" in ln for ln in fl[1:] for f in leaves):
                leaves.append(name)
            defs = "\n".join(lines) + "\n"
            main = f"print({name}({rng.randint(-5, 20)}, {rng.randint(-5, 20)}))\n"
            n = n_tokens(defs + main)
            if n >= target * 0.9 or len(funcs) >= 24:
                break
        if n <= target * 1.25:
            return defs + main, defs, name


def items(stdout: str) -> list[tuple[int, int]]:
    """The output items (kind, value) of isa's output buffer that print ``stdout``."""
    out = []
    for line in stdout.splitlines(keepends=True):
        for word in line.split():
            if word in ("True", "False"):
                out.append((isa.OUT_BOOL, int(word == "True")))
            else:
                out.append((isa.OUT_INT, int(word)))
        if line.endswith("\n"):
            out.append((isa.OUT_NEWLINE, 0))
    return out


def _expect(defs: str, call: str | None, limits: Limits) -> dict:
    """Expected outcome of ``call`` (or of the module body when None) under CPython with
    jaxcc's int32 semantics: stdout, error (exception name or None), result (or None)."""
    from property_tests import oracle

    max_out = limits.max_output
    # room for the two items of `print(__r)` beyond the program's own output
    lim = limits._replace(max_output=max_out + 2)
    run = functools.partial(oracle.run_detailed, limits=lim, budget=10_000_000)
    if call is None:
        out = run(defs)
        stdout, error, result = out.stdout, out.error, None
    else:
        base = run(defs).stdout
        full = run(defs + f"__r = {call}\nprint(__r)\n")
        stdout, error, result = full.stdout[len(base) :], full.error, None
        if error is None:
            head, _, last = stdout[:-1].rpartition("\n")
            stdout = head + "\n" if head else ""
            result = {"True": 1, "False": 0}.get(last, None)
            result = int(last) if result is None else result
    if len(items(stdout)) > max_out:  # the VM stops at item max_output + 1
        kept = items(stdout)[:max_out]
        stdout = isa.format_output([k for k, _ in kept], [v for _, v in kept], len(kept))
        error, result = "OutputLimitError", None
    return {"stdout": stdout, "error": error, "result": result}


def _func_id(defs: str, name: str) -> int:
    """Function ids: 0 is the module body, then the defs in source order."""
    names = [ln[4 : ln.index("(")] for ln in defs.splitlines() if ln.startswith("def ")]
    return 1 + names.index(name)


def generate(seed: int, size: str, n: int, with_tests: bool = True) -> list[dict]:
    """``n`` programs of ``size`` (a key of SIZES), deterministic in ``seed``."""
    rng = random.Random(f"jaxcc-bench/{CORPUS_VERSION}/{seed}/{size}")
    limits = LIMITS[size]
    progs = []
    for _ in range(n):
        source, defs, entry = _program(rng, SIZES[size])
        item = {
            "source": source,
            "n_bytes": len(source.encode()),
            "n_tokens": n_tokens(source),
            "tests": [],
        }
        if with_tests:
            for _ in range(N_TESTS):
                args = [rng.randint(-20, 50), rng.randint(-20, 50)]
                exp = _expect(defs, f"{entry}({args[0]}, {args[1]})", limits)
                item["tests"].append(
                    {"func": entry, "entry": _func_id(defs, entry), "args": args, **exp}
                )
        progs.append(item)
    return progs


def examples(root: str) -> list[dict]:
    """examples/*.py with one test each: the module body, its stdout under CPython."""
    progs = []
    for path in sorted(glob.glob(os.path.join(root, "examples", "*.py"))):
        with open(path) as f:
            source = f.read()
        exp = _expect(source, None, Limits())  # same max_output as examples_limits
        progs.append(
            {
                "name": os.path.basename(path),
                "source": source,
                "n_bytes": len(source.encode()),
                "n_tokens": n_tokens(source),
                "tests": [{"func": None, "entry": 0, "args": [], **exp}],
            }
        )
    return progs


def build(seed: int = 0, n: int = 256, root: str = ".") -> dict:
    """The whole corpus: {"small": [...], "medium": [...], "large": [...], "examples": [...]}."""
    corpus = {size: generate(seed, size, n) for size in SIZES}
    corpus["examples"] = examples(root)
    return corpus


def load_or_build(path: str, seed: int = 0, n: int = 256, root: str = ".", meta=None) -> dict:
    """The corpus cached at ``path`` (JSON) if it was built with the same parameters."""
    key = {"version": CORPUS_VERSION, "seed": seed, "n": n}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
        if data.get("key") == key:
            return data["corpus"]
    corpus = build(seed, n, root)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"meta": meta or {}, "key": key, "corpus": corpus}, f)
    return corpus


def tile(progs: list, b: int) -> list:
    """The first ``b`` items of ``progs`` repeated cyclically (a batch of any size)."""
    return [progs[i % len(progs)] for i in range(b)]
