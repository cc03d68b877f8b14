"""The probe of 2026-11-28 (run from the repository root on the GPU: ``PYTHONPATH=. python
docs/results/2026-11-28-h100/front_fusions/front_fusions.py small``): the front end
(``compiler.compile_arrays``, 65,536 small programs) timed and traced, and its 40 heaviest
GPU kernels looked up in the optimized HLO (the fused computation's ops, root and
``op_name``s). Writes $OUT/front_SIZE.json and the HLO text."""

import json
import os
import re
import sys
import time

import jax
import numpy as np

sys.path.insert(0, ".")
from bench import corpus as C
from bench import trace_kernels
from bench.ab_time import _time
from jaxcc import compiler, lexer

size = sys.argv[1] if len(sys.argv) > 1 else "small"
out = os.environ.get("OUT", "/tmp")
lim, b = C.LIMITS[size], 65536
progs = C.generate(0, size, 512)
src, length = lexer.encode([q["source"] for q in progs], lim)
i = np.arange(b) % src.shape[0]
args = jax.device_put((src[i], length[i]))


def front(s, n):
    p, e, _ = compiler.compile_arrays(s, n, lim)
    return p, e


t0 = time.perf_counter()
comp = jax.jit(front).lower(*args).compile()
print("compile", time.perf_counter() - t0, flush=True)
_, ms, mn = _time(comp, args, 11)
print("ms", ms, mn, flush=True)
top = trace_kernels.trace_top(comp, args, f"/tmp/tr_front_{size}", calls=2, top=40)
txt = comp.as_text()
open(f"{out}/front_{size}.hlo.txt", "w").write(txt)
comps = {}
cur = None
for line in txt.splitlines():
    m = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
    if m and not line.startswith(" "):
        cur = m.group(1)
        comps[cur] = []
    elif cur is not None:
        comps[cur].append(line)
res = []
for name, t, n, share in top:
    hit = [x for x in txt.splitlines() if re.search(rf"%{re.escape(name)} = ", x)]
    ent = {"name": name, "ms": t, "calls": n, "share": share}
    if hit:
        line = hit[0]
        ent["inst"] = line.strip()[:600]
        m = re.search(r"calls=%?([\w.\-]+)", line)
        if m and m.group(1) in comps:
            body = comps[m.group(1)]
            ent["body_lines"] = len(body)
            srcs = sorted(
                set(re.findall(r'source_file="([^"]+)" source_line=(\d+)', "\n".join(body)))
            )
            ent["sources"] = [f"{os.path.basename(f)}:{ln}" for f, ln in srcs][:30]
            ent["ops"] = sorted(set(re.findall(r"= \S+ (\w+)\(", "\n".join(body))))
            ent["root"] = [x.strip()[:400] for x in body if "ROOT" in x][:1]
    res.append(ent)
    print(json.dumps(ent)[:1500], flush=True)
json.dump({"ms": ms, "min_ms": mn, "top": res}, open(f"{out}/front_{size}.json", "w"), indent=1)
