"""The shipped model: float16 parameters in the package, loaded with no network.

``load()`` returns ``(cfg, params)`` for ``jaxcc/neural/weights/model.npz`` (written by
``python -m jaxcc.neural.train --export``); ``model.json`` beside it records the config,
the training command, seed, step and the commit it was trained at (docs/neural.md), and
the vocabulary's layout (``vocab``: how many names, literal slots, labels, numbers and lines
the output language has). ``load`` adapts weights of a smaller layout or of smaller
position tables to a larger model (``adapt``): how a model that reads longer programs
starts from the shipped one (docs/neural.md, section 6: the long programs of level 3).
"""

from __future__ import annotations

import functools
import json
import os

import jax.numpy as jnp
import numpy as np

from jaxcc.neural import vocab as V
from jaxcc.neural.model import Config, init_params

# The output language's layout: the sizes of the token groups after the opcodes, in
# token order (vocab.py). Weights files record theirs; a file without one (the stage-5
# weights and older) has UNRECORDED_LAYOUT: 64 names, 64 literal slots, 64 labels, 32
# numbers, 128 lines.
LAYOUT = {"n_vars": V.N_VARS, "n_lits": V.N_LITS, "n_labels": V.N_LABELS,
          "n_nums": V.N_NUMS, "n_lines": V.N_LINES}  # fmt: skip
UNRECORDED_LAYOUT = {"n_vars": 64, "n_lits": 64, "n_labels": 64, "n_nums": 32, "n_lines": 128}
# tables that may grow: the output-token table (by token group) and these (by rows)
_GROWS = ("out", "lit", "line", "name", "pos", "opos")

DIR = os.path.join(os.path.dirname(__file__), "weights")
DEFAULT = os.path.join(DIR, "model.npz")


def available(path: str = DEFAULT) -> bool:
    return os.path.exists(path)


def info(path: str = DEFAULT) -> dict:
    with open(os.path.splitext(path)[0] + ".json") as f:
        return json.load(f)


@functools.lru_cache(maxsize=4)
def load(path: str = DEFAULT, cfg: Config | None = None):
    """(Config, params as float32 nnx.State) of the weights at ``path``: a model of the
    file's own config, or of ``cfg`` (larger position tables, ``adapt``)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no neural compiler weights at {path} (see docs/neural.md)")
    meta = info(path)
    own = Config(**meta["config"])
    z = np.load(path)
    arrays = {k: z[k].astype(np.float32) for k in z.files}
    cfg = own if cfg is None else cfg
    lay = meta.get("vocab", UNRECORDED_LAYOUT)
    if cfg == own and lay == LAYOUT:
        import jax

        from jaxcc.neural.train import _unflat

        # the structure only (no random initialisation to compute and throw away)
        return cfg, _unflat(jax.eval_shape(lambda: init_params(cfg, 0)), arrays)
    return cfg, adapt(arrays, lay, own, cfg)


def adapt(arrays: dict, layout: dict, old: Config, cfg: Config, seed: int = 0):
    """Parameters of a model of ``cfg`` under the current vocabulary from ``arrays`` (a
    weights file's, in ``train._flat`` order) of a model of ``old`` whose vocabulary had
    ``layout``. Every array of the same shape is copied; the output-token table is copied
    group by group (a token keeps its embedding under its new id); the literal, line, name
    and position tables keep their first rows. Rows that are new (literal slots, lines,
    positions the old model never had) are freshly initialised at the trained table's
    scale: the model must be trained on before it uses them, and until then the decoding
    mask never offers those tokens to a program that fits the old bounds."""
    import jax

    if old._replace(max_src=cfg.max_src, max_out=cfg.max_out) != cfg or cfg.features < 2:
        raise ValueError(f"cannot adapt a model of {old} to {cfg}")
    if cfg.max_src < old.max_src or cfg.max_out < old.max_out:
        raise ValueError("position tables can only grow")
    if any(layout[k] > LAYOUT[k] for k in LAYOUT):
        raise ValueError(f"vocabulary layout {layout} is larger than this one, {LAYOUT}")
    leaves, treedef = jax.tree_util.tree_flatten_with_path(init_params(cfg, seed))
    if len(leaves) != len(arrays):
        raise ValueError(f"weights have {len(arrays)} arrays, the model {len(leaves)}")
    out = []
    for i, (path, fresh) in enumerate(leaves):
        a, x = arrays[f"{i:05d}"], np.asarray(fresh, np.float32)
        if a.shape == x.shape:
            out.append(jnp.asarray(a, fresh.dtype))
            continue
        table = path[0].key
        if table not in _GROWS or a.shape[1:] != x.shape[1:]:
            raise ValueError(f"cannot adapt {jax.tree_util.keystr(path)}: {a.shape} -> {x.shape}")
        y = x * (a.std() / max(float(x.std()), 1e-12))
        if table == "out":
            y[: V.VAR_BASE] = a[: V.VAR_BASE]
            ob = nb = V.VAR_BASE
            for k in LAYOUT:  # token groups in token order
                y[nb : nb + layout[k]] = a[ob : ob + layout[k]]
                ob, nb = ob + layout[k], nb + LAYOUT[k]
        else:
            y[: a.shape[0]] = a
        out.append(jnp.asarray(y, fresh.dtype))
    return jax.tree_util.tree_unflatten(treedef, out)


def as_float32(params):
    import jax

    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)
