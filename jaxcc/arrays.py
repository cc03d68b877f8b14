"""Small array helpers that every device stage uses (one home for each).

JAX gathers clamp an out-of-range index silently and scatters drop it; ``gather`` makes the
out-of-range case explicit. Every integer on the device is int32 (docs/layouts.md).

The stages are written for one program and vmapped; a gather or scatter on a batched
array then becomes one with batching dimensions, which XLA lowers through an
Int32[B, m, 2] array of (lane, row) index pairs. ``take_rows``/``index`` and
``set_rows``/``set_at``/``add_at``/``max_at``/``min_at`` give jnp's values with a vmap
rule that indexes the array flattened over the batch instead (docs/benchmarks.md,
"sixth run": on an H100 the lexer 1.4x faster, 77 -> 61 KB a small program in the loop).
Not always faster: XLA fuses some batched gathers and scatters better, so each site is
measured (the "seventh run" lists the ones that stay jnp's and why).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

I32 = jnp.int32
BIG = jnp.iinfo(jnp.int32).max  # above every key, rank and position the stages compare


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1): a static width to pad to."""
    return 1 << max(n - 1, 0).bit_length()


def map_batch(f, xs, chunk: int):
    """``jax.vmap(f)(xs)`` over the leading (batch) axis of the pytree ``xs``, run ``chunk``
    programs at a time, one chunk after another (``lax.map``), when B > chunk > 0: the same
    result, with a chunk's temporaries instead of the batch's (docs/benchmarks.md, tenth run)."""
    if chunk and jax.tree.leaves(xs)[0].shape[0] > chunk:
        return jax.lax.map(f, xs, batch_size=chunk)
    return jax.vmap(f)(xs)


def width_plan(size, full: int, widths: tuple[int, ...], m: int):
    """``by_width``'s plan for programs of sizes ``size`` (Int32[B]): (k, n_loop), a pass
    over all of them at ``widths[k]`` then ``n_loop`` chunks of ``m`` at ``full``, or k =
    len(widths) and no chunks for the full width alone: the plan of fewest padded
    elements (w * B + n_loop * m * full against full * B; ties: the narrower)."""
    B = size.shape[0]
    n_over = jnp.stack([jnp.sum(size > w) for w in widths])  # too large for each width
    n_iter = (n_over + m - 1) // m
    # in float32: w * B overflows int32 for large batches; every plan gives the same
    # result, so rounding could only pick a slower one
    cost = jnp.stack([w * B + n_iter[i].astype(jnp.float32) * (m * full)
                      for i, w in enumerate(widths)] + [jnp.float32(full * B)])  # fmt: skip
    k = jnp.argmin(cost).astype(I32)
    return k, jnp.where(k < len(widths), n_iter[jnp.minimum(k, len(widths) - 1)], 0)


def by_width(one_at, xs, size, full: int, widths: tuple[int, ...], cut, chunks):
    """``map_batch(one_at(full), xs, chunk)``, with the programs that fit a narrower width
    run at it: for stages whose result for a program does not depend on how far its arrays
    are padded past its size (the lexer's bytes, the middle end's nodes; each stage's
    tests check it). ``full``: the batch's width; ``widths``: the narrower ones to choose
    from (ascending); ``one_at(w)``: runs one program at width w; ``cut(xs, w)``: the batch
    cut to width w. ``chunks``: (narrow, wide, chunk): ``narrow(w)`` programs per chunk of
    a pass at width w, ``wide`` per chunk of the large programs, ``chunk`` per chunk of a
    pass at the full width.

    The batch is sorted by size. Each plan's cost is counted in padded elements: width w
    costs w * B for the whole batch plus, from the large end, whole chunks of ``wide``
    programs at the full width until every program larger than w is covered; the full
    width alone costs full * B. The cheapest plan runs (a ``lax.switch``: one branch;
    ties go to the narrower width): all of the batch through ``one_at(w)`` (those too
    large come out wrong), then the large programs ``wide`` at a time through
    ``one_at(full)`` (a while loop; a chunk that reaches back over small programs redoes
    them, the same result). The results go back in the batch's order, so each program's
    result is what ``one_at(full)`` gives it."""
    narrow, wide, chunk = chunks
    B = size.shape[0]
    order = jnp.argsort(size, stable=True)
    xs = jax.tree.map(lambda x: x[order], xs)
    m = min(B, max(1, wide))
    k, n_loop = width_plan(size, full, widths, m)
    one_full = one_at(full)
    passes = [lambda w=w: map_batch(one_at(w), cut(xs, w), narrow(w)) for w in widths]
    out = jax.lax.switch(k, [*passes, lambda: map_batch(one_full, xs, chunk)])

    # the chunks of large programs after the switch, not in its branches: the structure
    # the lexer's two widths were timed with on the GPU (docs/lexer.md, "Two widths")
    def body(carry):
        i, out = carry
        s0 = jnp.maximum(B - (i + 1) * m, 0)  # within the batch; rows below: redone
        res = jax.vmap(one_full)(jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, s0, m), xs))
        put = lambda o, r: jax.lax.dynamic_update_slice_in_dim(o, r, s0, 0)  # noqa: E731
        return i + 1, jax.tree.map(put, out, res)

    out = jax.lax.while_loop(lambda c: c[0] < n_loop, body, (jnp.int32(0), out))[1]
    inv = jnp.zeros(B, I32).at[order].set(jnp.arange(B, dtype=I32))
    return jax.tree.map(lambda x: x[inv], out)


