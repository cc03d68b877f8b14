"""The typed decoding mask (docs/neural.md section 3): the front end's type of each
printed value (``debuginfo.Debug.print_type``) decides PRINT_INT against PRINT_BOOL.

* the types agree with the pure-Python reference compiler's code (its PRINT_* opcodes,
  in order, per function) on generated programs and the examples;
* the mask never excludes the labeller's sequence (the right answer) and does exclude
  it when the types are flipped (so the check can fail);
* an untrained model sampled at high temperature follows any given types, and its
  samples stay well formed;
* ``fold_prints`` gives the allowed print opcode the probability of both.
"""

from __future__ import annotations

import glob

import jax
import jax.numpy as jnp
import numpy as np

from jaxcc import compiler, isa, lexer
from jaxcc.debuginfo import MAX_PRINTS, PRINT_FUNCS
from jaxcc.neural import corpus
from jaxcc.neural import grammar as G
from jaxcc.neural import model as M
from jaxcc.neural import sample as S
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import assemble
from jaxcc.neural.inputs import print_types, source_features
from jaxcc.neural.train import TRAIN_LIMITS
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.host_lex import host_lex_many

PRINT_OPS = (isa.Op.PRINT_INT, isa.Op.PRINT_BOOL)


def _reference_print_types(src: str, limits) -> tuple:
    """Per function (module first), the types its PRINT_* instructions print, in code
    order, from the reference compiler's program."""
    c = compile_source(src, limits)
    p = c.program
    op, n = np.asarray(p.op), int(p.n_code)
    entry = [int(x) for x in np.asarray(p.fn_entry)[: int(p.n_funcs)]]
    order = sorted(range(len(entry)), key=lambda f: entry[f])
    out = {}
    for i, f in enumerate(order):
        end = entry[order[i + 1]] if i + 1 < len(order) else n
        seq = op[entry[f] : end]
        out[f] = tuple(
            isa.T_BOOL if o == isa.Op.PRINT_BOOL else isa.T_INT for o in seq if o in PRINT_OPS
        )[:MAX_PRINTS]
    return tuple(out[f] for f in range(min(len(entry), PRINT_FUNCS)))


def _sources() -> list[str]:
    srcs = [open(f).read() for f in sorted(glob.glob("examples/*.py"))]
    for level in range(6):
        srcs += corpus.generate(corpus.HELDOUT_SEEDS[0] + 31 + level, 6, level, split="heldout")
    return srcs


def test_print_types_agree_with_the_reference_compiler():
    srcs = _sources()
    _, err, debug = compiler.compile_many(srcs, TRAIN_LIMITS)
    checked = with_bool = 0
    for j, s in enumerate(srcs):
        if int(err.code[j]) != 0:
            continue
        want = _reference_print_types(s, TRAIN_LIMITS)
        assert debug[j].print_types == want, s
        checked += 1
        with_bool += any(isa.T_BOOL in t for t in want)
    assert checked >= 40 and with_bool >= 5, (checked, with_bool)


def _labelled(n_per_level: int = 4):
    nl = TRAIN_LIMITS
    rows = []
    for level in range(6):
        for s in corpus.generate(corpus.HELDOUT_SEEDS[0] + 77 + level, 3 * n_per_level, level,
                                 split="heldout"):  # fmt: skip
            lb = corpus.label(s, nl, V.NEURAL_DEFAULT)
            if lb.tokens is not None:
                rows.append((s, lb.tokens))
            if len(rows) >= n_per_level * (level + 1):
                break
    return rows


