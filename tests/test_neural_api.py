"""``api.choose_split`` (the CLI's: lexing, sampling and verification as three jits
compiled side by side) computes what ``api.choose`` (one jit) does, and a second call at
the same shapes compiles nothing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxcc import lexer
from jaxcc.limits import Limits
from jaxcc.neural import api
from jaxcc.neural import model as M

LIM = Limits(max_source_bytes=512, max_tokens=256, max_code=160, max_funcs=6, max_locals=24,
             max_stack=256, max_depth=12, max_output=16, max_steps=400)  # fmt: skip
VL = LIM._replace(max_steps=200)
CFG = M.Config(d_model=32, n_layers=1, n_heads=2, d_ff=64, max_src=96, max_out=64,
               remat=False, dtype="float32", features=2)  # fmt: skip
SOURCES = [
    "def f(a, b):\n    return a + b\nprint(f(2, 3))\n",
    "x = 3\nwhile x > 0:\n    x -= 1\n    print(x, x < 2)\n",
    "(",  # does not lex: a padding row, never decoded
]


def test_choose_split_equals_choose():
    params = M.init_params(CFG, 3)
    src, length = lexer.encode([s.encode() for s in SOURCES], LIM)
    n_params = np.zeros((len(SOURCES), LIM.max_funcs), np.int32)
    n_params[0, 1] = 2

    def call(f, seed, src=src):
        return f(src, length, params, jax.random.key(seed), n_params, None, jnp.float32(1.0),
                 jnp.float32(0.95), CFG, 4, LIM, VL, 8)  # fmt: skip

    one = call(api.choose, 5)
    two = call(api.choose_split, 5)
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.asarray(two.ok)[:2].any()  # candidates were decoded
    assert not np.asarray(two.ok)[2].any() and not bool(two.found[2])
    triple = next(iter(api._COMPILED.values()))
    again = call(api.choose_split, 6)  # same shapes: the kept executables, no compile
    assert len(api._COMPILED) == 1 and next(iter(api._COMPILED.values())) is triple
    assert np.asarray(again.reason).shape == np.asarray(two.reason).shape
    # the source already on the default device: the same placement as a host array's
    call(api.choose_split, 6, jax.device_put(src))
    assert next(iter(api._COMPILED.values())) is triple
