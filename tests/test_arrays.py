"""jaxcc.arrays' gather and scatter helpers: the values of jnp's own indexing, under
vmap (one level and nested), jit and on one unbatched array, without the batched
gather's index array, and no write crossing from one lane into another."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcc import arrays
from jaxcc.arrays import add_at, gather, index, max_at, min_at, set_at, set_rows, take_rows


def _ref_set(a, idx, vals):
    return a.at[idx].set(vals, mode="drop", unique_indices=True)


def _distinct_kept(idx, n):
    norm = np.where(idx < 0, idx + n, idx)
    kept = norm[(norm >= 0) & (norm < n)]
    return len(set(kept.tolist())) == len(kept)


@pytest.mark.parametrize("seed", range(2))
def test_take_rows_and_index_equal_jnp(seed):
    rng = np.random.default_rng(seed)
    b, n, m = rng.integers(1, 9), rng.integers(1, 12), rng.integers(1, 6)
    a = jnp.asarray(rng.integers(-50, 50, (b, n, 2)), jnp.int32)
    idx = jnp.asarray(rng.integers(-n - 3, n + 4, (b, m)), jnp.int32)
    clip = jax.vmap(lambda x, i: jnp.take(x, i, axis=0, mode="clip"))(a, idx)
    plain = jax.vmap(lambda x, i: x[i])(a, idx)
    for f in (jax.vmap(take_rows), jax.jit(jax.vmap(take_rows))):
        np.testing.assert_array_equal(f(a, idx), clip)
    for f in (jax.vmap(index), jax.jit(jax.vmap(index))):
        np.testing.assert_array_equal(f(a, idx), plain)
    # one side shared, scalar indices, unbatched
    np.testing.assert_array_equal(
        jax.vmap(index, (0, None))(a, idx[0]), jax.vmap(lambda x: x[idx[0]])(a)
    )
    np.testing.assert_array_equal(
        jax.vmap(index, (None, 0))(a[0], idx), jax.vmap(lambda i: a[0][i])(idx)
    )
    np.testing.assert_array_equal(
        jax.vmap(index)(a, idx[:, 0]), jax.vmap(lambda x, i: x[i])(a, idx[:, 0])
    )
    np.testing.assert_array_equal(index(a[0], idx[0]), a[0][idx[0]])
    fill = jax.vmap(lambda x, i: gather(x[:, 0], i, -7))(a, idx)
    want = jnp.where(
        (idx >= 0) & (idx < n), jax.vmap(lambda x, i: x[i, 0])(a, jnp.clip(idx, 0, n - 1)), -7
    )
    np.testing.assert_array_equal(fill, want)


def test_nested_vmap_and_while_loop():
    rng = np.random.default_rng(7)
    a = jnp.asarray(rng.integers(-50, 50, (3, 5, 6)), jnp.int32)
    idx = jnp.asarray(rng.integers(-8, 9, (3, 5, 4)), jnp.int32)
    want = jax.vmap(jax.vmap(lambda x, i: x[i]))(a, idx)
    np.testing.assert_array_equal(jax.jit(jax.vmap(jax.vmap(index)))(a, idx), want)

    def rotate(x, k):  # k data-dependent steps of x <- x[(i + 1) % n]
        n = x.shape[0]
        body = lambda c: (c[0] + 1, index(c[1], (jnp.arange(n) + 1) % n))  # noqa: E731
        return jax.lax.while_loop(lambda c: c[0] < k, body, (0, x))[1]

    x = jnp.asarray(rng.integers(0, 99, (4, 7)), jnp.int32)
    k = jnp.array([0, 1, 3, 9])
    want = jnp.stack([jnp.roll(x[i], -int(k[i])) for i in range(4)])
    np.testing.assert_array_equal(jax.jit(jax.vmap(rotate))(x, k), want)


@pytest.mark.parametrize("seed", range(2))
def test_set_rows_equal_jnp_and_stays_in_its_lane(seed):
    rng = np.random.default_rng(100 + seed)
    checked = 0
    while checked < 6:
        b, n, m = rng.integers(1, 6), rng.integers(1, 7), rng.integers(1, 4)
        idx = np.stack([rng.choice(np.arange(-n - 3, n + 4), m, replace=False) for _ in range(b)])
        if not all(_distinct_kept(r, n) for r in idx):
            continue
        checked += 1
        a = jnp.asarray(rng.integers(-9, 9, (b, n, 2)), jnp.int32)
        idx = jnp.asarray(idx, jnp.int32)
        v = jnp.asarray(rng.integers(100, 200, (b, m, 2)), jnp.int32)
        want = jax.vmap(_ref_set)(a, idx, v)
        np.testing.assert_array_equal(jax.vmap(set_rows)(a, idx, v), want)
        np.testing.assert_array_equal(jax.jit(jax.vmap(set_rows))(a, idx, v), want)
        np.testing.assert_array_equal(
            jax.vmap(set_rows, (0, None, 0))(a, idx[0], v),
            jax.vmap(_ref_set, (0, None, 0))(a, idx[0], v),
        )
        np.testing.assert_array_equal(
            jax.vmap(set_rows, (None, 0, 0))(a[0], idx, v),
            jax.vmap(_ref_set, (None, 0, 0))(a[0], idx, v),
        )
        np.testing.assert_array_equal(set_rows(a[0], idx[0], v[0]), _ref_set(a[0], idx[0], v[0]))


def test_dropped_writes_never_reach_another_lane():
    # every lane writes only past its own rows (n, n + 1, huge): nothing changes anywhere
    a = jnp.arange(4 * 3 * 2, dtype=jnp.int32).reshape(4, 3, 2)
    idx = jnp.array([[3, 4], [5, 2**30], [3, 7], [4, 3]], jnp.int32)
    v = jnp.full((4, 2, 2), -1, jnp.int32)
    np.testing.assert_array_equal(jax.jit(jax.vmap(set_rows))(a, idx, v), a)


def test_no_batched_index_array():
    """The reason for the helpers: XLA materializes a batched gather's (lane, row) index
    pairs as an Int32[B, m, 2] concatenate; the flattened gather and scatter do not."""
    a = jnp.zeros((64, 32, 2), jnp.int32)
    i = jnp.zeros((64, 8), jnp.int32)
    v = jnp.zeros((64, 8, 2), jnp.int32)

    def concats(f, *args):
        return len(
            re.findall(
                r"s32\[64,8,2\]\{[0-9,]*\} concatenate\(",
                jax.jit(f).lower(*args).compile().as_text(),
            )
        )

    # (jnp's own x[j] under vmap has one such concatenate on jax 0.10-0.11)
    assert concats(jax.vmap(index), a, i) == 0
    assert (
        concats(jax.vmap(set_rows), a, jnp.arange(8, dtype=jnp.int32)[None].repeat(64, 0), v) == 0
    )


@pytest.mark.parametrize("op", ["add", "max", "min", "set"])
def test_scatter_ops_equal_jnp(op):
    """add_at / max_at / min_at / set_at: ``a.at[idx].<op>(vals, mode="drop")`` under
    vmap (any side shared), jit and unbatched, duplicates and out-of-range indices
    included (set: duplicates write one equal value, so the result is defined)."""
    f = {"add": add_at, "max": max_at, "min": min_at, "set": set_at}[op]

    def ref(x, i, u):
        return getattr(x.at[i], op)(u, mode="drop")

    rng = np.random.default_rng(["add", "max", "min", "set"].index(op))
    for _ in range(3):
        b, n, m = rng.integers(1, 6), rng.integers(1, 8), rng.integers(1, 10)
        a = jnp.asarray(rng.integers(-9, 9, (b, n, 3)), jnp.int32)
        idx = jnp.asarray(rng.integers(-n - 3, n + 4, (b, m)), jnp.int32)
        v = jnp.asarray(rng.integers(-50, 50, (b, m, 3)), jnp.int32)
        if op == "set":  # one value per row, whichever duplicate lands
            v = jnp.broadcast_to(jnp.asarray(rng.integers(-50, 50), jnp.int32), v.shape)
        for axes in [(0, 0, 0), (None, 0, 0), (0, None, 0), (0, 0, None), (None, 0, None)]:
            args = [x if ax == 0 else x[0] for x, ax in zip((a, idx, v), axes, strict=True)]
            if axes[2] is None:
                args[2] = v[0, 0]
            want = jax.vmap(ref, axes)(*args)
            np.testing.assert_array_equal(jax.jit(jax.vmap(f, axes))(*args), want)
        np.testing.assert_array_equal(f(a[0], idx[0], v[0]), ref(a[0], idx[0], v[0]))
    # a lane's dropped writes stay out of every other lane
    z = jnp.zeros((4, 3), jnp.int32)
    far = jnp.array([[3, 4], [5, 2**30], [3, 7], [4, 3]], jnp.int32)
    np.testing.assert_array_equal(jax.vmap(f)(z, far, jnp.full((4, 2), 5, jnp.int32)), z)


def _toy(w):
    """One program of a toy stage at width w: the sum of its values before its size (of
    those within w: a program larger than w comes out wrong), and w (which pass wrote
    the row). Like the stages, it ignores what lies past the size."""

    def one(a):
        vals, size = a
        return jnp.sum(jnp.where(jnp.arange(vals.shape[0]) < size, vals, 0)), jnp.int32(w)

    return one


@pytest.mark.parametrize(
    "sizes, plan",
    [
        ([3] * 30 + [5] * 2, 0),  # all fit 4 but two: the narrowest, one chunk of 4 at 8
        ([3] * 20 + [6] * 12, 1),  # many over 4, all within 6: width 6
        ([3] * 4 + [7] * 28, 2),  # most over 6: the full width alone
        ([0] * 32, 0),
    ],
)
def test_by_width_runs_the_cheapest_plan(sizes, plan):
    """``by_width`` gives every program the full width's result whichever plan runs, and
    runs the one ``width_plan`` names: the narrowest width that pays (each row says which
    pass wrote it), the large programs redone at the full width."""
    rng = np.random.default_rng(len(sizes) + plan)
    size = jnp.asarray(rng.permutation(np.array(sizes, np.int32)))
    B, full, widths, wide = size.shape[0], 8, (4, 6), 4
    vals = rng.integers(1, 100, (B, full)).astype(np.int32)
    vals[np.arange(full)[None, :] >= np.asarray(size)[:, None]] = 1000  # past each size
    xs = (jnp.asarray(vals), size)
    k, n_loop = arrays.width_plan(size, full, widths, min(B, wide))
    assert int(k) == plan
    out, at = arrays.by_width(
        _toy, xs, size, full, widths, lambda a, w: (a[0][:, :w], a[1]),
        (lambda w: 0, wide, 0),
    )  # fmt: skip
    want = np.where(np.arange(full)[None, :] < np.asarray(size)[:, None], vals, 0).sum(1)
    np.testing.assert_array_equal(np.asarray(out), want)
    w = (*widths, full)[plan]
    at = np.asarray(at)
    assert ((at == w) | (at == full)).all()
    assert (at[np.asarray(size) > w] == full).all()  # redone at the full width
    # the chunks of large programs: n_loop of `wide`, from the large end
    assert int(n_loop) == (-(-int((np.asarray(size) > w).sum()) // wide) if plan < 2 else 0)
    assert (at == full).sum() == (B if plan == 2 else min(B, int(n_loop) * wide))
