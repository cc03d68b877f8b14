"""The typed decoding mask (docs/neural.md section 3): the front end's print items
(``debuginfo.Debug.print_items``: each printed value's type, each print call's end)
decide every PRINT_INT, PRINT_BOOL and PRINT_NEWLINE.

* the items agree with the pure-Python reference compiler's code (its PRINT_* opcodes,
  in order, per function) on generated programs and the examples, and with its own
  DebugInfo (tests/test_debuginfo.py);
* the mask never excludes the labeller's sequence (the right answer) and does exclude
  it when the types are flipped or the items cut short (so the check can fail);
* an untrained model sampled at high temperature follows any given items, and its
  samples stay well formed;
* ``fold_prints`` gives the allowed print opcode the probability of both.
"""

from __future__ import annotations

import glob
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxcc import compiler, isa, lexer
from jaxcc.debuginfo import ITEM_END, ITEM_NEWLINE, MAX_PRINTS, PRINT_FUNCS
from jaxcc.neural import corpus
from jaxcc.neural import grammar as G
from jaxcc.neural import model as M
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import assemble
from jaxcc.neural.inputs import print_items, source_features
from jaxcc.neural.train import TRAIN_LIMITS
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.host_lex import host_lex_many

PRINT_OPS = (isa.Op.PRINT_INT, isa.Op.PRINT_BOOL, isa.Op.PRINT_NEWLINE)
ITEM_OF = {isa.Op.PRINT_INT: isa.T_INT, isa.Op.PRINT_BOOL: isa.T_BOOL,
           isa.Op.PRINT_NEWLINE: ITEM_NEWLINE}  # fmt: skip


