"""The Pallas parser kernel (jaxcc/parser_pallas.py) against the XLA parser, the reference.

On the CPU the kernel runs in Pallas' interpret mode, and every comparison is of EVERY
output field of every program: each Ast field (kind, op, value, parent, child_index,
n_children, tokens, positions, n_nodes), each Error field (code, line, col, detail) and
each ParseInfo field (the failing state, the offending token, the automaton's step
count), so a step taken differently (a reduction with the wrong rule, an error noted at
another token, a write into another lane's stack or nodes) shows even where the final
error code happens to agree. The error choice and the tree post-pass run after the
automaton, so the Ast and Error fields are only as good as the automaton state the kernel
leaves; ParseInfo.steps checks that it stops after the same number of steps.

Inputs: generated programs (bench/corpus.py's small corpus and jaxcc.testing's seeded
generator) lexed by jaxcc.lexer; tests/test_parser.py's valid programs and error cases
(syntax, indentation, errors found by the semantic actions, constructs outside the
subset), lexer errors (truncated tokens with the lexer's error passed in) and limit
overflows (parse depth, nodes); and hostile token arrays (kinds out of range and
negative, random values and positions, n_tokens 0, negative or past T, random lexer
errors) beside real token streams with tokens replaced, dropped and inserted; and the
same tokens on hostile tables (random entries, and loops no LR table has: automata that
run out of steps, stacks that overflow or go below 0, indices that jnp's indexing wraps),
so that every read and write the kernel places itself is checked where it is placed.
Batches are not multiples of the block, so padding lanes run too. Interpret mode hides
what the Triton lowering rejects, so the kernel is also lowered for CUDA here (Triton IR).

Interpret-mode compiles dominate the time (seconds per shape), so each test is one batch
of one shape.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from bench import corpus
from jaxcc import grammar, lexer, parser, parser_pallas
from jaxcc.errors import Code, Error, Limit, Syntax, Unsupported
from jaxcc.limits import Limits
from jaxcc.parser import ParseInfo
from jaxcc.syntax import Ast
from jaxcc.testing import seeded_program
from jaxcc.tokens import N_TOK, Tok, Tokens
from tests import test_parser as tp

SMALL = corpus.LIMITS["small"]  # T = 128, 128 nodes, depth 64
# tight parse limits: deep nesting and long expressions overflow them
TIGHT = Limits(max_source_bytes=512, max_tokens=128, max_indent=8, max_parse_depth=24,
               max_nodes=64)  # fmt: skip
HOSTILE = Limits(max_source_bytes=256, max_tokens=64, max_indent=8, max_parse_depth=16,
                 max_nodes=48)  # fmt: skip
PARTS = (("Ast", Ast), ("Error", Error), ("ParseInfo", ParseInfo))


def assert_parses_equal(got, want, names=None):
    """Every field of (Ast, Error, ParseInfo) equal, shapes and dtypes included; the
    message names the field and the first differing lanes."""
    got, want = jax.device_get(got), jax.device_get(want)
    assert len(got) == len(want) == 3
    for (part, cls), g_t, w_t in zip(PARTS, got, want, strict=True):
        assert isinstance(g_t, cls) and isinstance(w_t, cls), part
        for f in cls._fields:
            g, w = np.asarray(getattr(g_t, f)), np.asarray(getattr(w_t, f))
            assert g.shape == w.shape, f"{part}.{f}: shape {g.shape} != {w.shape}"
            assert g.dtype == w.dtype, f"{part}.{f}: dtype {g.dtype} != {w.dtype}"
            if not np.array_equal(g, w):
                if g.ndim == 0:
                    raise AssertionError(f"{part}.{f}: pallas {g} != xla {w}")
                bad = np.nonzero((g != w).reshape(g.shape[0], -1).any(axis=1))[0]
                who = [names[i] if names else int(i) for i in bad[:6]]
                first = int(bad[0])
                raise AssertionError(
                    f"{part}.{f}: pallas != xla in {len(bad)} lanes, e.g. {who}; lane "
                    f"{first}: pallas {g[first].tolist()} xla {w[first].tolist()}"
                )


def lex_sources(sources, limits):
    """jaxcc.lexer's tokens and errors of a list of sources (numpy)."""
    buf, length = lexer.encode(sources, limits)
    return jax.device_get(lexer.lex(buf, length, limits))


