"""Bytes each kernel of an optimized HLO module moves, attributed to the named scopes
(jaxcc's functions) it was traced under: where a stage's memory traffic goes.

    PYTHONPATH=. python bench/hlo_bytes.py FILE [--batch B] [--top 25] [--loop]
        [--times LOOP_JSON]

FILE is an optimized HLO text (``compiled.as_text()``; ``.gz`` read as gzip), e.g. one
``bench/step_profile.py --hlo`` wrote on the GPU, whose functions are under named scopes
of their own names. An instruction of a computation that is not a fusion's body (the
entry, a while loop's body and condition, a conditional's branches) is a kernel (a
fusion, sort, scatter, custom call ...); its bytes are its result's plus its operands'
(the sizes of their shapes: an upper bound on what it reads, as XLA's cost analysis
counts a fusion, except that a constant operand, a table looked up, counts at most the
result's size; a while loop's body counts once, not per iteration). Plumbing that moves
nothing (parameters, constants, tuples, get-tuple-element, bitcasts, while, call,
conditional) counts zero. Prints the bytes per program (``--batch``) by step (the first
scope below the stage's entry functions, as ``step_profile`` attributes time; with
``--loop`` "stage: step" as ``step_profile.by_stage``) and the largest kernels. With
``--times`` (a ``step_profile.py --loop`` JSON of the same module's run, which keeps each
kernel's time) it lists the slowest kernels instead, each with its bytes per launch and
the bandwidth that implies, and the time and bandwidth per kind of kernel (reduction
fusions ``input_*reduce*``, scatters, loop fusions, ...): the kernels far below the
device's bandwidth are the ones to look at.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))

import step_profile as sp  # noqa: E402

_DT = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
       "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8}  # fmt: skip
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16)\[([\d,]*)\]")
_HEAD = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([\w\-]+)\((.*)$")
FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "while", "call",
        "conditional", "after-all", "partition-id", "replica-id", "opt-barrier"}  # fmt: skip


def shape_bytes(shape: str) -> int:
    """Bytes of an HLO shape string (a tuple: the sum of its arrays)."""
    total = 0
    for dt, dims in _ARRAY.findall(shape):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _DT.get(dt, 4)
    return total


def kernels(hlo: str) -> list[tuple[str, str, int]]:
    """(instruction name in the trace's spelling, opcode, bytes) of every kernel."""
    comps: dict[str, list[tuple[str, str, str, str]]] = collections.defaultdict(list)
    fused: set[str] = set()
    comp = None
    for line in hlo.splitlines():
        h = _HEAD.match(line)
        if h and not line[:1].isspace():  # a computation's head (its signature may hold "=")
            comp = h.group(1)
            continue
        m = _INSTR.match(line)
        if not m or comp is None:
            continue
        name, shape, op, rest = m.groups()
        comps[comp].append((name, shape, op, rest))
        c = re.search(r"calls=%?([\w.\-]+)", rest)
        if op == "fusion" and c:
            fused.add(c.group(1))
        for k in ("to_apply", "comparator"):  # reducers and comparators are not kernels
            c = re.search(k + r"=%?([\w.\-]+)", rest)
            if c:
                fused.add(c.group(1))
    out = []
    for comp, instrs in comps.items():
        if comp in fused:
            continue
        shapes = {n: s for n, s, _, _ in instrs}
        consts = {n for n, _, op, _ in instrs if op == "constant"}
        for name, shape, op, rest in instrs:
            if op in FREE:
                continue
            args = rest.split("),")[0]  # the operand list (attributes follow ")," )
            size = shape_bytes(shape)
            # a constant operand is a table looked up (gathered from): at most the
            # result's size of it is read, not the whole table
            b = size + sum(
                min(shape_bytes(shapes.get(a, "")), size) if a in consts
                else shape_bytes(shapes.get(a, ""))
                for a in re.findall(r"%([\w.\-]+)", args)
            )  # fmt: skip
            out.append((name.replace(".", "_"), op, b))
    return out


def kind(name: str) -> str:
    """A kernel's kind by XLA's name for it (reduction fusions are "input_" fusions)."""
    if "scatter" in name:
        return "scatter"
    if name.startswith("input_") and "reduce" in name:
        return "reduction fusion"
    if name.startswith("loop_"):
        return "loop fusion"
    return name.split("_")[0]


def print_times(ks, times_json: str, top: int, hlo: str | None = None) -> int:
    """The slowest kernels with their bytes per launch and implied bandwidth, and time
    and bandwidth per kind (kernels absent from the HLO, custom calls and copies, are
    left out of the bandwidths); with the module's text, also the time per stage of the
    loop, attributed again as ``step_profile.by_stage`` does now."""
    import json

    with open(times_json) as f:
        d = json.load(f)
    times = (d.get("loop") or d)["kernels"]
    if hlo is not None:
        names = sp.function_names(sp.LOOP_MODULES)
        res = sp.by_stage({k: v[0] * 1e3 for k, v in times.items()},
                          {k: v[1] for k, v in times.items()}, sp.op_names(hlo), names, 1)  # fmt: skip
        for k, v in res["stage"]:
            print(f"  {v:8.3f} ms  {res['launches'].get(k, 0):5d} launches  {k}")
    by = {k: b for k, _, b in ks}
    rows = [(ms, n, by.get(k), k) for k, (ms, n) in times.items()]
    per: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for ms, n, b, k in rows:
        if b is not None:
            per[kind(k)][0] += ms
            per[kind(k)][1] += b * n
    total = sum(ms for ms, _, _, _ in rows)
    print(
        f"{total:.3f} ms of kernels per call, {sum(v[0] for v in per.values()):.3f} ms of them in the HLO"
    )
    for c, (ms, b) in sorted(per.items(), key=lambda x: -x[1][0]):
        print(f"  {ms:8.3f} ms  {b / (ms * 1e-3) / 1e9 if ms else 0:6.0f} GB/s  {c}")
    print("slowest kernels (ms per call, launches, MB a launch, GB/s):")
    for ms, n, b, k in sorted(rows, reverse=True)[:top]:
        bw = f"{b * n / (ms * 1e-3) / 1e9:6.0f}" if b and ms else "     -"
        mb = f"{b / 1e6:8.1f}" if b else "       -"
        print(f"  {ms:8.3f} {n:4d} {mb} {bw}  {k}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--loop", action="store_true", help='"stage: step" keys (the whole loop)')
    p.add_argument("--times", help="step_profile --loop JSON: kernels' times joined")
    ns = p.parse_args(argv)
    opener = gzip.open if ns.file.endswith(".gz") else open
    with opener(ns.file, "rt") as f:
        hlo = f.read()
    ks = kernels(hlo)
    if ns.times:
        return print_times(ks, ns.times, ns.top, hlo)
    names = sp.function_names(sp.LOOP_MODULES if ns.loop else sp.MODULES)
    ops = sp.op_names(hlo)
    b = {k: float(v) for k, _, v in ks}
    n = {k: 1 for k, _, _ in ks}
    if ns.loop:
        res = sp.by_stage(b, n, ops, names, 1)
        rows = res["stage"] + res["step"]
    else:
        res = sp.attribute(b, n, ops, names, 1)
        rows = res["outer"]
    total = sum(b.values())
    print(f"{len(ks)} kernels, {total / ns.batch / 1e3:.1f} KB per program")
    for k, v in rows:  # the attribution's "ms" are bytes / 1e3 here
        print(f"  {v * 1e3 / ns.batch / 1e3:9.2f} KB  {k}")
    print("largest kernels:")
    for k, op, v in sorted(ks, key=lambda x: -x[2])[: ns.top]:
        path = next((sp.scopes(o, names) for o in ops.get(k, []) if sp.scopes(o, names)), [])
        print(f"  {v / ns.batch / 1e3:9.2f} KB  {op:14s} {k}  {'/'.join(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
