"""GPU kernel time of the front end's stages by the Python function that issued it:

    PYTHONPATH=. python bench/step_profile.py --out DIR [--size small] [--batch 65536]
        [--stages lexer,middle:resolve_names] [--hlo]
    PYTHONPATH=. python bench/step_profile.py --out DIR --loop [--size medium] [--hlo]

Every plain function of jaxcc's lexer and middle-end modules is wrapped in a
``jax.named_scope`` of its own name before anything is traced (the same operations: a
name scope only names them), each stage of ``bench/breakdown.stages`` is jitted alone on
the previous stage's outputs, and a profiler trace of the chosen stages' calls gives
each GPU kernel's time. A kernel is attributed through its HLO instruction (the trace
names ``x_fusion_2`` what the HLO names ``x_fusion.2``) to the named scopes in its
``op_name``: per stage, the time under each outermost scope (the step, e.g. the lexer's
``_dfa_tokens``) and under each innermost one. Writes ``DIR/steps.json`` and prints a
table per stage. Needs a GPU (the CPU's profiler records no kernels).

With ``--loop`` it profiles the whole loop instead (``pipeline.evaluate``, one jit, the
corpus's tests): the kernels' time per call by stage (lexer, parser, middle end, VM,
judge) and by step below it, and the GPU timeline's span, busy time and longest idle gaps
(where the loop's wall time exceeds its kernels': host round trips of while loops,
launches).
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import inspect
import json
import os
import re
import sys

import jax

sys.path.insert(0, os.path.dirname(__file__))

from breakdown import carry_forward, stages  # noqa: E402
from middle_passes import encoded  # noqa: E402
from trace_kernels import kernels  # noqa: E402

MODULES = ("jaxcc.lexer", "jaxcc.resolve", "jaxcc.typecheck", "jaxcc.codegen")
# --loop: the stages' entry functions too (their names say which stage a kernel is in)
LOOP_MODULES = MODULES + ("jaxcc.parser", "jaxcc.middle", "jaxcc.pipeline", "jaxcc.arrays")
STAGE_OF = {"lex": "lexer", "parse": "parser", "middle_end": "middle end",
            "middle_end_debug": "middle end", "run_cases": "vm", "_judge": "judge"}  # fmt: skip
# the Pallas kernels: the trace names them by the kernel's name (parser_pallas, vm_pallas),
# not by their HLO instruction (a custom call), so no op_name reaches them
PALLAS_STAGE = {"jaxcc_parser": "parser", "jaxcc_vm": "vm"}


def _functions(modules):
    """(module, name, function) of every plain function defined in ``modules``."""
    for m in map(importlib.import_module, modules):
        for name, f in list(vars(m).items()):
            if inspect.isfunction(f) and f.__module__ == m.__name__:
                yield m, name, f


def function_names(modules=MODULES) -> set[str]:
    """The names ``wrap_modules`` puts scopes under, without wrapping anything (to read
    a module traced with them, e.g. ``bench/hlo_bytes.py``)."""
    return {name for _, name, _ in _functions(modules)}


def wrap_modules(modules=MODULES) -> set[str]:
    """Put every plain function of ``modules`` under a named scope of its name; returns
    the names (module-qualified names are not needed: they do not repeat)."""
    names = set()
    for m, name, f in _functions(modules):

        @functools.wraps(f)
        def w(*a, _f=f, _n=name, **k):
            with jax.named_scope(_n):
                return _f(*a, **k)

        setattr(m, name, w)
        names.add(name)
    return names


_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_OPNAME = re.compile(r'op_name="([^"]*)"')


def op_names(hlo: str) -> dict[str, list[str]]:
    """Each instruction's op_names, by its name with '.' as '_' (the trace's spelling): a
    fusion's own metadata, else those of the computation it calls."""
    comp_ops: dict[str, list[str]] = collections.defaultdict(list)
    own: dict[str, list[str]] = {}
    calls: dict[str, str] = {}
    comp = None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
        if head and "=" not in line.split("{")[0]:
            comp = head.group(1)
            continue
        m = _INSTR.match(line)
        if not m or "=" not in line:
            continue
        ops = _OPNAME.findall(line)
        if comp:
            comp_ops[comp] += ops
        c = re.search(r"calls=%?([\w.\-]+)", line)
        own[m.group(1)] = ops
        if c:
            calls[m.group(1)] = c.group(1)
    out = {}
    for name, ops in own.items():
        if not ops and name in calls:
            ops = comp_ops.get(calls[name], [])
        out[name.replace(".", "_")] = ops
    return out


