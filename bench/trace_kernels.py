"""The GPU kernels of a Perfetto trace (``jax.profiler.trace(..., create_perfetto_trace=True)``)
by total time: ``python bench/trace_kernels.py DIR [--top 30]``."""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re


def trace_events(path: str) -> list[dict]:
    """The events of the first Perfetto trace (``*.trace.json.gz``) under ``path``."""
    files = glob.glob(os.path.join(path, "**", "*.trace.json.gz"), recursive=True)
    if not files:
        raise FileNotFoundError(f"no *.trace.json.gz under {path}")
    with gzip.open(files[0]) as f:
        tr = json.load(f)
    return tr["traceEvents"] if isinstance(tr, dict) else tr


def _gpu_events(path: str) -> tuple[list[tuple[float, float, str]], list[str]]:
    """The GPU kernels of the first Perfetto trace under ``path`` as (start, end, name)
    in microseconds, sorted, and the trace's process names."""
    ev = trace_events(path)
    pids = {e["pid"]: e["args"]["name"] for e in ev
            if e.get("ph") == "M" and e.get("name") == "process_name"}  # fmt: skip
    ks = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev
                if e.get("ph") == "X" and "GPU" in pids.get(e.get("pid"), "") and "dur" in e)  # fmt: skip
    return ks, sorted(set(pids.values()))


def kernels(path: str) -> tuple[dict[str, float], dict[str, int], list[str]]:
    """(total microseconds, calls) per GPU kernel name in the first Perfetto trace under
    ``path``, and the trace's process names."""
    ks, names = _gpu_events(path)
    tot: dict[str, float] = collections.Counter()
    cnt: dict[str, int] = collections.Counter()
    for t0, t1, k in ks:
        tot[k] += t1 - t0
        cnt[k] += 1
    return dict(tot), dict(cnt), names


def gaps(path: str, top: int = 8) -> dict:
    """The GPU timeline of the first Perfetto trace under ``path``: the span from the
    first kernel's start to the last one's end, the time kernels ran in it (overlaps
    counted once), and the ``top`` longest idle gaps between kernels, each as [us,
    kernel before, kernel after]: where a stage's wall time exceeds its kernels'."""
    ks, _ = _gpu_events(path)
    if not ks:
        return {"span_us": 0.0, "busy_us": 0.0, "gaps": []}
    busy, end, name, holes = 0.0, ks[0][0], ks[0][2], []
    for t0, t1, k in ks:
        if t0 > end:
            holes.append([round(t0 - end, 1), name, k])
        busy += max(0.0, t1 - max(t0, end))
        if t1 > end:
            end, name = t1, k
    holes.sort(key=lambda h: -h[0])
    return {"span_us": round(end - ks[0][0], 1), "busy_us": round(busy, 1), "kernels": len(ks),
            "idle_us": round(sum(h[0] for h in holes), 1), "gaps": holes[:top]}  # fmt: skip


_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*?\bcalls=%?([\w.\-]+)")
_COMP = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_OLD_WHERE = re.compile(r'source_file="([^"]*)"\s+source_line=(\d+)')  # XLA before stack frames
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")


def _tables(hlo_text: str) -> dict[str, dict[int, str]]:
    """The HLO text's FileNames, FileLocations and StackFrames tables: {table: {id: row}}."""
    tables: dict[str, dict[int, str]] = {}
    cur = None
    for line in hlo_text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            cur = tables.setdefault(line, {})
        elif cur is not None and (m := _TABLE_ROW.match(line)):
            cur[int(m.group(1))] = m.group(2)
        else:
            cur = None
    return tables


def _frame_line(tables: dict, frame: int, skip: tuple[str, ...]) -> str | None:
    """ "FILE:LINE" of stack frame ``frame``, or of the first frame outward from it whose
    file is not in ``skip`` (helpers such as arrays.py, which every stage calls)."""
    files, locs, frames = (tables.get(k, {}) for k in ("FileNames", "FileLocations", "StackFrames"))
    first = None
    for _ in range(64):  # a frame's parents, innermost first (bounded: no cycle can hang)
        row = frames.get(frame)
        if row is None:
            break
        loc = locs.get(int(re.search(r"file_location_id=(\d+)", row).group(1)), "")
        fid, line = re.search(r"file_name_id=(\d+)", loc), re.search(r"\bline=(\d+)", loc)
        if fid and line:
            where = f"{os.path.basename(files.get(int(fid.group(1)), '?').strip(chr(34)))}:{line.group(1)}"
            first = first or where
            if where.split(":")[0] not in skip:
                return where
        parent = int(re.search(r"parent_frame_id=(\d+)", row).group(1)) - 1  # printed 1-based
        if parent <= 0 or parent == frame:
            break
        frame = parent
    return first


