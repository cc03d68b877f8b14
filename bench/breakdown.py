"""Per-stage breakdown of the compile-run-test loop (issue 14): ``bench/run.py --only breakdown``.

The loop is split into its stages exactly as ``jaxcc.pipeline.evaluate`` composes them,
calling the same functions:

    lexer.lex -> parser.parse(lex_error=) -> middle.PASSES, one stage per pass (under
    jax.vmap, as middle.middle_end_debug runs them) -> [optimize.optimize: only in the
    -O1 loop, entry breakdown_O1] -> pipeline._budget + vm.run_tests -> pipeline._judge

Each stage is its own ``jax.jit``, called on the previous stage's real outputs (device
arrays, already materialized), so it is compiled, timed and cost-analysed alone. The
whole loop (``pipeline.evaluate`` itself) is measured the same way in the same run; the
sum of the stages' times differs from it (XLA fuses across stage boundaries in the whole
loop and drops what no later stage reads; the split materializes every intermediate).
The stages' final Evaluation is checked equal to the whole loop's, field by field.

Around the passes it calls what ``middle.middle_end_debug`` calls: ``middle.initial_state``
before the first and ``middle.outcome`` after the last (whose debug arrays it drops, as
``pipeline.evaluate`` does).

Per stage: median wall time per batch (bench/run.py's ``measure``), programs/s, XLA's
cost analysis of the compiled stage (flops, bytes accessed), ``memory_analysis()``
per program, the achieved bandwidth (bytes accessed / time) and its fraction of the
device's peak memory bandwidth (PEAK_BANDWIDTH; empty for an unknown device).

Caveat: XLA's cost analysis counts a ``while`` body once (its trip count is unknown when
compiling), so for stages with loops (``while_loops`` > 0: the VM's step loop, and any
stage XLA did not unroll) bytes accessed and the bandwidth are lower bounds.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

# Peak memory (HBM) bandwidth in bytes/s by device kind (substring of
# jax.devices()[0].device_kind), first match wins; unknown devices get no fraction.
PEAK_BANDWIDTH = (
    ("H100 80GB HBM3", 3.35e12),  # H100 SXM5
    ("H200", 4.8e12),
)

LOOP = "whole loop"  # the stage name of the pipeline.evaluate row
MIDDLE = "middle end"  # middle.middle_end as one call (not in the sum of stages)
SUM = "sum of stages"


def peak_bandwidth(device_kind: str) -> float | None:
    for key, bw in PEAK_BANDWIDTH:
        if key in (device_kind or ""):
            return bw
    return None


def cost(compiled) -> dict:
    """{'flops', 'bytes_accessed'} of a compiled stage from XLA's cost analysis (None
    where it gives nothing: it returns a dict, a list of dicts (one per module; summed)
    or None depending on the jax version and backend)."""
    try:
        ca = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements it
        ca = None
    if isinstance(ca, dict):
        ca = [ca]
    out = {"flops": None, "bytes_accessed": None}
    for d in ca or []:
        for key, name in (("flops", "flops"), ("bytes accessed", "bytes_accessed")):
            v = (d or {}).get(key)
            if v is not None and v >= 0:
                out[name] = (out[name] or 0.0) + float(v)
    return out


def memory(compiled) -> dict:
    """Argument / output / temporary / aliased bytes of a compiled stage (None each if the
    backend does not report them)."""
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001
        ma = None
    names = ("argument", "output", "temp", "alias")
    return {f"{n}_bytes": getattr(ma, f"{n}_size_in_bytes", None) for n in names}


def while_loops(compiled) -> int | None:
    """Number of while ops in the optimized HLO (their bodies are costed once)."""
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001
        return None
    return None if text is None else text.count(" while(")


# ------------------------------------------------------------------ the stages


class Stage(NamedTuple):
    name: str
    inputs: tuple[str, ...]  # keys of the carry it reads
    fn: Callable  # (*inputs) -> dict of new carry entries
    in_loop: bool  # part of pipeline.evaluate's default composition (counted in the sum)


def _pass_stage(i: int, limits) -> Stage:
    """Pass i of middle.PASSES as a stage: over the batch as middle_end_debug runs it
    (vmapped, in chunks of middle.CHUNK programs).
    Outputs only the State fields the pass set; the last pass gives (program, error) as
    middle.outcome gives them (its debug arrays dropped: pipeline.evaluate does not use them)."""

    from jaxcc import arrays, middle

    name, f = middle.PASSES[i]
    first, last = i == 0, i == len(middle.PASSES) - 1

    def one(st):
        new = f(st, limits)
        if last:
            program, error, _ = middle.outcome(new)
            return {"program": program, "error": error}
        if first:
            return new
        return {k: v for k, v in new._asdict().items() if v is not getattr(st, k)}

    def fn(*inputs):  # batched; the new State fields only (run_size merges them)
        if first:
            limits.check()
        st = middle.initial_state(*inputs) if first else inputs[0]
        new = arrays.map_batch(one, st, middle.CHUNK)  # as middle.run_passes runs the passes
        return new if last else {"state": new}

    fn.__name__ = f"middle_{name}"
    inputs = ("ast", "parse_error") if first else ("state",)
    return Stage(f"middle:{name}", inputs, fn, True)


def stages(limits, optimize: bool = False) -> list[Stage]:
    """The loop's stages in pipeline.evaluate's order; with ``optimize`` the optimizer
    between the middle end and the VM, as pipeline.evaluate(optimize=True) has it
    (compiler.compile_arrays: the optimized program replaces the compiler's)."""
    from jaxcc import lexer, middle, parser, pipeline
    from jaxcc import optimize as opt

    def lex(source, length):
        tokens, err = lexer.lex(source, length, limits)
        return {"tokens": tokens, "lex_error": err}

    def parse(tokens, lex_error):
        ast, err = parser.parse(tokens, limits, lex_error=lex_error)
        return {"ast": ast, "parse_error": err}

    def middle_end(ast, parse_error):  # the three passes as the loop calls them
        program, error = middle.middle_end(ast, None, limits, parse_error)
        return {MIDDLE: (program, error)}

    def optimizer(program):  # compiler.compile_arrays(optimize=True)'s stage
        return {"program": opt.optimize(program, limits, *opt.level(optimize))}

    def run_tests(program, error, cases):  # pipeline.evaluate's VM call
        _, per_case = pipeline.run_cases(program, error, cases, limits)
        return {"per_case": per_case}

    def judge(program, error, per_case, cases):
        return {"evaluation": pipeline._judge(program, error, per_case, cases)}

    out = [
        Stage("lexer", ("source", "length"), lex, True),
        Stage("parser", ("tokens", "lex_error"), parse, True),
    ]
    out += [_pass_stage(i, limits) for i in range(len(middle.PASSES))]
    # the middle end as one call, as compiler.compile_arrays makes it: on a GPU for a
    # large batch at two widths (docs/middle_end.md), which the passes one by one are not;
    # its own row, not in the sum (the passes above are), its output checked equal to theirs
    out.append(Stage(MIDDLE, ("ast", "parse_error"), middle_end, False))
    if optimize:
        out.append(Stage("optimize", ("program",), optimizer, True))
    out += [
        Stage("vm", ("program", "error", "cases"), run_tests, True),
        Stage("judge", ("program", "error", "per_case", "cases"), judge, True),
    ]
    return out


class _Bound:
    """``jitted`` with keyword arguments bound, with the ``lower``/call interface that
    bench/run.py's ``measure`` uses (so the whole loop is pipeline.evaluate's own jit)."""

    def __init__(self, jitted, **kw):
        self.jitted, self.kw = jitted, kw

    def lower(self, *args):
        return self.jitted.lower(*args, **self.kw)

    def __call__(self, *args):
        return self.jitted(*args, **self.kw)


def carry_forward(carry: dict, out: dict) -> None:
    """Put a stage's outputs into ``carry`` (the next stages' inputs): a dict of fields
    updates the NamedTuple of that name (a middle-end pass's State), anything else is
    set."""
    for k, v in out.items():
        carry[k] = carry[k]._replace(**v) if isinstance(v, dict) and k in carry else v


def whole_loop(limits, optimize: bool = False) -> _Bound:
    """pipeline.evaluate (source, length, cases) -> Evaluation at these limits."""
    from jaxcc import pipeline

    return _Bound(pipeline.evaluate, limits=limits, optimize=optimize)


def cases_of(entry, args, expected):
    """pipeline.Cases of bench test arrays (every case valid: baselines.test_arrays pads
    by repeating a program's last case)."""
    from jaxcc import pipeline

    return pipeline.Cases(entry, args, expected, np.ones(expected.shape, bool))


def corpus_inputs(size: str, batch: int, seed: int = 0, n: int = 512):
    """(limits, source, length, cases), host arrays: ``n`` seeded corpus programs of
    ``size`` and their tests (``baselines.test_arrays``), tiled to ``batch`` programs:
    the loop's inputs as the bench scripts time it."""
    from bench import baselines
    from bench import corpus as C
    from jaxcc import lexer

    lim = C.LIMITS[size]
    progs = C.generate(seed, size, n)
    src, length = lexer.encode([q["source"] for q in progs], lim)
    t = baselines.test_arrays(progs)
    i = np.arange(batch) % src.shape[0]
    return lim, src[i], length[i], cases_of(t["entry"][i], t["args"][i], t["expected"][i])


def same(a, b) -> bool:
    """Two pytrees of arrays equal leaf by leaf (same structure)."""
    import jax

    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    return ta == tb and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True)
    )


