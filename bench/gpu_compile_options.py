"""Compile time of the CLI's split compiler jits under XLA option sets (issue 14's
compile time; issue 17's cold `while True: pass`): one fresh process per set, no
persistent cache, the one-file shape of `jaxcc run examples/collatz.py`.

    PYTHONPATH=. python bench/gpu_compile_options.py OUT.jsonl [SET ...]

Per set: each stage's lower and compile seconds (lexer's two halves, parser, middle end, optimizer,
compiled one after another, so each number is that stage's own), then the compiled
stages' run time at batch 1 and 256 (median of 20 calls): options that compile faster
may run slower. Sets whose options XLA does not know are recorded with the error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

SETS = {
    "default": {},
    "llvm_parallel": {"xla_gpu_force_compilation_parallelism": 16},
    "ptxas_O0": {"xla_gpu_disable_gpuasm_optimizations": True},
    "llvm_O0": {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True},
    "no_autotune": {"xla_gpu_autotune_level": 0},
    "all": {
        "xla_gpu_force_compilation_parallelism": 16,
        "xla_gpu_disable_gpuasm_optimizations": True,
        "xla_backend_optimization_level": 0,
        "xla_llvm_disable_expensive_passes": True,
        "xla_gpu_autotune_level": 0,
    },
}


def one(name: str) -> dict:
    t0 = time.perf_counter()
    import jax
    import numpy as np

    jax.devices()
    t_init = time.perf_counter() - t0
    from jaxcc import compiler, lexer
    from jaxcc import optimize as opt
    from jaxcc.limits import CLI

    src = open(os.path.join(os.path.dirname(__file__), "..", "examples", "collatz.py")).read()
    t = compiler.tier(CLI, len(src.encode()))
    lex_front, lex_back, parse, mid, optimize_batch = compiler._stage_jits(
        SETS[name] or None, split_lexer=True
    )
    passes, rounds = opt.level(1, None, None)
    out = {
        "set": name,
        "options": SETS[name],
        "device": jax.devices()[0].device_kind,
        "init_s": t_init,
        "limits_tier": t.max_source_bytes,
    }
    fns = {}
    for b in (1, 256):
        source, length = lexer.encode([src] * b, t)
        steps = (
            ("lexer_front", lex_front, lambda r, s=source, n=length: (s, n, t)),
            ("lexer_back", lex_back, lambda r, s=source, n=length: (s, n, r, t)),
            ("parser", parse, lambda r: (*r, t)),
            ("middle_resolve", mid[0], lambda r: (*r, t)),
            ("middle_types", mid[1], lambda r: (r, t)),
            ("middle_emit", mid[2], lambda r: (r, t)),
            ("optimizer", optimize_batch, lambda r: (r.program, t, passes, rounds)),
        )
        stages, r = [], None
        for sname, f, make in steps:
            a = make(r)
            t1 = time.perf_counter()
            low = f.lower(*a)
            t2 = time.perf_counter()
            c = low.compile()
            t3 = time.perf_counter()
            if b == 1:
                out[f"{sname}_lower_s"], out[f"{sname}_compile_s"] = t2 - t1, t3 - t2
            stages.append(c)
            r = c(*a[: -1 if sname != "optimizer" else -3])
        fns[b] = (stages, source, length)

    def run(stages, source, length):
        lf, lb, pa, m0, m1, m2, op = stages
        r = m2(m1(m0(*pa(*lb(source, length, lf(source, length))))))
        return op(r.program)

    for b, (stages, source, length) in fns.items():
        jax.block_until_ready(run(stages, source, length))
        ts = []
        for _ in range(20):
            t1 = time.perf_counter()
            jax.block_until_ready(run(stages, source, length))
            ts.append(time.perf_counter() - t1)
        out[f"run_b{b}_s"] = float(np.median(ts))
    out["compile_total_s"] = sum(
        out[f"{s}_compile_s"]
        for s in (
            "lexer_front",
            "lexer_back",
            "parser",
            "middle_resolve",
            "middle_types",
            "middle_emit",
            "optimizer",
        )
    )
    return out


def main() -> int:
    if sys.argv[1] == "--one":
        try:
            print("RESULT " + json.dumps(one(sys.argv[2])), flush=True)
        except Exception as e:  # noqa: BLE001 (recorded)
            print("RESULT " + json.dumps({"set": sys.argv[2], "error": repr(e)[:400]}), flush=True)
        return 0
    path, names = sys.argv[1], sys.argv[2:] or list(SETS)
    for name in names:
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, __file__, "--one", name],
            capture_output=True,
            text=True,
            env={**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false"},
            timeout=400,
        )
        line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
        r = json.loads(line[7:]) if line else {"set": name, "error": p.stderr[-400:]}
        r["process_s"] = time.perf_counter() - t0
        print(json.dumps(r), flush=True)
        with open(path, "a") as f:
            f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
