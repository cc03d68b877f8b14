"""jaxcc.lexer: differential against host_lex (CPython's tokenize), batch isolation,
limits, one unbatched program, the CLI against `python -m tokenize`, and each scan
kernel against its sequential Python."""

from __future__ import annotations

import ast
import subprocess
import sys
import warnings

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import TOKENIZE_311, TOKENIZE_IS_311
from jaxcc import lexer
from jaxcc import lexer_tables as LT
from jaxcc.errors import Code, Limit, Syntax, Unsupported
from jaxcc.limits import Limits
from jaxcc.reference.compiler import syntax_detail
from jaxcc.reference.host_lex import host_lex
from jaxcc.tokens import Tok
from property_tests.limits import LEXER as LIM

B = 16

# one compiled function for every batched call in this file: same shape, one trace
_lex16 = jax.jit(chex.assert_max_traces(lexer._lex_batched, n=1), static_argnames=("limits",))


def lex_many(sources, fill=0, muls=LT.HASH_MULS):
    """Lex sources in batches of B; returns per-program (Tokens of numpy, error tuple)."""
    out = []
    for i in range(0, len(sources), B):
        chunk = list(sources[i : i + B])
        chunk += [""] * (B - len(chunk))
        src, n = lexer.encode(chunk, LIM)
        if fill:  # junk beyond each program's length must not matter
            for j in range(B):
                src[j, min(n[j], LIM.max_source_bytes) :] = fill
        toks, err = _lex16(src, n, lexer.dfa_tables(LIM.max_source_bytes, muls), limits=LIM)
        toks = jax.tree.map(np.asarray, toks)
        err = tuple(np.asarray(e) for e in err)
        for j in range(min(B, len(sources) - i)):
            out.append((jax.tree.map(lambda x, j=j: x[j], toks), tuple(int(e[j]) for e in err)))
    return out


def assert_same_as_host(src, toks, err):
    h_toks, h_err = host_lex(src, LIM)
    assert err == tuple(int(x) for x in h_err), (src, err, tuple(h_err))
    for f in toks._fields:
        np.testing.assert_array_equal(
            getattr(toks, f), getattr(h_toks, f), err_msg=f"{f} of {src!r}"
        )


EXAMPLES = [
    "",
    "\n",
    "x = 1\n",
    "x = 1",
    "# only a comment",
    "x = 1  # trailing\n",
    "x = 1\n   ",
    "x = 1 \\\n  # c",
    "x = 1 + \\\n    2\n",
    "x = (1,\n\n  # inside\n  2)\n",
    "def f(a: int, b) -> int:\n    return a + b\n\n\nprint(f(1, 2))\n",
    "if x:\n    if y:\n        pass\n    else: z = 3\nelif w:\n  q = 1\nwhile True: break\n",
    "if x:\n\ty = 1\n\tif z:\n\t\tpass\n",
    "if x:\n  \t  y\n \t \tz\n",
    "if x:\n\x0c    y\n",
    "for i in range(10):\n    continue\n",
    "x //= 3; y **= 2 >> 1 != 4; z <<= 1; w ^= ~v; u %= -t; s |= r & q\n",
    "a<b<=c>d>=e==f!=g\n",
    "def g() -> None:\n    pass\n",
    "x = 0x_ff + 0o17 + 0b1_0 + 1_000 + 0 + 00 + 0_0\n",
    "x = 2147483647\ny = 2147483648\n",
    "x = 0xFFFFFFFF\n",
    "x = 2147483649\n",
    "x = 99999999999999999999\n",
    "x = 0b1111111111111111111111111111111111\n",
    "x = 0o20000000000\n",
    "x = 0o20000000001\n",
    "x = 0000000000000000000000000000000000000000000\n",
    "x = 0x00000000000000000000000000000000000001\n",
    "x = 1if y else 2\n",
    "x = 0or 1\n",
    "x = 1else\n",
    "007\n",
    "0x\n",
    "1_\n",
    "0b12\n",
    "1x = 2\n",
    "1e\n",
    "1.5\n",
    "1e5\n",
    "x = .5\n",
    "1j\n",
    "1.5j\n",
    "x = a.b\n",
    "x = ...\n",
    "x = a / b\n",
    "x /= 2\n",
    "x = [1]\n",
    "x = {}\n",
    "x @ y\n",
    "(x := 1)\n",
    "x = 'abc'\n",
    'x = b"abc"\n',
    "x = rb'''abc\n'''\n",
    "x = '''abc\n",
    "x = 'abc\\\ndef'\n",
    "x = 'abc\\\ndef\n",
    "x = 'unterminated\n",
    "x = $\n",
    "x = 1\x0b\n",
    "\x1c\n",
    "x = 1\x0c+ 2\n",
    "x = 1 ? 2\n",
    "x = `y`\n",
    "x = !y\n",
    "x = 1 \\ 2\n",
    "x = \\",
    "import os\n",
    "class A: pass\n",
    "x = lambda: 1\n",
    "x = 1\ny = 'é'\n",
    "if x:\n    a\n  b\n",
    "x = (1,\n",
    "x = (1,\n 2",
    "x = 1)\n",
    "x = \\\n",
    "x\r\ny\r\n",
    "if x:\n    y\n\n# c\n   \nz\n",
    "if a:\n if b:\n  if c:\n   d\n",
    "aa = bb + aa * cc - bb; print(aa, abs(bb), min(cc, aa), max(1, 2), range(3), int, bool)\n",
    "_x1 = __y2 + Z_ + _\n",
    "x = 1 # c \\\ny = 2\n",
    "f(\n  1,\n  2\n)\nx = 1\n",
]


