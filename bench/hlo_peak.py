"""What is live at the peak of a jitted function's temporary memory, from XLA's dumps:

    XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=^$" python ...
    python bench/hlo_peak.py DIR/module_0000.jit__lambda.sm_9.0a_gpu_after_optimizations [--batch B]

Reads the optimized HLO (``PREFIX.txt``: the entry computation's schedule, operands and
stack frames) and the buffer assignment (``PREFIX-buffer-assignment.txt``: each value of
the preallocated temp buffer with its size and offset). A value lives from its
instruction to the last entry instruction that reads it or an alias of it (bitcast,
get-tuple-element, tuple); a value inside a called computation (a while body) lives
during the instruction that calls it. The heap in use at each step is the union of the
live values' [offset, offset + size) intervals; at the step where it is largest it
prints the bytes per program (``--batch``: the leading dimension) by shape class and by
the innermost source line of ``--file`` (default lexer.py) each value's fusion came from
(approximate: a fusion has one line for all its outputs). The union at the peak equals
XLA's own temp size when the live ranges are right (checked: the lexer, small, 65,536).
"""

from __future__ import annotations

import argparse
import collections
import re


def _tables(hlo):
    sec, tab = None, {"FileNames": {}, "FunctionNames": {}, "FileLocations": {}, "StackFrames": {}}
    for line in hlo:
        s = line.strip()
        if s in tab:
            sec = s
            continue
        if sec and re.match(r"^\d+ ", s):
            i, rest = s.split(" ", 1)
            tab[sec][int(i)] = rest.strip('"') if sec in ("FileNames", "FunctionNames") else {
                k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", rest)}  # fmt: skip
        elif s:
            sec = None
    return tab


def _where(tab, fid):
    out, seen = [], 0
    frames, locs = tab["StackFrames"], tab["FileLocations"]
    while fid in frames and seen < 64:
        loc = locs[frames[fid]["file_location_id"]]
        name = tab["FileNames"][loc["file_name_id"]].split("/")[-1]
        out.append(f"{name}:{loc['line']} {tab['FunctionNames'][loc['function_name_id']]}")
        parent = frames[fid]["parent_frame_id"]
        if parent == fid:
            break
        fid, seen = parent, seen + 1
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("prefix", help="DIR/module_NNNN.NAME.PLATFORM_after_optimizations")
    p.add_argument("--batch", type=int, default=1, help="programs per call (divides bytes)")
    p.add_argument("--file", default="lexer.py", help="source file for the line column")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--profile", action="store_true",
                   help="also the largest heap while each jaxcc function's code runs")  # fmt: skip
    ns = p.parse_args(argv)
    hlo = open(ns.prefix + ".txt").read().splitlines()
    ba = open(ns.prefix + "-buffer-assignment.txt").read().splitlines()
    tab = _tables(hlo)
    start = next(i for i, line in enumerate(hlo) if line.startswith("ENTRY"))
    entry = []
    for line in hlo[start + 1 :]:
        if line.startswith("}"):
            break
        m = re.match(r"\s*(?:ROOT )?%(\S+) = ", line)
        if m:
            entry.append((m.group(1), line))
    pos = {n: i for i, (n, _) in enumerate(entry)}
    comp_of, frame_of, cur = {}, {}, None
    for line in hlo:
        m = re.match(r"^%?(\S+) .*\{$", line)
        if m and not line.startswith(" "):
            cur = m.group(1)
            continue
        m = re.match(r"\s*(?:ROOT )?%(\S+) = ", line)
        if m:
            comp_of[m.group(1)] = cur
            f = re.search(r"stack_frame_id=(\d+)", line)
            frame_of[m.group(1)] = int(f.group(1)) if f else None
    caller, users, alias = {}, collections.defaultdict(list), {}
    for n, line in entry:
        for c in re.findall(r"(?:body|condition|calls|to_apply)=%([\w.\-]+)", line):
            caller[c] = n
        for o in set(re.findall(r"%([\w.\-]+)", line.split("=", 1)[1])):
            users[o].append(n)
        alias[n] = any(a in line for a in (" bitcast(", " get-tuple-element(", " tuple("))

    def last_use(n, depth=0):
        best = pos.get(n, -1)
        for u in users.get(n, []):
            best = max(best, pos[u])
            if alias.get(u) and depth < 32:
                best = max(best, last_use(u, depth + 1))
        return best

    ranges, in_temp = [], False
    for line in ba:
        if line.startswith("allocation "):
            in_temp = "preallocated-temp" in line
            continue
        m = in_temp and re.match(
            r"\s*value: <\d+ (\S+?)(?:\{[\d,]*\})? @0> \(size=(\d+),offset=(\d+)\): (\S+)", line)  # fmt: skip
        if not m:
            continue
        name, size, off, shape = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if name in pos:
            a, b = pos[name], max(pos[name], last_use(name))
        elif caller.get(comp_of.get(name)) is not None:
            a = b = pos[caller[comp_of[name]]]
        else:
            continue
        ranges.append((a, b, size, off, name, shape.split("{")[0]))

    def heap(t):
        iv = sorted((off, off + size) for a, b, size, off, *_ in ranges if a <= t <= b)
        tot, cs, ce = 0, None, None
        for s, e in iv:
            if cs is None or s > ce:
                tot += 0 if cs is None else ce - cs
                cs, ce = s, e
            else:
                ce = max(ce, e)
        return tot + (0 if cs is None else ce - cs)

    sizes = [heap(t) for t in range(len(entry))]
    tp = max(range(len(entry)), key=sizes.__getitem__)
    b = ns.batch
    print(f"peak {sizes[tp] / b:.0f} bytes per program at step {tp} of {len(entry)} "
          f"({entry[tp][0]})")  # fmt: skip
    owners = {}
    for a, e, size, off, name, shape in ranges:
        if a <= tp <= e and (off not in owners or owners[off][0] < size):
            owners[off] = (size, name, shape)
    by_shape, by_line = collections.Counter(), collections.Counter()
    n_shape = collections.Counter()
    for size, name, shape in owners.values():
        key = re.sub(rf"\[{b},", "[B,", shape) if b > 1 else shape
        by_shape[key] += size
        n_shape[key] += 1
        lines = [w for w in _where(tab, frame_of.get(name)) if w.startswith(ns.file)]
        by_line[lines[0] if lines else "?"] += size
    if ns.profile:
        _profile(entry, sizes, tab, frame_of, b)
    print("by shape (bytes per program, values):")
    for k, v in by_shape.most_common(ns.top):
        print(f"  {v / b:8.0f}  x{n_shape[k]:<3d} {k}")
    print(f"by innermost {ns.file} line:")
    for k, v in by_line.most_common(ns.top):
        print(f"  {v / b:8.0f}  {k}")
    return 0


def _profile(entry, sizes, tab, frame_of, b):
    """Per jaxcc stage (the outermost jaxcc/ frame below the entry point, file:function)
    the largest heap at a step whose instruction it emitted: where each stage peaks."""
    best = {}
    for t, (name, _) in enumerate(entry):
        frames = [w for w in _where(tab, frame_of.get(name))
                  if w.split(":")[0] not in ("pipeline.py", "compiler.py", "ab_time.py")]  # fmt: skip
        key = frames[-1] if frames else "?"
        key = key.split(":")[0] + ":" + key.split(" ")[-1]
        if key not in best or sizes[t] > best[key][0]:
            best[key] = (sizes[t], t)
    print("largest heap per stage (bytes per program, at step):")
    for k, (v, t) in sorted(best.items(), key=lambda kv: -kv[1][0]):
        print(f"  {v / b:8.0f}  step {t:5d}  {k}")


if __name__ == "__main__":
    raise SystemExit(main())
