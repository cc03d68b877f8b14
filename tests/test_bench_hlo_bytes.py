"""bench/hlo_bytes.py: the bytes of an optimized HLO module's kernels, read from its text,
and their attribution to named scopes."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, "bench")
import hlo_bytes as hb  # noqa: E402


def test_shape_bytes():
    assert hb.shape_bytes("s32[64,128]{1,0}") == 64 * 128 * 4
    assert hb.shape_bytes("(s16[10]{0}, pred[3,4]{1,0})") == 20 + 12
    assert hb.shape_bytes("u8[]") == 1


def _f(x, i):
    table = jnp.asarray(np.arange(1 << 16, dtype=np.int32))  # a constant looked up
    with jax.named_scope("_sum_rows"):
        s = jnp.sum(x * 2.0 + 1.0, axis=1)
    with jax.named_scope("_lookup"):
        t = table[i]
    return s, t


def test_kernel_bytes_on_a_compiled_module():
    x, i = jnp.ones((64, 128), jnp.float32), jnp.arange(32, dtype=jnp.int32)
    hlo = jax.jit(_f).lower(x, i).compile().as_text()
    ks = hb.kernels(hlo)
    by = {}
    for k, _, b in ks:
        by[k] = b
    assert ks and all(b >= 0 for _, _, b in ks)
    # the row sums read all of x (32 KB) and write 64 floats
    assert max(by.values()) >= 64 * 128 * 4 + 64 * 4
    # the table (256 KB) counts at most the lookup's result: nothing near its size
    assert sum(by.values()) < 64 * 128 * 4 * 2 + (1 << 16)
    ops = hb.sp.op_names(hlo)
    names = {"_sum_rows", "_lookup"}
    res = hb.sp.attribute({k: float(b) for k, b in by.items()}, {k: 1 for k in by}, ops,
                          names, 1)  # fmt: skip
    outer = dict(res["outer"])
    assert outer.get("_sum_rows", 0) * 1e3 >= 64 * 128 * 4  # the step that reads x


def test_times_joined_by_kernel_name(tmp_path, capsys):
    import json

    ks = [
        ("input_add_reduce_fusion", "fusion", 2_000_000),
        ("loop_add_fusion", "fusion", 4_000_000),
    ]
    times = {
        "input_add_reduce_fusion": [2.0, 1],
        "loop_add_fusion": [1.0, 2],
        "memcpy128": [0.5, 3],
    }
    p = tmp_path / "loop.json"
    p.write_text(json.dumps({"loop": {"kernels": times}}))
    assert hb.kind("input_add_reduce_fusion") == "reduction fusion"
    assert hb.kind("input_scatter_fusion_3") == "scatter"
    assert hb.kind("loop_add_fusion") == "loop fusion"
    hb.print_times(ks, str(p), top=5)
    out = capsys.readouterr().out
    assert "3.500 ms of kernels per call, 3.000 ms of them in the HLO" in out
    # 2 MB in 2 ms: 1 GB/s; 2 launches of 4 MB in 1 ms: 8 GB/s
    assert "     1 GB/s  reduction fusion" in out and "     8 GB/s  loop fusion" in out
    assert out.index("input_add_reduce_fusion") < out.index("memcpy128")  # slowest first
