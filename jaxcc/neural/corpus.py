"""Training pairs for the neural compiler: generated programs and their bytecode tokens.

``label(source)`` compiles a source with the deterministic reference compiler and writes
its bytecode in the token language of ``vocab.py``, in the canonical form described
there (``data.py``'s labeller: there is one). ``batch_at(seed, i, ...)`` is training
batch i: a pure function of (seed, i), so a resumed run sees exactly the batches an
unbroken run would. Programs come from
``jaxcc.testing``'s seeded generator with a curriculum of four levels (``LEVELS``), half
of them with random formatting (comments, spacing, other literal spellings), level 4
(``TEXTBOOK``) from ``textbook.py``: programs in the style of small exercises, 30% of
them reformatted the same way, and level 5 (``LONG``): level-3 programs of at least
``LONG_MIN_BYTES`` bytes.

Seeds: training uses program seeds derived from seeds in ``TRAIN_SEEDS``; held-out
evaluation uses ``HELDOUT_SEEDS`` (disjoint), and ``generate(split=...)`` checks it.
"""

from __future__ import annotations

import ast
import hashlib
from typing import NamedTuple

import numpy as np

from jaxcc.limits import DEFAULT, Limits
from jaxcc.neural import vocab as V

TRAIN_SEEDS = range(0, 2**30)
HELDOUT_SEEDS = range(2**30, 2**31)

# level -> generator parameters (max_functions, fuel, depth, max_statements)
LEVELS = {0: (1, 1, 1, 2), 1: (2, 2, 1, 3), 2: (2, 2, 2, 3), 3: (3, 3, 2, 4)}
# level 4: textbook-style programs (jaxcc.neural.textbook), not testing's fuzzer
TEXTBOOK = 4
# level 5: level-3 programs of at least LONG_MIN_BYTES bytes (the long tail of level 3:
# the stage-6 model's longer position tables and literal slots are learned from them)
LONG = 5
LONG_MIN_BYTES = 1000


class LabelResult(NamedTuple):
    tokens: np.ndarray | None  # Int32[n]: the sequence without BOS, ending in EOS
    reason: str  # "ok" or why the program is outside the neural path
    n_src: int = 0  # source tokens the model reads (COMMENT and NL dropped)


def _program_seed(seed: int, i: int, level: int) -> int:
    h = hashlib.blake2b(f"{seed}/{i}/{level}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & (2**62 - 1)


def generate_one(pseed: int, level: int, textbook_version: int | None = None) -> str:
    """One program of a level. ``textbook_version``: ``textbook.program``'s version for
    level 4 (default its newest; 1 regenerates what stages 4-6 were evaluated on)."""
    from jaxcc import testing

    if level == TEXTBOOK:
        from jaxcc.neural import textbook

        src = textbook.program(pseed, textbook_version or textbook.VERSION)
        r = testing._Seeded(pseed ^ 0x5EED)
        if r.chance(30):  # the same program with other formatting (its comments dropped)
            return testing._Render(testing._Seeded(r.int(0, 2**32 - 1)), r.int(1, 2)).module(
                ast.parse(src)
            )
        return src
    if level == LONG:  # the first long one of a few level-3 programs (pure in pseed)
        for t in range(64):
            src = generate_one(_program_seed(pseed, t, LONG), 3)
            if len(src.encode()) >= LONG_MIN_BYTES:
                break
        return src
    mf, fuel, depth, stmts = LEVELS[level]
    r = testing._Seeded(pseed)
    mod = testing._Gen(r, mf, fuel, depth, stmts, True).module()
    plain = ast.unparse(mod) + "\n"
    if r.chance(50):
        return testing._Render(testing._Seeded(r.int(0, 2**32 - 1)), r.int(1, 3)).module(mod)
    return plain


def generate(
    seed: int, n: int, level: int, split: str = "train", textbook_version: int | None = None
) -> list[str]:
    """n program sources of a curriculum level, from ``seed`` (checked against split)."""
    rng = TRAIN_SEEDS if split == "train" else HELDOUT_SEEDS
    if seed not in rng:
        raise ValueError(f"seed {seed} is not a {split} seed ({rng})")
    return [generate_one(_program_seed(seed, i, level), level, textbook_version) for i in range(n)]


def label(
    source: str, limits: Limits = DEFAULT, nlimits: V.NeuralLimits = V.NEURAL_DEFAULT
) -> LabelResult:
    """The canonical token sequence of the reference compiler's code for ``source``, or
    why it has none (``data.label``'s reasons: a compile error, or a bound of the neural
    path), and the number of source tokens the model reads. One labeller serves the
    training batches and the tests: ``data._label`` (its fast host lexer makes it 1.3-1.8x
    faster than the one this module had, whose sequences it matched on 383 programs)."""
    from jaxcc.neural import data

    seq, info = data._label(source, limits, nlimits)
    if seq is None:
        return LabelResult(None, info.reason)
    return LabelResult(np.asarray(seq, np.int32), "ok", info.n_src)


def put_row(b: dict, r: int, src: str, limits: Limits, nlimits: V.NeuralLimits) -> bool:
    """Write ``src`` and its labelled tokens into row ``r`` of the batch arrays ``b``
    (``batch_at``'s dict; the row cleared first), or return False and leave the row as it
    is when the source is over ``limits.max_source_bytes`` or has no label."""
    data = src.encode()
    if len(data) > limits.max_source_bytes:
        return False
    lb = label(src, limits, nlimits)
    if lb.tokens is None:
        return False
    b["source"][r] = 0
    b["source"][r, : len(data)] = np.frombuffer(data, np.uint8)
    b["length"][r] = len(data)
    b["target"][r] = 0
    b["target"][r, : len(lb.tokens)] = lb.tokens
    b["target_len"][r] = len(lb.tokens)
    b["n_src"][r] = lb.n_src
    return True


def batch_at(seed: int, index: int, batch: int, level: int, limits: Limits,
             nlimits: V.NeuralLimits) -> dict:  # fmt: skip
    """Training batch ``index``: ``batch`` labelled programs of ``level`` (programs that
    fail to label are replaced by the next ones), padded to limits / nlimits."""
    out = {"source": np.zeros((batch, limits.max_source_bytes), np.uint8),
           "length": np.zeros(batch, np.int32),
           "target": np.zeros((batch, nlimits.max_out), np.int32),
           "target_len": np.zeros(batch, np.int32), "n_src": np.zeros(batch, np.int32),
           "level": np.full(batch, level, np.int32)}  # fmt: skip
    j = b = 0
    while b < batch:
        src = generate_one(_program_seed(seed, index * 4 * batch + j, level), level)
        j += 1
        b += put_row(out, b, src, limits, nlimits)
    return out