def _reference_items(src: str, limits) -> tuple:
    """Per function (module first), its PRINT_* instructions as print items, in code
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
        out[f] = tuple(ITEM_OF[int(o)] for o in seq if o in PRINT_OPS)[:MAX_PRINTS]
    return tuple(out[f] for f in range(min(len(entry), PRINT_FUNCS)))


def _sources() -> list[str]:
    srcs = [open(f).read() for f in sorted(glob.glob("examples/*.py"))]
    for level in range(6):
        srcs += corpus.generate(corpus.HELDOUT_SEEDS[0] + 31 + level, 6, level, split="heldout")
    return srcs


def test_print_items_agree_with_the_reference_compilers_code():
    srcs = _sources()
    _, err, debug = compiler.compile_many(srcs, TRAIN_LIMITS)
    checked = with_bool = 0
    for j, s in enumerate(srcs):
        if int(err.code[j]) != 0:
            continue
        want = _reference_items(s, TRAIN_LIMITS)
        assert debug[j].print_items == want, s
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
    pt = np.asarray(jax.jit(print_items, static_argnames="limits")(tokens, nl, lex_error))
    seq = np.zeros((len(rows), nv.max_out), np.int32)
    for i, (_, t) in enumerate(rows):
        seq[i, : len(t)] = t
    feats = source_features(tokens, nv)
    typed = assemble(
        jnp.asarray(seq), feats._replace(print_items=jnp.asarray(pt)), nl, nv, check=True
    )
    assert bool(jnp.all(typed.ok)), "the typed mask excludes a labeller's sequence"

    # flipped types: exactly the sequences that print something are now rejected
    def ok_with(items):
        a = assemble(jnp.asarray(seq), feats._replace(print_items=jnp.asarray(items)), nl, nv,
                     check=True)  # fmt: skip
        return np.asarray(a.ok)

    values = np.isin(seq, [V.op_tok(isa.Op.PRINT_INT), V.op_tok(isa.Op.PRINT_BOOL)]).any(axis=1)
    assert values.sum() >= len(rows) // 2
    # flipped value types: exactly the sequences that print a value are rejected
    flipped = np.where((pt == isa.T_INT) | (pt == isa.T_BOOL), 1 - pt, pt)
    np.testing.assert_array_equal(ok_with(flipped), ~values)
    # no items at all (ITEM_END first everywhere): exactly those that print are rejected
    prints = values | (seq == V.op_tok(isa.Op.PRINT_NEWLINE)).any(axis=1)
    np.testing.assert_array_equal(ok_with(np.full_like(pt, ITEM_END)), ~prints)


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
        elif fn >= 0 and t in [V.op_tok(o) for o in PRINT_OPS]:
            out.setdefault(fn, []).append(t - V.OP_BASE)
    return out


# samples per source of an untrained model in the two tests below (twice as many with
# --slow): each is assembled and run in the VM, which is where their time goes
K_UNTRAINED = 128 if os.environ.get("JAXCC_SLOW") == "1" else 64


def test_untrained_samples_follow_the_given_items():
    # tests/ is on sys.path; _sample: the sampler compiled for run time
    from test_neural_grammar import CFG, LIM, SOURCES, _run_everything, _sample

    toks, _ = host_lex_many(SOURCES, LIM)
    rng = np.random.default_rng(5)
    choices = np.array([isa.T_INT, isa.T_BOOL, ITEM_NEWLINE], np.int32)
    pt = choices[rng.integers(0, 3, size=(len(SOURCES), PRINT_FUNCS, MAX_PRINTS))]
    pt[:, :, 6:] = -1  # beyond the sixth item of a function: not known, anything goes
    pt[:, 1::2, 4] = ITEM_END  # odd functions: four items, then no more prints
    src = source_features(toks, CFG.nlimits)._replace(print_items=jnp.asarray(pt))
    params = M.init_params(CFG, 9)
    smp = _sample(params, src, jax.random.key(2), K_UNTRAINED, 2.0)
    asm = assemble(smp.tokens, src, LIM, CFG.nlimits, check=True)
    assert bool(jnp.all(asm.ok)) and bool(jnp.all(smp.done))
    from jaxcc.errors import Code

    assert not np.any(_run_everything(asm.program) == Code.INVALID_BYTECODE)
    typed = newlines = 0
    for b in range(len(SOURCES)):
        for j in range(K_UNTRAINED):
            for f, ops in _prints_by_function(smp.tokens[b, j]).items():
                assert f % 2 == 0 or len(ops) <= 4, (b, j, f)  # none after the last item
                for i, o in enumerate(ops[:6]):
                    assert ITEM_OF[o] == pt[b, f, i], (b, j, f, i)
                    typed += 1
                    newlines += o == isa.Op.PRINT_NEWLINE
    assert typed > 200 and newlines > 50, (typed, newlines)  # the property was exercised


def test_fold_prints_moves_the_probability_of_both():
    logits = jnp.zeros(V.VOCAB).at[V.op_tok(isa.Op.PRINT_INT)].set(2.0)
    both = jnp.ones(V.VOCAB, bool)
    np.testing.assert_array_equal(G.fold_prints(logits, both), logits)
    only_bool = both.at[V.op_tok(isa.Op.PRINT_INT)].set(False)
    got = G.fold_prints(logits, only_bool)
    assert float(got[V.op_tok(isa.Op.PRINT_BOOL)]) == float(jnp.logaddexp(2.0, 0.0))
    np.testing.assert_array_equal(np.delete(np.asarray(got), V.op_tok(isa.Op.PRINT_BOOL)),
                                  np.delete(np.asarray(logits), V.op_tok(isa.Op.PRINT_BOOL)))  # fmt: skip


def test_untrained_samples_under_the_structure_rules_are_well_formed():
    # the typed mask with the front end's real facts (print items, return types and the
    # source's statement structure): its rules never leave a sample without a way on
    from test_neural_grammar import CFG, LIM, SOURCES, _run_everything, _sample

    from jaxcc.neural.inputs import typing

    toks, err = host_lex_many(SOURCES, LIM)
    toks = jax.tree.map(jnp.asarray, toks)
    pt, rt = jax.jit(typing, static_argnames="limits")(toks, LIM, jax.tree.map(jnp.asarray, err))
    assert bool(jnp.all(pt[:, 0, 0] != -1)), "the front end accepts every source"
    src = source_features(toks, CFG.nlimits)._replace(print_items=pt, ret_types=rt)
    params = M.init_params(CFG, 11)
    smp = _sample(params, src, jax.random.key(4), K_UNTRAINED, 1.0)
    asm = assemble(smp.tokens, src, LIM, CFG.nlimits, check=True)
    assert bool(jnp.all(asm.ok)) and bool(jnp.all(smp.done))
    from jaxcc.errors import Code

    assert not np.any(_run_everything(asm.program) == Code.INVALID_BYTECODE)
    # the samples are not trivial: they vary (the rules' effect: test_neural_structure.py)
    assert len({tuple(np.asarray(t)) for t in smp.tokens.reshape(-1, CFG.max_out)[:64]}) > 32
