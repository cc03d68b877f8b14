"""The loop's VM stage with and without ``shrink`` (the lockstep array halving as lanes
stop), and the whole loop with it, on a corpus batch (GPU or CPU):

    PYTHONPATH=. python bench/vm_shrink.py [--size small] [--batch 65536] [--shrink 0,2,4,6]
        [--pallas] [--loop] [--no-vm] [--json F]

Programs: ``bench.corpus.generate(0, size, 512)`` compiled by jaxcc and tiled to the
batch, four test cases each (``baselines.test_arrays``), so ``vm.run_tests`` runs
4 * batch lanes with the loop's budgets (``pipeline._budget``). Per setting: median and
minimum of 7 timed calls after a compiling one, the compile seconds, and a check that
every lane's verdict equals the first setting's. Also prints the distribution of steps
per lane (what the lockstep array pays for: the batch runs as long as its slowest lane).
``--pallas`` adds the Pallas VM (``backend="pallas"``; its blocks of lanes stop on their
own); ``--loop`` times ``pipeline.evaluate`` whole with each setting too, ``--no-vm``
only that; ``--split`` adds the same composition as two jitted calls (the compiler, then
the VM and the verdicts), the arrays staying on the device between them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def _timed(compiled, args, n: int = 7):
    """(output, median ms, minimum ms) of n calls after one (bench/ab_time.py's)."""
    from bench.ab_time import _time

    return _time(compiled, args, n)


def _split_loop(lim, backend: str, shrink: int, by: int, args, want) -> dict:
    """``pipeline.evaluate``'s composition as two jitted calls, the arrays staying on the
    device between them: compiler.compile_arrays, then pipeline.run_cases +
    pipeline._judge. Timed from source to verdicts (both calls, one sync at the end);
    ``same``: every Evaluation field equal to the one-jit loop's ``want``."""
    import jax

    from bench import breakdown
    from jaxcc import compiler, pipeline

    def front(s, n):
        program, error, _ = compiler.compile_arrays(s, n, lim)
        return program, error

    def back(program, error, cases):
        _, per_case = pipeline.run_cases(program, error, cases, lim, backend, shrink, by)
        return pipeline._judge(program, error, per_case, cases)

    src, length, cases = args
    t0 = time.perf_counter()
    c_front = jax.jit(front).lower(src, length).compile()
    prog, err = c_front(src, length)
    c_back = jax.jit(back).lower(prog, err, cases).compile()
    cs = round(time.perf_counter() - t0, 1)
    ev, ms, mn = _timed(lambda s, n, c: c_back(*c_front(s, n), c), args, 11)
    return {"ms": ms, "min_ms": mn, "compile_s": cs, "same": breakdown.same(ev, want),
            "passed": int((np.asarray(ev.verdict) == 0).sum())}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="small")
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--shrink", default="0,2,4,6", help="levels, or LEVELSxFACTOR (2x8)")
    p.add_argument("--loop-shrink", help="the loop's settings (default: --shrink's)")
    p.add_argument("--loop", action="store_true", help="also pipeline.evaluate whole")
    p.add_argument("--pallas", action="store_true", help="also the Pallas VM (no shrink)")
    p.add_argument("--no-vm", action="store_true", help="only the loop (with --loop)")
    p.add_argument("--split", action="store_true",
                   help="with --loop: also the loop as two jits, compile then VM + judge")  # fmt: skip
    p.add_argument("--json")
    ns = p.parse_args(argv)
    sys.path.insert(0, ".")
    import jax

    from bench import breakdown
    from jaxcc import compiler, pipeline, vm

    b = ns.batch
    lim, *inputs = breakdown.corpus_inputs(ns.size, b)
    src, length, cases = jax.device_put(tuple(inputs))
    prog, err, _ = jax.jit(lambda s, n: compiler.compile_arrays(s, n, lim))(src, length)
    budget = pipeline._budget(err, cases, lim)
    out = {"size": ns.size, "batch": b, "device": jax.devices()[0].device_kind, "vm": {}}

    def parse(spec):
        levels, _, by = spec.partition("x")
        return int(levels), int(by or 2)

    settings = [("xla", *parse(s)) for s in ns.shrink.split(",")]
    if ns.pallas:
        settings.append(("pallas", 0, 2))
    loop_settings = settings
    if ns.loop_shrink:
        loop_settings = [("xla", *parse(s)) for s in ns.loop_shrink.split(",")]
    ref = None
    for backend, shrink, by in [] if ns.no_vm else settings:
        name = f"{backend} shrink={shrink}x{by}"

        def f(prog, cases, budget, backend=backend, shrink=shrink, by=by):
            return vm.run_tests(prog, cases.entry, cases.args, cases.expected, lim,
                                budget=budget, shrink=shrink, backend=backend, shrink_by=by)  # fmt: skip

        args = (prog, cases, budget)
        t0 = time.perf_counter()
        compiled = jax.jit(f).lower(*args).compile()
        cs = round(time.perf_counter() - t0, 1)
        (passed, per_case), ms, mn = _timed(compiled, args)
        per_case = np.asarray(per_case)
        ref = per_case if ref is None else ref
        out["vm"][name] = {"ms": ms, "min_ms": mn, "compile_s": cs,
                           "same": bool(np.array_equal(per_case, ref)),
                           "passed": int(np.asarray(passed).sum())}  # fmt: skip
        print(name, out["vm"][name], flush=True)
    if not ns.no_vm:
        tb = vm._tables(prog)
        pid, e, a, bud = vm._test_lanes(cases.entry, cases.args, budget, lim)
        run = jax.jit(lambda *x: vm._run_lanes(tb, *x, lim, 16, 1))
        steps = np.asarray(run(pid, e, a, bud).steps)
        pct = [50, 90, 99, 99.9, 100]
        out["steps_per_lane"] = dict(
            zip(map(str, pct), np.percentile(steps, pct).tolist(), strict=True)
        )
        out["steps_per_lane"]["mean"] = float(steps.mean())
        print("steps per lane", out["steps_per_lane"], flush=True)
    if ns.loop:
        out["loop"] = {}
        for backend, shrink, by in loop_settings:

            def f(s, n, c, backend=backend, shrink=shrink, by=by):
                return pipeline.evaluate(s, n, c, lim, backend=backend, shrink=shrink, shrink_by=by)

            args = (src, length, cases)
            t0 = time.perf_counter()
            compiled = jax.jit(f).lower(*args).compile()
            cs = round(time.perf_counter() - t0, 1)
            ev, ms, mn = _timed(compiled, args, 11)
            name = f"{backend} shrink={shrink}x{by}"
            out["loop"][name] = {"ms": ms, "min_ms": mn, "compile_s": cs,
                                 "passed": int((np.asarray(ev.verdict) == 0).sum())}  # fmt: skip
            print("loop", name, out["loop"][name], flush=True)
            if ns.split:
                r = _split_loop(lim, backend, shrink, by, args, ev)
                out["loop"][name + " split"] = r
                print("loop", name, "split", r, flush=True)
    if ns.json:
        with open(ns.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
