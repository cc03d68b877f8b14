"""Baselines, timed on the same programs and tests as jaxcc's compile-run-test loop.

* ``cpython``: what users have today. For each program: ``compile()`` the source,
  ``exec`` it (defining its functions; the module body's own ``print(fK(..))`` runs
  too, into a list), then call the function under test once per test case and compare
  the return value with the expected one. One process.
* ``cpython_pool``: the same, spread over every host core with a multiprocessing Pool
  (spawned workers, warmed up before timing; chunks of programs per task).
* ``reference``: jaxcc's own reference pipeline, plain Python: the reference compiler
  (source -> bytecode) and the reference interpreter, one test case at a time.
* ``cpu_centric`` (the paper's "traditional" design, section 2.2 and equation 16): compile
  on the host with the reference compiler, ship the bytecode (and the test inputs) to the
  device with ``jax.device_put``, run the tests there with ``jaxcc.vm.run_tests``, ship the
  verdicts back with ``jax.device_get``. The two transfers are timed on their own.

A test case passes when the call returns normally with the expected value (what
``jaxcc.vm.run_tests`` checks); a program passes when all its cases pass.

Nothing here imports JAX at module level: the Pool's spawned workers import this module.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np


def _noop_print(*args, **kwargs):
    _noop_print.items.append(args)


_noop_print.items = []


def cpython_program(prog: dict) -> bool:
    """Compile, exec and test one program under CPython; True when every case passes."""
    code = compile(prog["source"], "<bench>", "exec")
    ns = {"print": _noop_print}
    exec(code, ns)
    _noop_print.items.clear()
    ok = True
    for t in prog["tests"]:
        fn = ns[t["func"]] if t["func"] else None
        try:
            got = fn(*t["args"]) if fn else None
        except Exception:  # noqa: BLE001 - a test case that raises fails, as on the VM
            ok = False
            continue
        ok &= t["error"] is None and got == t["result"]
    return ok


def _cpython_chunk(progs: list[dict]) -> int:
    return sum(cpython_program(p) for p in progs)


def cpython(progs: list[dict]) -> dict:
    t = time.perf_counter()
    passed = _cpython_chunk(progs)
    dt = time.perf_counter() - t
    return {"seconds": dt, "programs": len(progs), "passed": passed}


class Pool:
    """A warm pool of ``n`` spawned worker processes (default: every host core)."""

    def __init__(self, n: int | None = None):
        self.n = n or os.cpu_count() or 1
        self.pool = multiprocessing.get_context("spawn").Pool(self.n)
        self.pool.map(_cpython_chunk, [[] for _ in range(self.n)])  # start and import

    def run(self, progs: list[dict]) -> dict:
        # a few chunks per worker: even load, small pickling overhead
        k = max(1, len(progs) // (4 * self.n))
        chunks = [progs[i : i + k] for i in range(0, len(progs), k)]
        t = time.perf_counter()
        passed = sum(self.pool.map(_cpython_chunk, chunks))
        dt = time.perf_counter() - t
        return {"seconds": dt, "programs": len(progs), "passed": passed, "workers": self.n}

    def close(self):
        self.pool.terminate()
        self.pool.join()


def reference(progs: list[dict], limits) -> dict:
    """The reference compiler and interpreter (plain Python), test case by test case."""
    from jaxcc.errors import Code
    from jaxcc.reference import compiler, interp

    t = time.perf_counter()
    passed = 0
    compile_s = 0.0
    for p in progs:
        t0 = time.perf_counter()
        comp = compiler.compile_source(p["source"], limits)
        compile_s += time.perf_counter() - t0
        program, error = comp[0], comp[1]
        ok = int(np.asarray(error.code)) == Code.OK
        for c in p["tests"]:
            if not ok:
                break
            r = interp.run_program(program, limits, c["entry"], c["args"])
            ok = c["error"] is None and int(r.status) == Code.OK and int(r.result) == c["result"]
        passed += ok
    dt = time.perf_counter() - t
    return {"seconds": dt, "programs": len(progs), "passed": passed, "compile_s": compile_s}


def test_arrays(progs: list[dict]) -> dict[str, np.ndarray]:
    """The test cases as arrays for ``vm.run_tests``: entry Int32[B], args Int32[B, K, 2],
    expected Int32[B, K] (0 where the case expects an error) and want Bool[B] (the
    verdict CPython gives: every case returns its value)."""
    k = max(len(p["tests"]) for p in progs)
    a = max(len(c["args"]) for p in progs for c in p["tests"])
    b = len(progs)
    entry = np.zeros(b, np.int32)
    args = np.zeros((b, k, max(a, 1)), np.int32)
    expected = np.zeros((b, k), np.int32)
    want = np.ones(b, bool)
    for i, p in enumerate(progs):
        cases = p["tests"] + [p["tests"][-1]] * (k - len(p["tests"]))  # pad by repeating
        entry[i] = cases[0]["entry"]
        for j, c in enumerate(cases):
            args[i, j, : len(c["args"])] = c["args"]
            expected[i, j] = c["result"] if c["error"] is None else 0
            want[i] &= c["error"] is None
    return {"entry": entry, "args": args, "expected": expected, "want": want}


def cpu_centric(progs: list[dict], limits, run_tests) -> dict:
    """Host compile -> device_put -> run_tests on the device -> device_get, each timed.

    ``run_tests``: a jitted ``(program, entry, args, expected) -> (passed, per_case)``
    already compiled for this batch shape (the caller warms it up)."""
    import jax

    from jaxcc.reference import compiler

    sources = [p["source"] for p in progs]
    tests = test_arrays(progs)
    t0 = time.perf_counter()
    comp = compiler.compile_many(sources, limits)
    program, error = comp[0], comp[1]
    program = jax.tree.map(np.asarray, program)
    ok = np.asarray(error.code) == 0
    t1 = time.perf_counter()
    dev = jax.device_put((program, tests["entry"], tests["args"], tests["expected"]))
    jax.block_until_ready(dev)
    t2 = time.perf_counter()
    out = run_tests(*dev)
    jax.block_until_ready(out)
    t3 = time.perf_counter()
    passed, per_case = jax.device_get(out)
    t4 = time.perf_counter()
    passed = np.asarray(passed) & ok
    nbytes_in = sum(np.asarray(x).nbytes for x in jax.tree.leaves(dev))
    nbytes_out = np.asarray(passed).nbytes + np.asarray(per_case).nbytes
    return {
        "seconds": t4 - t0,
        "programs": len(progs),
        "passed": int(passed.sum()),
        "agree": int((passed == tests["want"]).sum()),
        "host_compile_s": t1 - t0,
        "h2d_s": t2 - t1,
        "device_s": t3 - t2,
        "d2h_s": t4 - t3,
        "h2d_bytes": nbytes_in,
        "d2h_bytes": nbytes_out,
    }
