#!/usr/bin/env bash
# One device call: VM micro-benchmark and the pipeline's XLA compile time on the GPU.
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee $OUT/gpu.txt
python -c "import jax; print(jax.__version__, jax.devices())" | tee -a $OUT/gpu.txt
timeout 240 python bench/bench_vm.py --out $OUT --sizes 1024,16384,131072,1048576 --inner 16,32 --repeats 3 --small-limits 2>&1 | tee $OUT/vm.log
timeout 200 python - <<'PY' 2>&1 | tee $OUT/compile.log
import time, jax
from jaxcc import compiler, lexer, parser, middle
from jaxcc.limits import Limits
L = Limits(max_source_bytes=1024, max_tokens=256, max_nodes=256, max_code=512, max_funcs=8, max_locals=32, max_stack=256, max_depth=32, max_output=64, max_steps=100000)
srcs = [open("examples/gcd.py").read()] * 4096
s, n = lexer.encode(srcs, L)
s, n = jax.device_put(s), jax.device_put(n)
for name, f in [("lex", lambda: lexer.lex(s, n, L)), ("all", lambda: compiler.compile_arrays(s, n, L))]:
    t = time.time(); jax.block_until_ready(f()); c = time.time() - t
    ts = []
    for _ in range(3):
        t = time.time(); jax.block_until_ready(f()); ts.append(time.time() - t)
    print(name, "compile+first", round(c, 2), "run", min(ts), "programs/s", 4096 / min(ts), flush=True)
PY
