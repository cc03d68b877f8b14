"""Supervised training of a tiny model on CPU: the loss falls, checkpoints reload
bit-identically, and a run resumed from a checkpoint ends where an unbroken run ends."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import OPTIMIZED
from jaxcc import lexer
from jaxcc.neural import corpus as data
from jaxcc.neural import train
from jaxcc.neural.model import Config, init_params

CFG = Config(d_model=48, n_layers=2, n_heads=4, d_ff=96, max_src=96, max_out=160, remat=False)
H = train.Hyper(steps=400, batch=8, lr=1e-2, warmup=20, seed=0)
SOURCES = [
    "def f(a, b):\n    return a + b\nprint(f(2, 3))\n",
    "x = 3\nwhile x > 0:\n    x -= 1\n    print(x)\n",
    "def g(n):\n    if n <= 1:\n        return 1\n    return n * g(n - 1)\nprint(g(5))\n",
    "for i in range(10):\n    if i % 3 == 0:\n        continue\n    print(i)\n",
    "a = 7\nb = a * 2 - 1\nprint(a < b, b)\n",
    "def h(x):\n    return x < 3 < x * x\nprint(h(4))\n",
    "t = 0\nfor k in range(1, 5):\n    t += k * k\nprint(t)\n",
    "def m(a, b, c):\n    return max(a, min(b, c))\nprint(m(1, 5, 3))\n",
]


@pytest.fixture(scope="module")
def batch():
    lim = train.TRAIN_LIMITS
    labels = [data.label(s, lim, CFG.nlimits) for s in SOURCES]
    assert all(lb.tokens is not None for lb in labels), [lb.reason for lb in labels]
    target = np.zeros((len(SOURCES), CFG.max_out), np.int32)
    for i, lb in enumerate(labels):
        target[i, : len(lb.tokens)] = lb.tokens
    tlen = np.array([len(lb.tokens) for lb in labels], np.int32)
    source, length = lexer.encode(SOURCES, lim)
    src = train.prepare(source, length, lim, CFG.nlimits)
    return src, jnp.asarray(target), jnp.asarray(tlen)


_STEPS = {}  # tx -> train_step compiled for this file's shapes


def _run(params, opt_state, batch, tx, start, stop):
    src, target, tlen = batch
    # compiled once, for run time: 220 steps cost more than the compile (conftest.OPTIMIZED)
    step = _STEPS.get(tx)
    if step is None:
        low = train.train_step.lower(params, opt_state, src, target, tlen, CFG, tx)
        step = _STEPS[tx] = low.compile(OPTIMIZED)
    losses = []
    for _ in range(start, stop):
        params, opt_state, m = step(params, opt_state, src, target, tlen)
        losses.append(float(m["loss"]))
    return params, opt_state, losses


def test_loss_falls_and_resume_is_exact(batch, tmp_path):
    tx = train.optimizer(H)
    params = init_params(CFG, H.seed)
    opt_state = tx.init(params)
    p1, o1, l1 = _run(params, opt_state, batch, tx, 0, 200)
    print("losses", l1[::20])
    assert l1[-1] < 0.25 * l1[0], (l1[0], l1[-1])
    train.save(str(tmp_path), p1, o1, {"step": 200})
    p2, o2, meta = train.load(str(tmp_path), CFG, tx)
    assert meta["step"] == 200
    for a, b in zip(jax.tree.leaves((p1, o1)), jax.tree.leaves((p2, o2)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # an unbroken run and a run resumed from the reloaded checkpoint agree exactly
    pa, _, la = _run(p1, o1, batch, tx, 200, 220)
    pb, _, lb = _run(p2, o2, batch, tx, 200, 220)
    assert la == lb
    for a, b in zip(jax.tree.leaves(pa), jax.tree.leaves(pb), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_checkpoint_files_stay_small(batch, tmp_path, monkeypatch):
    monkeypatch.setattr(train, "CHUNK_BYTES", 40_000)
    tx = train.optimizer(H)
    params = init_params(CFG, 1)
    train.save(str(tmp_path), params, tx.init(params), {"step": 0})
    files = sorted(p.name for p in tmp_path.glob("ckpt-*.npz"))
    assert len(files) > 2
    p2, _, _ = train.load(str(tmp_path), CFG, tx)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(p2), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_curriculum_and_going_on_from_weights():
    # from scratch: levels 0-1 first; from trained weights: every level from the start
    assert {train.level_of(i, 1000) for i in range(40)} == {0, 1}
    assert {train.level_of(i, 1000, curriculum=False) for i in range(4)} == {0, 1, 2, 3}
    # --cycle replaces the mix once every level is reached, not the curriculum before it
    cyc = [train.level_of(i, 1000, curriculum=False, long=True, cycle="3,5,5") for i in range(6)]
    assert cyc == [3, 5, 5, 3, 5, 5]
    assert {train.level_of(i, 1000, cycle="3,5,5") for i in range(40)} == {0, 1}


def test_attention_choice_off_gpu(batch):
    src, target, tlen = batch
    params = init_params(CFG, 0)
    if jax.default_backend() != "gpu":  # "auto" keeps the einsums where cuDNN cannot run
        assert train.pick_attention("auto", params, src, target, tlen, CFG).attention == "xla"
    assert train.pick_attention("xla", params, src, target, tlen, CFG) == CFG
    assert train.pick_attention("cudnn", params, src, target, tlen, CFG).attention == "cudnn"


def test_init_from_exported_weights(tmp_path):
    """--init starts from shipped-style weights exactly (float16 round trip), records
    where they came from, and refuses weights of another config."""
    import json

    cfg = train.CONFIGS["tiny"]
    params = init_params(cfg, 7)
    w = str(tmp_path / "w.npz")
    train.export(params, cfg, w, {"step": 5})
    out = str(tmp_path / "again.npz")
    args = ["--config", "tiny", "--steps", "0", "--workers", "1", "--init", w, "--export", out]
    assert train.main(["--out", str(tmp_path / "ck"), *args]) == 0
    a, b = np.load(w), np.load(out)
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])
    meta = json.load(open(tmp_path / "ck" / "meta.json"))
    assert meta["init"]["path"] == w and meta["init"]["step"] == 5
    assert meta["config"]["attention"] == "xla"
    other = str(tmp_path / "other.npz")
    train.export(init_params(train.CONFIGS["v1"], 0), train.CONFIGS["v1"], other, {"step": 0})
    with pytest.raises(SystemExit, match="cannot start a model of config tiny"):
        train.main(["--out", str(tmp_path / "ck2"), *args[:-4], "--init", other])


def test_mined_programs_fill_a_fraction_of_each_batch(tmp_path):
    """--hard: the first hard_rows rows are mined programs with the labeller's tokens, the
    others the plain batch's rows; a pure function of (seed, i)."""
    import json

    from jaxcc.neural import mine

    srcs = data.generate(5, 4, 3)
    path = str(tmp_path / "hard.json")
    with open(path, "w") as f:
        json.dump({"programs": [{"level": 3, "source": s, "correct": 0, "greedy": False}
                                for s in srcs]}, f)  # fmt: skip
    assert [p["source"] for p in mine.load_hard(path)] == srcs
    nl = train.CONFIGS["long"].nlimits
    plain = train._batch_at((0, 7, 8, 1), nl)
    mixed = train._batch_at((0, 7, 8, 1), nl, hard=path, hard_frac=0.25)
    again = train._batch_at((0, 7, 8, 1), nl, hard=path, hard_frac=0.25)
    rows = train.hard_rows(8, 0.25)
    assert rows == 2
    for k in plain:
        if k != "index":
            np.testing.assert_array_equal(mixed[k][rows:], plain[k][rows:])
            np.testing.assert_array_equal(mixed[k], again[k])
    assert list(mixed["level"][:rows]) == [-1] * rows
    for r in range(rows):
        src = bytes(mixed["source"][r, : mixed["length"][r]]).decode()
        assert src in srcs
        lb = data.label(src, train.TRAIN_LIMITS, nl)
        n = int(mixed["target_len"][r])
        assert n == len(lb.tokens)
        np.testing.assert_array_equal(mixed["target"][r, :n], lb.tokens)
        assert (
            not mixed["target"][r, n:].any() and not mixed["source"][r, len(src.encode()) :].any()
        )
