"""The decoding mask's structural rules (docs/neural.md section 3), checked against the
labeller's sequences and CPython's ``ast``:

* ``Src.loop_end`` (from the tokens' layout) against ``ast.For``'s line extents;
* the typed mask fixes each value print's depth and the ``POP_N`` after a print call's
  ``PRINT_NEWLINE`` (one allowed token where the labeller writes them, several without
  the front end's items);
* loop exits nest: while an inner loop's exit is pending, no outer loop's exit may be
  defined (the slip that made ``examples/gcd.py`` wrong);
* inside a for loop the typed mask allows only line markers of that loop's lines;
* a def's return type in the declarations is the front end's (``inputs.typing``).

Every rule is checked at every place the labeller's sequences exercise it, and the test
counts the places, so a rule that never applies fails it.
"""

from __future__ import annotations

import ast
import glob

import jax
import jax.numpy as jnp
import numpy as np

from jaxcc import isa, lexer
from jaxcc.neural import corpus
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import masks
from jaxcc.neural.inputs import source_features, typing
from jaxcc.neural.train import TRAIN_LIMITS

NL, NV = TRAIN_LIMITS, V.NEURAL_DEFAULT
PRINT_VALUE = {V.op_tok(isa.Op.PRINT_INT), V.op_tok(isa.Op.PRINT_BOOL)}
PRINT_NEWLINE, POP_N = V.op_tok(isa.Op.PRINT_NEWLINE), V.op_tok(isa.Op.POP_N)
FOR_RANGE = V.op_tok(isa.Op.FOR_RANGE)


def _sources() -> list[str]:
    srcs = [open(f).read() for f in sorted(glob.glob("examples/*.py"))]
    for level in (1, 3, 4):
        srcs += corpus.generate(corpus.HELDOUT_SEEDS[0] + 4242 + level, 10, level, split="heldout")
    # examples/syntax_error.py is not a program; some generated ones are over the limits
    return [s for s in srcs if _parses(s) and corpus.label(s, NL, NV).tokens is not None]


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _features(srcs):
    src, length = lexer.encode(srcs, NL)
    tokens, lex_error = jax.jit(lexer.lex, static_argnames="limits")(src, length, NL)
    pt, rt = jax.jit(typing, static_argnames="limits")(tokens, NL, lex_error)
    return source_features(tokens, NV), (pt, rt)


def _for_lines(source: str) -> dict[int, tuple[int, set[int]]]:
    """For each ``for`` statement's line: its last line and the start lines of the
    statements outside it (CPython's ast)."""
    tree = ast.parse(source)
    starts = {n.lineno for n in ast.walk(tree) if isinstance(n, ast.stmt)}
    out = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.For):
            out[n.lineno] = (n.end_lineno, {s for s in starts if not n.lineno <= s <= n.end_lineno})
    return out


def test_loop_end_matches_the_ast():
    srcs = _sources()
    feats, _ = _features(srcs)
    le = np.asarray(feats.loop_end)
    loops = 0
    for j, s in enumerate(srcs):
        fl = _for_lines(s)
        for line in range(1, V.N_LINES + 1):
            if line not in fl:
                assert le[j, line] == 0, (s, line)
                continue
            end, outside = fl[line]
            loops += 1
            # the loop's last line is inside the bound; no statement outside it is
            assert end <= le[j, line], (s, line)
            assert not any(end < o <= le[j, line] for o in outside), (s, line)
    assert loops >= 20, loops


def _labelled(srcs):
    rows = []
    for s in srcs:
        lb = corpus.label(s, NL, NV)
        if lb.tokens is not None:
            rows.append((s, list(lb.tokens)))
    return rows


def test_typed_mask_fixes_print_depths_pops_loop_exits_and_loop_lines():
    rows = _labelled(_sources())
    srcs = [s for s, _ in rows]
    feats, (items, rets) = _features(srcs)
    seq = np.zeros((len(rows), NV.max_out), np.int32)
    for i, (_, t) in enumerate(rows):
        seq[i, : len(t)] = t
    typed = np.asarray(masks(jnp.asarray(seq), feats._replace(print_items=items, ret_types=rets),
                             NL, NV))  # fmt: skip
    untyped = np.asarray(masks(jnp.asarray(seq), feats, NL, NV))
    seen = {"depth": 0, "depth_free": 0, "pop": 0, "nest": 0, "lines": 0, "lines_free": 0,
            "ret": 0}  # fmt: skip
    for i, (s, t) in enumerate(rows):
        fl = _for_lines(s)
        n_lines = len(s.splitlines())
        line = 0
        named: set[int] = set()  # labels of this body so far
        pending: dict[int, tuple[bool, int]] = {}  # label -> (a loop exit, loop's line)
        for p, tok in enumerate(t):
            m, mu = typed[i, p], untyped[i, p]
            assert m[tok], (s, p, V.name(tok))  # the labeller's sequence is never excluded
            prev = t[p - 1] if p else None
            if prev in PRINT_VALUE:  # the depth operand: one choice, as written
                assert m.sum() == 1, (s, p)
                seen["depth"] += 1
                seen["depth_free"] += int(mu.sum() > 1)
            if prev == PRINT_NEWLINE and tok == POP_N:  # nothing but the pop...
                assert m.sum() == 1 and typed[i, p + 1].sum() == 1, (s, p)  # ...of all values
                seen["pop"] += 1
            if tok in (V.RET_INT, V.RET_BOOL, V.RET_NONE):  # the front end's type alone
                rets = [V.RET_INT, V.RET_BOOL, V.RET_NONE]
                assert m[rets].sum() == 1 and mu[rets].all(), (s, p)
                seen["ret"] += 1
            if tok in (V.BODY, V.END):
                pending, named = {}, set()
            name = V.name(tok)
            if name.startswith("LN_"):
                line = int(name[3:])
            if name.startswith("LAB_"):
                j = int(name[4:])
                if prev == V.LABEL and j in pending:
                    inner = max([k for k, (f, _) in pending.items() if f], default=-1)
                    # the labeller closes the innermost open loop first
                    assert j >= inner, "the labeller defines an outer label first"
                    del pending[j]
                    outer = [k for k in pending if k < inner]
                    for k in outer:  # nothing named before the inner loop's exit, here
                        assert not m[V.LAB_BASE + k] and not mu[V.LAB_BASE + k], (s, p, k)
                        seen["nest"] += 1
                elif prev != V.LABEL and j not in named:  # first named by a jump
                    pending[j] = (prev == FOR_RANGE, line)
                named.add(j)
            if name.startswith("LN_"):
                loops = [(k, ln) for k, (f, ln) in pending.items() if f]
                if loops and max(loops)[1] in fl:
                    end, outside = fl[max(loops)[1]]
                    for o in outside:
                        if o <= n_lines:
                            assert not m[V.ln_tok(o)], (s, p, o)
                            seen["lines"] += 1
                            seen["lines_free"] += int(mu[V.ln_tok(o)])
    # every rule applied, and each excluded tokens that the untyped mask allows
    assert seen["depth"] >= 50 and seen["depth_free"] >= 10, seen
    assert seen["pop"] >= 30 and seen["nest"] >= 3 and seen["ret"] >= 20, seen
    assert seen["lines"] >= 100 and seen["lines_free"] >= 100, seen