def both(tokens, limits, lex_error=None, **pallas_options):
    """(pallas, xla) results: through the public switch, or with the kernel's knobs
    through parser_pallas.parse_with_info when any are given."""
    want = parser.parse_with_info(tokens, limits, lex_error, backend="xla")
    if pallas_options:
        got = parser_pallas.parse_with_info(tokens, limits, lex_error, **pallas_options)
    else:
        got = parser.parse_with_info(tokens, limits, lex_error, backend="pallas")
    return got, want


def _codes(res):
    return np.asarray(jax.device_get(res[1].code))


# ------------------------------------------------------------------ valid programs


@functools.cache
def generated_sources(n_corpus=110, n_seeded=40):
    """bench/corpus.py's small programs and jaxcc.testing's seeded programs that fit
    SMALL (the same every run)."""
    srcs = [p["source"] for p in corpus.generate(0, "small", n_corpus, with_tests=False)]
    seed = 0
    seeded = []
    while len(seeded) < n_seeded:
        seed += 1
        s = seeded_program(seed)
        if len(s.encode()) <= SMALL.max_source_bytes and corpus.n_tokens(s) <= 120:
            seeded.append(s)
    return srcs + seeded


def test_generated_programs_equal_xla():
    """150 generated programs through parser.parse_with_info(backend="pallas"): blocks
    of 128 lanes, the second padded."""
    srcs = generated_sources()
    assert len(srcs) % parser_pallas.BLOCK != 0 and len(srcs) > parser_pallas.BLOCK
    toks, lerr = lex_sources(srcs, SMALL)
    assert np.all(lerr.code == Code.OK)
    got, want = both(toks, SMALL, lerr)
    assert_parses_equal(got, want, srcs)
    codes = _codes(want)
    # most parse (so a wrong tree would show), and the trees are not trivial
    assert np.mean(codes == Code.OK) >= 0.9, np.unique(codes, return_counts=True)
    assert np.asarray(want[0].n_nodes).max() >= 60
    assert np.asarray(want[2].steps).max() >= 150


# ------------------------------------------------------------------ errors

LEXER_ERRORS = [
    'x = 1\ny = "s" +\n',
    'x = 1 2\ny = "s"\n',
    'x = 1, 2\ny = "s"\n',
    "x = 1, 2\ny = 1 $ 2\n",
    "x = 1, 2\ny = 1 \x01 2\n",
    "if x:\n    y = 1\n  z = 2\n",
    "x = 1 2\ny = 0b12\n",
    "if x\nprint(x))\n",
    "x = 1 2\ny = (\n",
    "x = (\n1 2\n",
    "x = 1\ny = 2)\n",
    "x = 1)\nif x:\n    y\n  z\n",
    "x = ((1)\n\n",
    "x = 1 2\ny = 1 $ 2\n",
    "if x\n    y = 1\n  z = 2\n",
    "x = 1\n  y = 2\nz = 0b12\n",
    "x = (1 +\n2\n",
    "def f(a):\n    return a +\n",
    # over the tokens of TIGHT (T = 128): the lexer's LIMIT, tokens truncated
    "x = 1\n" + "y = x + 1\n" * 30,
    # over its bytes
    "x = 1\n" * 100,
]

LIMIT_CASES = [
    "x = " + "(" * 30 + "1" + ")" * 30 + "\n",  # parse depth
    "x = 1\nprint(" + "-" * 40 + "1)\n",  # parse depth: unary chain
    "x = " + " + ".join(["1"] * 40) + "\n",  # nodes
    "def f(a):\n    if a:\n        x = a * 2 + a * 3 + a * 4\n" * 5,  # nodes, later
    "if a:\n" + "".join(" " * k + "if a:\n" for k in range(1, 8)) + " " * 8 + "x = 1\n",
    "x = 1 2 " + "(" * 30 + "\n",  # a syntax error before the depth would overflow
]


