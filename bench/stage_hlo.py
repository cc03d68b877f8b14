"""Write each front-end stage's optimized HLO (``compiled.as_text()``) for a corpus batch,
to read what XLA fused (e.g. the reduction kernels a ``--trace`` breakdown shows heavy):

    PYTHONPATH=. python bench/stage_hlo.py --out DIR [--size small] [--batch 65536]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax

sys.path.insert(0, os.path.dirname(__file__))

from breakdown import carry_forward, stages  # noqa: E402
from middle_passes import encoded  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--size", default="small")
    p.add_argument("--batch", type=int, default=1024)
    ns = p.parse_args(argv)
    os.makedirs(ns.out, exist_ok=True)
    lim, src, length = encoded(ns.size, ns.batch, n=512)
    carry = {"source": src, "length": length}
    for st in stages(lim):
        if not all(k in carry for k in st.inputs):
            break  # the VM's stages need test cases: the front end only
        args = tuple(carry[k] for k in st.inputs)
        comp = jax.jit(st.fn).lower(*args).compile()
        path = os.path.join(ns.out, st.name.replace(":", "_") + ".hlo.txt")
        with open(path, "w") as f:
            f.write(comp.as_text())
        print(st.name, os.path.getsize(path), "bytes of HLO", flush=True)
        carry_forward(carry, comp(*args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
