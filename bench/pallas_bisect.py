"""Which Pallas (Triton) compiles work on this GPU: each variant in its own subprocess, so a
crash in the compiler (a segfault) is recorded instead of ending the run.

    PYTHONPATH=. python bench/pallas_bisect.py          # JSON lines; $OUT/pallas_bisect.json
"""

import json
import os
import subprocess
import sys
import time

VARIANTS = {
    "trivial": "trivial",
    "gather_loop_barrier": "gather",
    "while_refs": "while_refs",
    "vm_once_b32_i1": dict(block=32, num_warps=1, barrier=False, inner_steps=1, outer="once"),
    "vm_for_b32_i1": dict(block=32, num_warps=1, barrier=False, inner_steps=1, outer="for"),
    "vm_for_default": dict(outer="for"),
    "vm_for_nobarrier": dict(outer="for", barrier=False),
}


def gather_kernel(k) -> None:
    """Compile and run a toy kernel k(t_ref Int32[64, 4], x_ref Int32[128], o_ref
    Int32[4, 128]) that gathers from t by per-lane indices."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    t = jnp.arange(256, dtype=jnp.int32).reshape(64, 4)
    x = jnp.zeros(128, jnp.int32)
    o = pl.pallas_call(
        k,
        out_shape=jax.ShapeDtypeStruct((4, 128), jnp.int32),
        compiler_params=plt.CompilerParams(num_warps=4),
    )(t, x)
    jax.block_until_ready(o)


def child(name: str) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    v = VARIANTS[name]
    if v == "trivial":

        def k(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1

        x = jnp.arange(128, dtype=jnp.int32)
        o = pl.pallas_call(
            k,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            compiler_params=plt.CompilerParams(),
        )(x)
        assert int(o.sum()) == int(x.sum()) + 128
        return
    if v == "gather":

        def k(t_ref, x_ref, o_ref):
            lane = jnp.arange(128, dtype=jnp.int32)

            def body(i, acc):
                idx = (acc + i) % 64
                val = t_ref[idx, lane % 4]
                plt.debug_barrier()
                o_ref[lane % 4, lane] = val
                return acc + val

            o_ref[0, :] = jax.lax.fori_loop(0, 8, body, x_ref[...])

        return gather_kernel(k)
    if v == "while_refs":  # scf.while carrying the refs (Pallas' while lowering does)

        def k(t_ref, x_ref, o_ref):
            lane = jnp.arange(128, dtype=jnp.int32)

            def cond(c):
                i, acc = c
                return (i < 8) & (jnp.max(jnp.where(acc >= 0, 1, 0)) > 0)

            def body(c):
                i, acc = c
                val = t_ref[(acc + i) % 64, lane % 4]
                o_ref[lane % 4, lane] = val
                return i + 1, acc + val

            o_ref[0, :] = jax.lax.while_loop(cond, body, (0, x_ref[...]))[1]

        return gather_kernel(k)
    from bench.pallas_probe import _hand
    from jaxcc import vm, vm_pallas

    batch, limits, entry, args = _hand()
    b = np.shape(batch.op)[0]
    budget = np.full(b, limits.max_steps, np.int32)
    want = vm.run_batch(batch, entry, args, budget, limits)
    inner = v.pop("inner_steps", 16)
    got = vm_pallas.run_batch(batch, entry, args, budget, limits, inner, **v)
    bad = [
        f
        for f in want._fields
        if not np.array_equal(np.asarray(getattr(got, f)), np.asarray(getattr(want, f)))
    ]
    print("MISMATCH" if bad else "EQUAL", bad, flush=True)
    if v.get("outer") == "for":  # timing of the kernel against XLA on the same lanes
        import time as _t

        for label, fn in (
            ("xla", lambda: vm.run_batch(batch, entry, args, budget, limits)),
            ("pallas", lambda: vm_pallas.run_batch(batch, entry, args, budget, limits, inner, **v)),
        ):
            jax.block_until_ready(fn())
            t0 = _t.perf_counter()
            jax.block_until_ready(fn())
            print(label, "s", _t.perf_counter() - t0, flush=True)


def main() -> None:
    out = os.environ.get("OUT")
    recs = []
    names = sys.argv[1:] or list(VARIANTS)
    for name in names:
        t0 = time.perf_counter()
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        try:
            p = subprocess.run(
                [sys.executable, __file__, "--child", name],
                env=env,
                capture_output=True,
                text=True,
                timeout=150,
            )
            rc, text = p.returncode, (p.stdout + p.stderr)
        except subprocess.TimeoutExpired as e:
            rc, text = "timeout", str(e.stdout or "") + str(e.stderr or "")
        lines = [x for x in text.splitlines() if "Warning" not in x]
        rec = dict(name=name, rc=rc, seconds=round(time.perf_counter() - t0, 1), tail=lines[-25:])
        recs.append(rec)
        print(json.dumps(rec), flush=True)
        if out:
            with open(os.path.join(out, "pallas_bisect.json"), "w") as f:
                json.dump(recs, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
