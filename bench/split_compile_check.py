"""On a GPU: the compiler's split compile (a small batch as several jits, the middle end
as three: ``compiler.split_compile``) gives exactly the one-jit compiler's programs and
errors, and `jaxcc run` of examples/*.py prints each example's expected output.

    PYTHONPATH=. python bench/split_compile_check.py OUT_DIR    # N=32 programs per level

On the CPU the split jits are checked by tests/test_pipeline.py and
tests/test_middle_end.py (with XLA's CPU); this runs the same comparison where the split
path is the default, on generated programs (jaxcc.neural.corpus levels 0-5), the
hand-written tests/neural_holdout/*.py and the examples, in batches of 16. Writes
OUT_DIR/split_compile_check.json; exit status 1 on any difference.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

import numpy as np


def main() -> int:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import jax

    from jaxcc import compiler
    from jaxcc.limits import CLI
    from jaxcc.neural import corpus

    sources = [open(p).read() for p in sorted(glob.glob("examples/*.py"))]
    sources += [open(p).read() for p in sorted(glob.glob("tests/neural_holdout/*.py"))]
    for level in range(6):
        n = int(os.environ.get("N", "32"))  # programs per level
        sources += corpus.generate(corpus.HELDOUT_SEEDS[0] + 7 + level, n, level, "heldout")
    report = {"device": jax.devices()[0].device_kind, "programs": len(sources),
              "split_used": compiler.split_compile(16), "batches": 0, "differ": []}  # fmt: skip
    t0 = time.time()
    for i in range(0, len(sources), 16):
        chunk = sources[i : i + 16]
        a = jax.device_get(compiler.compile_many(chunk, CLI, optimize=1))  # split on a GPU
        b = jax.device_get(compiler.compile_many(chunk, CLI, optimize=1, fast=False))
        report["batches"] += 1
        for j in range(len(chunk)):
            same = all(np.array_equal(np.asarray(x)[j], np.asarray(y)[j])
                       for x, y in zip((*a[0], *a[1]), (*b[0], *b[1]), strict=True))  # fmt: skip
            if not same:
                report["differ"].append(i + j)
    report["compile_seconds"] = time.time() - t0
    report["errors"] = int(sum(int(e) != 0 for e in compiler.compile_many(sources, CLI)[1].code))
    # the examples through the command line (one batch: the split path), against .out
    p = subprocess.run([sys.executable, "-m", "jaxcc", "run", "--json", *sorted(glob.glob(
        "examples/*.py"))], capture_output=True, text=True)  # fmt: skip
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    wrong = [r["file"] for r in rows
             if r["stdout"] != open(r["file"][:-3] + ".out").read()]  # fmt: skip
    report["examples"] = {"files": len(rows), "stdout_differs": wrong,
                          "errors": {r["file"]: r["error"]["type"] for r in rows if r["error"]}}  # fmt: skip
    with open(os.path.join(out, "split_compile_check.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report), flush=True)
    return 1 if report["differ"] or wrong or len(rows) != 11 else 0


if __name__ == "__main__":
    sys.exit(main())