def error_sources():
    return (
        [e[0] for e in tp.ERRORS] + tp.VALID + LEXER_ERRORS + LIMIT_CASES
        + ["", "\n", "   \n", "#\n", "pass", "x = (", ")", "else", "\t\tx\n"]
    )  # fmt: skip


def test_error_programs_equal_xla():
    """tests/test_parser.py's error cases and valid programs, lexer errors and limit
    overflows, under tight parse limits (depth 24, 64 nodes)."""
    srcs = error_sources()
    toks, lerr = lex_sources(srcs, TIGHT)
    got, want = both(toks, TIGHT, lerr)
    assert_parses_equal(got, want, srcs)
    err = jax.device_get(want[1])
    codes = set(err.code.tolist())
    assert {Code.OK, Code.SYNTAX, Code.INDENTATION, Code.UNSUPPORTED, Code.LIMIT} <= codes
    pairs = set(zip(err.code.tolist(), err.detail.tolist(), strict=True))
    # errors of the automaton, of the semantic actions, of the limits, of the lexer
    assert {
        (Code.SYNTAX, Syntax.EXPECTED_COLON),
        (Code.SYNTAX, Syntax.CANNOT_ASSIGN),
        (Code.SYNTAX, Syntax.UNMATCHED_PAREN),
        (Code.INDENTATION, Syntax.EXPECTED_INDENT),
        (Code.INDENTATION, Syntax.UNEXPECTED_INDENT),
        (Code.UNSUPPORTED, Unsupported.CHAINED_ASSIGNMENT),
        (Code.UNSUPPORTED, Unsupported.ANNOTATION),
        (Code.UNSUPPORTED, Unsupported.STRING),
        (Code.LIMIT, Limit.PARSE_DEPTH),
        (Code.LIMIT, Limit.NODES),
    } <= pairs, pairs
    assert np.sum(lerr.code != Code.OK) >= len(LEXER_ERRORS)
    assert np.any(np.asarray(want[2].state) >= 0)


# ------------------------------------------------------------------ hostile tokens

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


# first tokens of some random lanes: negative kinds (indices that wrap), the LOOPS' tokens
FIRST_KINDS = [-1, -2, -3, -N_TOK - 2, I32_MIN, I32_MAX, Tok.NUMBER, Tok.KW_WHILE,
               Tok.KW_ASSERT, Tok.KW_FOR, Tok.KW_IF, Tok.NAME]  # fmt: skip


def _mutate(rng, kinds, n):
    """A real token stream with a few tokens replaced, dropped or inserted."""
    ks = list(kinds[:n])
    for _ in range(int(rng.integers(1, 4))):
        op = rng.integers(0, 3)
        i = int(rng.integers(0, max(len(ks), 1)))
        new = int(rng.integers(1, N_TOK))
        if op == 0 and ks:
            ks[i] = new
        elif op == 1 and ks:
            del ks[i]
        else:
            ks.insert(i, new)
    return ks


