"""The shipped model: float16 parameters in the package, loaded with no network.

``load()`` returns ``(cfg, params)`` for ``jaxcc/neural/weights/model.npz`` (written by
``python -m jaxcc.neural.train --export``); ``model.json`` beside it records the config,
the training command, seed, step and the commit it was trained at (docs/neural.md).
"""

from __future__ import annotations

import functools
import json
import os

import jax.numpy as jnp
import numpy as np

from jaxcc.neural.model import Config, init_params

DIR = os.path.join(os.path.dirname(__file__), "weights")
DEFAULT = os.path.join(DIR, "model.npz")


def available(path: str = DEFAULT) -> bool:
    return os.path.exists(path)


def info(path: str = DEFAULT) -> dict:
    with open(os.path.splitext(path)[0] + ".json") as f:
        return json.load(f)


@functools.lru_cache(maxsize=4)
def load(path: str = DEFAULT):
    """(Config, params as float32 nnx.State) of the weights at ``path``."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no neural compiler weights at {path} (see docs/neural.md)")
    cfg = Config(**info(path)["config"])
    from jaxcc.neural.train import _unflat

    z = np.load(path)
    params = _unflat(init_params(cfg, 0), {k: z[k].astype(np.float32) for k in z.files})
    return cfg, params


def as_float32(params):
    import jax

    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)
