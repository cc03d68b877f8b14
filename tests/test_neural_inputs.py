"""The model's input features (jaxcc/neural/inputs.py) against a plain-Python reading of
the host lexer's tokens, on generated programs and a hand case."""

from __future__ import annotations

import numpy as np

from jaxcc import lexer
from jaxcc.neural import corpus
from jaxcc.neural.inputs import source_features
from jaxcc.neural.train import TRAIN_LIMITS
from jaxcc.reference.host_lex import host_lex
from jaxcc.tokens import Tok

HAND = "x = 100\n# c\ndef f(a):\n    if (a + (200)) > 100:\n        return 200\n    return 7\nprint(f(x), 7)\n"


def _expected(source: str) -> dict:
    """Features by the obvious sequential loop over the kept tokens."""
    t, _ = host_lex(source, TRAIN_LIMITS)
    n = int(t.n_tokens)
    kind, value = np.asarray(t.kind)[:n], np.asarray(t.value)[:n]
    out = {"clit": [], "indent": [], "paren": [], "col": [], "lit": []}
    lits: list[int] = []
    indent = paren = col = 0
    for k, v in zip(kind, value, strict=True):
        indent += int(k == Tok.INDENT) - int(k == Tok.DEDENT)
        if k in (Tok.COMMENT, Tok.NL):
            continue
        if k == Tok.RPAR:
            paren -= 1
        if k == Tok.NUMBER:
            out["lit"].append(len(lits))
            lits.append(int(v))
            out["clit"].append(lits.index(int(v)))
        else:
            out["lit"].append(0)
            out["clit"].append(0)
        out["indent"].append(min(max(indent, 0), 15))
        out["paren"].append(min(max(paren, 0), 15))
        out["col"].append(min(col, 63))
        if k == Tok.LPAR:
            paren += 1
        col = 0 if k == Tok.NEWLINE else col + 1
    return out


def test_features_match_a_sequential_reading():
    sources = [HAND] + [
        corpus.generate_one(corpus._program_seed(3, i, lvl), lvl)
        for lvl in (1, 3)
        for i in range(6)
    ]
    src, length = lexer.encode(sources, TRAIN_LIMITS)
    tokens, _ = lexer.lex(src, length, TRAIN_LIMITS)
    f = source_features(tokens)
    for i, s in enumerate(sources):
        want = _expected(s)
        n = int(f.n[i])
        if len(want["col"]) > n:  # over the neural bound (max_src): error set, cut
            assert int(f.error[i]) != 0 and n == len(f.col[i])
            want = {k: v[:n] for k, v in want.items()}
        assert n == len(want["col"])
        for name, values in want.items():
            assert np.asarray(getattr(f, name))[i, :n].tolist() == values, (name, s)


def test_canonical_slot_is_the_first_literal_of_that_value():
    src, length = lexer.encode([HAND], TRAIN_LIMITS)
    f = source_features(lexer.lex(src, length, TRAIN_LIMITS)[0])
    is_num = np.asarray(f.kind)[0] == Tok.NUMBER
    # literals in order: 100, 200, 100, 200, 7, 7
    assert np.asarray(f.clit)[0][is_num].tolist() == [0, 1, 0, 1, 4, 4]
    assert np.asarray(f.lit)[0][is_num].tolist() == [0, 1, 2, 3, 4, 5]
