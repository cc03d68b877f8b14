"""bench/vm_latency_probe.py: its floor kernels compute the chains they claim to time
(interpret mode; on a GPU they are timed, docs/vm.md "One lane's step")."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from bench import vm_latency_probe as probe


def _expected(kind, x, table, k):
    """The chain in plain numpy, lane by lane."""
    x = x.copy()
    mem = {}
    for i in range(k):
        if kind in ("alu", "barrier"):
            x = x * 3 + 1
        elif kind == "reduce":
            x = x + x.min() + 1
        elif kind == "load":
            x = table[x & (probe.WORDS - 1), np.arange(len(x))]
        else:
            mem[i % probe.WORDS] = x + 1
            back = 0 if kind == "store_load" else 8
            x = mem.get((i - back) % probe.WORDS, np.zeros_like(x))
    return x


@pytest.mark.parametrize("kind", probe.FLOORS)
def test_floor_kernels_compute_their_chain(kind):
    block, k = 4, 12
    rng = np.random.default_rng(0)
    table = rng.integers(0, probe.WORDS, (probe.WORDS, block)).astype(np.int32)
    x = np.arange(block, dtype=np.int32) * 5
    got = probe.floor_call(jnp.asarray(table), jnp.zeros((probe.WORDS, block), jnp.int32),
                           jnp.asarray(x), kind=kind, block=block, k=k, interpret=True)  # fmt: skip
    # the kernel starts from x + lane (its chain starts from data, not a constant)
    want = _expected(kind, x + np.arange(block, dtype=np.int32), table, k)
    np.testing.assert_array_equal(np.asarray(got), want.astype(np.int32))


def test_variant_specs():
    """``--few-blocks`` / ``--wide-blocks`` / ``--loop-blocks``: a block, optionally with a
    prefetch after a colon."""
    assert probe.few_variant("32") == {"block": 32}
    assert probe.few_variant("128:1") == {"block": 128, "prefetch": 1}
    assert probe.few_variant("1:0") == {"block": 1, "prefetch": 0}
    with pytest.raises(ValueError):
        probe.few_variant("x:1")