def as_i32(x):
    """``x`` as an int32 array."""
    return jnp.asarray(x, I32)


def gather(a, idx, fill=0):
    """``a[idx]`` where 0 <= idx < len(a), else ``fill`` (gathers clamp silently)."""
    ok = (idx >= 0) & (idx < a.shape[0])
    return jnp.where(ok, take_rows(a, idx), jnp.asarray(fill, a.dtype))


def index(a, idx):
    """``a[idx]`` for an integer array ``idx`` along the leading axis, exactly as jnp
    indexes (an index below 0 counts from the end, then it is clamped), through
    ``take_rows``: under ``vmap`` no Int32[B, ..., 2] index array."""
    idx = jnp.asarray(idx)
    return take_rows(a, jnp.where(idx < 0, idx + a.shape[0], idx))


# Indices into the flattened batch must fit int32; above this the rule keeps XLA's own.
_FLAT_MAX = 2**31 - 1


@jax.custom_batching.custom_vmap
def take_rows(a, idx):
    """``a[clip(idx, 0, len(a) - 1)]`` along the leading axis (``jnp.take(mode="clip")``).

    Under ``vmap`` with a batched ``a`` this gathers from ``a`` flattened over the batch,
    at ``idx + lane * len(a)``, instead of the batched gather that ``jnp.take`` becomes:
    XLA rewrites a gather with batching dimensions into one whose indices are the
    (lane, row) pairs, concatenated into an Int32[B, ..., 2] array that is materialized
    (a kernel and 8 bytes per index on the GPU). The values are the same.
    """
    return jnp.take(a, idx, axis=0, mode="clip")


@take_rows.def_vmap
def _take_rows_vmap(axis_size, in_batched, a, idx):
    a_batched, idx_batched = in_batched
    if not a_batched:  # one table for every lane: a plain gather already
        return jnp.take(a, idx, axis=0, mode="clip"), idx_batched
    n = a.shape[1]
    if not idx_batched:
        idx = jnp.broadcast_to(idx, (axis_size,) + idx.shape)
    if axis_size * n > _FLAT_MAX or n == 0:
        return jax.vmap(lambda x, i: jnp.take(x, i, axis=0, mode="clip"))(a, idx), True
    idx = jnp.clip(idx.astype(I32), 0, n - 1)
    lane = jnp.arange(axis_size, dtype=I32).reshape((axis_size,) + (1,) * (idx.ndim - 1))
    # jnp.take, not take_rows: one trace fewer per call (an outer vmap, which no stage
    # has, would batch this gather as jnp does)
    return jnp.take(
        a.reshape((axis_size * n,) + a.shape[2:]), idx + lane * n, axis=0, mode="clip"
    ), True


def _scatter_op(op: str, unique: bool = False):
    """``a.at[idx].<op>(vals, mode="drop"[, unique_indices=True])`` along the leading axis
    as a function whose vmap rule scatters into ``a`` flattened over the batch, at
    ``idx + lane * len(a)`` (``take_rows``' reason: no Int32[B, ..., 2] index array). An
    index below 0 counts from the end; one still outside [0, len(a)) is dropped: it goes
    past every lane's rows, each to a place of its own (so the flat indices stay
    distinct where ``unique`` promises it), and no lane writes into another's rows."""

    def plain(a, idx, vals):
        return getattr(a.at[idx], op)(vals, mode="drop", unique_indices=unique)

    f = jax.custom_batching.custom_vmap(plain)

    def rule(axis_size, in_batched, a, idx, vals):
        a_b, i_b, v_b = in_batched
        if not (a_b or i_b or v_b):
            return plain(a, idx, vals), False
        row = a.shape[1:] if a_b else a.shape
        lane_idx = idx.shape[1:] if i_b else idx.shape
        # each lane's values as the scatter broadcasts them: Int32[lane_idx + row[1:]]
        vshape = lane_idx + row[1:]
        if v_b:
            vals = jax.vmap(lambda u: jnp.broadcast_to(u, vshape))(vals)
        else:
            vals = jnp.broadcast_to(vals, (axis_size,) + vshape)
        a = a if a_b else jnp.broadcast_to(a, (axis_size,) + a.shape)
        idx = idx if i_b else jnp.broadcast_to(idx, (axis_size,) + idx.shape)
        n = a.shape[1]
        if axis_size * n + idx.size > _FLAT_MAX or n == 0:
            return jax.vmap(plain)(a, idx, vals), True
        idx = idx.astype(I32)
        idx = jnp.where(idx < 0, idx + n, idx)
        lane = jnp.arange(axis_size, dtype=I32).reshape((axis_size,) + (1,) * (idx.ndim - 1))
        spare = axis_size * n + jnp.arange(idx.size, dtype=I32).reshape(idx.shape)
        flat_idx = jnp.where((idx >= 0) & (idx < n), idx + lane * n, spare)
        out = plain(a.reshape((axis_size * n,) + a.shape[2:]), flat_idx, vals)
        return out.reshape(a.shape), True

    f.def_vmap(rule)
    return f


_set_unique = _scatter_op("set", unique=True)


def set_rows(a, idx, vals):
    """``a.at[idx].set(vals, mode="drop", unique_indices=True)`` along the leading axis:
    rows ``idx`` replaced by ``vals`` (``_scatter_op``'s indices; the kept ones must be
    distinct)."""
    return _set_unique(a, idx, vals)


add_at = _scatter_op("add")
max_at = _scatter_op("max")
min_at = _scatter_op("min")
set_at = _scatter_op("set")  # duplicate indices: one of their values, as jnp's own