@functools.cache
def hostile_batch(b=75, seed=20261125):
    """Token arrays no lexer makes: see the module docstring. Lanes 0..39 are real
    programs (some mutated), the rest random; also random lexer errors."""
    T = HOSTILE.max_tokens
    rng = np.random.default_rng(seed)
    srcs = [s for s in tp.VALID if s] + [e[0] for e in tp.ERRORS[:20]]
    real, rerr = lex_sources(srcs, HOSTILE)
    fields = {f: np.zeros((b, T), np.int32) for f in Tokens._fields if f != "n_tokens"}
    n_tokens = np.zeros(b, np.int32)
    for lane in range(b):
        if lane < 40:  # a real program, mutated in 3 lanes of 4
            r = lane % len(srcs)
            for f in fields:
                fields[f][lane] = getattr(real, f)[r]
            n = int(real.n_tokens[r])
            if lane % 4:
                ks = _mutate(rng, real.kind[r], n)[:T]
                fields["kind"][lane] = 0
                fields["kind"][lane, : len(ks)] = ks
                n = len(ks)
            n_tokens[lane] = n
        else:
            kind = rng.integers(-3, N_TOK + 3, T)
            if lane % 5 == 0:  # extreme kinds among plausible ones
                at = rng.random(T) < 0.2
                kind = np.where(at, rng.choice([I32_MIN, I32_MAX, -N_TOK, -1, N_TOK, 4 * N_TOK], T),
                                rng.integers(1, N_TOK, T))  # fmt: skip
            fields["kind"][lane] = kind
            for f in fields:
                if f != "kind":
                    fields[f][lane] = rng.choice(
                        [rng.integers(-5, 70), I32_MIN, I32_MAX, 0, 1], T,
                        p=[0.8, 0.05, 0.05, 0.05, 0.05],
                    )  # fmt: skip
            n_tokens[lane] = rng.choice([0, -1, -5, T, T + 7, 2**30, int(rng.integers(1, T))])
            if lane - 40 < len(FIRST_KINDS):  # these first tokens: see hostile_tables
                fields["kind"][lane, 0] = FIRST_KINDS[lane - 40]
                n_tokens[lane] = T // 2
        if lane % 7 == 3:  # random values (annotations, names, numbers)
            fields["value"][lane] = rng.integers(-3, 40, T)
    toks = Tokens(**fields, n_tokens=n_tokens)
    lerr = Error(*[np.zeros(b, np.int32) for _ in range(4)])
    pick = rng.random(b) < 0.3
    lerr = Error(
        np.where(pick, rng.choice([Code.SYNTAX, Code.INDENTATION, Code.UNSUPPORTED, Code.LIMIT,
                                   Code.OK, 99, -1], b), 0).astype(np.int32),
        np.where(pick, rng.integers(-2, 12, b), 0).astype(np.int32),
        np.where(pick, rng.integers(-2, 40, b), 0).astype(np.int32),
        np.where(pick, rng.integers(-2, 30, b), 0).astype(np.int32),
    )  # fmt: skip
    return toks, lerr


def test_hostile_tokens_equal_xla():
    """Hostile token arrays (75 lanes) through the public switch: every field equal,
    ParseInfo.steps included, whatever the kinds, values, positions and counts."""
    toks, lerr = hostile_batch()
    got, want = both(toks, HOSTILE, lerr)
    assert_parses_equal(got, want)
    codes = _codes(want)
    steps = np.asarray(jax.device_get(want[2].steps))
    # the batch reaches deep: parses that succeed, long runs, every kind of stop
    assert {Code.OK, Code.SYNTAX, Code.INDENTATION, Code.LIMIT} <= set(codes.tolist())
    assert steps.max() >= 60 and np.sum(steps == 0) >= 1


# (first token, rule, len, lhs, node kind): in state 0 the token reduces by the rule, whose
# GOTO in state 0 is state 0 again; loops no LR table has
LOOPS = (
    (Tok.NAME, 1, 1, 1, 0),  # the stack stays: the automaton runs out of steps
    (Tok.KW_IF, 2, 0, 1, 0),  # the stack grows past D (writes dropped): out of steps
    (Tok.NUMBER, 3, 0, 1, 1),  # a node per step: the nodes overflow
    (Tok.KW_WHILE, 4, 3, 1, 0),  # the stack pointer goes below 0: negative rows (wrapped)
    (Tok.KW_ASSERT, 5, 1, -1, 0),  # a negative GOTO index (wrapped to the table's end)
)


