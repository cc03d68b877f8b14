"""Supervised training of the neural compiler (paper eq. 4), resumable.

    python -m jaxcc.neural.train --out runs/base --steps 20000 --seed 0 --time-limit 540

trains on (source, bytecode-token) pairs made on the fly by ``data.py`` (programs from the
seeded generator, labelled by the deterministic reference compiler, a curriculum from
small to large), with AdamW, warmup plus cosine decay and clipping by global norm, bf16
compute, one jitted train step. Every ``--ckpt-every`` steps and when ``--time-limit``
seconds have passed it writes ``OUT/ckpt.npz`` (parameters, optimizer state, step) and
``OUT/meta.json`` (config, hyper-parameters, the loss/accuracy history) and plots
``OUT/curves.png``; rerunning the same command resumes exactly where it stopped (batch i
is a pure function of (seed, i), so the data stream resumes too). ``--export FILE``
writes float16 weights for shipping (``weights.py``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxcc import lexer
from jaxcc.limits import Limits
from jaxcc.neural import vocab as V
from jaxcc.neural import weights
from jaxcc.neural.inputs import source_features
from jaxcc.neural.model import Config, _mixed, graphdef, init_params

# Limits of the training programs (the generator's programs fit; larger ones are skipped)
TRAIN_LIMITS = Limits(
    max_source_bytes=2048, max_tokens=768, max_indent=16, max_parse_depth=256,
    max_nodes=1024, max_code=512, max_funcs=16, max_locals=64, max_stack=512,
    max_depth=64, max_output=64, max_steps=100_000,
)  # fmt: skip


# Shapes a training batch is cut to (source tokens, output tokens): the smallest that
# holds the whole batch. Most programs are short; padding every batch to the longest
# shape would spend most of the step on padding. Needs Config.features >= 2 (positions of
# the source and of the bytecode counted apart).
TIERS = ((128, 256), (256, 448), (384, 640), (512, 896), (768, 1280))


def tier_of(n_src: int, n_out: int, cfg: Config) -> tuple[int, int]:
    if cfg.features < 2:
        return cfg.max_src, cfg.max_out
    for s, o in TIERS:
        if n_src <= s and n_out <= o and s <= cfg.max_src and o <= cfg.max_out:
            return s, o
    return cfg.max_src, cfg.max_out


def cut(src, target, s: int, o: int):
    """src (per-token fields) and target cut to s source and o output tokens."""
    per_token = ("kind", "name", "lit", "clit", "bucket", "line", "indent", "paren", "col")
    src = src._replace(**{f: getattr(src, f)[:, :s] for f in per_token})
    return src, target[:, :o]


def data_index(step: int, reuse: int) -> int:
    """The batch that training step ``step`` uses: each batch is used ``reuse`` times,
    the r-th time 8 * r steps after its first (data generation on the host is the
    bottleneck, so a batch is reused rather than the accelerator left waiting)."""
    i, r = divmod(step, reuse)
    return i - 8 * r if i - 8 * r >= 0 else i


class Hyper(NamedTuple):
    steps: int = 20000
    batch: int = 32
    lr: float = 1e-3
    warmup: int = 500
    weight_decay: float = 0.01
    clip: float = 1.0
    seed: int = 0
    reuse: int = 1  # training steps per generated batch (data_index)
    textbook: bool = False  # mix in level 4 (corpus.TEXTBOOK) batches: level_of
    long: bool = False  # mix in level 5 (corpus.LONG) batches too: level_of
    cycle: str = ""  # e.g. "1,3,4,5,2,3,4,5": the levels' mix once all are reached (level_of)
    hard: str = ""  # mined programs (mine.py's hard.json) ...
    hard_frac: float = 0.0  # ... put in this fraction of every batch's rows (hard_rows)


def optimizer(h: Hyper):
    warm = min(h.warmup, max(h.steps // 10, 1))
    sched = optax.warmup_cosine_decay_schedule(0.0, h.lr, warm, max(h.steps, warm + 1), h.lr * 0.05)
    return optax.chain(optax.clip_by_global_norm(h.clip),
                       optax.adamw(sched, b2=0.98, weight_decay=h.weight_decay))  # fmt: skip


@functools.partial(jax.jit, static_argnames=("limits", "nlimits"))
def prepare(source, length, limits: Limits, nlimits: V.NeuralLimits):
    """Source bytes to the model's input (the device lexer, as at inference)."""
    tokens, _ = lexer.lex(source, length, limits)
    return source_features(tokens, nlimits)