# ------------------------------------------------------------------ the entry


def _stats(compiled, seconds: float, b: int, peak: float | None) -> dict:
    c = cost(compiled)
    m = memory(compiled)
    ba = c["bytes_accessed"]
    bw = None if ba is None or not seconds else ba / seconds
    per = {k.replace("_bytes", "_bytes_per_program"): None if v is None else v / b
           for k, v in m.items() if k != "alias_bytes"}  # fmt: skip
    total = None
    if None not in m.values():
        total = m["argument_bytes"] + m["output_bytes"] + m["temp_bytes"] - m["alias_bytes"]
    return {
        "bytes_accessed": ba,
        "bytes_accessed_per_program": None if ba is None else ba / b,
        "flops": c["flops"],
        "achieved_Bps": bw,
        "peak_Bps": peak,
        "frac_peak": None if bw is None or peak is None else bw / peak,
        "bytes_per_program": None if total is None else total / b,
        "mem_bytes": total,
        **per,
        "while_loops": while_loops(compiled),
    }


def _timing_ctx(ctx, quick: bool):
    """ctx with fewer repeats (every stage compiles on its own: keep the entry short)."""
    args = argparse.Namespace(**vars(ctx.args))
    args.repeats = min(args.repeats, 3 if quick else 5)
    args.target_s = min(args.target_s, 0.3 if quick else 1.0)

    class _C:
        pass

    c = _C()
    c.args = args
    return c


