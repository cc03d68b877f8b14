"""Small array helpers that every device stage uses (one home for each).

JAX gathers clamp an out-of-range index silently and scatters drop it; ``gather`` makes the
out-of-range case explicit. Every integer on the device is int32 (docs/layouts.md).
"""

from __future__ import annotations

import jax.numpy as jnp

I32 = jnp.int32
BIG = jnp.iinfo(jnp.int32).max  # above every key, rank and position the stages compare


def as_i32(x):
    """``x`` as an int32 array."""
    return jnp.asarray(x, I32)


def gather(a, idx, fill=0):
    """``a[idx]`` where 0 <= idx < len(a), else ``fill`` (gathers clamp silently)."""
    ok = (idx >= 0) & (idx < a.shape[0])
    return jnp.where(ok, a[jnp.clip(idx, 0, a.shape[0] - 1)], jnp.asarray(fill, a.dtype))