def loss_fn(params, cfg: Config, src, target, target_len):
    """Mean cross-entropy over target tokens (EOS included), token and sequence accuracy."""
    model = nnx.merge(graphdef(cfg), params)
    tgt_in = jnp.concatenate([jnp.full_like(target[:, :1], V.BOS), target[:, :-1]], axis=1)
    logits = model(src, tgt_in)
    pos = jnp.arange(target.shape[1])[None, :]
    w = (pos < target_len[:, None]).astype(jnp.float32)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, target)
    loss = jnp.sum(ce * w) / jnp.maximum(jnp.sum(w), 1.0)
    hit = (jnp.argmax(logits, -1) == target) | (w == 0)
    acc = jnp.sum(hit.astype(jnp.float32) * w) / jnp.maximum(jnp.sum(w), 1.0)
    exact = jnp.mean(jnp.all(hit, axis=1).astype(jnp.float32))
    return loss, (acc, exact)


@functools.partial(jax.jit, static_argnames=("cfg", "tx"), donate_argnums=(0, 1))
@_mixed
def train_step(params, opt_state, src, target, target_len, cfg: Config, tx):
    (loss, (acc, exact)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        params, cfg, src, target, target_len
    )
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, {"loss": loss, "acc": acc, "exact": exact,
                               "gnorm": optax.tree.norm(grads)}  # fmt: skip


@functools.partial(jax.jit, static_argnames=("cfg",))
@_mixed
def eval_step(params, src, target, target_len, cfg: Config):
    loss, (acc, exact) = loss_fn(params, cfg, src, target, target_len)
    return {"loss": loss, "acc": acc, "exact": exact}


# ---------------------------------------------------------------- checkpoints


def _flat(tree) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return {f"{i:05d}": np.asarray(x) for i, (_, x) in enumerate(leaves)}


def _unflat(like, arrays: dict) -> object:
    leaves, treedef = jax.tree_util.tree_flatten(like)
    if len(leaves) != len(arrays):
        raise ValueError(f"checkpoint has {len(arrays)} arrays, the model {len(leaves)}")
    new = [jnp.asarray(arrays[f"{i:05d}"], dtype=x.dtype) for i, x in enumerate(leaves)]
    return jax.tree_util.tree_unflatten(treedef, new)


CHUNK_BYTES = 12 << 20  # checkpoint files stay under the device tool's 16 MB per file