def run_size(ctx, size: str, b: int, measure, inputs, optimize: bool = False) -> dict:
    """Measure every stage and the whole loop (pipeline.evaluate with ``optimize``) for one
    corpus size and batch; add the rows to ctx (variant "O1" with the optimizer). Returns {"carry": every stage's outputs, "loop": the whole loop's Evaluation,
    "want": CPython's verdict per program}."""
    import jax

    lim = ctx.limits(size)
    tctx = _timing_ctx(ctx, ctx.quick)
    peak = peak_bandwidth(jax.devices()[0].device_kind)
    (src, length, entry, args, expected), want = inputs(ctx, size, b)
    carry = jax.device_put(
        {"source": src, "length": length, "cases": cases_of(entry, args, expected)}
    )
    base = {"bench": "breakdown", **({"variant": "O1"} if optimize else {}), "size": size,
            "batch": b, "devices": 1}  # fmt: skip
    rows = []
    for st in stages(lim, optimize):
        args_ = tuple(carry[k] for k in st.inputs)
        m = measure(jax.jit(st.fn), args_, tctx)
        carry_forward(carry, m["out"])
        # (before the optimizer, with O1, replaces the passes' program)
        if st.name == MIDDLE and not same(carry[MIDDLE], (carry["program"], carry["error"])):
            raise AssertionError(f"breakdown {size} batch {b}: middle.middle_end differs "
                                 "from its passes run one by one")  # fmt: skip
        if getattr(ctx.args, "trace", None):  # the stage's heaviest GPU kernels
            from bench.trace_kernels import trace_top

            m["top_kernels"] = trace_top(m["compiled"], args_, os.path.join(
                ctx.args.trace, f"{size}_{b}_{st.name.replace(':', '_')}"))  # fmt: skip
        rows.append(ctx.add(**base, stage=st.name, in_loop=st.in_loop, seconds=m["seconds"],
                            throughput=b / m["seconds"], unit="programs/s",
                            compile_s=m["compile_s"], min_s=m["min_s"], repeats=m["repeats"],
                            **({"top_kernels": m["top_kernels"]} if "top_kernels" in m else {}),
                            **_stats(m["compiled"], m["seconds"], b, peak)))  # fmt: skip
        del m
    m = measure(whole_loop(lim, optimize), (carry["source"], carry["length"], carry["cases"]), tctx)
    loop_out = m["out"]
    ev = carry["evaluation"]
    verdict = np.asarray(ev.verdict)
    equal = same(ev, loop_out)
    loop_s = m["seconds"]
    for r in rows:
        r["share_of_loop"] = r["seconds"] / loop_s
    in_loop = [r for r in rows if r["in_loop"]]
    sum_s = sum(r["seconds"] for r in in_loop)

    def total(key):
        vals = [r.get(key) for r in in_loop]
        return None if None in vals else sum(vals)

    ba, bw = total("bytes_accessed"), None
    if ba is not None:
        bw = ba / sum_s
    ctx.add(**base, stage=SUM, seconds=sum_s, throughput=b / sum_s, unit="programs/s",
            share_of_loop=sum_s / loop_s, bytes_accessed=ba,
            bytes_accessed_per_program=None if ba is None else ba / b, flops=total("flops"),
            achieved_Bps=bw, peak_Bps=peak,
            frac_peak=None if bw is None or peak is None else bw / peak,
            compile_s=sum(r["compile_s"] for r in rows if r["in_loop"]))  # fmt: skip
    ctx.add(**base, stage=LOOP, seconds=loop_s, throughput=b / loop_s, unit="programs/s",
            share_of_loop=1.0, compile_s=m["compile_s"], min_s=m["min_s"],
            repeats=m["repeats"], sum_over_loop=sum_s / loop_s, equal_to_stages=equal,
            passed=int((verdict == 0).sum()), agree=int(((verdict == 0) == want).sum()),
            **_stats(m["compiled"], loop_s, b, peak))  # fmt: skip
    del m
    if not equal:
        raise AssertionError(f"breakdown {size} batch {b}: the stages' Evaluation differs "
                             "from pipeline.evaluate's")  # fmt: skip
    return {"carry": carry, "loop": loop_out, "want": want}


TABLE_COLS = ["size", "batch", "variant", "stage", "seconds", "share_of_loop", "throughput",
              "bytes_accessed_per_program", "achieved_Bps", "frac_peak", "flops",
              "bytes_per_program", "temp_bytes_per_program", "while_loops", "compile_s"]  # fmt: skip


def table(rows: list[dict]) -> str:
    """The breakdown rows as one markdown table (printed at the end of the entry)."""
    from bench import report

    rows = [r for r in rows if r.get("bench") == "breakdown"]
    out = report.markdown(rows, TABLE_COLS)
    traced = [r for r in rows if r.get("top_kernels")]
    if traced:  # --trace: each stage's heaviest GPU kernels
        out += ("\n\n| size | batch | stage | kernel | ms per call | launches | share | source lines |"
                "\n|---|---|---|---|---|---|---|---|")  # fmt: skip
        for r in traced:
            for name, ms, n, share, *lines in r["top_kernels"]:  # (lines: since 2026-11-29)
                where = lines[0] if lines else ""
                out += f"\n| {r['size']} | {r['batch']} | {r['stage']} | {name[:60]} | {ms} | {n} | {share} | {where} |"
    return out