def kernel_lines(hlo_text: str, names, top: int = 3, skip: tuple[str, ...] = ("arrays.py",)) -> dict[str, str]:  # fmt: skip
    """``fusion_lines`` of each of ``names``, reading ``hlo_text`` once: {name: lines}."""
    lines = hlo_text.splitlines()
    want = set(names)
    called: dict[str, str] = {}  # fused computation -> kernel name
    for line in lines:
        m = _INSTR.match(line)
        if m and m.group(1) in want:
            called.setdefault(m.group(2), m.group(1))
    tables = _tables(hlo_text) if called else {}
    frame_cache: dict[int, str | None] = {}
    out = dict.fromkeys(want, "")
    counts: dict[str, int] | None = None
    for line in lines:
        if counts is None:
            m = _COMP.match(line)
            if m and m.group(1) in called:
                name, counts = called[m.group(1)], {}
            continue
        if line.strip() == "}":
            best = sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:top]
            out[name] = ", ".join(f"{w} x{c}" for w, c in best)
            counts = None
            continue
        op = _OP_NAME.search(line)
        if op and op.group(1).rsplit("/", 1)[-1].startswith("jit("):
            continue  # named for a jit call, not a primitive: it carries the call site's line
        wheres = [f"{os.path.basename(f)}:{n}" for f, n in _OLD_WHERE.findall(line)]
        for i in map(int, _FRAME_ID.findall(line)):
            if i not in frame_cache:
                frame_cache[i] = _frame_line(tables, i, skip)
            wheres += [frame_cache[i]] if frame_cache[i] else []
        for where in wheres:
            counts[where] = counts.get(where, 0) + 1
    return out


def fusion_lines(hlo_text: str, name: str, top: int = 3, skip: tuple[str, ...] = ("arrays.py",)) -> str:  # fmt: skip
    """Where the GPU kernel ``name`` (a fusion instruction of the optimized HLO
    ``hlo_text``, ``compiled.as_text()``) comes from: the ``top`` source lines that most of
    its fused operations carry in their metadata, as "FILE:LINE xCOUNT" joined by ", "
    (each operation's innermost traced frame, or the first one outward from it in a file
    not in ``skip``; files by base name); "" for a kernel that is not a fusion of the text
    (a sort, a copy, a custom call) or whose operations carry no line."""
    return kernel_lines(hlo_text, [name], top, skip)[name]


def trace_top(compiled, args: tuple, path: str, calls: int = 2, top: int = 8) -> list:
    """Trace ``calls`` calls of ``compiled(*args)`` into ``path``; the ``top`` kernels as
    [name, ms per call, launches per call, share of the kernels' time, source lines
    (``fusion_lines``)] (empty when the profiler gives no GPU kernels, as on the CPU)."""
    import jax

    jax.block_until_ready(compiled(*args))
    with jax.profiler.trace(path, create_perfetto_trace=True):
        for _ in range(calls):
            jax.block_until_ready(compiled(*args))
    tot, cnt, _ = kernels(path)
    total = sum(tot.values()) or 1.0
    best = sorted(tot.items(), key=lambda x: -x[1])[:top]
    where = kernel_lines(compiled.as_text(), [k for k, _ in best])
    return [[k, round(v / 1e3 / calls, 3), cnt[k] // calls, round(v / total, 3), where[k]]
            for k, v in best]  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--top", type=int, default=30)
    ns = p.parse_args(argv)
    tot, cnt, procs = kernels(ns.dir)
    if not tot:
        print("no GPU kernels; processes:", procs)
    total = sum(tot.values())
    print(f"{len(tot)} kernels, {total / 1e3:.2f} ms in all")
    for name, us in sorted(tot.items(), key=lambda x: -x[1])[: ns.top]:
        print(f"{us / 1e3:9.3f} ms {100 * us / total:5.1f}% x{cnt[name]:<5d} {name[:110]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