@TOKENIZE_311
def test_examples_match_host_lex():
    for src, (toks, err) in zip(EXAMPLES, lex_many(EXAMPLES), strict=True):
        assert_same_as_host(src, toks, err)


def test_known_values():
    (toks, err), (toks2, err2) = lex_many(["x = 2147483648 + 0x1f\n", "x = 2147483649\n"])
    assert err == (0, 0, 0, 0)
    assert toks.kind[:6].tolist() == [
        Tok.NAME,
        Tok.EQUAL,
        Tok.NUMBER,
        Tok.PLUS,
        Tok.NUMBER,
        Tok.NEWLINE,
    ]
    assert toks.value[2] == -(2**31) and toks.value[4] == 31
    assert err2 == (Code.LIMIT, 1, 4, Limit.INT_LITERAL)


def test_names_interned_in_order_of_first_occurrence():
    ((toks, err),) = lex_many(["b = a + print(b) + range + zz + a + int + zz\n"])
    assert err == (0, 0, 0, 0)
    names = toks.kind == Tok.NAME
    assert toks.value[names].tolist() == [7, 8, 0, 7, 4, 9, 8, 5, 9]


def test_batch_isolation_and_padding():
    progs = ["def f(a):\n    return a  # r\n", "x = 'bad'\n", "if x:\n  y = (1,\n  2)\n", "z=1"]
    alone = [lex_many([p])[0] for p in progs]
    mixed = lex_many(progs[::-1] + EXAMPLES[:7], fill=ord("'"))
    for i, p in enumerate(progs[::-1]):
        a_toks, a_err = alone[len(progs) - 1 - i]
        m_toks, m_err = mixed[i]
        assert a_err == m_err, p
        for f in a_toks._fields:
            np.testing.assert_array_equal(getattr(a_toks, f), getattr(m_toks, f))


def test_no_recompile_for_new_batches_of_the_same_shape():
    lex_many(["a = 1\n"] * 3)
    lex_many(["b = 2\n"] * 20)  # two more calls, still one trace (chex would raise)


def test_token_limit():
    src = "x=" + "+".join(["1"] * 140) + "\n"  # 283 tokens > 256, 282 bytes
    ((toks, err),) = lex_many([src])
    assert err[0] == Code.LIMIT and err[3] == Limit.TOKENS
    assert toks.n_tokens == LIM.max_tokens
    assert_same_as_host(src, toks, err)
    # the limit is an error in source order: a later error does not hide it
    ((toks, err2),) = lex_many([src + "$\n"])
    assert err2 == err


def test_indent_depth_limit():
    deep = "".join(" " * k + "if x:\n" for k in range(13)) + " " * 13 + "pass\n"
    ok = "".join(" " * k + "if x:\n" for k in range(12)) + " " * 12 + "pass\n"
    (t1, e1), (t2, e2) = lex_many([deep, ok])
    assert e1 == (Code.LIMIT, 14, 0, Limit.INDENT_DEPTH)
    assert e2 == (0, 0, 0, 0)
    assert_same_as_host(deep, t1, e1)
    assert_same_as_host(ok, t2, e2)