def hostile_tables(seed=7):
    """The parser's tables with 3% random entries (ACTION, GOTO, rule fields, state flags;
    out of range and negative included) and the LOOPS; also ACTION[0, KW_FOR] is a
    reduction by rule -1 (the last rule: an empty one back to state 0), and the last
    state's ACTION row (where a negative kind's index in state 0 lands once wrapped) all
    shifts: wherever the kernel placed an index differently from jnp's indexing (a
    negative index counts from the end, then it is clamped), the results would differ."""
    rng = np.random.default_rng(seed)
    tabs = [np.array(x) for x in parser._tables()]
    action, goto, rules, flags = tabs
    nnt = goto.size // (len(flags) * N_TOK)
    for a, lo, hi in ((action, -50, 4 * action.max()), (goto, -20, 2 * len(flags)),
                      (flags, -1, 64)):  # fmt: skip
        at = rng.random(a.shape) < 0.03
        a[at] = rng.integers(lo, hi, a.shape)[at]
    at = rng.random(rules.shape) < 0.03
    rules[at] = rng.integers(-20, 200, rules.shape)[at]
    F = grammar.F
    loops = LOOPS + ((Tok.KW_FOR, len(rules) - 1, 0, 1, 0),)
    for tok, r, length, lhs, kind in loops:
        rules[r] = 0
        rules[r, F["len"]], rules[r, F["lhs"]], rules[r, F["kind"]] = length, lhs, kind
        action[tok] = (r << 2 | grammar.ACT_REDUCE) if r < len(rules) - 1 else -2
        goto[(0 * nnt + lhs) * N_TOK + tok] = 0  # negative: from the end
    assert action[Tok.KW_FOR] & 3 == grammar.ACT_REDUCE and action[Tok.KW_FOR] >> 2 == -1
    goto[0] = 9  # where a negative GOTO index would land if clamped, not wrapped
    action[-N_TOK:] = 1 << 2 | grammar.ACT_SHIFT
    return type(parser._tables())(action, goto, rules, flags)


