"""Micro-benchmark of the JAX VM (jaxcc.vm.run): lane-steps/s and programs/s vs batch size.

The workload is hand-assembled bytecode: function 1 computes sum(i * i for i in range(n))
with a FOR_RANGE loop (9 instructions per iteration: FOR_RANGE, STORE_VAR, 3 LOAD_VAR,
MUL, ADD, STORE_VAR, JUMP), prints it and returns it; each lane gets its own n (seeded,
uniform in [n_lo, n_hi], or all equal with --fixed). Every lane's result is checked.

lane-steps/s counts instructions actually executed (sum of RunResult.steps over lanes);
"slot-steps/s" counts lanes x lockstep steps (what the machine did, finished lanes
included). Timing: jitted run, warm-up call first, then the median of --repeats calls,
each ended by block_until_ready.

    python bench/bench_vm.py --out /tmp/vm_bench            # GPU: 1k .. 1M lanes
    python bench/bench_vm.py --quick --out /tmp/vm_bench    # CPU smoke run (< 1 minute)
    python bench/bench_vm.py --out /tmp/vm_bench --shrink 0,3 --n-lo 10 --n-hi 1000
                                       # skewed run times: does shrinking the batch pay?
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jaxcc import isa, vm  # noqa: E402
from jaxcc.errors import Code  # noqa: E402
from jaxcc.isa import Op  # noqa: E402
from jaxcc.limits import DEFAULT, Limits  # noqa: E402


def sum_squares_program(i_pad: int = 64, f_pad: int = 4) -> isa.Program:
    """Function 0: return 0. Function 1 (n): s = 0; for i in range(n): s = s + i * i;
    print(s); return s."""
    lc, lv, sv = Op.LOAD_CONST, Op.LOAD_VAR, Op.STORE_VAR
    main = [(lc, 0), (Op.RETURN_VALUE, 0)]
    e = len(main)
    body = [(lc, 0), (sv, 1), (lc, 0), (lv, 0), (lc, 1), (Op.FOR_RANGE, e + 14), (sv, 2),
            (lv, 1), (lv, 2), (lv, 2), (Op.MUL, 0), (Op.ADD, 0), (sv, 1), (Op.JUMP, e + 5),
            (lv, 1), (Op.PRINT_INT, 1), (Op.PRINT_NEWLINE, 0), (Op.RETURN_VALUE, 0)]  # fmt: skip
    code = main + body
    op = np.zeros(i_pad, np.int32)
    arg = np.zeros(i_pad, np.int32)
    for i, (o, a) in enumerate(code):
        op[i], arg[i] = int(o), a
    tab = np.zeros((4, f_pad), np.int32)
    tab[:, 0] = [0, 0, 0, 1]
    tab[:, 1] = [e, 1, 3, 6]
    return isa.Program(
        op=op, arg=arg, line=np.arange(1, i_pad + 1, dtype=np.int32),
        n_code=np.int32(len(code)), fn_entry=tab[0], fn_nparams=tab[1], fn_nlocals=tab[2],
        fn_maxstack=tab[3], fn_rettype=np.zeros(f_pad, np.int32), n_funcs=np.int32(2),
    )  # fmt: skip


def batch(prog: isa.Program, b: int) -> isa.Program:
    return isa.Program(*(jnp.broadcast_to(jnp.asarray(x), (b, *np.shape(x))) for x in prog))


def bench_one(b, ns, limits, inner_steps, unroll, repeats, shrink=0):
    prog = batch(sum_squares_program(), b)
    entry = jnp.ones((b,), jnp.int32)
    args = jnp.asarray(ns, jnp.int32)[:, None]
    budget = jnp.full((b,), limits.max_steps, jnp.int32)

    def call():
        r = vm.run_batch(prog, entry, args, budget, limits, inner_steps, unroll, shrink)
        jax.block_until_ready(r)
        return r

    t0 = time.perf_counter()
    r = call()  # compile + warm-up
    compile_s = time.perf_counter() - t0
    want = np.array([sum(i * i for i in range(n)) % 2**32 for n in ns], np.int64)
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)
    status = np.asarray(r.status)
    ok = status == Code.OK
    assert np.array_equal(np.asarray(r.result)[ok], want[ok]), "wrong results"
    overflow = status == Code.OVERFLOW
    assert np.all(ok | overflow), f"unexpected statuses {np.unique(status)}"
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    steps = np.asarray(r.steps).astype(np.int64)
    lane_steps = int(steps.sum())
    lockstep = int(steps.max())
    lockstep = -(-lockstep // inner_steps) * inner_steps  # whole outer iterations
    return dict(
        lanes=b,
        inner_steps=inner_steps,
        unroll=unroll,
        shrink=shrink,
        n_lo=int(min(ns)),
        n_hi=int(max(ns)),
        compile_s=round(compile_s, 3),
        time_s=t,
        times_s=times,
        lane_steps=lane_steps,
        lane_steps_per_s=lane_steps / t,
        slot_steps_per_s=b * lockstep / t,
        programs_per_s=b / t,
        outer_iterations=lockstep // inner_steps,
        us_per_outer_iteration=1e6 * t / max(1, lockstep // inner_steps),
    )


def hlo_stats(b, limits, inner_steps, unroll, shrink, path):
    """Compile one configuration, write its optimized HLO to path, count key ops."""
    prog = batch(sum_squares_program(), b)
    entry = jnp.ones((b,), jnp.int32)
    args = jnp.ones((b, 1), jnp.int32)
    budget = jnp.full((b,), limits.max_steps, jnp.int32)
    lowered = vm.run_batch.lower(prog, entry, args, budget, limits, inner_steps, unroll, shrink)
    text = lowered.compile().as_text()
    with open(path, "w") as f:
        f.write(text)
    ops = ("fusion(", "gather(", "scatter(", "while(", "copy(", "custom-call(")
    return {op[:-1]: text.count(op) for op in ops}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True, help="directory for bench_vm.json")
    p.add_argument("--quick", action="store_true", help="small sizes (CPU smoke run)")
    p.add_argument("--sizes", type=str, default=None, help="comma-separated lane counts")
    p.add_argument("--inner", type=str, default="16,32", help="comma-separated inner_steps")
    p.add_argument("--unroll", type=int, default=1)
    p.add_argument("--shrink", type=str, default="0",
                   help="comma-separated vm shrink levels (halvings of the lockstep array)")  # fmt: skip
    p.add_argument("--n-lo", type=int, default=100)
    p.add_argument("--n-hi", type=int, default=300)
    p.add_argument("--fixed", action="store_true", help="every lane gets n = n_hi")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--small-limits", action="store_true",
                   help="max_stack 64, max_depth 16, max_output 16 instead of DEFAULT")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dump-hlo", action="store_true",
                   help="write the optimized HLO of each configuration to --out and print "
                        "its op counts (fusions, gathers, scatters per module)")  # fmt: skip
    a = p.parse_args(argv)

    if a.quick:
        sizes = [512, 2048]
        inner = [16]
        a.n_lo, a.n_hi, a.repeats = 10, 30, 3
    else:
        sizes = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 17, 1 << 18, 1 << 20]
        inner = [int(x) for x in a.inner.split(",")]
    if a.sizes:
        sizes = [int(x) for x in a.sizes.split(",")]
    limits = DEFAULT
    if a.small_limits or a.quick:
        limits = Limits(max_stack=64, max_depth=16, max_output=16)
    dev = jax.devices()[0]
    info = dict(device_kind=dev.device_kind, platform=dev.platform, jax=jax.__version__,
                limits=limits._asdict(), seed=a.seed, fixed=a.fixed, unroll=a.unroll)  # fmt: skip
    print(
        f"device: {dev.device_kind} ({dev.platform}), jax {jax.__version__}",
        flush=True,
    )
    rows = []
    rng = np.random.default_rng(a.seed)
    shrinks = [int(x) for x in a.shrink.split(",")]
    for k, sh, b in [(k, sh, b) for k in inner for sh in shrinks for b in sizes]:
        if a.fixed:
            ns = np.full(b, a.n_hi)
        else:
            ns = rng.integers(a.n_lo, a.n_hi + 1, b)
        row = bench_one(b, ns, limits, k, a.unroll, a.repeats, sh)
        if a.dump_hlo:
            os.makedirs(a.out, exist_ok=True)
            path = os.path.join(a.out, f"vm_hlo_b{b}_k{k}_s{sh}.txt")
            row["hlo_ops"] = hlo_stats(b, limits, k, a.unroll, sh, path)
            print(f"  HLO ops {row['hlo_ops']} -> {path}", flush=True)
        rows.append(row)
        print(
            f"lanes={b:8d} inner={k:3d} shrink={sh}  {row['time_s'] * 1e3:9.2f} ms  "
            f"lane-steps/s={row['lane_steps_per_s']:.3e}  "
            f"slot-steps/s={row['slot_steps_per_s']:.3e}  "
            f"programs/s={row['programs_per_s']:.3e}  "
            f"us/outer-iter={row['us_per_outer_iteration']:.1f}  "
            f"(compile {row['compile_s']:.1f} s)",
            flush=True,
        )
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "bench_vm.json")
    with open(path, "w") as f:
        json.dump(dict(info=info, rows=rows), f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