def test_source_too_long_is_an_error_not_a_truncation():
    src = "x = 1\n" * 100  # 600 bytes > 512
    s, n = lexer.encode([src], LIM)
    assert n[0] == 600
    ((toks, err),) = lex_many([src])
    assert err == (Code.LIMIT, 1, 0, Limit.SOURCE_BYTES) and toks.n_tokens == 0


def test_error_positions():
    cases = {
        "x = 1\ny = $\n": (Code.SYNTAX, 2, 4, Syntax.INVALID),
        "x = 1\ny = \x01\n": (Code.SYNTAX, 2, 4, Syntax.INVALID_CHARACTER),
        "x = 'a'\n": (Code.UNSUPPORTED, 1, 4, Unsupported.STRING),
        # CPython's compile() column (after the line's last byte), not tokenize's
        "if x:\n    a\n  b\n": (Code.INDENTATION, 3, 3, Syntax.UNINDENT_MISMATCH),
        "x = (1,\n": (Code.SYNTAX, 2, 0, Syntax.EOF_IN_MULTILINE),
        "y = 007\n": (Code.SYNTAX, 1, 4, Syntax.INVALID_DECIMAL),
        "y = 0x\n": (Code.SYNTAX, 1, 4, Syntax.INVALID_NUMBER),
        "import x\n": (Code.UNSUPPORTED, 1, 0, Unsupported.KEYWORD),
        "x = 1\ny = 'é'\n": (Code.UNSUPPORTED, 2, 5, Unsupported.NON_ASCII),
        # a NUL: at the start of its line, before the errors on it (`python FILE`)
        "x = 1\ny = \0\n": (Code.SYNTAX, 2, 0, Syntax.NULL_BYTES),
        "x = 1\ny = $ \0\n": (Code.SYNTAX, 2, 0, Syntax.NULL_BYTES),
        "x = 1\n\0 = 'é'\n": (Code.UNSUPPORTED, 2, 5, Unsupported.NON_ASCII),
        # CPython's 200 open brackets, of any kind
        "x = " + "(" * 201 + "\n": (Code.SYNTAX, 1, 204, Syntax.TOO_MANY_PARENS),
        "x = " + "(" * 200 + "[\n": (Code.SYNTAX, 1, 204, Syntax.TOO_MANY_PARENS),
        "x = (\n" + "(" * 200 + "\n": (Code.SYNTAX, 2, 199, Syntax.TOO_MANY_PARENS),
        # encode drops a byte-order mark: columns do not count it
        "\ufeffx = 'a'\n": (Code.UNSUPPORTED, 1, 4, Unsupported.STRING),
    }
    for (src, want), (_, err) in zip(cases.items(), lex_many(list(cases)), strict=True):
        assert err == tuple(int(x) for x in want), src
        if TOKENIZE_IS_311:  # the host reference asks this Python's tokenize
            assert tuple(int(x) for x in host_lex(src, LIM)[1]) == err, src


# A number glued to what follows it: tokenize splits the text without complaint, CPython's
# tokenizer rejects it, with "leading zeros in decimal integer literals are not permitted"
# or "invalid ... literal" (and lets and/else/for/if/in/not/or follow a number).
GLUED = [
    "x = 007", "x = 0_7", "x = 09", "x = 00_7", "x = 01x", "x = 08_1", "x = 0_0_1",
    "x = 0_7x", "x = 0_7_1", "x = 01_2a", "x = 01if 1 else 2", "x = 01or 1",
    "x = 0or 1", "x = 0x", "x = 1_", "x = 0b12", "x = 0_x", "x = 00x1", "x = 00",
    "x=0b", "x = 1a", "x = 0a", "x = 0_", "x = 00_", "x = 01_", "x = 01__2", "x = 0_7_",
    "x = 07e", "x = 0_7e", "x = 0__7", "x = 1True", "while 0while 1: pass",
    "x = 1if 1 else 2", "x = 1 if 1else 2", "x = 0x1for 1", "x = 0b1and 1", "x = 00or 1",
    "x = 1not in 2", "for i in range(0in 1): pass",
]  # fmt: skip