def scopes(op: str, names: set[str]) -> list[str]:
    """The wrapped functions' names on an op_name's path, outermost first."""
    parts = re.split(r"[/()]", op)
    return [p for p in parts if p in names]


ENTRY = {"lex", "_lex_batched", "_lex_tiered", "_lex_one", "lex_front", "lex_back",
         "_lex_front", "_lex_back", "resolve_names", "infer_types", "emit_code"}  # fmt: skip


def _below_entry(path: list[str]) -> list[str]:
    i = 0
    while i < len(path) - 1 and path[i] in ENTRY:
        i += 1
    return path[i:]


def attribute(times: dict, calls: dict, ops: dict, names: set[str], n_calls: int) -> dict:
    outer: dict[str, float] = collections.Counter()
    inner: dict[str, float] = collections.Counter()
    launches: dict[str, int] = collections.Counter()
    unknown = []
    kpaths = {k: [p for p in (scopes(o, names) for o in ops.get(k, [])) if p] for k in times}
    # the step: the first scope below the stage's entry functions (lex, _lex_one, ...)
    kpaths = {k: [_below_entry(p) for p in ps] for k, ps in kpaths.items()}
    for k, us in times.items():
        paths = kpaths[k]
        if not paths:
            unknown.append((k, us / n_calls / 1e3))
            key_o = key_i = "(none)"
        else:
            # the most common outermost / innermost scope among the kernel's ops
            key_o = collections.Counter(p[0] for p in paths).most_common(1)[0][0]
            key_i = collections.Counter(p[-1] for p in paths).most_common(1)[0][0]
        outer[key_o] += us / n_calls / 1e3
        inner[key_i] += us / n_calls / 1e3
        launches[key_o] += calls[k] // n_calls
    r = lambda d: sorted(((k, round(v, 4)) for k, v in d.items()), key=lambda x: -x[1])  # noqa: E731
    return {
        "total_ms": round(sum(times.values()) / n_calls / 1e3, 3),
        "outer": r(outer),
        "inner": r(inner),
        "launches": dict(launches),
        "unattributed": sorted(unknown, key=lambda x: -x[1])[:20],
    }


def by_stage(times: dict, calls: dict, ops: dict, names: set[str], n_calls: int) -> dict:
    """The loop's kernel time per call (ms) by stage (``STAGE_OF``, the outermost stage
    entry on a kernel's most common scope path) and by "stage: step" (the first scope
    below the stage's entry functions that is not ``arrays``' plumbing)."""
    stage: dict[str, float] = collections.Counter()
    step: dict[str, float] = collections.Counter()
    launches: dict[str, int] = collections.Counter()
    plumbing = set(ENTRY) | set(STAGE_OF) | {"map_batch", "by_width", "middle_end_debug",
                                             "run_passes", "_resolve", "_types", "_emit"}  # fmt: skip
    for k, us in times.items():
        paths = [tuple(p) for p in (scopes(o, names) for o in ops.get(k, [])) if p]
        path = collections.Counter(paths).most_common(1)[0][0] if paths else ()
        i = next((j for j, n in enumerate(path) if n in STAGE_OF), None)
        st = STAGE_OF[path[i]] if i is not None else PALLAS_STAGE.get(k, "(other)")
        rest = [n for n in path[(i or 0) + 1 :] if n not in plumbing] if i is not None else []
        key = f"{st}: {rest[0] if rest else k if k in PALLAS_STAGE else '-'}"
        stage[st] += us / n_calls / 1e3
        step[key] += us / n_calls / 1e3
        launches[st] += calls[k] // n_calls
    r = lambda d: sorted(((k, round(v, 4)) for k, v in d.items()), key=lambda x: -x[1])  # noqa: E731
    return {"total_ms": round(sum(times.values()) / n_calls / 1e3, 3), "stage": r(stage),
            "step": r(step), "launches": dict(launches)}  # fmt: skip


def save_hlo(compiled, path: str) -> None:
    """The optimized HLO text, gzipped (for reading bytes per fusion off the device)."""
    import gzip

    with gzip.open(path, "wt") as f:
        f.write(compiled.as_text())


