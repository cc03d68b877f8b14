"""Why the lexer's jit compiles slowly on the GPU: its compile time at the one-file CLI
shape (batch 1, the tier of examples/collatz.py) when its DFA tables (a 5.6 MB merge
table among them) are closed over by the caller's jit (constants in the HLO: what
compiler.py's split jits and compile_arrays do today), when they are the caller's jit's
arguments, and in DFA_MODE "vector" (no merge table); and a jit holding the merge table
alone as a constant against the same jit taking it as an argument. A fresh process each.

    PYTHONPATH=. python bench/lexer_compile.py OUT.jsonl [VARIANT ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

VARIANTS = ("closed", "args", "vector", "const_only", "arg_only")


def one(name: str) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxcc import compiler, lexer
    from jaxcc import lexer_tables as LT
    from jaxcc.limits import CLI

    jax.devices()
    src = open(os.path.join(os.path.dirname(__file__), "..", "examples", "collatz.py")).read()
    t = compiler.tier(CLI, len(src.encode()))
    source, length = lexer.encode([src], t)
    if name in ("const_only", "arg_only"):
        merge = LT.merge_tables()[1]
        x = np.zeros((1, t.max_source_bytes), np.int32)
        if name == "const_only":
            f, args = jax.jit(lambda i: jnp.asarray(merge)[i]), (x,)
        else:
            f, args = jax.jit(lambda i, m: m[i]), (x, merge)
    else:
        if name == "vector":
            lexer.DFA_MODE = "vector"
        tables = lexer.dfa_tables(source.shape[-1])
        if name == "args":
            f = jax.jit(lambda s, ln, tb: lexer._lex_jit(s, ln, tb, t))
            args = (source, length, tables)
        else:
            f, args = jax.jit(lambda s, ln: lexer.lex(s, ln, t)), (source, length)
    t0 = time.perf_counter()
    low = f.lower(*args)
    t1 = time.perf_counter()
    c = low.compile()
    t2 = time.perf_counter()
    out = jax.block_until_ready(c(*args))
    ts = []
    for _ in range(20):
        t3 = time.perf_counter()
        out = jax.block_until_ready(c(*args))
        ts.append(time.perf_counter() - t3)
    leaves = jax.tree.leaves(out)
    return {"variant": name, "device": jax.devices()[0].device_kind, "lower_s": t1 - t0,
            "compile_s": t2 - t1, "run_s": float(np.median(ts)),
            "hlo_chars": len(low.as_text()),
            "checksum": int(sum(int(np.asarray(x).astype(np.int64).sum()) for x in leaves))}  # fmt: skip


def main() -> int:
    if sys.argv[1] == "--one":
        print("RESULT " + json.dumps(one(sys.argv[2])), flush=True)
        return 0
    path, names = sys.argv[1], sys.argv[2:] or list(VARIANTS)
    for name in names:
        t0 = time.perf_counter()
        env = {**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false"}
        p = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True,
                           text=True, env=env, timeout=300)  # fmt: skip
        line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
        r = json.loads(line[7:]) if line else {"variant": name, "error": p.stderr[-600:]}
        r["process_s"] = time.perf_counter() - t0
        print(json.dumps(r), flush=True)
        with open(path, "a") as f:
            f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