def test_glued_numbers_read_like_cpython():
    sources = [s + "\n" for s in GLUED]
    for src, (_, err) in zip(sources, lex_many(sources), strict=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ast.parse(src)
                want = (0, 0, 0)
            except SyntaxError as e:
                want = (int(Code.SYNTAX), e.lineno, int(syntax_detail(e.msg)))
        assert (err[0], err[1], err[3]) == want, src
        if TOKENIZE_IS_311:  # the host reference asks this Python's tokenize
            h = host_lex(src, LIM)[1]
            assert (int(h.code), int(h.line), int(h.detail)) == want, src


COLLIDING = ["ab = ba + ab + ba + abc + cab + bca + abc\n", "xy = 1\nyx = xy\nxy = yx\n"]


def test_hash_collisions_are_resolved():
    # with multiplier 1 the hash is the byte sum: anagrams collide
    for src, (toks, err) in zip(COLLIDING, lex_many(COLLIDING, muls=(1,)), strict=True):
        assert_same_as_host(src, toks, err)


def test_interning_without_packed_keys(monkeypatch):
    """Limits too large for the user flag, length and slot to share one int32 (``jaxcc
    run``'s tier of 64 KB, ``python -m jaxcc.lexer`` on a file over 8 KB) sort three
    operands: the same ids, collisions included."""
    assert lexer._intern_key_bits(LIM.max_source_bytes, LIM.max_tokens + 1) is not None
    assert lexer._intern_key_bits(1 << 14, (1 << 14) + 1) is not None  # jaxcc run's 16 KB tier
    assert lexer._intern_key_bits(1 << 16, (1 << 14) + 1) is None  # its 64 KB tier
    monkeypatch.setattr(lexer, "_intern_key_bits", lambda n, ts: None)
    srcs = COLLIDING + [s for s in EXAMPLES if s][: B - len(COLLIDING)]
    src, n = lexer.encode(srcs, LIM)
    lex = jax.jit(lexer._lex_batched, static_argnames=("limits",))
    for muls in ((1,), LT.HASH_MULS):
        toks, err = lex(src, n, lexer.dfa_tables(LIM.max_source_bytes, muls), limits=LIM)
        for j, s in enumerate(srcs):
            one = jax.tree.map(lambda x, j=j: np.asarray(x)[j], toks)
            assert_same_as_host(s, one, tuple(int(np.asarray(e)[j]) for e in err))


def test_unbatched_program_and_cli_limits():
    limits = lexer.cli_limits(10)
    src = "def f(a):\n    return a  # c\nprint(f(1))"
    s, n = lexer.encode([src], limits)
    toks, err = lexer.lex(s[0], n[0], limits)
    assert toks.kind.shape == (limits.max_tokens,)
    h_toks, h_err = host_lex(src, limits)
    assert tuple(int(x) for x in err) == tuple(int(x) for x in h_err)
    for f in toks._fields:
        np.testing.assert_array_equal(np.asarray(getattr(toks, f)), getattr(h_toks, f))


def test_cli_matches_python_m_tokenize(tmp_path, capsys):
    files = {
        "a.py": "def f(a, b):\n    # c\n    return a + b  # hi\n\nx = (1 +\n  2)\nif x >= 0b11: print(f(x, 0x_1F))\n",
        "b.py": "while True:\n\tbreak\ny = 1 \\\n  + 2",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        for flags in ([], ["-e"]):
            want = subprocess.run(
                [sys.executable, "-m", "tokenize", *flags, str(path)],
                capture_output=True,
                text=True,
            ).stdout
            assert lexer.main([*flags, str(path)]) == 0
            assert capsys.readouterr().out == want
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\ny = $\n")
    assert lexer.main([str(bad)]) == 1
    # shown as `jaxcc run` and CPython show it (one renderer: jaxcc.format)
    want = f'  File "{bad}", line 2\n    y = $\n        ^\nSyntaxError: invalid syntax\n'
    assert capsys.readouterr().err == want


# ---- each kernel against its sequential Python


@pytest.mark.parametrize("mode", ["merge", "vector"])
def test_dfa_scan_matches_sequential(mode):
    rng = np.random.default_rng(0)
    cls = rng.integers(0, LT.N_CLASSES, (8, 64)).astype(np.int32)
    dfa = jax.jit(jax.vmap(lambda c, t: lexer._dfa_states(c, mode, t), in_axes=(0, None)))
    got = np.asarray(dfa(jnp.asarray(cls), lexer.dfa_tables(64)))
    for row, g in zip(cls, got, strict=True):
        s, want = 0, []
        for c in row:
            s = LT.TRANS[c, s]
            want.append(s)
        assert g.tolist() == want


@pytest.mark.parametrize("col_hi", [None, 64])  # int32, and int16 (the lexer's small N)
def test_indent_stack_matches_sequential(col_hi):
    rng = np.random.default_rng(1)
    cols = []
    for _ in range(32):  # columns that only dedent to levels on the stack
        stack, row = [0], []
        for _ in range(20):
            if rng.random() < 0.4:
                stack.append(stack[-1] + int(rng.integers(1, 4)))
            elif rng.random() < 0.5 and len(stack) > 1:
                del stack[int(rng.integers(1, len(stack))) :]
            row.append(stack[-1])
        cols.append(row)
    cols = np.array(cols, np.int32)
    ok = np.ones_like(cols, bool)
    got = jax.jit(jax.vmap(lambda c, o: lexer._indent_stack(c, o, 12, col_hi)))(cols, ok)
    for row, depth, mism in zip(cols, np.asarray(got.depth), np.asarray(got.mismatch), strict=True):
        stack = [0]
        for k, c in enumerate(row):
            if c < stack[-1]:  # a dedent: to a level on the stack
                assert not mism[k]
            if c > stack[-1]:
                stack.append(c)
            while c < stack[-1]:
                stack.pop()
            assert depth[k] == len(stack) - 1
    bad = jax.jit(lambda c, o: lexer._indent_stack(c, o, 12, col_hi))(
        jnp.array([4, 8, 6, 0], jnp.int32), jnp.ones(4, bool)
    )
    assert np.asarray(bad.mismatch)[2:].tolist() == [True, False]  # 6 is not on [0, 4, 8]


def test_indent_columns_match_sequential():
    rng = np.random.default_rng(2)
    lines = [
        "".join(rng.choice([" ", "\t", "\f"], int(rng.integers(0, 12)))) + "x\n" for _ in range(24)
    ]
    data = "".join(lines).encode()
    b = np.frombuffer(data, np.uint8).astype(np.int32)
    idx = np.arange(len(b), dtype=np.int32)
    starts = np.array([0] + [i + 1 for i, c in enumerate(data[:-1]) if c == 10], np.int32)
    pos = np.array(
        [s + len(ln) - len(ln.lstrip(" \t\f")) for s, ln in zip(starts, lines, strict=True)],
        np.int32,
    )
    full_pos = np.zeros_like(idx)
    full_pos[starts] = pos
    got = np.asarray(jax.jit(lexer._indent_columns)(b, idx, idx, full_pos))[starts]
    for ln, g in zip(lines, got, strict=True):
        col = 0
        for ch in ln:
            if ch == " ":
                col += 1
            elif ch == "\t":
                col = (col // 8 + 1) * 8
            elif ch == "\f":
                col = 0
            else:
                break
        assert g == col, repr(ln)


@pytest.mark.parametrize("text", ["x = 1\n", "if a:\n  b = (1,\n 2)\n"])
def test_encode_pads_and_keeps_lengths(text):
    s, n = lexer.encode([text, text.encode()], LIM)
    assert s.shape == (2, LIM.max_source_bytes) and s.dtype == np.uint8
    assert n.tolist() == [len(text)] * 2 and bytes(s[0, : n[0]]) == text.encode()


def test_limits_beyond_the_error_keys_are_refused():
    # the lexer orders errors by 4 * byte + kind below 2**30
    too_big = Limits(max_source_bytes=1 << 28)
    with pytest.raises(ValueError, match="max_source_bytes"):
        lexer.lex(np.zeros((1, 8), np.uint8), np.zeros(1, np.int32), too_big)
    with pytest.raises(ValueError, match="max_nodes"):
        Limits(max_nodes=1 << 25).check()
    assert LIM.check() == LIM


def test_narrow_scans_match_int32():
    # positions in [-1, len + 1] or _BIG: the int16 scans give the int32 scans' results
    rng = np.random.default_rng(5)
    n = 300
    x = rng.integers(-1, n + 2, n).astype(np.int32)
    x[rng.random(n) < 0.3] = lexer._BIG
    x = jnp.asarray(x)
    assert np.array_equal(lexer._cummax(x), jax.lax.cummax(x, axis=0))
    assert np.array_equal(lexer._rcummin(x), jax.lax.cummin(x, axis=0, reverse=True))
    assert lexer._cummax(x).dtype == lexer._rcummin(x).dtype == jnp.int32
    d = jnp.asarray(rng.integers(-1, 2, n).astype(np.int32))
    assert np.array_equal(lexer._cumsum(d, n), jnp.cumsum(d))


def test_lex_in_two_halves_equals_lex():
    """``lex_back(lex_front(...))``, each half its own jit (the compiler's split compile),
    gives exactly ``lex``'s tokens and errors, on valid programs and on every kind of
    lexical error."""
    import glob
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = [open(f).read() for f in sorted(glob.glob(os.path.join(root, "examples", "*.py")))]
    sources += ["x = 1 +\n", "s = 'abc\n", "x = 0x\n", "if x:\n\t  y = 1\n  z = 2\n",
                "x = 1\n  y = 2\n", "a = 1$\n", "x = 12abc\n", "def f(:\n", "", "x = (\n"]  # fmt: skip
    src, length = lexer.encode(sources, LIM)
    want = lexer.lex(src, length, LIM)
    front = jax.jit(lambda s, n: lexer.lex_front(s, n, LIM))(src, length)
    got = jax.jit(lambda s, n, f: lexer.lex_back(s, n, f, LIM))(src, length, front)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert (np.asarray(want[1].code) != Code.OK).sum() >= 6  # the errors took part


def test_width_tiers_equal_one_width(monkeypatch):
    """``lex(..., tiers=True)`` (the length-sorted batch lexed at the cheapest of 3 N / 8,
    N / 2 and N, the programs too long for it again at N in chunks, results back in batch
    order: ``arrays.by_width``) gives exactly the one-width lexer's tokens and errors for
    each of the three plans: short and long programs, programs too long for N, lexical
    errors, junk bytes past each length, and several chunks of long programs (the last
    one reaching back over short ones)."""
    import glob
    import os

    from jaxcc import arrays

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = [open(f).read() for f in sorted(glob.glob(os.path.join(root, "examples", "*.py")))]
    sources += ["x = 1 +\n", "s = 'abc\n", "x = 0x\n", "if x:\n\t  y = 1\n  z = 2\n", "",
                "a = 1$\n", "x = (\n", "y" * 300, "z = 1\n" * 100, "w = 2\n" * 45]  # fmt: skip
    sources += ["v = 3\n" * k for k in range(33, 43)]  # 198-252 bytes: between 3 N / 8 and N / 2
    rng = np.random.default_rng(7)
    sources += [bytes(rng.integers(9, 127, int(rng.integers(0, 600)), dtype=np.uint8))
                for _ in range(40)]  # fmt: skip
    N = LIM.max_source_bytes
    src, length = lexer.encode(sources, LIM)
    for j in range(len(sources)):
        src[j, min(length[j], N) :] = 0x41  # junk past the length must not matter
    assert lexer.tier_widths(N, len(sources), True) == (3 * N // 8, N // 2, N)
    assert lexer.tier_widths(N, len(sources), False) == ()
    assert 10 < (length > N // 2).sum() and (length > N).sum() >= 3
    want = lexer.lex(src, length, LIM, tiers=False)
    assert (np.asarray(want[1].code) != Code.OK).sum() >= 20  # the errors took part
    monkeypatch.setattr(lexer, "LONG_CHUNK_BYTES", 7 * N)  # chunks of 7 long programs
    short = np.flatnonzero(length <= 3 * N // 8)
    mid = np.flatnonzero((length > 3 * N // 8) & (length <= N // 2))
    long = np.flatnonzero(length > N // 2)
    M = 32  # every plan's batch has M rows (some repeated): the tiered lexer compiles once
    row_sets = {
        0: np.r_[np.resize(short, M - 9), long[:9]],  # mostly short: 3 N / 8, two chunks at N
        1: np.r_[np.resize(mid, M - 6), short[:4], long[:2]],  # N / 2, then one chunk at N
        2: np.r_[short[:1], np.resize(long, M - 4), short[1:4]],  # mostly long: N alone
    }
    for plan, rows in row_sets.items():
        assert len(rows) == M
        k, n_loop = arrays.width_plan(jnp.asarray(length[rows]), N, (3 * N // 8, N // 2), 7)
        assert int(k) == plan and (int(n_loop) > 0) == (plan < 2), (plan, k, n_loop)
        got = lexer.lex(src[rows], length[rows], LIM, tiers=True)
        for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(np.asarray(a)[rows], np.asarray(b))