def profile_loop(ns) -> dict:
    """--loop: the whole loop's kernels by stage and step, and its GPU timeline."""
    import time

    import numpy as np
    from breakdown import corpus_inputs, whole_loop
    from trace_kernels import gaps

    names = wrap_modules(LOOP_MODULES)
    lim, *inputs = corpus_inputs(ns.size, ns.batch)
    args = jax.device_put(tuple(inputs))
    f = whole_loop(lim)
    t0 = time.perf_counter()
    comp = f.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(comp(*args))
    walls = []
    for _ in range(5):
        t0 = time.perf_counter()
        jax.block_until_ready(comp(*args))
        walls.append(time.perf_counter() - t0)
    d = os.path.join(ns.out, f"trace_loop_{ns.size}")
    with jax.profiler.trace(d, create_perfetto_trace=True):
        for _ in range(ns.calls):
            ev = jax.block_until_ready(comp(*args))
    times, calls, _ = kernels(d)
    res = by_stage(times, calls, op_names(comp.as_text()), names, ns.calls)
    if ns.hlo:
        save_hlo(comp, os.path.join(ns.out, f"hlo_loop_{ns.size}.txt.gz"))
    res["wall_ms_median"] = round(1e3 * sorted(walls)[len(walls) // 2], 3)
    res["compile_s"] = round(compile_s, 1)
    res["passed"] = int((np.asarray(ev.verdict) == 0).sum())
    res["timeline"] = gaps(d, top=12)  # over all the traced calls
    # each kernel's ms per call and launches, to attribute again off the device
    res["kernels"] = {k: [round(v / ns.calls / 1e3, 5), calls[k] // ns.calls]
                      for k, v in sorted(times.items(), key=lambda x: -x[1])}  # fmt: skip
    print(
        f"== loop {ns.size} {ns.batch}: wall {res['wall_ms_median']} ms, kernels "
        f"{res['total_ms']} ms per call; timeline {res['timeline']}",
        flush=True,
    )
    for k, v in res["stage"]:
        print(f"  {v:8.3f} ms  {res['launches'].get(k, 0):5d} launches  {k}")
    for k, v in res["step"][:40]:
        print(f"    {v:8.3f} ms  {k}")
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--size", default="small")
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--stages", default="lexer,middle:resolve_names,middle:infer_types,"
                                        "middle:emit_code")  # fmt: skip
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--loop", action="store_true", help="the whole loop, by stage and step")
    p.add_argument("--hlo", action="store_true", help="also write each profiled jit's "
                   "optimized HLO, gzipped, as DIR/hlo_NAME.txt.gz")  # fmt: skip
    ns = p.parse_args(argv)
    os.makedirs(ns.out, exist_ok=True)
    if ns.loop:
        result = {"device": jax.devices()[0].device_kind, "size": ns.size, "batch": ns.batch,
                  "loop": profile_loop(ns)}  # fmt: skip
        with open(os.path.join(ns.out, f"loop_{ns.size}.json"), "w") as f:
            json.dump(result, f, indent=1)
        return 0
    names = wrap_modules()
    want = ns.stages.split(",")
    lim, src, length = encoded(ns.size, ns.batch, n=512)
    carry = jax.device_put({"source": src, "length": length})  # no host copies timed
    result = {"device": jax.devices()[0].device_kind, "size": ns.size, "batch": ns.batch}
    for st in stages(lim):
        if not all(k in carry for k in st.inputs):
            break  # the VM's stages need test cases: the front end only
        args = tuple(carry[k] for k in st.inputs)
        comp = jax.jit(st.fn).lower(*args).compile()
        out = jax.block_until_ready(comp(*args))
        if st.name in want:
            d = os.path.join(ns.out, "trace_" + st.name.replace(":", "_"))
            with jax.profiler.trace(d, create_perfetto_trace=True):
                for _ in range(ns.calls):
                    jax.block_until_ready(comp(*args))
            times, calls, _ = kernels(d)
            res = attribute(times, calls, op_names(comp.as_text()), names, ns.calls)
            if ns.hlo:
                tag = st.name.replace(":", "_").replace(" ", "_")  # "middle end" -> middle_end
                save_hlo(comp, os.path.join(ns.out, f"hlo_{tag}.txt.gz"))
            result[st.name] = res
            print(f"== {st.name}: {res['total_ms']} ms of kernels per call", flush=True)
            for k, v in res["outer"][:25]:
                print(f"  {v:8.3f} ms  {res['launches'].get(k, 0):5d} launches  {k}")
            print("  innermost:", res["inner"][:15])
            print("  unattributed:", res["unattributed"][:8], flush=True)
        carry_forward(carry, out)
    with open(os.path.join(ns.out, "steps.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
