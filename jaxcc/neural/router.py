"""The hybrid's complexity router (paper eq. 13, Algorithm 3 line 3).

``features(tokens, n_code)`` computes, on the device and per program, the complexity
features of eq. 13 from the lexer's token arrays and the deterministic code's length:
source tokens, lines, nesting depth, functions, loops, branches, calls, self-calls
(recursion), literals, operators, boolean operators, comparisons and instructions (all
as log(1 + count)). ``score(params, feats)`` is a logistic classifier's estimate of the
probability that the neural path compiles the program within k samples; the programs
whose score is at least the threshold are routed to the neural path ("simple").

``fit(feats, labels)`` trains the classifier with optax (Adam on the logistic loss,
standardised features, a little L2), on held-out generated programs labelled by whether
the neural path succeeded (``bench``/``evaluate`` make the labels on the GPU);
``choose_threshold`` picks the threshold for a stated success rate among the routed
programs. The trained router is ``weights/router.json``; without it every program that
fits the neural path is routed to it.
"""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcc.tokens import Tok

FEATURES = ("tokens", "lines", "depth", "functions", "loops", "branches", "calls",
            "self_calls", "literals", "operators", "bool_ops", "comparisons", "instructions")  # fmt: skip
PATH = os.path.join(os.path.dirname(__file__), "weights", "router.json")

_OPS = [t for t in Tok if Tok.PLUS <= t <= Tok.CIRCUMFLEXEQUAL]
_CMP = (Tok.LESS, Tok.GREATER, Tok.LESSEQUAL, Tok.GREATEREQUAL, Tok.EQEQUAL, Tok.NOTEQUAL)


def _one(kind, value, n_tokens, n_code):
    t = kind.shape[0]
    live = (jnp.arange(t) < n_tokens) & (kind != Tok.COMMENT) & (kind != Tok.NL)
    is_ = lambda *ks: live & jnp.isin(kind, jnp.asarray(ks, jnp.int32))  # noqa: E731
    depth = jnp.cumsum(is_(Tok.INDENT).astype(jnp.int32) - is_(Tok.DEDENT).astype(jnp.int32))
    nxt = jnp.concatenate([kind[1:], jnp.zeros(1, kind.dtype)])
    call = is_(Tok.NAME) & (nxt == Tok.LPAR)
    # the function a token is in: the name after the last `def` at a shallower depth
    is_def_name = jnp.concatenate([jnp.zeros(1, bool), is_(Tok.KW_DEF)[:-1]]) & is_(Tok.NAME)
    idx = jnp.arange(t)
    last_def = jax.lax.cummax(jnp.where(is_def_name, idx, -1), axis=0)
    def_name = jnp.where(last_def >= 0, value[jnp.maximum(last_def, 0)], -1)
    def_depth = jnp.where(last_def >= 0, depth[jnp.maximum(last_def, 0)], 0)
    self_call = call & (value == def_name) & (depth > def_depth) & ~is_def_name
    line_ends = is_(Tok.NEWLINE)
    counts = jnp.stack([
        jnp.sum(live), jnp.sum(line_ends), jnp.max(depth), jnp.sum(is_(Tok.KW_DEF)),
        jnp.sum(is_(Tok.KW_FOR, Tok.KW_WHILE)), jnp.sum(is_(Tok.KW_IF, Tok.KW_ELIF, Tok.KW_ELSE)),
        jnp.sum(call), jnp.sum(self_call), jnp.sum(is_(Tok.NUMBER)), jnp.sum(is_(*_OPS)),
        jnp.sum(is_(Tok.KW_AND, Tok.KW_OR, Tok.KW_NOT)), jnp.sum(is_(*_CMP)), n_code,
    ]).astype(jnp.float32)  # fmt: skip
    return jnp.log1p(counts)


@jax.jit
def features(tokens, n_code):
    """Float32[B, len(FEATURES)]: log(1 + count) of each feature, per program."""
    return jax.vmap(_one)(tokens.kind, tokens.value, tokens.n_tokens, jnp.asarray(n_code))


