"""jaxcc benchmarks: ``python bench/run.py [--quick] [--out DIR] [--only NAME,...]``.

Runs every registered benchmark on whatever JAX device is present and writes into DIR:
``results.json`` (every measurement with the run's metadata), ``results.md`` (the
tables), ``corpus.json`` (the programs and tests measured) and ``plot_*.png``
(throughput against batch size; needs matplotlib). The summary table is printed last.
An entry whose stage does not import yet is skipped with the reason; an entry that
fails is reported and the others still run. Rows of entries not re-run are kept from
an earlier results.json in DIR (same device), so several ``--only`` runs add up.

Timing: each batch size is compiled ahead of time (``jit(...).lower(...).compile()``,
timed as compile_s), run once to warm up, then run ``repeats`` times with
``block_until_ready``; the median is reported. Inputs are placed on the device before
timing (the stages are measured on the device; the cpu_centric baseline times its
transfers separately). A sweep over batch sizes stops early when a call takes longer
than --max-call-s, when the device memory the compiled program needs would not fit, or
on an out-of-memory error.

``--list`` prints the entries. docs/benchmarks.md explains each and the paper's claims.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # `python bench/run.py` without PYTHONPATH
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from bench import baselines, report  # noqa: E402
from bench import corpus as corpus_mod  # noqa: E402

# Each batch size is a new shape, i.e. a new XLA compile of every stage (tens of
# seconds for the lexer): few sizes, a factor of 16 apart.
FULL_BATCHES = [1, 16, 256, 4096, 65536, 262144]
QUICK_BATCHES = [1, 16]
HYBRID_BATCHES = [1, 16, 128, 256, 512]  # the hybrid entry's, unless --batches


class Entry(NamedTuple):
    name: str
    needs: tuple[str, ...]  # modules that must import (with the attributes after ':')
    fn: Callable
    doc: str
    quick: bool  # part of a plain --quick run (else only with --only)


REGISTRY: dict[str, Entry] = {}


def register(name: str, needs: tuple[str, ...] = (), quick: bool = True):
    def deco(fn):
        doc = " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split())  # 1st paragraph
        REGISTRY[name] = Entry(name, needs, fn, doc, quick)
        return fn

    return deco


def missing(needs: tuple[str, ...]) -> str | None:
    """Why an entry cannot run (a module or attribute that does not import), or None."""
    for need in needs:
        mod, _, attr = need.partition(":")
        try:
            m = importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001 - a half-written stage must not stop the run
            return f"{mod} not importable ({type(e).__name__}: {e})"
        for a in filter(None, attr.split(",")):
            if not hasattr(m, a):
                return f"{mod}.{a} does not exist yet"
    return None


# ------------------------------------------------------------------ context and timing


class Ctx:
    def __init__(self, args, corpus: dict, meta: dict):
        self.args = args
        self.corpus = corpus
        self.meta = meta
        self.rows: list[dict] = []
        self.entry = ""
        self.entry_t0 = 0.0
        self._cache: dict = {}

    @property
    def quick(self) -> bool:
        return self.args.quick

    def sizes(self) -> list[str]:
        return self.args.sizes

    def batches(self) -> list[int]:
        return self.args.batches

    def limits(self, size: str):
        if size == "examples":
            return corpus_mod.examples_limits(self.corpus.get("examples") or [])
        return corpus_mod.LIMITS[size]

    def progs(self, size: str, b: int) -> list[dict]:
        return corpus_mod.tile(self.corpus[size], b)

    def over_budget(self) -> bool:
        return time.perf_counter() - self.entry_t0 > self.args.entry_budget_s

    def add(self, **row) -> dict:
        row = {"entry": self.entry, **row}
        self.rows.append(row)
        print("   ", _row_text(row), flush=True)
        return row

    def memo(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def _row_text(r: dict) -> str:
    parts = [f"{k}={report.fmt_num(v)}" for k, v in r.items() if k not in ("entry", "times")]
    return " ".join(parts)


def _device_memory_limit() -> float | None:
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    if "bytes_limit" in stats:
        return float(stats["bytes_limit"])
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _is_oom(e: BaseException) -> bool:
    s = f"{type(e).__name__}: {e}"
    return "RESOURCE_EXHAUSTED" in s or "Out of memory" in s or "out of memory" in s


def _mem_bytes(compiled) -> int | None:
    """Device bytes the compiled program needs: arguments + outputs + temporaries."""
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend reports it
        return None
    if ma is None:
        return None
    return int(
        ma.argument_size_in_bytes
        + ma.output_size_in_bytes
        + ma.temp_size_in_bytes
        - ma.alias_size_in_bytes
    )


def measure(jitted, args: tuple, ctx: Ctx) -> dict:
    """Compile ``jitted`` for ``args`` (ahead of time), warm up, time repeats (median)."""
    import chex
    import jax

    chex.clear_trace_counter()  # stages guard retracing; every batch size is a new shape
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    run = compiled
    t0 = time.perf_counter()
    try:
        out = jax.block_until_ready(compiled(*args))
    except TypeError:
        # jax 0.10: an AOT executable of a function whose inner jit hoists numpy
        # constants can expect them as extra arguments ("compiled for 13 inputs but
        # called with 9"); the ordinary jit path compiles again and works
        run = jitted
        out = jax.block_until_ready(jitted(*args))
    first_s = time.perf_counter() - t0
    n = ctx.args.repeats
    if first_s > 0:  # fewer repeats for slow calls (at least 3 below a second each)
        n = max(3 if first_s < 1.0 else 1, min(n, int(ctx.args.target_s / first_s)))
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        out = jax.block_until_ready(run(*args))
        times.append(time.perf_counter() - t0)
    return {
        "seconds": statistics.median(times),
        "min_s": min(times),
        "repeats": n,
        "compile_s": compile_s,
        "first_s": first_s,
        "mem_bytes": _mem_bytes(compiled),
        "out": out,
        "compiled": compiled,  # for cost_analysis() / memory_analysis() (breakdown entry)
    }


def sweep(ctx: Ctx, bench: str, size: str, make: Callable, jitted, work: Callable, unit: str,
          batches=None, **extra) -> None:  # fmt: skip
    """Time ``jitted(*make(b))`` for each batch size b. ``work(b, args, out)`` gives
    (amount of work, dict of extra fields); throughput = work / seconds."""
    import jax

    limit = _device_memory_limit()
    per_prog = None
    for b in batches or ctx.batches():
        if ctx.over_budget():
            ctx.add(bench=bench, size=size, batch=b, note="stopped: entry time budget spent")
            break
        if per_prog is not None and limit is not None and per_prog * b > 0.8 * limit:
            ctx.add(bench=bench, size=size, batch=b,
                    note=f"skipped: needs ~{per_prog * b / 2**30:.1f} GiB")  # fmt: skip
            break
        try:
            args = jax.device_put(make(b))
            m = measure(jitted, args, ctx)
        except Exception as e:  # noqa: BLE001
            if _is_oom(e):
                ctx.add(bench=bench, size=size, batch=b, note="out of memory")
                break
            raise
        amount, fields = work(b, args, m["out"])
        if m["mem_bytes"] is not None:
            per_prog = m["mem_bytes"] / b
        ctx.add(
            bench=bench, size=size, batch=b, devices=1, seconds=m["seconds"],
            throughput=amount / m["seconds"], unit=unit,
            bytes_per_program=per_prog, mem_bytes=m["mem_bytes"], compile_s=m["compile_s"],
            min_s=m["min_s"], repeats=m["repeats"], **fields, **extra,
        )  # fmt: skip
        del m, args
        if ctx.rows[-1]["seconds"] > ctx.args.max_call_s:
            break


# ------------------------------------------------------------------ stage functions


def encode(sources: list[str], limits):
    """(source UInt8[B, N], length Int32[B]) as numpy arrays: ``jaxcc.lexer.encode``."""
    from jaxcc import lexer

    src, length = lexer.encode(sources, limits)
    return np.asarray(src), np.asarray(length)


def jax_block(x):
    import jax

    return jax.block_until_ready(x)


def compile_fn(limits, optimize: int = False, passes=None, max_rounds=None):
    """source -> (Program, Error): ``jaxcc.compiler.compile_arrays`` (with ``optimize``
    the optimizer too, at that level: 1 the -O1 preset, 2 every pass to a fixpoint),
    un-jitted here so that each entry jits it at its own shapes. The debug arrays it
    also returns are dropped, so XLA does not compute them. ``passes``, ``max_rounds``:
    as compile_arrays' (None: the level's)."""
    from jaxcc import compiler

    def f(src, length):
        c = compiler.compile_arrays(src, length, limits, optimize, passes, max_rounds)
        return c.program, c.error

    return f


def loop_fn(limits, optimize: int = False, passes=None, max_rounds=None, backend: str = "xla"):
    """source + tests -> (passed Bool[B], per_case, error code): the whole loop (with
    ``optimize``: the optimizer between the compiler and the VM, as compile_fn's;
    ``backend``: the VM's, "xla" or "pallas"; the XLA VM shrinks as pipeline.evaluate's
    does)."""
    from jaxcc import pipeline, vm

    comp = compile_fn(limits, optimize, passes, max_rounds)

    def f(src, length, entry, args, expected):
        prog, err = comp(src, length)
        shrink = pipeline.loop_shrink(None, args.shape[0] * args.shape[1])
        passed, per_case = vm.run_tests(prog, entry, args, expected, limits, backend=backend,
                                        shrink=shrink, shrink_by=pipeline.SHRINK_BY)  # fmt: skip
        return passed & (err.code == 0), per_case, err.code

    return f


def _reference_programs(ctx: Ctx, size: str, b: int):
    """Bytecode from the reference compiler for the first min(b, corpus) programs,
    tiled to b (compiled once per size)."""
    import jax

    def make():
        from jaxcc.reference import compiler

        progs = ctx.corpus[size]
        comp = compiler.compile_many([p["source"] for p in progs], ctx.limits(size))
        return jax.tree.map(np.asarray, comp[0]), np.asarray(comp[1].code)

    program, codes = ctx.memo(("refprog", size), make)
    idx = np.arange(b) % program.op.shape[0]
    return jax.tree.map(lambda x: x[idx], program), codes[idx]


def _encoded(ctx: Ctx, size: str, b: int):
    """(source, length) of the corpus tiled to b programs (encoded once per size, then
    tiled as arrays: encoding 256k strings one by one takes tens of seconds)."""
    src, length = ctx.memo(("enc", size), lambda: encode(
        [p["source"] for p in ctx.corpus[size]], ctx.limits(size)))  # fmt: skip
    idx = np.arange(b) % src.shape[0]
    return src[idx], length[idx]


def _loop_inputs(ctx: Ctx, size: str, b: int):
    """Loop inputs (source, length, entry, args, expected) of b programs and CPython's
    verdict per program (want)."""
    src, length = _encoded(ctx, size, b)
    t = ctx.memo(("tests", size), lambda: baselines.test_arrays(ctx.corpus[size]))
    idx = np.arange(b) % t["entry"].shape[0]
    return (src, length, t["entry"][idx], t["args"][idx], t["expected"][idx]), t["want"][idx]


# ------------------------------------------------------------------ entries: stages


@register("lexer", needs=("jaxcc.lexer:lex",))
def bench_lexer(ctx: Ctx):
    """Lexer throughput: source bytes per second (real bytes, not padding)."""
    import jax

    from jaxcc import lexer

    for size in ctx.sizes():
        lim = ctx.limits(size)
        jitted = jax.jit(lambda s, n, lim=lim: lexer.lex(s, n, lim))

        def make(b, size=size, lim=lim):
            return _encoded(ctx, size, b)

        def work(b, args, out):
            toks, err = out
            return int(np.asarray(args[1]).sum()), {
                "errors": int((np.asarray(err.code) != 0).sum())
            }

        sweep(ctx, "lexer", size, make, jitted, work, "bytes/s")


@register("parser", needs=("jaxcc.parser:parse", "jaxcc.reference.host_lex"))
def bench_parser(ctx: Ctx):
    """Parser throughput: tokens per second (input: tokens from the host lexer)."""
    import jax

    from jaxcc import parser
    from jaxcc.reference import host_lex

    for size in ctx.sizes():
        lim = ctx.limits(size)
        toks = ctx.memo(("toks", size), lambda size=size, lim=lim: jax.tree.map(
            np.asarray, host_lex.host_lex_many([p["source"] for p in ctx.corpus[size]], lim)[0]))  # fmt: skip
        jitted = jax.jit(lambda t, lim=lim: parser.parse(t, lim))

        def make(b, toks=toks):
            idx = np.arange(b) % toks.kind.shape[0]
            return (jax.tree.map(lambda x: x[idx], toks),)

        def work(b, args, out):
            ast, err = out
            return int(np.asarray(args[0].n_tokens).sum()), {
                "errors": int((np.asarray(err.code) != 0).sum())
            }

        sweep(ctx, "parser", size, make, jitted, work, "tokens/s")


@register("middle", needs=("jaxcc.middle:middle_end", "jaxcc.reference.flatten:flatten_many"))
def bench_middle(ctx: Ctx):
    """Middle end (names, types, code generation): programs per second (input: the
    reference AST and tokens)."""
    import jax

    from jaxcc import middle
    from jaxcc.reference import flatten

    for size in ctx.sizes():
        lim = ctx.limits(size)

        def load(size=size, lim=lim):
            ast, toks, _ = flatten.flatten_many([p["source"] for p in ctx.corpus[size]], lim)
            return jax.tree.map(np.asarray, (ast, toks))

        ast, toks = ctx.memo(("ast", size), load)
        jitted = jax.jit(lambda a, t, lim=lim: middle.middle_end(a, t, lim))

        def make(b, ast=ast, toks=toks):
            idx = np.arange(b) % toks.kind.shape[0]
            return jax.tree.map(lambda x: x[idx], (ast, toks))

        def work(b, args, out):
            prog, err = out
            return b, {"errors": int((np.asarray(err.code) != 0).sum())}

        sweep(ctx, "middle", size, make, jitted, work, "programs/s")


@register("vm", needs=("jaxcc.vm:run", "jaxcc.reference.compiler:compile_many"))
def bench_vm(ctx: Ctx):
    """VM: lane-steps per second running each program's module body (bytecode from the
    reference compiler); programs/s in the row too."""
    import jax

    from jaxcc import vm

    for size in ctx.sizes():
        lim = ctx.limits(size)
        jitted = jax.jit(lambda p, lim=lim: vm.run(p, lim))

        def make(b, size=size):
            return (_reference_programs(ctx, size, b)[0],)

        def work(b, args, out):
            steps = int(np.asarray(out.steps).sum())
            return steps, {
                "steps_per_program": steps / b,
                "ok": int((np.asarray(out.status) == 0).sum()),
            }

        sweep(ctx, "vm", size, make, jitted, work, "lane-steps/s")
        for r in ctx.rows:  # programs/s beside lane-steps/s
            if r.get("bench") == "vm" and r.get("size") == size and r.get("seconds"):
                r["programs_per_s"] = r["batch"] / r["seconds"]


@register("compile", needs=("jaxcc.lexer:lex", "jaxcc.parser:parse", "jaxcc.middle:middle_end"))
def bench_compile(ctx: Ctx):
    """Source to bytecode on the device (lexer + parser + middle end in one jit): programs/s."""
    import jax

    for size in ctx.sizes():
        lim = ctx.limits(size)
        jitted = jax.jit(compile_fn(lim))

        def make(b, size=size, lim=lim):
            return _encoded(ctx, size, b)

        def work(b, args, out):
            return b, {"errors": int((np.asarray(out[1].code) != 0).sum())}

        sweep(ctx, "compile", size, make, jitted, work, "programs/s")


LOOP_NEEDS = ("jaxcc.lexer:lex", "jaxcc.parser:parse", "jaxcc.middle:middle_end",
              "jaxcc.vm:run_tests")  # fmt: skip


@register("loop", needs=LOOP_NEEDS)
def bench_loop(ctx: Ctx):
    """The whole compile-run-test loop on the device (source and tests in, verdicts out):
    programs/s; `agree` counts programs whose verdict equals CPython's. With
    ``--vm-backends xla,pallas`` (the default "auto" on a GPU) also the loop with the
    Pallas VM kernel (rows `loop_pallas`: pipeline.evaluate's default VM on a GPU)."""
    from jaxcc import vm_pallas

    backends = ctx.args.vm_backends
    if backends == ["auto"]:
        auto = vm_pallas.resolve("auto")
        backends = ["xla"] if auto == "xla" else ["xla", auto]
    for backend in backends:
        _bench_loop(ctx, backend)


def _bench_loop(ctx: Ctx, backend: str) -> None:
    import jax

    name = "loop" if backend == "xla" else f"loop_{backend}"
    for size in ctx.sizes():
        lim = ctx.limits(size)
        jitted = jax.jit(loop_fn(lim, backend=backend))
        wants: dict = {}

        def make(b, size=size, wants=wants):
            args, want = _loop_inputs(ctx, size, b)
            wants[b] = want
            return args

        def work(b, args, out, wants=wants):
            passed = np.asarray(out[0])
            return b, {
                "passed": int(passed.sum()),
                "agree": int((passed == wants[b]).sum()),
                "tests_per_program": int(args[3].shape[1]),
            }

        sweep(ctx, name, size, make, jitted, work, "programs/s")


BREAKDOWN_NEEDS = LOOP_NEEDS + (
    "jaxcc.pipeline:evaluate,run_cases,_judge",
    "jaxcc.middle:PASSES,State",
)


def _breakdown(ctx: Ctx, optimize: bool) -> None:
    from bench import breakdown

    sizes = ["small", "medium"] if ctx.sizes() == list(corpus_mod.SIZES) else ctx.sizes()
    default = ctx.batches() in (FULL_BATCHES, QUICK_BATCHES)
    batches = ([16] if ctx.quick else [65536]) if default else ctx.batches()
    keep = getattr(ctx, "breakdown_outputs", None)  # a dict: tests read the outputs
    n0 = len(ctx.rows)
    for size in sizes:
        for b in batches:
            if ctx.over_budget():
                ctx.add(bench="breakdown", size=size, batch=b,
                        note="stopped: entry time budget spent")  # fmt: skip
                break
            try:
                out = breakdown.run_size(ctx, size, b, measure, _loop_inputs, optimize)
            except Exception as e:  # noqa: BLE001
                if _is_oom(e):
                    ctx.add(bench="breakdown", size=size, batch=b, note="out of memory")
                    break
                raise
            if keep is not None:
                keep[(size, b, optimize)] = out
            del out
    print(breakdown.table(ctx.rows[n0:]), flush=True)


@register("breakdown", needs=BREAKDOWN_NEEDS, quick=False)
def bench_breakdown(ctx: Ctx):
    """Per-stage breakdown of the loop (issue 14): lexer, parser, each middle-end pass,
    the VM's run_tests and the verdicts, each jitted alone on the previous stage's
    outputs; time, programs/s, XLA's cost analysis (bytes accessed, flops), memory per
    program and the fraction of the device's peak bandwidth per stage, and the sum of the
    stages against pipeline.evaluate (whose Evaluation the stages' must equal).

    Sizes: --sizes (the default set: small and medium); batches: --batches, else 65,536
    (--quick: 16). bench/breakdown.py has the stages and the fields."""
    _breakdown(ctx, optimize=False)


@register("breakdown_O1", needs=BREAKDOWN_NEEDS + ("jaxcc.optimize:optimize",), quick=False)
def bench_breakdown_o1(ctx: Ctx):
    """The breakdown of the -O1 loop (pipeline.evaluate(optimize=True)): the same stages
    with the optimizer between the middle end and the VM (rows: variant O1)."""
    _breakdown(ctx, optimize=True)


def _quantiles(x) -> dict:
    x = np.asarray(x, float)
    if x.size == 0:
        return {}
    q = np.percentile(x, [0, 10, 50, 90, 100])
    return dict(zip(("min", "p10", "p50", "p90", "max"), (float(v) for v in q), strict=True))


def _steps_of(program, progs: list[dict], ok, limits) -> np.ndarray:
    """Float[B]: VM steps of each compiled program over its tests (the JAX VM, one lane
    per (program, test); steps do not depend on the device)."""
    import jax

    from jaxcc import vm

    lanes = [(i, t["entry"], t["args"]) for i in np.flatnonzero(ok) for t in progs[i]["tests"]]
    a = max([len(x[2]) for x in lanes] + [1])
    idx = np.array([x[0] for x in lanes], np.int64)
    entry = np.array([x[1] for x in lanes], np.int32)
    args = np.zeros((len(lanes), a), np.int32)
    for j, x in enumerate(lanes):
        args[j, : len(x[2])] = x[2]
    sub = jax.tree.map(lambda f: np.asarray(f)[idx], program)
    res = jax.device_get(vm.run(sub, limits, entry, args))
    steps = np.zeros(len(progs))
    np.add.at(steps, idx, np.asarray(res.steps, float))
    return steps


@register("optimize", needs=("jaxcc.optimize:optimize",) + LOOP_NEEDS)
def bench_optimize(ctx: Ctx):
    """The optimizer (jaxcc.optimize) at each --opt-levels level (default 1, the -O1
    preset the loop uses; 2: every pass to a fixpoint): instructions and VM steps saved
    per program on each corpus and examples/ (steps of the tests' runs;
    device-independent), the optimizer's own programs/s and compile time, and the loop's
    programs/s with it (rows loop_O1 / loop_O2; compare with the `loop` entry's rows,
    the loop without it)."""
    for spec in ctx.args.opt_levels:
        _bench_optimize_level(ctx, spec)


# --opt-levels letters: a pass by its first letter (thread, unreachable, fold, peephole,
# deadstore, cmpjump, loadvar2, invert)
_PASS_LETTERS = {"t": "thread", "u": "unreachable", "f": "fold", "p": "peephole",
                 "d": "deadstore", "c": "cmpjump", "l": "loadvar2", "i": "invert"}  # fmt: skip


def opt_config(spec: str) -> tuple[str, int | None, tuple, int]:
    """An --opt-levels item -> (row suffix, level or None, passes, rounds): "1" / "2"
    the levels (-O1, -O2: rows loop_O1, loop_O2), or "LETTERS:ROUNDS" a preset to compare
    with them, e.g. "tcdli:1" (thread, deadstore, cmpjump, loadvar2, invert, 1 round:
    rows loop_Ptcdli_r1)."""
    from jaxcc import optimize as opt

    if ":" not in spec:
        return f"O{int(spec)}", int(spec), *opt.level(int(spec))
    letters, rounds = spec.split(":")
    passes = opt.check_passes([_PASS_LETTERS[x] for x in letters])
    return f"P{letters}_r{int(rounds)}", None, passes, int(rounds)


def _bench_optimize_level(ctx: Ctx, spec: str) -> None:
    import jax

    from jaxcc import optimize as opt

    suffix, level, passes, rounds = opt_config(spec)
    tag = {"opt": suffix, "passes": ",".join(passes), "rounds": rounds}
    for size in [*ctx.sizes(), "examples"]:
        progs = ctx.corpus.get(size) or []
        if not progs:
            continue
        lim = ctx.limits(size)
        p0, codes = _reference_programs(ctx, size, len(progs))
        ok = codes == 0
        t0 = time.perf_counter()
        p1 = jax.device_get(opt.optimize(p0, lim, passes, rounds))
        first_s = time.perf_counter() - t0
        n0, n1 = np.asarray(p0.n_code, float)[ok], np.asarray(p1.n_code, float)[ok]
        s0, s1 = _steps_of(p0, progs, ok, lim)[ok], _steps_of(p1, progs, ok, lim)[ok]
        instr = 100 * (1 - n1 / np.maximum(n0, 1))
        steps = 100 * (1 - s1 / np.maximum(s0, 1))
        ctx.add(bench="optimize_gain", size=size, **tag, programs=int(ok.sum()),
                instr_mean=float(n0.mean()), instr_saved_pct=100 * (1 - n1.sum() / n0.sum()),
                instr_saved_mean_pct=float(instr.mean()),
                **{f"instr_saved_{k}": v for k, v in _quantiles(instr).items()},
                steps_mean=float(s0.mean()), steps_saved_pct=100 * (1 - s1.sum() / s0.sum()),
                steps_saved_mean_pct=float(steps.mean()),
                **{f"steps_saved_{k}": v for k, v in _quantiles(steps).items()},
                first_call_s=first_s)  # fmt: skip
        if size == "examples":
            continue
        jitted = jax.jit(lambda p, lim=lim: opt.optimize(p, lim, passes, rounds))

        def make(b, size=size):
            return (_reference_programs(ctx, size, b)[0],)  # the arguments: one Program

        def work(b, args, out):
            return b, dict(tag)

        sweep(ctx, "optimize" if level == 1 else f"optimize_{suffix}", size, make, jitted,
              work, "programs/s")  # fmt: skip

        wants: dict = {}

        def make_loop(b, size=size, wants=wants):
            args, want = _loop_inputs(ctx, size, b)
            wants[b] = want
            return args

        def work_loop(b, args, out, wants=wants):
            passed = np.asarray(out[0])
            return b, {"passed": int(passed.sum()), "agree": int((passed == wants[b]).sum()), **tag}

        loop = loop_fn(lim, optimize=1, passes=passes, max_rounds=rounds)
        sweep(ctx, f"loop_{suffix}", size, make_loop, jax.jit(loop), work_loop, "programs/s")


@register("latency", needs=("jaxcc.vm:run_tests",))
def bench_latency(ctx: Ctx):
    """Single-program latency (batch 1, small program): device loop and source-to-bytecode
    (on the device, inputs resident), host-inclusive loop (encode, transfer, run, fetch),
    and CPython / the reference pipeline for one program."""
    import jax

    size = "small"
    lim = ctx.limits(size)
    prog = ctx.corpus[size][:1]
    if missing(LOOP_NEEDS) is None:
        args, _ = _loop_inputs(ctx, size, 1)
        jitted = jax.jit(loop_fn(lim))
        m = measure(jitted, jax.device_put(args), ctx)
        ctx.add(bench="latency", size=size, batch=1, variant="loop on device",
                seconds=m["seconds"], compile_s=m["compile_s"])  # fmt: skip
        cj = jax.jit(compile_fn(lim))
        m2 = measure(cj, jax.device_put(args[:2]), ctx)
        ctx.add(bench="latency", size=size, batch=1, variant="compile on device",
                seconds=m2["seconds"])  # fmt: skip
        jax.block_until_ready(jitted(*jax.device_put(args)))  # the jit path, warm
        times = []
        for _ in range(max(3, ctx.args.repeats)):
            t0 = time.perf_counter()
            a, _ = _loop_inputs(ctx, size, 1)
            out = jax.device_get(jitted(*jax.device_put(a)))
            times.append(time.perf_counter() - t0)
        del out
        ctx.add(bench="latency", size=size, batch=1, variant="loop, host to host",
                seconds=statistics.median(times))  # fmt: skip
    else:
        ctx.add(bench="latency", size=size, note="loop: " + missing(LOOP_NEEDS))
    times = []
    for _ in range(max(5, ctx.args.repeats)):
        times.append(baselines.cpython(prog)["seconds"])
    ctx.add(
        bench="latency", size=size, batch=1, variant="cpython", seconds=statistics.median(times)
    )
    if missing(("jaxcc.reference.compiler:compile_source",)) is None:
        times = [baselines.reference(prog, lim)["seconds"] for _ in range(3)]
        ctx.add(bench="latency", size=size, batch=1, variant="reference pipeline",
                seconds=statistics.median(times))  # fmt: skip


@register("memory", needs=("jaxcc.vm:run",))
def bench_memory(ctx: Ctx):
    """Device memory per program in flight: compiled.memory_analysis() (arguments +
    outputs + temporaries) / batch, for each stage available, at two batch sizes the
    sweeps compiled (cache hits); and the device's peak bytes in use where it reports it."""
    import jax

    b_small, b_big = (1, 16) if ctx.quick else (256, 4096)  # shapes the sweeps compiled
    stages = []
    for size in ctx.sizes():
        lim = ctx.limits(size)
        if missing(LOOP_NEEDS) is None:
            stages.append(("loop", size, jax.jit(loop_fn(lim)),
                           lambda b, size=size: _loop_inputs(ctx, size, b)[0]))  # fmt: skip
            stages.append(("compile", size, jax.jit(compile_fn(lim)),
                           lambda b, size=size: _loop_inputs(ctx, size, b)[0][:2]))  # fmt: skip
        if missing(("jaxcc.reference.compiler:compile_many",)) is None:
            from jaxcc import vm

            stages.append(("vm", size, jax.jit(lambda p, lim=lim: vm.run(p, lim)),
                           lambda b, size=size: (_reference_programs(ctx, size, b)[0],)))  # fmt: skip
    for stage, size, jitted, make in stages:
        for b in (b_small, b_big):
            args = jax.device_put(make(b))
            compiled = jitted.lower(*args).compile()
            mb = _mem_bytes(compiled)
            ma = compiled.memory_analysis()
            ctx.add(bench="memory", size=size, batch=b, variant=stage,
                    bytes_per_program=None if mb is None else mb / b, mem_bytes=mb,
                    temp_bytes=getattr(ma, "temp_size_in_bytes", None),
                    arg_bytes=getattr(ma, "argument_size_in_bytes", None),
                    out_bytes=getattr(ma, "output_size_in_bytes", None))  # fmt: skip
            stats = jax.devices()[0].memory_stats()
            if stats and "peak_bytes_in_use" in stats:
                jax.block_until_ready(compiled(*args))
                # the device's peak since the process started (there is no reset):
                # an upper bound, meaningful when this entry runs alone
                stats = jax.devices()[0].memory_stats()
                ctx.rows[-1]["process_peak_bytes"] = stats["peak_bytes_in_use"]


# ------------------------------------------------------------------ XLA compile time

PROBES = {
    "vm": ("jaxcc.vm:run", "jaxcc.reference.compiler:compile_many"),
    "compile": LOOP_NEEDS[:3],
    "loop": LOOP_NEEDS,
}


def probe(args) -> None:
    """Child process of the xla_compile entry: trace, lower and compile one stage with
    the persistent cache in args.cache, print the times as one JSON line."""
    t_import = time.perf_counter()
    import jax

    jax.config.update("jax_compilation_cache_dir", args.cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import_s = time.perf_counter() - t_import
    with open(os.path.join(args.out, "corpus.json")) as f:
        corpus = json.load(f)["corpus"]
    ctx = Ctx(args, corpus, {})
    size, b = args.sizes[0], args.batches[0]
    lim = ctx.limits(size)
    if args.probe == "vm":
        from jaxcc import vm

        jitted = jax.jit(lambda p: vm.run(p, lim))
        inputs = (_reference_programs(ctx, size, b)[0],)
    elif args.probe == "compile":
        jitted = jax.jit(compile_fn(lim))
        inputs = _loop_inputs(ctx, size, b)[0][:2]
    else:
        jitted = jax.jit(loop_fn(lim))
        inputs = _loop_inputs(ctx, size, b)[0]
    inputs = jax.device_put(inputs)
    t0 = time.perf_counter()
    traced = jitted.trace(*inputs)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    jax.block_until_ready(compiled(*inputs))
    t4 = time.perf_counter()
    print("PROBE " + json.dumps({"import_s": import_s, "trace_s": t1 - t0, "lower_s": t2 - t1,
                                 "compile_s": t3 - t2, "first_run_s": t4 - t3}))  # fmt: skip


@register("xla_compile", needs=("jaxcc.vm:run",))
def bench_xla_compile(ctx: Ctx):
    """XLA compile time of the VM, the compiler and the whole loop (small programs), each
    in a fresh process: cold (empty persistent cache) and warm (the cache the cold run
    filled)."""
    b = 16 if ctx.quick else 1024
    for stage, needs in PROBES.items():
        if ctx.quick and stage != "vm":  # a cold compile of the lexer takes ~1 min on a CPU
            ctx.add(bench="xla_compile", variant=stage, note="skipped in --quick")
            continue
        why = missing(needs)
        if why:
            ctx.add(bench="xla_compile", variant=stage, note="skipped: " + why)
            continue
        with tempfile.TemporaryDirectory(prefix="jaxcc-cache-") as cache:
            for temp in ("cold", "warm"):
                cmd = [sys.executable, os.path.abspath(__file__), "--_probe", stage,
                       "--cache", cache, "--out", ctx.args.out, "--sizes", "small",
                       "--batches", str(b)]  # fmt: skip
                env = dict(
                    os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
                )
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
                wall = time.perf_counter() - t0
                line = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")]
                if proc.returncode != 0 or not line:
                    ctx.add(bench="xla_compile", variant=f"{stage} {temp}",
                            note="probe failed: " + proc.stderr.strip()[-300:])  # fmt: skip
                    break
                r = json.loads(line[-1][6:])
                ctx.add(bench="xla_compile", size="small", batch=b, variant=f"{stage} {temp}",
                        seconds=r["compile_s"], process_s=wall, **r)  # fmt: skip


# ------------------------------------------------------------------ baselines


POOL_REPEATS = 3


def _baseline_n(ctx: Ctx, full: int, quick: int) -> int:
    return quick if ctx.quick else full


@register("cpython")
def bench_cpython(ctx: Ctx):
    """CPython compile() + exec + the tests, one process: programs/s."""
    for size in ctx.sizes():
        progs = ctx.progs(size, _baseline_n(ctx, 2048, 64))
        r = baselines.cpython(progs)
        ctx.add(bench="cpython", size=size, batch=r["programs"], seconds=r["seconds"],
                throughput=r["programs"] / r["seconds"], unit="programs/s",
                passed=r["passed"])  # fmt: skip


@register("cpython_pool")
def bench_cpython_pool(ctx: Ctx):
    """CPython compile() + exec + the tests on every host core (multiprocessing Pool):
    the median of POOL_REPEATS timed runs over as many programs as the loop's batch
    (65,536), after one untimed run of them all; every run's rate is in the row. Until
    2026-11-28 it timed 16,384 programs once after a warm-up of 64: on an H200 host that
    first run gave 86,759 small programs/s where the runs after it gave 134,000-201,000
    (docs/benchmarks.md, twelfth run), so the earlier ratios overstate the loop's lead."""
    pool = baselines.Pool()
    repeats = 1 if ctx.quick else POOL_REPEATS
    try:
        for size in ctx.sizes():
            progs = ctx.progs(size, _baseline_n(ctx, 65536, 256))
            pool.run(progs)  # warm: the first run after the pool starts is the slowest
            runs = sorted((pool.run(progs) for _ in range(repeats)), key=lambda r: r["seconds"])
            r = runs[len(runs) // 2]
            ctx.add(bench="cpython_pool", size=size, batch=r["programs"], seconds=r["seconds"],
                    throughput=r["programs"] / r["seconds"], unit="programs/s",
                    passed=r["passed"], workers=r["workers"],
                    repeats=[round(q["programs"] / q["seconds"]) for q in runs])  # fmt: skip
    finally:
        pool.close()


@register("reference", needs=("jaxcc.reference.compiler:compile_source",))
def bench_reference(ctx: Ctx):
    """The reference pipeline (reference compiler + interpreter, plain Python): programs/s."""
    for size in ctx.sizes():
        progs = ctx.progs(size, _baseline_n(ctx, 256, 8))
        r = baselines.reference(progs, ctx.limits(size))
        ctx.add(bench="reference", size=size, batch=r["programs"], seconds=r["seconds"],
                throughput=r["programs"] / r["seconds"], unit="programs/s",
                passed=r["passed"], compile_s=r["compile_s"])  # fmt: skip


@register("cpu_centric", needs=("jaxcc.vm:run_tests", "jaxcc.reference.compiler:compile_many"))
def bench_cpu_centric(ctx: Ctx):
    """The paper's CPU-centric pipeline: host compile (reference compiler), device_put,
    vm.run_tests on the device, device_get; each phase timed."""
    import jax

    from jaxcc import pipeline, vm

    # the host compiles ~200 programs/s (reference compiler): 4096 take ~20 s a run
    batches = [b for b in ctx.batches() if b <= (64 if ctx.quick else 4096)]
    for size in ctx.sizes():
        lim = ctx.limits(size)

        def run_tests(p, e, a, x, lim=lim):  # the VM as the loop runs it (shrink included)
            shrink = pipeline.loop_shrink(None, a.shape[0] * a.shape[1])
            return vm.run_tests(p, e, a, x, lim, shrink=shrink, shrink_by=pipeline.SHRINK_BY)

        jitted = jax.jit(run_tests)
        for b in batches:
            if ctx.over_budget():
                ctx.add(
                    bench="cpu_centric", size=size, batch=b, note="stopped: entry time budget spent"
                )
                break
            progs = ctx.progs(size, b)
            baselines.cpu_centric(progs, lim, jitted)  # compile for this shape, warm up
            runs = [baselines.cpu_centric(progs, lim, jitted) for _ in range(2 if ctx.quick else 1)]
            r = min(runs, key=lambda x: x["seconds"])
            ctx.add(bench="cpu_centric", size=size, batch=b, seconds=r["seconds"],
                    throughput=b / r["seconds"], unit="programs/s",
                    **{k: v for k, v in r.items() if k not in ("seconds", "programs")})  # fmt: skip
            if r["seconds"] > ctx.args.max_call_s:
                break


# ------------------------------------------------------------------ scaling


@register("scaling", needs=("jaxcc.vm:run", "jaxcc.reference.compiler:compile_many"))
def bench_scaling(ctx: Ctx):
    """1, 2, 4, ... devices (all of jax.devices()): the VM alone and the whole loop at
    one fixed batch, split over the devices with jaxcc.sharding."""
    import jax

    from jaxcc import sharding, vm

    devs = jax.devices()
    counts = sorted({1 << i for i in range(len(devs).bit_length()) if 1 << i <= len(devs)}
                    | {len(devs)})  # fmt: skip
    b = 64 if ctx.quick else 65536
    size = "small"
    lim = ctx.limits(size)
    program = _reference_programs(ctx, size, b)[0]
    # on one device --quick leaves the loop out: it would only be one more long compile
    loop_ok = missing(LOOP_NEEDS) is None and not (ctx.quick and len(devs) == 1)
    if not loop_ok:
        ctx.add(
            bench="scaling_loop", note="skipped: " + (missing(LOOP_NEEDS) or "--quick, 1 device")
        )
    if loop_ok:
        loop_args, want = _loop_inputs(ctx, size, b)
    for n in counts:
        mesh = sharding.make_mesh(devs[:n])
        cases = [("scaling_vm", sharding.sharded(functools.partial(vm.run, limits=lim), mesh),
                  (program,), "lane-steps/s")]  # fmt: skip
        if loop_ok:
            cases.append(("scaling_loop", sharding.sharded(loop_fn(lim), mesh), loop_args,
                          "programs/s"))  # fmt: skip
        for bench, fn, args, unit in cases:
            placed, pad = sharding.shard_batch(args, mesh)
            out = jax.block_until_ready(fn(*placed))  # compile and warm up
            times = []
            for _ in range(max(3, ctx.args.repeats)):
                t0 = time.perf_counter()
                out = jax.block_until_ready(fn(*placed))
                times.append(time.perf_counter() - t0)
            dt = statistics.median(times)
            work = int(np.asarray(out.steps).sum()) if bench == "scaling_vm" else b
            extra = {}
            if bench == "scaling_loop":
                passed = np.asarray(out[0])[:b]
                extra["agree"] = int((passed == want).sum())
            ctx.add(bench=bench, size=size, batch=b, devices=n, seconds=dt,
                    throughput=work / dt, unit=unit, **extra)  # fmt: skip


# ------------------------------------------------------------------ entries: neural, hybrid

NEURAL_NEEDS = ("jaxcc.neural.hybrid:hybrid_compile,sample_each", "jaxcc.neural.weights:load")


def _neural_setup(ctx: Ctx):
    """(cfg, params, limits, label) of the model measured: the shipped weights (or
    --neural-weights); with --quick, a tiny random-init model at small shapes (what the
    CPU smoke test runs; its numbers say nothing about the real model)."""
    from jaxcc.neural import claims, hybrid, weights

    def make():
        if ctx.quick and not ctx.args.neural_weights:
            from jaxcc.neural.model import init_params

            cfg = claims.QUICK_CFG
            return cfg, init_params(cfg, 0), claims.QUICK_LIMITS, "random-init tiny model"
        path = ctx.args.neural_weights or weights.DEFAULT
        cfg, params = weights.load(path)
        return cfg, params, hybrid.NEURAL_LIMITS, os.path.relpath(path, ROOT)

    return ctx.memo("neural_model", make)


def _neural_sources(ctx: Ctx, lim) -> list[str]:
    """The small corpus programs that fit the neural path's source shape."""
    return [p["source"] for p in ctx.corpus["small"]
            if len(p["source"].encode()) <= lim.max_source_bytes]  # fmt: skip


@register("neural", needs=NEURAL_NEEDS, quick=False)
def bench_neural(ctx: Ctx):
    """The neural path's generation: k candidates per program (sampling and assembly, one
    jit), candidates/s at k = 16, 256, 1000 (4096 / k programs per call, at most 64),
    with the typed decoding mask and at the sampling budget (``sample.tier`` of the
    batch's longest source) as ``jaxcc run --compiler neural`` samples (the front end's
    print items and return types, ``inputs.typing``, computed once per program before
    the clock starts: they do not depend on k)."""
    import jax

    from jaxcc import lexer
    from jaxcc.neural import api, hybrid, inputs

    cfg, params, lim, label = _neural_setup(ctx)
    sources = _neural_sources(ctx, lim)
    for k in (2, 4) if ctx.quick else (16, 256, 1000):
        if ctx.over_budget():
            ctx.add(bench="neural", k=k, note="stopped: entry time budget spent")
            break
        b = max(1, min(4 if ctx.quick else 64, 4096 // k))
        batch = (sources * b)[:b]
        tier = api._tier(batch, cfg, lim)  # the budget jaxcc run --compiler neural samples at
        src, length = lexer.encode(batch, lim)
        tokens, lex_error = jax.jit(lexer.lex, static_argnames="limits")(src, length, lim)
        pt, rt = jax.jit(inputs.typing, static_argnames="limits")(tokens, lim, lex_error)
        keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(0), i))(np.arange(b))
        # the parameters are an argument (closed over, they would be HLO constants)
        gen = jax.jit(lambda t, p, kk, pt, rt, k=k, tier=tier: hybrid.sample_each(
            t, p, kk, k, lim, 0.8, 0.95, True, cfg, tier, print_items=pt, ret_types=rt)[1])  # fmt: skip
        m = measure(gen, (tokens, params, keys, pt, rt), ctx)
        ctx.add(bench="neural", size="small", batch=b, k=k, candidates=b * k,
                seconds=m["seconds"], throughput=b * k / m["seconds"], unit="candidates/s",
                ok=int(np.asarray(m["out"]).sum()), compile_s=m["compile_s"], model=label,
                mask="typed", tier=list(tier))  # fmt: skip


@register("hybrid", needs=NEURAL_NEEDS, quick=False)
def bench_hybrid(ctx: Ctx):
    """The paper's eq. 9-14 in one run (jaxcc.neural.claims.timing): the neural path (k =
    16 samples, level-3 verification on 64 probes per function), hybrid_compile with the
    shipped router, the deterministic GPU compiler and CPython compile() on every host
    core, on one seeded shuffle of the held-out generated programs (levels 0-3) and the
    hand-written ones; each --batches size until the device runs out of memory (then a
    limit row; default 1, 16, 128, 256, 512), the deterministic compiler at
    --hybrid-det-batches. Every shape is compiled first on --precompile-threads threads
    (compile_s of a row is then what is left: loading the executable);
    hybrid_timing.json and throughput.png are written beside results.json, the former
    after every batch size."""
    import jax

    from jaxcc.neural import claims

    cfg, params, lim, label = _neural_setup(ctx)
    ns = claims.parse_args(["--out", ctx.args.out] + (["--quick"] if ctx.quick else []))
    if not ctx.quick:
        # the neural path runs out of memory between 256 and 512 programs on an 80 GB
        # GPU: without --batches, no larger sizes (each would be compiled first)
        given = getattr(ctx.args, "batches_given", True)
        ns.batches = ",".join(map(str, ctx.batches() if given else HYBRID_BATCHES))
        ns.det_batches = ctx.args.hybrid_det_batches
    ns.timing_budget_s = ctx.args.entry_budget_s
    ns.precompile_threads = ctx.args.precompile_threads
    progs = claims.load_programs(ns)
    _, ok = claims.reference([s for s, _ in progs], lim, ns.funcs)
    sources = [s for (s, _), keep in zip(progs, ok, strict=True) if keep]
    classes = [c for (_, c), keep in zip(progs, ok, strict=True) if keep]
    device = jax.devices()[0].device_kind
    path = os.path.join(ctx.args.out, "hybrid_timing.json")

    def save(out: dict) -> None:
        doc = {"device": device, "model": label, "programs": len(sources),
               "classes": {c: classes.count(c) for c in dict.fromkeys(classes)},
               "args": vars(ns), "timing": out}  # fmt: skip
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, default=str)

    out = claims.timing(ns, cfg, params, sources, lim, claims.verify_limits(lim), ns.funcs, save)
    save(out)
    claims.plots(ctx.args.out, {"classes": {}, "timing": out, "device": device,
                                "args": {"timing_k": ns.timing_k}})  # fmt: skip
    common = dict(bench="hybrid", size="heldout+handwritten", programs=len(sources))
    if "precompile" in out:
        p = out["precompile"]
        ctx.add(**common, variant="precompile", seconds=p["seconds"], compiles=p["compiles"],
                threads=p["threads"], failed=len(p["failed"]))  # fmt: skip
    for r in out["deterministic"]:
        ctx.add(**common, variant="deterministic", batch=r["batch"], seconds=r["seconds"],
                throughput=r["programs_per_s"], unit="programs/s", compile_s=r["compile_s"])  # fmt: skip
    for r in out["neural"]:
        ctx.add(**common, variant="neural", batch=r["batch"], k=r["k"], seconds=r["t_neural_s"],
                t_gen_s=r["t_gen_s"], t_verify_s=r["t_verify_s"],
                throughput=r["programs_per_s"], unit="programs/s", compile_s=r["compile_s"],
                model=label)  # fmt: skip
    for r in out["hybrid"]:
        paths = {f"path_{name.lower()}": n for name, n in r["paths"].items()}
        ctx.add(**common, variant="hybrid", batch=r["batch"], k=r["k"], seconds=r["seconds"],
                throughput=r["programs_per_s"], unit="programs/s", compile_s=r["compile_s"],
                p_simple=r["p_simple"], eq14_prediction_s=r["eq14_prediction_s"],
                t_routing_s=r["t_routing_s"], model=label, **paths)  # fmt: skip
    for key, variant in (("limit", "neural"), ("deterministic_limit", "deterministic")):
        if key in out:
            ctx.add(**common, variant=variant, note=f"out of device memory at batch "
                    f"{out[key]['batch']} (the device's limit): {out[key]['error'][:160]}")  # fmt: skip
    if "stopped" in out:
        ctx.add(**common, note=f"stopped: {out['stopped']}")
    if "cpython_compile" in out:
        c = out["cpython_compile"]
        ctx.add(**common, variant="cpython_compile", cores=c["cores"], seconds=c["seconds"],
                throughput=c["programs_per_s"], unit="programs/s", note="CPython compile(), "
                f"one process per host core, {c['programs']} programs")  # fmt: skip


# the long-tail batch of the compaction entry: every program counts n down to 0 (15 VM
# steps per iteration: 308 steps for n = 20, 30,008 for n = 2000); 1% start 100x higher
TAIL_SOURCE = """def f(n: int) -> int:
    t = 0
    while n > 0:
        t += n % 7
        n -= 1
    return t
"""
TAIL_SHORT, TAIL_FACTOR, TAIL_FRACTION = 20, 100, 0.01


def _tail_variants(one_call, prog, entry, args, lim):
    """(name, run, stats) of the compaction entry's three ways to run one batch; ``run()``
    returns the RunResult, ``stats`` gets the driver's Stats of each run."""
    from jaxcc import driver, vm, vm_pallas

    # the entry is about compaction, which the serial backend never does: lockstep there
    backend = "xla" if vm_pallas.resolve("auto") == "serial" else "auto"

    def sliced(compact: bool, stats: list):
        d = driver.Driver(vm.start(prog, lim, entry, args), lim, compact=compact, backend=backend)
        res = d.run()
        stats.append(d.stats())
        return res

    plain, packed = [], []
    return [
        ("one vm.run call", lambda: one_call(prog, entry, args), []),
        ("slices, no compaction", functools.partial(sliced, False, plain), plain),
        ("slices, compaction", functools.partial(sliced, True, packed), packed),
    ]


@register("compaction", needs=("jaxcc.driver:Driver", "jaxcc.vm:start",
                               "jaxcc.reference.compiler:compile_source"), quick=False)  # fmt: skip
def bench_compaction(ctx: Ctx):
    """A long-tail batch (1% of the programs run 100x longer than the rest) three ways,
    side by side: one vm.run call, the driver in slices without compaction, and with
    compaction (jaxcc.driver); results checked identical.

    Batch sizes: --batches (those >= 128), else 4096 and 65536 (--quick: 1024). Each
    variant runs once untimed (compiling every tier it uses), then is timed."""
    import jax

    from jaxcc import isa, vm
    from jaxcc.limits import Limits
    from jaxcc.reference.compiler import compile_source

    device = jax.devices()[0].device_kind
    print(f"    device: {device}", flush=True)
    lim = Limits(max_code=64, max_funcs=2, max_stack=16, max_depth=4, max_output=4,
                 max_steps=100 * 10 * TAIL_SHORT * TAIL_FACTOR)  # fmt: skip
    c = compile_source(TAIL_SOURCE, lim)
    assert int(c.error.code) == 0, c.error
    default = ctx.batches() in (FULL_BATCHES, QUICK_BATCHES)
    sizes = [1024] if ctx.quick else [4096, 65536]
    sizes = sizes if default else [b for b in ctx.batches() if b >= 128]
    one_call = jax.jit(lambda p, e, a: vm.run(p, lim, entry=e, args=a))
    for b in sizes:
        if ctx.over_budget():
            ctx.add(bench="compaction", batch=b, note="stopped: entry time budget spent")
            break
        rng = np.random.default_rng(ctx.args.seed)
        n = np.full(b, TAIL_SHORT, np.int32)
        n_long = max(1, int(round(b * TAIL_FRACTION)))
        n[rng.choice(b, n_long, replace=False)] = TAIL_SHORT * TAIL_FACTOR
        prog = isa.Program(*(np.broadcast_to(np.asarray(x), (b, *np.shape(x))).copy()
                             for x in c.program))  # fmt: skip
        entry = np.ones(b, np.int32)
        args = jax.device_put(n[:, None])
        prog, entry = jax.device_put((prog, entry))

        variants = _tail_variants(one_call, prog, entry, args, lim)
        want = None
        base_s = None
        for name, fn, stats in variants:
            t0 = time.perf_counter()
            res = jax.device_get(fn())  # compiles (every tier), untimed
            first_s = time.perf_counter() - t0
            if want is None:
                want = res
                ok = int((np.asarray(res.status) == 0).sum())
            same = all(np.array_equal(np.asarray(x), np.asarray(y))
                       for x, y in zip(res, want, strict=True))  # fmt: skip
            times = []
            for _ in range(max(1, min(ctx.args.repeats, 3))):
                t0 = time.perf_counter()
                jax.block_until_ready(fn())
                times.append(time.perf_counter() - t0)
            sec = statistics.median(times)
            base_s = base_s or sec
            extra = {}
            if stats:
                st = stats[-1]
                extra = dict(slices=st.slices, tiers=" ".join(map(str, st.sizes)),
                             compactions=st.compactions)  # fmt: skip
            ctx.add(bench="compaction", size="tail", batch=b, variant=name, device=device,
                    seconds=sec, first_s=first_s, speedup=base_s / sec, identical=same,
                    long_programs=n_long, ok=ok,
                    lane_steps=int(np.asarray(want.steps, np.int64).sum()), **extra)  # fmt: skip
            if not same:
                raise AssertionError(f"{name}: results differ from one vm.run call")


@register("examples", needs=LOOP_NEEDS + ("jaxcc.vm:run",), quick=False)
def bench_examples(ctx: Ctx):
    """examples/*.py compiled and run on the device as one batch; their output is
    compared with CPython's (a correctness check with a time)."""
    import jax

    from jaxcc import isa, vm

    progs = ctx.corpus.get("examples") or []
    if not progs:
        ctx.add(bench="examples", note="no examples/*.py")
        return
    lim = ctx.limits("examples")
    comp = compile_fn(lim)

    def f(src, length):
        prog, err = comp(src, length)
        return err, vm.run(prog, lim)

    args = jax.device_put(encode([p["source"] for p in progs], lim))
    m = measure(jax.jit(f), args, ctx)
    err, res = jax.device_get(m["out"])
    from jaxcc.errors import EXCEPTION_NAME

    agree, differ = 0, []
    for i, p in enumerate(progs):
        t = p["tests"][0]
        code = int(err.code[i])
        if code != 0:
            got = EXCEPTION_NAME.get(code)
            ok = t["error"] == got
        else:
            text = isa.format_output(res.out_kind[i], res.out_val[i], res.n_out[i])
            got = None if int(res.status[i]) == 0 else EXCEPTION_NAME.get(int(res.status[i]))
            ok = text == t["stdout"] and got == t["error"]
        agree += ok
        if not ok:
            differ.append(f"{p['name']}: jaxcc {got or 'ok'}, CPython {t['error'] or 'ok'}")
    steps = np.asarray(res.steps)
    ctx.add(bench="examples", size="examples", batch=len(progs), seconds=m["seconds"],
            throughput=len(progs) / m["seconds"], unit="programs/s", agree=agree,
            max_steps=int(steps.max()), compile_s=m["compile_s"],
            note="; ".join(differ) or None)  # fmt: skip


# ------------------------------------------------------------------ per-stage micro-benchmarks


def _micro(stage: str):
    """Run bench/bench_<stage>.py (the stage author's own benchmark) in a subprocess with
    --out DIR/bench_<stage> (and --quick); its files stay in that folder."""

    def fn(ctx: Ctx):
        path = os.path.join(ROOT, "bench", f"bench_{stage}.py")
        bench = f"micro_{stage}"
        if not os.path.exists(path):
            ctx.add(bench=bench, note=f"skipped: bench/bench_{stage}.py does not exist yet")
            return
        out = os.path.join(ctx.args.out, f"bench_{stage}")
        cmd = [sys.executable, path, "--out", out] + (["--quick"] if ctx.quick else [])
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - t0
        print("\n".join("      " + ln for ln in proc.stdout.strip().splitlines()[-15:]))
        files = sorted(os.listdir(out)) if os.path.isdir(out) else []
        ctx.add(bench=bench, seconds=wall, note=f"rc={proc.returncode}; {out}: {', '.join(files)}")
        if proc.returncode != 0:
            raise RuntimeError(f"bench_{stage}.py failed: {proc.stderr.strip()[-500:]}")

    fn.__doc__ = f"bench/bench_{stage}.py, the {stage} author's micro-benchmark (subprocess)."
    return fn


for _stage in ("lexer", "parser", "vm"):
    register(f"micro_{_stage}", quick=False)(_micro(_stage))


# ------------------------------------------------------------------ main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="small batches and corpora (minutes on a CPU)"
    )
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"), help="output directory")
    p.add_argument("--only", default="", help="comma-separated entry names (see --list)")
    p.add_argument("--skip", default="", help="comma-separated entry names not to run")
    p.add_argument("--list", action="store_true", help="list the entries and exit")
    p.add_argument("--sizes", default=None, help="corpus sizes (small,medium,large)")
    p.add_argument("--batches", default=None, help="batch sizes, e.g. 1,16,256")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per point (max)")
    p.add_argument(
        "--target-s", type=float, default=None, help="aim for this much timing per point"
    )
    p.add_argument(
        "--max-call-s", type=float, default=None, help="stop a sweep after a call this slow"
    )
    p.add_argument(
        "--entry-budget-s", type=float, default=None, help="stop an entry's sweeps after this long"
    )
    p.add_argument("--seed", type=int, default=0, help="corpus seed")
    p.add_argument("--trace", default=None,
                   help="breakdown: trace each stage (jax.profiler) under this folder and "
                   "record its heaviest GPU kernels (row key top_kernels)")  # fmt: skip
    p.add_argument(
        "--vm-backends",
        default="auto",
        help="the loop entry's VM backends, comma-separated (xla, pallas; auto: both on "
        "a GPU, xla elsewhere)",
    )
    p.add_argument("--opt-levels", default="1",
                   help="optimize entry: optimizer levels or presets, e.g. 1,2,tcdli:1 (1: the "
                   "-O1 preset the loop uses, rows loop_O1; 2: every pass to a fixpoint, rows "
                   "loop_O2; LETTERS:ROUNDS: those passes by first letter, rows "
                   "loop_PLETTERS_rROUNDS)")  # fmt: skip
    p.add_argument("--neural-weights", default=None,
                   help="neural/hybrid entries: model.npz (default: the shipped model)")  # fmt: skip
    p.add_argument("--hybrid-det-batches", default="1,16,128,256,1024,4096,16384,65536",
                   help="hybrid entry: the deterministic compiler's batch sizes")  # fmt: skip
    p.add_argument("--precompile-threads", type=int, default=8,
                   help="hybrid entry: compile every shape first on this many threads (0: no)")  # fmt: skip
    p.add_argument("--n-corpus", type=int, default=None, help="programs per corpus size")
    p.add_argument("--cache", default=os.path.join(ROOT, ".jax_cache"),
                   help="persistent compilation cache ('' for none)")  # fmt: skip
    p.add_argument("--_probe", dest="probe", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    q = a.quick
    a.sizes = a.sizes.split(",") if a.sizes else (["small"] if q else list(corpus_mod.SIZES))
    a.batches_given = a.batches is not None
    a.batches = (
        [int(x) for x in a.batches.split(",")]
        if a.batches
        else (QUICK_BATCHES if q else FULL_BATCHES)
    )
    a.repeats = a.repeats or (3 if q else 10)
    a.target_s = a.target_s or (0.3 if q else 2.0)
    a.max_call_s = a.max_call_s or (5.0 if q else 20.0)
    a.entry_budget_s = a.entry_budget_s or (300.0 if q else 420.0)
    a.n_corpus = a.n_corpus or (32 if q else 512)
    a.opt_levels = [x for x in str(a.opt_levels).split(",") if x]
    a.vm_backends = [x for x in str(a.vm_backends).split(",") if x]
    a.out = os.path.abspath(a.out)
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        for e in REGISTRY.values():
            print(f"{e.name:14s} {e.doc}")
        return 0
    if args.probe:
        probe(args)
        return 0
    import jax

    if args.cache:
        jax.config.update("jax_compilation_cache_dir", args.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    os.makedirs(args.out, exist_ok=True)
    meta = report.meta(argv)
    print(f"jaxcc bench on {report.meta_line(meta)}", flush=True)
    if args.only:
        names = [n for n in args.only.split(",") if n]
    else:
        names = [n for n, e in REGISTRY.items() if e.quick or not args.quick]
    names = [n for n in names if n not in set(args.skip.split(","))]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        print(f"unknown entries: {unknown}; known: {list(REGISTRY)}")
        return 2
    t0 = time.perf_counter()
    corpus = corpus_mod.load_or_build(
        os.path.join(args.out, "corpus.json"), args.seed, args.n_corpus, ROOT, meta
    )
    print(f"corpus: {', '.join(f'{k} {len(v)}' for k, v in corpus.items())} programs "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
    ctx = Ctx(args, corpus, meta)
    status = {}
    for i, name in enumerate(names):
        e = REGISTRY[name]
        why = missing(e.needs)
        if why:
            print(f"[{i + 1}/{len(names)}] {name}: skipped: {why}", flush=True)
            ctx.entry = name
            ctx.add(bench=name, note=f"skipped: {why}")
            status[name] = "skipped"
            continue
        print(f"[{i + 1}/{len(names)}] {name}: {e.doc}", flush=True)
        ctx.entry, ctx.entry_t0 = name, time.perf_counter()
        try:
            e.fn(ctx)
            status[name] = "ok"
        except Exception as ex:  # noqa: BLE001 - report it, run the others
            tb = traceback.format_exc()
            print(tb, flush=True)
            ctx.add(bench=name, note=f"error: {type(ex).__name__}: {str(ex)[:200]}")
            status[name] = "error"
        print(f"    ({time.perf_counter() - ctx.entry_t0:.1f} s)", flush=True)
    rows = report.merge_rows(os.path.join(args.out, "results.json"), meta, ctx.rows, set(names))
    report.write_json(os.path.join(args.out, "results.json"), meta, status=status,
                      limits={k: ctx.limits(k)._asdict() for k in corpus}, rows=rows)  # fmt: skip
    report.write_markdown(os.path.join(args.out, "results.md"), meta, rows)
    pngs = report.plots(args.out, meta, rows)
    print(
        f"\nwrote {args.out}/results.json, results.md, corpus.json"
        + (f", {len(pngs)} plots" if pngs else "")
    )
    print()
    print(f"Device: {report.meta_line(meta)}")
    print(report.markdown(report.summary(rows), report.SUMMARY_COLS))
    return 1 if "error" in status.values() else 0


if __name__ == "__main__":
    sys.exit(main())