def test_typed_mask_accepts_the_labellers_sequence_and_only_it():
    nl, nv = TRAIN_LIMITS, V.NEURAL_DEFAULT
    rows = _labelled()
    src, length = lexer.encode([s for s, _ in rows], nl)
    tokens, lex_error = jax.jit(lexer.lex, static_argnames="limits")(src, length, nl)
    pt = np.asarray(jax.jit(print_types, static_argnames="limits")(tokens, nl, lex_error))
    seq = np.zeros((len(rows), nv.max_out), np.int32)
    for i, (_, t) in enumerate(rows):
        seq[i, : len(t)] = t
    feats = source_features(tokens, nv)
    typed = assemble(jnp.asarray(seq), feats._replace(print_t=jnp.asarray(pt)), nl, nv, check=True)
    assert bool(jnp.all(typed.ok)), "the typed mask excludes a labeller's sequence"
    # flipped types: exactly the sequences that print something are now rejected
    flipped = np.where(pt >= 0, 1 - pt, pt)
    bad = assemble(jnp.asarray(seq), feats._replace(print_t=jnp.asarray(flipped)), nl, nv,
                   check=True)  # fmt: skip
    prints = np.isin(seq, [V.op_tok(o) for o in PRINT_OPS]).any(axis=1)
    assert prints.sum() >= len(rows) // 2
    np.testing.assert_array_equal(np.asarray(bad.ok), ~prints)


def _prints_by_function(toks) -> dict:
    """{function index: [print opcode, ...]} of one sampled token sequence."""
    out: dict[int, list[int]] = {}
    fn = -1
    for t in np.asarray(toks):
        t = int(t)
        if t == V.BODY:
            fn = 0
        elif t == V.END:
            fn += 1
        elif t == V.EOS:
            break
        elif fn >= 0 and t in (V.op_tok(o) for o in PRINT_OPS):
            out.setdefault(fn, []).append(t - V.OP_BASE)
    return out


def test_untrained_samples_follow_the_given_types():
    from test_neural_grammar import CFG, LIM, SOURCES, _run_everything  # tests/ is on sys.path

    toks, _ = host_lex_many(SOURCES, LIM)
    rng = np.random.default_rng(5)
    pt = rng.integers(0, 2, size=(len(SOURCES), PRINT_FUNCS, MAX_PRINTS)).astype(np.int32)
    pt[:, :, 6:] = -1  # beyond the sixth print of a function: not known, either allowed
    src = source_features(toks, CFG.nlimits)._replace(print_t=jnp.asarray(pt))
    params = M.init_params(CFG, 9)
    smp = S.sample(M.graphdef(CFG), params, src, jax.random.key(2), 128, LIM, 2.0, 1.0, False)
    asm = assemble(smp.tokens, src, LIM, CFG.nlimits, check=True)
    assert bool(jnp.all(asm.ok)) and bool(jnp.all(smp.done))
    from jaxcc.errors import Code

    assert not np.any(_run_everything(asm.program) == Code.INVALID_BYTECODE)
    typed = 0
    for b in range(len(SOURCES)):
        for j in range(128):
            for f, ops in _prints_by_function(smp.tokens[b, j]).items():
                for i, o in enumerate(ops):
                    if i < 6:
                        want = isa.Op.PRINT_BOOL if pt[b, f, i] == isa.T_BOOL else isa.Op.PRINT_INT
                        assert o == want, (b, j, f, i)
                        typed += 1
    assert typed > 200, typed  # the property was exercised


def test_fold_prints_moves_the_probability_of_both():
    logits = jnp.zeros(V.VOCAB).at[V.op_tok(isa.Op.PRINT_INT)].set(2.0)
    both = jnp.ones(V.VOCAB, bool)
    np.testing.assert_array_equal(G.fold_prints(logits, both), logits)
    only_bool = both.at[V.op_tok(isa.Op.PRINT_INT)].set(False)
    got = G.fold_prints(logits, only_bool)
    assert float(got[V.op_tok(isa.Op.PRINT_BOOL)]) == float(jnp.logaddexp(2.0, 0.0))
    np.testing.assert_array_equal(np.delete(np.asarray(got), V.op_tok(isa.Op.PRINT_BOOL)),
                                  np.delete(np.asarray(logits), V.op_tok(isa.Op.PRINT_BOOL)))  # fmt: skip
