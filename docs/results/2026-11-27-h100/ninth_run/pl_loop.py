"""The probe of the ninth run (run from the repository root on the GPU:
``PYTHONPATH=. python docs/results/2026-11-27-h100/ninth_run/pl_loop.py small``): the
loop with the Pallas VM as one jit, with an optimization barrier between compiler and
VM, the XLA loop with that barrier, and the loop as two jits (compiler; VM + verdicts),
each timed (bench/ab_time.py) and traced (bench/trace_kernels.py: the 12 heaviest GPU
kernels). Writes $OUT/pl_loop_SIZE.json."""

import json
import os
import sys
import time

import jax
import numpy as np
from jax import lax

sys.path.insert(0, ".")
from bench import baselines, breakdown, trace_kernels  # noqa: E402
from bench import corpus as C  # noqa: E402
from bench.ab_time import _time  # noqa: E402
from jaxcc import compiler, lexer, pipeline  # noqa: E402

size = sys.argv[1]
out = os.environ.get("OUT", "/tmp")
lim, b = C.LIMITS[size], int(sys.argv[2]) if len(sys.argv) > 2 else 65536
progs = C.generate(0, size, 512)
src, length = lexer.encode([q["source"] for q in progs], lim)
t = baselines.test_arrays(progs)
i = np.arange(b) % src.shape[0]
cases = breakdown.cases_of(t["entry"][i], t["args"][i], t["expected"][i])
args = jax.device_put((src[i], length[i], cases))


def mk(backend, barrier):
    def f(s, n, c):
        program, error, _ = compiler.compile_arrays(s, n, lim)
        if barrier:
            program, error, c = lax.optimization_barrier((program, error, c))
        _, per_case = pipeline.run_cases(program, error, c, lim, backend, None)
        return pipeline._judge(program, error, per_case, c)

    return f


res = {}
ref = None
for name, backend, barrier in [
    ("pallas", "pallas", False),
    ("pallas_barrier", "pallas", True),
    ("xla_barrier", "xla", True),
]:
    t0 = time.perf_counter()
    comp = jax.jit(mk(backend, barrier)).lower(*args).compile()
    cs = time.perf_counter() - t0
    ev, ms, mn = _time(comp, args, 11)
    ref = ev if ref is None else ref
    top = trace_kernels.trace_top(comp, args, f"/tmp/tr_{size}_{name}", calls=2, top=12)
    res[name] = {"ms": ms, "min_ms": mn, "compile_s": round(cs, 1),
                 "same": breakdown.same(ev, ref), "top": top}  # fmt: skip
    print(name, json.dumps(res[name]), flush=True)


def front(s, n):
    p, e, _ = compiler.compile_arrays(s, n, lim)
    return p, e


def back(p, e, c):
    _, pc = pipeline.run_cases(p, e, c, lim, "pallas", None)
    return pipeline._judge(p, e, pc, c)


cf = jax.jit(front).lower(*args[:2]).compile()
pe = cf(*args[:2])
cb = jax.jit(back).lower(*pe, args[2]).compile()
for nm, comp, a in [("split_front", cf, args[:2]), ("split_back", cb, (*pe, args[2]))]:
    _, ms, mn = _time(comp, a, 11)
    top = trace_kernels.trace_top(comp, a, f"/tmp/tr_{size}_{nm}", calls=2, top=12)
    res[nm] = {"ms": ms, "min_ms": mn, "top": top}
    print(nm, json.dumps(res[nm]), flush=True)
with open(f"{out}/pl_loop_{size}.json", "w") as fh:
    json.dump(res, fh, indent=1)