def test_hostile_tables_equal_xla():
    """Hostile tables (hostile_tables) on the hostile token batch, through the parser's
    jitted batch function (internal: it takes the tables as an argument): every field
    equal, lanes that run out of steps included (Code.LIMIT after the loop's bound)."""
    toks, lerr = hostile_batch()
    tabs = hostile_tables()
    spi = parser.STEPS_PER_ITER
    want = parser._parse_batch(toks, lerr, tabs, HOSTILE, spi, "xla", ())
    got = parser._parse_batch(toks, lerr, tabs, HOSTILE, spi, "pallas", ())
    assert_parses_equal(got, want)
    T = HOSTILE.max_tokens
    bound = ((8 * T + 64) // spi + 1) * spi
    steps = np.asarray(want[2].steps)
    codes = set(np.asarray(want[1].code).tolist())
    assert np.sum(steps == bound) >= 3, sorted(steps.tolist())
    assert {Code.SYNTAX, Code.LIMIT} <= codes


# ------------------------------------------------------------------ single program, isolation


def test_unbatched_and_batch_isolation():
    """One program (1-D token arrays) equals XLA's; and a lane's result does not depend on
    its neighbours: the same programs at the same lanes of two batches (40 lanes, blocks
    of 32) whose other lanes differ (long parses, errors, hostile tokens, empty lanes)."""
    srcs = generated_sources()
    toks, lerr = lex_sources(srcs, SMALL)
    one = jax.tree.map(lambda x: x[3], (toks, lerr))
    got, want = both(one[0], SMALL, one[1])
    assert np.ndim(got[1].code) == 0 and int(want[1].code) == Code.OK
    assert_parses_equal(got, want)

    b = 40
    keep = np.array([0, 5, 31, 32, 39])  # first and last lanes of both blocks
    idx1 = np.arange(b) + 1
    idx2 = (np.arange(b) * 7 + 60) % len(srcs)
    idx1[keep] = idx2[keep] = np.arange(len(keep)) + 100
    batch1 = jax.tree.map(lambda x: x[idx1], (toks, lerr))
    batch2 = jax.tree.map(lambda x: x[idx2], (toks, lerr))
    # batch2's neighbours: errors, an empty lane, lexer errors that stop parses early
    t2, e2 = batch2
    kind = np.array(t2.kind)
    kind[1, 5:9] = Tok.RPAR
    kind[2] = Tok.INDENT
    n2 = np.array(t2.n_tokens)
    n2[3] = 0
    n2[4] = -7
    code2 = np.array(e2.code)
    code2[6:12] = Code.SYNTAX
    batch2 = (t2._replace(kind=kind, n_tokens=n2), e2._replace(code=code2))
    opts = {"block": 32}
    got1 = parser_pallas.parse_with_info(batch1[0], SMALL, batch1[1], **opts)
    got2 = parser_pallas.parse_with_info(batch2[0], SMALL, batch2[1], **opts)
    rows = functools.partial(jax.tree.map, lambda x: np.asarray(x)[keep])
    assert_parses_equal(rows(got1), rows(got2))
    assert set(_codes(got2).tolist()) != {Code.OK}
    want1 = parser.parse_with_info(batch1[0], SMALL, batch1[1], backend="xla")
    assert_parses_equal(got1, want1)


# ------------------------------------------------------------------ backends, knobs


def test_backend_names():
    """An unknown backend is an error; "auto" on a machine without a GPU is the XLA
    parser (no Pallas call in its program) and "pallas" is the kernel."""
    srcs = tp.VALID[:5]
    toks, lerr = lex_sources(srcs, SMALL)
    with pytest.raises(ValueError, match="backend"):
        parser.parse_with_info(toks, SMALL, lerr, backend="bogus")
    with pytest.raises(ValueError, match="backend"):
        parser.parse(toks, SMALL, lerr, backend="cuda")
    want = parser.parse_with_info(toks, SMALL, lerr, backend="xla")
    assert_parses_equal(parser.parse_with_info(toks, SMALL, lerr, backend="auto"), want)
    ast_, err = parser.parse(toks, SMALL, lerr, backend="pallas")
    assert_parses_equal((ast_, err, want[2]), want)
    if jax.default_backend() != "gpu":

        def program(backend):
            def f(t, e):
                return parser.parse_with_info(t, SMALL, e, backend=backend)

            return str(jax.make_jaxpr(f)(toks, lerr))

        assert "pallas_call" not in program("auto")
        assert "pallas_call" not in program("xla")
        assert "pallas_call" in program("pallas")


@pytest.mark.parametrize("block,steps_per_iter,lean", [(32, 5, False), (64, 1, True)])
def test_block_and_steps_per_iter(block, steps_per_iter, lean):
    """The kernel's knobs change nothing: blocks of 32 or 64 lanes (the error batch, the
    last block padded), 5 or 1 steps per inner loop, and every read made or only those
    whose values are used (``lean``), against XLA at its default and at the same
    steps_per_iter."""
    srcs = error_sources()
    toks, lerr = lex_sources(srcs, TIGHT)
    assert len(srcs) % block != 0
    got, want = both(toks, TIGHT, lerr, block=block, steps_per_iter=steps_per_iter, lean=lean)
    assert_parses_equal(got, want, srcs)
    same = parser.parse_with_info(toks, TIGHT, lerr, steps_per_iter=steps_per_iter, backend="xla")
    assert_parses_equal(same, want, srcs)


def test_vmap_and_jit_of_the_kernel():
    """``parse`` vmapped over single programs (Pallas' batching rule adds a grid axis),
    with and without jit, equals the XLA loop on the batch."""
    srcs = tp.VALID[:4] + [tp.ERRORS[0][0]]
    toks, lerr = lex_sources(srcs, SMALL)
    want = parser.parse_with_info(toks, SMALL, lerr, backend="xla")
    assert int(want[1].code[-1]) == Code.SYNTAX

    def one(t, e):
        return parser.parse_with_info(t, SMALL, e, backend="pallas")

    assert_parses_equal(jax.vmap(one)(toks, lerr), want)
    assert_parses_equal(jax.jit(jax.vmap(one))(toks, lerr), want)


def test_lowers_to_triton(triton_modules):
    """The kernel lowers for CUDA through the Pallas Triton backend (no GPU needed): one
    Triton kernel, every primitive accepted, and the Triton IR passes MLIR's verifier
    (which checks, e.g., Triton's power-of-two tensor sizes). Counted loops only (Triton
    on jax 0.11.2 crashed on the VM kernel's scf.while: parser_pallas' docstring), and the
    barrier between a step's stores and the next step's loads."""
    modules = triton_modules
    toks, lerr = lex_sources(tp.VALID[:3], SMALL)
    text = parser_pallas.lower_triton(toks, SMALL, lerr)
    assert text.count("__gpu$xla.gpu.triton") == 1
    assert len(modules) == 1 and modules[0].operation.verify()
    ir = modules.pop().operation.get_asm()
    # the guarded iterations and their inner steps
    assert ir.count("scf.while") == 0 and ir.count("scf.for") == 2
    assert ir.count("gpu.barrier") == 1