def save(out: str, params, opt_state, meta: dict) -> None:
    """Parameters and optimizer state as ckpt-N.npz files of at most CHUNK_BYTES each,
    then meta.json naming them (written last, so a checkpoint is complete or absent)."""
    os.makedirs(out, exist_ok=True)
    arrays = {"p" + k: v for k, v in _flat(params).items()}
    arrays.update({"o" + k: v for k, v in _flat(opt_state).items()})
    chunks: list[dict] = [{}]
    size = 0
    for k, v in arrays.items():
        if size + v.nbytes > CHUNK_BYTES and chunks[-1]:
            chunks.append({})
            size = 0
        chunks[-1][k] = v
        size += v.nbytes
    files = []
    for i, c in enumerate(chunks):
        name = f"ckpt-{i}.npz"
        np.savez(os.path.join(out, name + ".tmp.npz"), **c)
        os.replace(os.path.join(out, name + ".tmp.npz"), os.path.join(out, name))
        files.append(name)
    meta = {**meta, "files": files}
    with open(os.path.join(out, "meta.json.tmp"), "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(os.path.join(out, "meta.json.tmp"), os.path.join(out, "meta.json"))


def load(out: str, cfg: Config, tx):
    """(params, opt_state, meta) from OUT, or None when there is no checkpoint."""
    path = os.path.join(out, "meta.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        meta = json.load(f)
    arrays = {}
    for name in meta["files"]:
        z = np.load(os.path.join(out, name))
        arrays.update({k: z[k] for k in z.files})
    like = init_params(cfg, 0)
    params = _unflat(like, {k[1:]: v for k, v in arrays.items() if k[0] == "p"})
    opt_state = _unflat(tx.init(like), {k[1:]: v for k, v in arrays.items() if k[0] == "o"})
    return params, opt_state, meta


def export(params, cfg: Config, path: str, meta: dict) -> None:
    """Float16 parameters for shipping, with the config and provenance beside them."""
    np.savez_compressed(path, **{k: v.astype(np.float16) for k, v in _flat(params).items()})
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump({"config": cfg._asdict(), "vocab": weights.LAYOUT, **meta}, f, indent=1)


def plot(history: list[dict], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plots are optional (the bench extra)
        return
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    for split, style in (("train", "-"), ("heldout", "o-")):
        h = [r for r in history if r["split"] == split]
        if not h:
            continue
        s = [r["step"] for r in h]
        ax[0].plot(s, [r["loss"] for r in h], style, label=split, ms=3)
        ax[1].plot(s, [r["acc"] for r in h], style, label=f"{split} token acc", ms=3)
        ax[1].plot(s, [r["exact"] for r in h], style, label=f"{split} exact seq", ms=3)
    ax[0].set_yscale("log")
    ax[0].set_xlabel("step")
    ax[0].set_title("cross-entropy")
    ax[1].set_xlabel("step")
    ax[1].set_title("teacher-forced accuracy")
    ax[1].legend(fontsize=7)
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- data


def pick_attention(choice: str, params, src, target, target_len, cfg: Config) -> Config:
    """``cfg`` with the attention implementation to train with. "auto" takes the fused
    cuDNN kernel when the backend is a GPU, the kernel compiles, its loss on this batch
    equals xla's within 1% and its forward pass is faster; otherwise xla."""
    if choice != "auto":
        return cfg._replace(attention=choice)
    if jax.default_backend() != "gpu":
        return cfg

    def timed(c):
        out = eval_step(params, src, target, target_len, c)["loss"].block_until_ready()
        t = time.perf_counter()
        for _ in range(3):
            eval_step(params, src, target, target_len, c)["loss"].block_until_ready()
        return float(out), (time.perf_counter() - t) / 3

    ref, t_xla = timed(cfg)
    try:
        got, t_cudnn = timed(cfg._replace(attention="cudnn"))
    except Exception as e:  # noqa: BLE001 - any failure of the kernel means "use xla"
        print(f"attention: xla (cudnn failed: {type(e).__name__}: {str(e)[:200]})", flush=True)
        return cfg
    same = abs(got - ref) <= 0.01 * abs(ref) + 1e-4
    pick = "cudnn" if same and t_cudnn < t_xla else "xla"
    print(f"attention: {pick} (loss xla {ref:.5f} cudnn {got:.5f}; forward xla "
          f"{t_xla * 1e3:.1f} ms cudnn {t_cudnn * 1e3:.1f} ms)", flush=True)  # fmt: skip
    return cfg._replace(attention=pick)


# with --textbook, once every level is reached: batches cycle through these levels
# (textbook programs 3/8, level 3 2/8, levels 0-2 1/8 each)
TEXTBOOK_CYCLE = (0, 1, 2, 3, 4, 3, 4, 4)
# with --long as well: long level-3 programs (level 5) 2/8, textbook 2/8, the rest 1/8
LONG_CYCLE = (0, 1, 2, 3, 4, 5, 4, 5)


def level_of(step: int, total: int, curriculum: bool = True, textbook: bool = False,
             long: bool = False, cycle: str = "") -> int:  # fmt: skip
    """Curriculum: small programs first, every level mixed in once reached (without
    the curriculum, as when training goes on from trained weights: all levels from the
    start); with ``textbook``, level 4 joins at the end of the curriculum
    (``TEXTBOOK_CYCLE``), with ``long`` level 5 too (``LONG_CYCLE``); ``cycle`` (levels
    separated by commas) replaces either cycle, to weigh the levels otherwise."""
    p = step / max(total, 1) if curriculum else 1.0
    top = 1 if p < 0.05 else 2 if p < 0.15 else 3
    if cycle and top == 3:
        levels = [int(x) for x in cycle.split(",")]
        return levels[step % len(levels)]
    if long and top == 3:
        return LONG_CYCLE[step % len(LONG_CYCLE)]
    if textbook and top == 3:
        return TEXTBOOK_CYCLE[step % len(TEXTBOOK_CYCLE)]
    return step % (top + 1)


def batches(seed: int, start: int, total: int, batch: int, workers: int, nlimits,
            curriculum: bool = True, textbook: bool = False, long: bool = False,
            cycle: str = "", hard: str = "", hard_frac: float = 0.0):  # fmt: skip
    """Batch i for i in [start, total): a pure function of (seed, i) (data.batch_at), its
    first ``hard_rows`` rows replaced by mined programs when ``hard`` names a file."""
    args = [(seed, i, batch, level_of(i, total, curriculum, textbook, long, cycle))
            for i in range(start, total)]  # fmt: skip
    f = functools.partial(_batch_at, nlimits=nlimits, hard=hard, hard_frac=hard_frac)
    if workers <= 1:
        yield from map(f, args)
        return
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(workers) as pool:
        yield from pool.imap(f, args, chunksize=1)


def hard_rows(batch: int, frac: float) -> int:
    """Rows of a batch given to mined programs: round(frac * batch), at most the batch."""
    return min(batch, int(round(frac * batch)))


_HARD: dict[str, list[str]] = {}  # a worker's mined sources, loaded once per file


def _hard_sources(path: str) -> list[str]:
    if path not in _HARD:
        from jaxcc.neural import mine

        _HARD[path] = [p["source"] for p in mine.load_hard(path)]
    return _HARD[path]


def _batch_at(a, nlimits, hard: str = "", hard_frac: float = 0.0):
    from jaxcc.neural import corpus

    seed, i, batch, level = a
    b = {**corpus.batch_at(seed, i, batch, level, TRAIN_LIMITS, nlimits), "index": i}
    rows = hard_rows(batch, hard_frac) if hard else 0
    pool = _hard_sources(hard) if rows else []
    j = r = 0
    while r < rows and pool and j < 64 * rows:  # row r: mined program h(seed, i, j)
        src = pool[corpus._program_seed(seed, i * 64 * batch + j, -1) % len(pool)]
        j += 1
        if not corpus.put_row(b, r, src, TRAIN_LIMITS, nlimits):
            continue
        b["level"][r] = -1  # a mined program
        r += 1
    return b


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m jaxcc.neural.train", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--out", required=True, help="checkpoint folder (resumed when it holds one)")
    p.add_argument("--steps", type=int, default=Hyper._field_defaults["steps"])
    p.add_argument("--batch", type=int, default=Hyper._field_defaults["batch"])
    p.add_argument("--lr", type=float, default=Hyper._field_defaults["lr"])
    p.add_argument("--warmup", type=int, default=Hyper._field_defaults["warmup"])
    p.add_argument("--seed", type=int, default=Hyper._field_defaults["seed"])
    p.add_argument("--reuse", type=int, default=Hyper._field_defaults["reuse"],
                   help="training steps per generated batch")  # fmt: skip
    p.add_argument("--textbook", action="store_true",
                   help="mix in textbook-style programs (level 4, jaxcc.neural.textbook)")  # fmt: skip
    p.add_argument("--long", action="store_true",
                   help="mix in long level-3 programs too (level 5, corpus.LONG)")  # fmt: skip
    p.add_argument("--cycle", default="",
                   help="levels mixed once all are reached, e.g. 1,3,4,5,2,3,4,5 "
                   "(default: train.LONG_CYCLE with --long, TEXTBOOK_CYCLE with --textbook)")  # fmt: skip
    p.add_argument("--hard", default="",
                   help="mined programs (python -m jaxcc.neural.mine's hard.json)")  # fmt: skip
    p.add_argument("--hard-frac", type=float, default=0.25,
                   help="with --hard: the fraction of every batch's rows given to them")  # fmt: skip
    p.add_argument("--config", default="base", choices=sorted(CONFIGS))
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument(
        "--time-limit", type=float, default=0, help="stop (and save) after this many seconds"
    )
    p.add_argument("--ckpt-every", type=int, default=1000)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--export", help="also write shipped float16 weights to this .npz")
    p.add_argument("--init", help="start from these weights (.npz, as shipped) with a fresh "
                   "optimizer and no curriculum, instead of a random initialisation")  # fmt: skip
    p.add_argument("--attention", default="auto", choices=("auto", "xla", "cudnn"),
                   help="auto: the fused cuDNN kernel where it runs and agrees with xla")  # fmt: skip
    ns = p.parse_args(argv)
    if ns.cycle and not all(x.strip().isdigit() and 0 <= int(x) <= 5 for x in ns.cycle.split(",")):
        p.error(f"--cycle {ns.cycle!r}: levels 0-5 separated by commas")
    t0 = time.time()
    cfg = CONFIGS[ns.config]
    h = Hyper(ns.steps, ns.batch, ns.lr, ns.warmup, seed=ns.seed, reuse=ns.reuse,
              textbook=ns.textbook, long=ns.long, cycle=ns.cycle, hard=ns.hard,
              hard_frac=ns.hard_frac if ns.hard else 0.0)  # fmt: skip
    from jaxcc.cli import enable_compilation_cache

    enable_compilation_cache()
    tx = optimizer(h)
    got = load(ns.out, cfg, tx)
    if got is None:
        params = init_params(cfg, h.seed)
        if ns.init:
            try:  # the same model, or one whose position tables or vocabulary grew
                _, params = weights.load(ns.init, cfg)
            except ValueError as e:
                raise SystemExit(
                    f"{ns.init} cannot start a model of config {ns.config}: {e}"
                ) from e
        opt_state = tx.init(params)
        meta = {"config": cfg._asdict(), "hyper": h._asdict(), "step": 0, "history": [],
                "command": "python -m jaxcc.neural.train " + " ".join(sys.argv[1:] if argv is None else argv), "calls": [],
                "init": ns.init and {"path": ns.init, **{k: v for k, v in weights.info(ns.init).items() if k != "history"}}}  # fmt: skip
    else:
        params, opt_state, meta = got
        meta["hyper"].setdefault("reuse", 1)
        meta["hyper"].setdefault("textbook", False)
        meta["hyper"].setdefault("long", False)
        meta["hyper"].setdefault("cycle", "")
        meta["hyper"].setdefault("hard", "")
        meta["hyper"].setdefault("hard_frac", 0.0)
        if Config(**meta["config"]) != cfg or {**meta["hyper"], "steps": h.steps} != h._asdict():
            raise SystemExit(f"{ns.out} was trained with other settings: {meta['hyper']}")
        if meta["hyper"]["steps"] != h.steps:  # a longer or shorter schedule from here on
            meta.setdefault("schedule_changes", []).append({"at": meta["step"], "steps": h.steps})
            meta["hyper"] = h._asdict()
    step = meta["step"]
    meta["calls"].append({"start_step": step, "device": str(jax.devices()[0].device_kind)})
    from jaxcc.neural import corpus

    held = corpus.batch_at(corpus.HELDOUT_SEEDS[0], 0, 64, 3, TRAIN_LIMITS, cfg.nlimits)
    held_src = prepare(held["source"], held["length"], TRAIN_LIMITS, cfg.nlimits)
    evals = [("heldout", held_src, held)]
    if h.long:  # long programs (level 5) apart too: what the longer tables learn
        held_long = corpus.batch_at(corpus.HELDOUT_SEEDS[0], 0, 32, corpus.LONG, TRAIN_LIMITS,
                                    cfg.nlimits)  # fmt: skip
        evals.append(("heldout_long",
                      prepare(held_long["source"], held_long["length"], TRAIN_LIMITS, cfg.nlimits),
                      held_long))  # fmt: skip
    saved_cfg, cfg = (
        cfg,
        pick_attention(ns.attention, params, held_src, held["target"], held["target_len"], cfg),
    )
    meta["calls"][-1]["attention"] = cfg.attention
    try:
        from tqdm import tqdm
    except ImportError:  # progress bars are optional
        tqdm = None
    n_batches = -(-h.steps // h.reuse)
    first = data_index(step, h.reuse) if step < h.steps else n_batches
    first = min(
        [first] + [data_index(s, h.reuse) for s in range(step, min(step + 8 * h.reuse, h.steps))]
    )
    curriculum = not meta.get("init")
    it = batches(h.seed, first, n_batches, h.batch, ns.workers, cfg.nlimits, curriculum,
                 h.textbook, h.long, h.cycle, h.hard, h.hard_frac)  # fmt: skip
    recent: dict[int, dict] = {}
    bar = tqdm(total=h.steps, initial=step, dynamic_ncols=True) if tqdm else None
    last_save = step
    while step < h.steps:
        want = data_index(step, h.reuse)
        while want not in recent:
            b = next(it)
            recent[b["index"]] = b
        for old in [i for i in recent if i < want - 8 * h.reuse]:
            del recent[old]
        b = recent[want]
        src = prepare(b["source"], b["length"], TRAIN_LIMITS, cfg.nlimits)
        ts, to = tier_of(int(b["n_src"].max()), int(b["target_len"].max()), cfg)
        src, target = cut(src, b["target"], ts, to)
        params, opt_state, m = train_step(params, opt_state, src, target, b["target_len"], cfg, tx)
        step += 1
        if step % 50 == 0 or step == h.steps:
            m = {k: float(v) for k, v in m.items()}
            meta["history"].append({"split": "train", "step": step, **m})
            if bar:
                bar.set_postfix(
                    loss=f"{m['loss']:.4f}", acc=f"{m['acc']:.4f}", exact=f"{m['exact']:.2f}"
                )
        if step % ns.eval_every == 0 or step == h.steps:
            for split, esrc, eb in evals:
                e = {k: float(v) for k, v in eval_step(
                    params, esrc, eb["target"], eb["target_len"], cfg).items()}  # fmt: skip
                meta["history"].append({"split": split, "step": step, **e})
                print(f"step {step}: {split} {e}", flush=True)
        if bar:
            bar.update(1)
        out_of_time = ns.time_limit and time.time() - t0 > ns.time_limit
        if step - last_save >= ns.ckpt_every or step == h.steps or out_of_time:
            meta["step"] = step
            save(ns.out, params, opt_state, meta)
            plot(meta["history"], os.path.join(ns.out, "curves.png"))
            last_save = step
        if out_of_time:
            break
    if bar:
        bar.close()
    meta["step"] = step
    save(ns.out, params, opt_state, meta)
    plot(meta["history"], os.path.join(ns.out, "curves.png"))
    if ns.export:
        export(params, saved_cfg, ns.export, {"step": step, "hyper": meta["hyper"],
                                        "command": meta["command"], "history": meta["history"][-4:]})  # fmt: skip
    print(f"stopped at step {step} of {h.steps} after {time.time() - t0:.0f} s")
    return 0


CONFIGS = {
    "base": Config(d_model=256, n_layers=6, n_heads=8, d_ff=1024, features=2),
    # base reading up to 768 source tokens and writing up to 1280 (stage 6 on): every
    # generated program the neural path's Limits take (hybrid.NEURAL_LIMITS)
    "long": Config(
        d_model=256, n_layers=6, n_heads=8, d_ff=1024, max_src=768, max_out=1280, features=2
    ),
    "v1": Config(d_model=256, n_layers=4, n_heads=8, d_ff=768),
    "tiny": Config(d_model=64, n_layers=2, n_heads=4, d_ff=128, remat=False, features=2),
}

if __name__ == "__main__":
    raise SystemExit(main())