def score(params: dict, feats):
    """Probability (Float32[B]) that the neural path compiles each program."""
    z = (feats - params["mean"][None, :]) / params["std"][None, :]
    return jax.nn.sigmoid(z @ params["w"] + params["b"])


def fit(feats, labels, steps: int = 2000, lr: float = 0.05, l2: float = 1e-3, seed: int = 0):
    """Train the logistic router on (features, success) pairs; returns its params."""
    feats = jnp.asarray(feats, jnp.float32)
    y = jnp.asarray(labels, jnp.float32)
    mean = jnp.mean(feats, axis=0)
    std = jnp.std(feats, axis=0) + 1e-3
    p = {
        "w": jax.random.normal(jax.random.key(seed), (feats.shape[1],)) * 0.01,
        "b": jnp.float32(0),
    }
    tx = optax.adam(lr)
    st = tx.init(p)

    def loss(p):
        z = ((feats - mean[None, :]) / std[None, :]) @ p["w"] + p["b"]
        return jnp.mean(optax.sigmoid_binary_cross_entropy(z, y)) + l2 * jnp.sum(p["w"] ** 2)

    @jax.jit
    def step(p, st):
        g = jax.grad(loss)(p)
        u, st = tx.update(g, st)
        return optax.apply_updates(p, u), st

    with jax.numpy_dtype_promotion("standard"):  # optax mixes its int32 count with floats
        for _ in range(steps):
            p, st = step(p, st)
    return {"w": p["w"], "b": p["b"], "mean": mean, "std": std}


def roc(scores, labels):
    """(false-positive rates, true-positive rates, thresholds), thresholds descending."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels, bool)
    order = np.argsort(-s)
    s, y = s[order], y[order]
    tp = np.cumsum(y)
    fp = np.cumsum(~y)
    tpr = tp / max(int(y.sum()), 1)
    fpr = fp / max(int((~y).sum()), 1)
    return np.concatenate([[0.0], fpr]), np.concatenate([[0.0], tpr]), np.concatenate([[np.inf], s])


def auc(scores, labels) -> float:
    fpr, tpr, _ = roc(scores, labels)
    return float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2))


def choose_threshold(scores, labels, success: float = 0.95) -> float:
    """The lowest threshold whose routed programs (score >= it) succeed at rate >= success
    (so the most programs go to the neural path at that success rate)."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels, bool)
    best = float(np.max(s)) + 1e-6 if len(s) else 1.0
    for t in np.unique(s)[::-1]:
        m = s >= t
        if y[m].mean() >= success:
            best = float(t)
        else:
            break
    return best


def save(params: dict, threshold: float, meta: dict, path: str = PATH) -> None:
    obj = {k: np.asarray(v).tolist() for k, v in params.items()}
    with open(path, "w") as f:
        json.dump(
            {"params": obj, "threshold": threshold, "features": FEATURES, **meta}, f, indent=1
        )


def load(path: str = PATH):
    """(params, threshold), or None when no router was trained."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        obj = json.load(f)
    params = {k: jnp.asarray(v, jnp.float32) for k, v in obj["params"].items()}
    return params, float(obj["threshold"])


def route_sources(sources) -> list[bool]:
    """Host helper for the CLI: True for each source routed to the neural path."""
    got = load()
    if got is None:
        return [True] * len(sources)
    from jaxcc.limits import Limits
    from jaxcc.reference.compiler import compile_source
    from jaxcc.reference.host_lex import host_lex_many

    lim = Limits(max_source_bytes=2048, max_tokens=768)
    toks, _ = host_lex_many(sources, lim)
    n_code = np.array([int(compile_source(s).program.n_code) for s in sources], np.int32)
    params, threshold = got
    s = np.asarray(score(params, features(toks, n_code)))
    return [bool(x >= threshold) for x in s]
