"""The parser against CPython's ast and the host oracle (reference.flatten)."""

from __future__ import annotations

import ast
import os

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TOKENIZE_311
from jaxcc import grammar
from jaxcc.errors import Code, Error, Limit, Syntax, Unsupported
from jaxcc.limits import Limits
from jaxcc.parser import main, parse, parse_with_info
from jaxcc.pyast import to_python_ast
from jaxcc.reference.flatten import flatten
from jaxcc.reference.host_lex import host_lex, host_lex_many
from jaxcc.syntax import Ast, Node
from jaxcc.tokens import Tok, Tokens

L = Limits(max_tokens=256, max_nodes=256, max_parse_depth=64)
SMALL = Limits(max_tokens=256, max_nodes=64, max_parse_depth=32)
B = 16  # every batch is padded to B programs: one compilation for the whole file
SLOW = os.environ.get("JAXCC_SLOW") == "1"


def _np(tree):
    return jax.tree.map(np.asarray, tree)


def _row(tree, b):
    return jax.tree.map(lambda x: x[b], tree)


def parse_sources(sources, limits=L):
    """Parse a list of sources in batches of B: (trees, errors, infos, tokens, lex errors)."""
    out = []
    for i in range(0, len(sources), B):
        chunk = list(sources[i : i + B])
        chunk += [""] * (B - len(chunk))
        toks, lerr = host_lex_many(chunk, limits)
        tree, err, info = _np(parse_with_info(toks, limits, lerr))
        for b in range(len(sources[i : i + B])):
            out.append((_row(tree, b), _row(err, b), _row(info, b), _row(toks, b), _row(lerr, b)))
    return out


def assert_matches_cpython(src, tree, err, toks):
    assert int(err.code) == Code.OK, (src, err)
    mine = ast.dump(to_python_ast(tree, toks, src), include_attributes=True, indent=1)
    want = ast.dump(ast.parse(src), include_attributes=True, indent=1)
    assert mine == want, src
    ref, _, rerr = flatten(src, L)
    assert int(rerr.code) == Code.OK
    for f in Ast._fields:
        np.testing.assert_array_equal(getattr(tree, f), getattr(ref, f), err_msg=f"{f}: {src!r}")


VALID = [
    "",
    "\n\n# only a comment\n",
    "x = 1\n",
    "x = 1",  # no final newline
    "pass\n",
    "x = 1; y = 2;  # two\nz = x\n",
    # precedence and associativity of every operator
    "print(1 + 2 * 3 - 4 // 5 % 6)\n",
    "print(2 ** 3 ** 2, -2 ** 2, 2 ** -1, -+~x)\n",
    "print(a | b ^ c & d << e >> f + g)\n",
    "print(a - b - c, a // b // c, (a - b) - c, a - (b - c))\n",
    "print(not a == b, not not a, a and b or c and d, a or b or c, (a or b) or c)\n",
    "print(a and (b and c), a < b <= c > d >= e == f != g, (a < b) < c)\n",
    "print(a if b else c if d else e, (a if b else c) if d else e)\n",
    "x = ((1 + (2)) * ((x)))\n",
    "x = (  # comment inside\n  1 +\n  2\n)\n",
    "x = 1 + \\\n  2\n",
    "x = 0x_ff + 0o17 + 0b1_0 + 1_000 + 00 + 2147483648\n",
    "x = True; y = False; z = None\n",
    "x += 1\nx -= 1\nx *= 2\nx //= 3\nx %= 4\nx **= 2\nx <<= 1\nx >>= 1\nx &= 1\nx |= 1\nx ^= 1\n",
    "(x) = 1\n(y) += 2\n",
    # statements
    "if a:\n    x = 1\n",
    "if a:\n    x = 1\nelse:\n    x = 2\n",
    "if a:\n x\nelif b:\n y\nelif c:\n z\nelse:\n w\n",
    "if a:\n    pass\nelse:\n    if b:\n        pass\n",
    "if a: x = 1\nelif b: x = 2\nelse: x = 3; y = 4;\n",
    "while x < 10:\n    x += 1\n    if x == 5:\n        break\n    continue\n",
    "while True: pass\n",
    "for i in range(10):\n    print(i)\n",
    "for i in range(1, 10, 2): print(i, end)\n",
    "for (i) in range(3):\n    pass\n",
    "def f():\n    pass\n",
    "def f(a, b,):\n    return a + b\n",
    "def f(a: int, b: bool) -> int:\n    return a\n",
    "def f(a: int) -> None:\n    return\n",
    "def f() -> bool: return True\n",
    "def g(n):\n    if n <= 0:\n        return 0\n    return g(n - 1) + 1\nprint(g(3))\n",
    "assert x\nassert x > 1 and y\n",
    "print()\nprint(1,)\nprint(abs(-1), min(1, 2), max(1, 2, 3))\n",
    "if a:\n    if b:\n        x = 1\n    else:\n        x = 2\n",
    "def f(x):\n\tif x:\n\t\treturn 1\n\treturn 2\n",
    "if a:\n    x = 1\n\n   # odd comment\n\n    y = 2\nz = 3\n",
    "x = 1  # trailing\n",
    "if a: pass;\n",
    "def f():\n    x = 1;\n",
]


def test_valid_programs_match_cpython():
    for src, (tree, err, info, toks, _) in zip(VALID, parse_sources(VALID), strict=True):
        assert_matches_cpython(src, tree, err, toks)
        assert int(info.state) == -1


# (source, code, detail or None, line as CPython reports it)
ERRORS = [
    ("if x\n  pass\n", Code.SYNTAX, Syntax.EXPECTED_COLON, 1),
    ("while x\n  pass\n", Code.SYNTAX, Syntax.EXPECTED_COLON, 1),
    ("def f()\n  pass\n", Code.SYNTAX, Syntax.EXPECTED_COLON, 1),
    ("for i in range(3)\n  pass\n", Code.SYNTAX, Syntax.EXPECTED_COLON, 1),
    ("if x:\n  pass\nelse\n  pass\n", Code.SYNTAX, Syntax.EXPECTED_COLON, 3),
    ("if x pass\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("else x:\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("elif x:\n  pass\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("def f(a b): pass\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x = (1 +\n)\n", Code.SYNTAX, Syntax.INVALID, 2),
    ("x +\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x = 1 +", Code.SYNTAX, Syntax.INVALID, 1),
    ("f(a b)\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("print((0\n& False False) ** 0)\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("print(1,\n f(x) + \n g(2)\n 3)\n", Code.SYNTAX, Syntax.INVALID, 2),
    ("print(1 if x else\n 2 3)\n", Code.SYNTAX, Syntax.INVALID, 2),
    ("print(1\n if x 2)\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x = (1\n if x << \n 2 % else 3)\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x = (1\n if x +\n)\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x = (1 if x else\n)\n", Code.SYNTAX, Syntax.INVALID, 2),
    ("x = 1 2\n", Code.SYNTAX, Syntax.INVALID, 1),
    (")\n", Code.SYNTAX, Syntax.UNMATCHED_PAREN, 1),
    # an unmatched ')' that a later '(' balances (tokenize sees no error at all)
    ("x = (4 + 1))\ny = (1\n", Code.SYNTAX, Syntax.UNMATCHED_PAREN, 1),
    ("x = 1\nprint(x))\n", Code.SYNTAX, Syntax.UNMATCHED_PAREN, 2),
    ("x = -\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x = 1;;\n", Code.SYNTAX, Syntax.INVALID, 1),
    (";\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x += 1 = 2\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("1 +* 2\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x = 1 if y\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("if x:\n  pass\n  else: y\n", Code.SYNTAX, Syntax.INVALID, 3),
    ("f() = 1\n", Code.SYNTAX, Syntax.CANNOT_ASSIGN, 1),
    ("x = 1\n1 = x\n", Code.SYNTAX, Syntax.CANNOT_ASSIGN, 2),
    ("x + 1 += 1\n", Code.SYNTAX, Syntax.CANNOT_ASSIGN, 1),
    ("for 1 in range(3):\n  pass\n", Code.SYNTAX, Syntax.CANNOT_ASSIGN, 1),
    ("x = 1\n  y = 2\n", Code.INDENTATION, Syntax.UNEXPECTED_INDENT, 2),
    ("  x = 1\n", Code.INDENTATION, Syntax.UNEXPECTED_INDENT, 1),
    ("if x:\n  y\n    z\n", Code.INDENTATION, Syntax.UNEXPECTED_INDENT, 3),
    ("if x:\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 1),
    ("if x:\ny\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 2),
    ("if x:\n# c\n\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 3),
    ("def f():\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 1),
    ("x = 1\nif y:\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 2),
    ("while x:\npass\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 2),
    ("if x:\n  pass\nelse:\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 3),
    ("def f():\n  if y:\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 2),
    ("if a:\n  if b:\nz = 1\n", Code.INDENTATION, Syntax.EXPECTED_INDENT, 3),
    # valid Python outside the subset
    ("a, b = 1, 2\n", Code.UNSUPPORTED, Unsupported.TUPLE, 1),
    ("x = (1, 2)\n", Code.UNSUPPORTED, Unsupported.TUPLE, 1),
    ("x = ()\n", Code.UNSUPPORTED, Unsupported.TUPLE, 1),
    ("return 1,\n", Code.UNSUPPORTED, Unsupported.TUPLE, 1),
    ("a = b = 1\n", Code.UNSUPPORTED, Unsupported.CHAINED_ASSIGNMENT, 1),
    ("a = b = (c) = 1\n", Code.UNSUPPORTED, Unsupported.CHAINED_ASSIGNMENT, 1),
    # a chain with a target that is not a name: CPython's SyntaxError, not Unsupported
    ("a = 1 = 2\n", Code.SYNTAX, Syntax.CANNOT_ASSIGN, 1),
    ("a + 1 = b = 1\n", Code.SYNTAX, Syntax.CANNOT_ASSIGN, 1),
    ("x = 1\ng2 = 0 + x = 0\n", Code.SYNTAX, Syntax.CANNOT_ASSIGN, 2),
    ("a = b = c + 1 = 2\n", Code.SYNTAX, Syntax.CANNOT_ASSIGN, 1),
    ("x: int = 1\n", Code.UNSUPPORTED, Unsupported.ANNOTATED_ASSIGNMENT, 1),
    ("f(a=1)\n", Code.UNSUPPORTED, Unsupported.KEYWORD_ARGUMENT, 1),
    ("f(*a)\n", Code.UNSUPPORTED, Unsupported.STAR_ARGUMENT, 1),
    # CPython: "cannot use starred expression here" (a SyntaxError, not a missing feature)
    ("g = (*a)\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("x = 1\ng = ( * 0) ** 0\n", Code.SYNTAX, Syntax.INVALID, 2),
    ("f(**a)\n", Code.UNSUPPORTED, Unsupported.STAR_ARGUMENT, 1),
    ("f(*a, b, c=1, *d, **e,)\n", Code.UNSUPPORTED, Unsupported.STAR_ARGUMENT, 1),
    ("x = 1\nreturn *x\n", Code.UNSUPPORTED, Unsupported.STAR_ARGUMENT, 2),
    ("f(a=1, \n2)\n", Code.SYNTAX, Syntax.INVALID, 2),
    ("f(**a, 2)\n", Code.SYNTAX, Syntax.INVALID, 1),
    ("def f(a=1): pass\n", Code.UNSUPPORTED, Unsupported.DEFAULT_ARGUMENT, 1),
    ("def f(a: int = 1): pass\n", Code.UNSUPPORTED, Unsupported.DEFAULT_ARGUMENT, 1),
    ("def f(*a): pass\n", Code.UNSUPPORTED, Unsupported.STAR_ARGUMENT, 1),
    ("def f(a, **k): pass\n", Code.UNSUPPORTED, Unsupported.STAR_ARGUMENT, 1),
    ("while x:\n  pass\nelse:\n  pass\n", Code.UNSUPPORTED, Unsupported.LOOP_ELSE, 3),
    ("for i in range(3):\n  pass\nelse:\n  pass\n", Code.UNSUPPORTED, Unsupported.LOOP_ELSE, 3),
    ("def f():\n  def g(): pass\n", Code.UNSUPPORTED, Unsupported.NESTED_FUNCTION, 2),
    ("if x:\n  def g(): pass\n", Code.UNSUPPORTED, Unsupported.NESTED_FUNCTION, 2),
    ("def f(a: list): pass\n", Code.UNSUPPORTED, Unsupported.ANNOTATION, 1),
    ("def f(a) -> float: pass\n", Code.UNSUPPORTED, Unsupported.ANNOTATION, 1),
    (
        "def f(a: bool, b) -> int: pass\ndef g(a: x): pass\n",
        Code.UNSUPPORTED,
        Unsupported.ANNOTATION,
        2,
    ),
    ("print(x in y)\n", Code.UNSUPPORTED, Unsupported.COMPARISON, 1),
    ("print(x not in y)\n", Code.UNSUPPORTED, Unsupported.COMPARISON, 1),
    ("f()()\n", Code.UNSUPPORTED, Unsupported.CALL_TARGET, 1),
    ("(f)(1)\n", Code.UNSUPPORTED, Unsupported.CALL_TARGET, 1),
    ("assert x, 1\n", Code.UNSUPPORTED, Unsupported.TUPLE, 1),
    ("for a, b in range(3):\n  pass\n", Code.UNSUPPORTED, Unsupported.FOR_TARGET, 1),
    # a SyntaxError wins over an earlier construct outside the subset
    ("a, b = 1, 2\nx = (\n1 2)\n", Code.SYNTAX, Syntax.INVALID, 3),
]


def test_errors_match_cpython():
    sources = [e[0] for e in ERRORS]
    for (src, code, detail, line), (_, err, info, _, _) in zip(
        ERRORS, parse_sources(sources), strict=True
    ):
        got = (Code(int(err.code)), int(err.detail), int(err.line))
        assert got == (code, detail, line), src
        try:
            ast.parse(src)
            cpython = None
        except SyntaxError as e:
            cpython = (
                Code.INDENTATION if isinstance(e, IndentationError) else Code.SYNTAX,
                e.lineno,
            )
        if code in (Code.SYNTAX, Code.INDENTATION):
            assert cpython == (code, line), src
        else:
            assert cpython is None, src  # valid Python, outside the subset
            assert int(flatten(src, L)[2].code) == code, src
        if code == Code.SYNTAX and detail in (Syntax.INVALID, Syntax.EXPECTED_COLON):
            assert int(info.state) >= 0


def test_expected_tokens_of_failing_state():
    (_, err, info, _, _), (_, err2, info2, _, _) = parse_sources(["if x\n", "x = 1 +\n"])
    assert int(err.detail) == Syntax.EXPECTED_COLON
    assert Tok.COLON in grammar.expected_tokens(int(info.state))
    want = {Tok.NAME, Tok.NUMBER, Tok.LPAR, Tok.MINUS, Tok.KW_TRUE}
    assert want <= set(grammar.expected_tokens(int(info2.state)))
    assert Tok.NEWLINE not in grammar.expected_tokens(int(info2.state))


def test_limits():
    deep = "x = " + "(" * 70 + "1" + ")" * 70 + "\n"
    wide = "x = " + " + ".join(["1"] * 100) + "\n"  # 201 nodes + 3: fits in 256
    (_, e1, _, _, _), (t2, e2, _, k2, _) = parse_sources([deep, wide])
    assert (int(e1.code), int(e1.detail), int(e1.line)) == (Code.LIMIT, Limit.PARSE_DEPTH, 1)
    assert_matches_cpython(wide, t2, e2, k2)
    # 64 nodes: the 32nd `1 +` needs the 65th
    wider = "x = 1\nx = " + " + ".join(["1"] * 40) + "\n"
    toks, lerr = host_lex(wider, L)
    tree, err = _np(parse(toks, SMALL, lerr))
    assert (int(err.code), int(err.detail), int(err.line)) == (Code.LIMIT, Limit.NODES, 2)
    assert int(tree.n_nodes) == 0


@TOKENIZE_311
def test_lexer_error_and_parser_error_first_in_source_order():
    cases = [
        # the lexer's error comes first: the parser stops before it
        ('x = 1\ny = "s" +\n', Code.UNSUPPORTED, Unsupported.STRING, 2),
        # a syntax error before the lexer's error
        ('x = 1 2\ny = "s"\n', Code.SYNTAX, Syntax.INVALID, 1),
        # the parser's Unsupported before the lexer's
        ('x = 1, 2\ny = "s"\n', Code.UNSUPPORTED, Unsupported.TUPLE, 1),
        # a SyntaxError from the lexer wins over the parser's Unsupported
        ("x = 1, 2\ny = 1 $ 2\n", Code.SYNTAX, Syntax.INVALID, 2),
        ("x = 1, 2\ny = 1 \x01 2\n", Code.SYNTAX, Syntax.INVALID_CHARACTER, 2),
        ("if x:\n    y = 1\n  z = 2\n", Code.INDENTATION, Syntax.UNINDENT_MISMATCH, 3),
        # CPython prefers some tokenizer errors anywhere after its parser's SyntaxError ...
        ("x = 1 2\ny = 0b12\n", Code.SYNTAX, Syntax.INVALID_NUMBER, 2),
        ("if x\nprint(x))\n", Code.SYNTAX, Syntax.UNMATCHED_PAREN, 2),
        ("x = 1 2\ny = (\n", Code.SYNTAX, Syntax.INVALID, 1),  # opened after the error
        ("x = (\n1 2\n", Code.SYNTAX, Syntax.UNEXPECTED_EOF, 1),  # opened before it
        # tokenize's "EOF in multi-line statement" made CPython's
        ("x = 1\ny = 2)\n", Code.SYNTAX, Syntax.UNMATCHED_PAREN, 2),
        # an unmatched ')' before a later lexer error
        ("x = 1)\nif x:\n    y\n  z\n", Code.SYNTAX, Syntax.UNMATCHED_PAREN, 1),
        ("x = ((1)\n\n", Code.SYNTAX, Syntax.UNEXPECTED_EOF, 1),
        # ... but not others, nor after an unexpected indent
        ("x = 1 2\ny = 1 $ 2\n", Code.SYNTAX, Syntax.INVALID, 1),
        ("if x\n    y = 1\n  z = 2\n", Code.SYNTAX, Syntax.EXPECTED_COLON, 1),
        ("x = 1\n  y = 2\nz = 0b12\n", Code.INDENTATION, Syntax.UNEXPECTED_INDENT, 2),
    ]
    res = parse_sources([c[0] for c in cases])
    for (src, code, detail, line), (tree, err, _, _, lerr) in zip(cases, res, strict=True):
        assert int(lerr.code) != Code.OK
        assert int(err.code) == code, src
        assert int(err.detail) == detail, src
        assert int(err.line) == line, src
        assert int(tree.n_nodes) == 0


def test_batch_isolation_and_single_program():
    srcs = VALID[:8] + [e[0] for e in ERRORS[:8]]
    batched = parse_sources(srcs)
    for src, (tree, err, info, _, _) in zip(srcs, batched, strict=True):
        toks, lerr = host_lex(src, L)
        t1, e1, i1 = _np(parse_with_info(toks, L, lerr))  # unbatched
        for a, b in zip(
            jax.tree.leaves((tree, err, info)), jax.tree.leaves((t1, e1, i1)), strict=True
        ):
            np.testing.assert_array_equal(a, b, err_msg=src)


def test_jit_matches_eager():
    src = "x = -a\n"  # eager mode is slow: one while_loop iteration
    toks, lerr = host_lex(src, L)
    jitted = _np(parse(toks, SMALL, lerr))
    with jax.disable_jit():
        eager = _np(parse(toks, SMALL, lerr))
    for a, b in zip(jax.tree.leaves(jitted), jax.tree.leaves(eager), strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(jitted[1].code) == Code.OK


def test_node_rows_past_the_count_are_never_read(monkeypatch):
    """The Pallas kernel leaves the node rows it does not write undefined (no zero
    fill): ``parser._finish`` must read no row at or past a program's node count. The
    XLA loop started from nodes full of garbage (large, negative, every field) gives
    the same Ast, Error and ParseInfo as from zeros, on valid programs and errors."""
    from jaxcc import parser

    srcs = VALID[:10] + [e[0] for e in ERRORS[:6]]
    toks, lerr = host_lex_many(srcs, L)
    fn = parser._parse_batch.__wrapped__  # a fresh trace with the patched _init
    args = (toks, lerr, parser._tables(), L, parser.STEPS_PER_ITER, "xla", ())
    want = _np(fn(*args))
    init = parser._init

    def garbage_init(D, N):
        c = init(D, N)
        junk = (jax.numpy.arange(N * 6, dtype=np.int32).reshape(N, 6) * 7919) ^ -(2**30)
        return c._replace(nodes=junk)

    monkeypatch.setattr(parser, "_init", garbage_init)
    got = _np(fn(*args))
    assert int(np.sum(want[1].code == Code.OK)) >= 10
    for path, a, b in zip(jax.tree_util.tree_flatten_with_path(want)[0],
                          jax.tree.leaves(got), jax.tree.leaves(want), strict=True):  # fmt: skip
        np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path[0]))


def test_tables_match_grammar():
    """The stored tables are exactly what the grammar generates (no conflicts: Lark's
    strict mode raises on any), and every rule's action is consistent."""
    built = grammar.build_tables()
    stored = grammar.load_tables()
    for f in grammar.Tables._fields:
        np.testing.assert_array_equal(getattr(built, f), getattr(stored, f), err_msg=f)
    rules = stored.rules
    F = grammar.F
    nodes = set(int(k) for k in rules[:, F["kind"]])
    # every node kind but PAD is made by some rule
    assert nodes == set(range(len(Node)))
    # an action never looks beyond its rule's right-hand side
    assert np.all((rules[:, F["check"]] == 0) | (rules[:, F["aux"]] < rules[:, F["len"]]))


def _tree_ok(tree):
    """Post-order structure invariants of a successful parse."""
    n = int(tree.n_nodes)
    assert n >= 1 and int(tree.kind[n - 1]) == Node.MODULE and int(tree.parent[n - 1]) == -1
    for i in range(n - 1):
        p = int(tree.parent[i])
        assert i < p < n
    counts = np.bincount(tree.parent[: n - 1], minlength=n)[:n]
    np.testing.assert_array_equal(counts, tree.n_children[:n])
    assert np.all(tree.kind[n:] == 0) and np.all(tree.parent[n:] == -1)


# tokens of every kind (COMMENT and NL included) in arbitrary order
_kinds = st.lists(st.sampled_from([k for k in Tok if k != Tok.PAD]), max_size=60)


@settings(max_examples=200 if SLOW else 25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_kinds, min_size=B, max_size=B), st.booleans())
def test_arbitrary_tokens_never_crash(batch, end):
    T = L.max_tokens
    kind = np.zeros((B, T), np.int32)
    n = np.zeros(B, np.int32)
    for b, ks in enumerate(batch):
        ks = list(ks) + ([Tok.ENDMARKER] if end else [])
        kind[b, : len(ks)] = ks
        n[b] = len(ks)
    pos = np.broadcast_to(np.arange(T, dtype=np.int32), (B, T))
    line = (pos // 4 + 1).astype(np.int32)
    col = (pos % 4 * 2).astype(np.int32)
    toks = Tokens(kind, pos, pos + 1, line, col, line, col + 1, pos % 9, n)
    tree, err, info = _np(parse_with_info(toks, L))
    assert np.all(
        np.isin(err.code, [Code.OK, Code.SYNTAX, Code.INDENTATION, Code.UNSUPPORTED, Code.LIMIT])
    )
    # never stuck: the step budget (a LIMIT error) is never what stops a parse
    assert np.all(info.steps <= 3 * np.maximum(n, 1) + 8)
    for b in range(B):
        if int(err.code[b]) == Code.OK:
            _tree_ok(_row(tree, b))
        else:
            assert int(tree.n_nodes[b]) == 0
            assert int(err.line[b]) >= 1


def test_cli(tmp_path, capsys):
    src = "def f(a: int) -> int:\n    return a + 1\nprint(f(2))\n"
    p = tmp_path / "ok.py"
    p.write_text(src)
    assert main([str(p)], limits=L) == 0
    assert capsys.readouterr().out == ast.dump(ast.parse(src), indent=1) + "\n"
    p = tmp_path / "bad.py"
    p.write_text("x = 1\nif x:\n\n")
    assert main([str(p)], limits=L) == 1
    errtext = capsys.readouterr().err
    assert "line 2" in errtext
    assert errtext.rstrip().endswith(
        "IndentationError: expected an indented block after 'if' statement on line 2"
    )


@pytest.mark.parametrize("kind", ["error", "ok"])
def test_error_is_reported_with_empty_ast_or_full_tree(kind):
    src = "x = (1 +\n2\n" if kind == "error" else "x = (1 +\n2)\n"
    ((tree, err, _, toks, lerr),) = parse_sources([src])
    if kind == "error":
        assert int(lerr.detail) == Syntax.EOF_IN_MULTILINE
        # CPython: "'(' was never closed" at the bracket
        assert Error(*[int(x) for x in err]) == Error(Code.SYNTAX, 1, 4, Syntax.UNEXPECTED_EOF)
        assert int(tree.n_nodes) == 0
    else:
        assert_matches_cpython(src, tree, err, toks)
        _tree_ok(tree)


def test_first_error_compares_positions_without_limits():
    """The parser picks its first error by (class, line, col) compared field by field:
    columns past 4095 and lines past 2**17 (a 262,144-byte tier holds both) still order."""
    from jaxcc.parser import _first_error

    S, U = Code.SYNTAX, Code.UNSUPPORTED

    def first(cands, lex_first=False):
        cands = [tuple(np.int32(x) for x in c) for c in cands]
        return tuple(int(x) for x in _first_error(cands, np.bool_(lex_first)))

    none = (0, 0, 0, 0)
    assert first([none, none, none]) == none
    assert first([(U, 1, 5000, 1), (U, 1, 4500, 2), none]) == (U, 1, 4500, 2)
    assert first([(U, 200_001, 0, 1), none, (U, 200_000, 9, 3)]) == (U, 200_000, 9, 3)
    assert first([(U, 1, 0, 1), (S, 9, 9, 2), none]) == (S, 9, 9, 2)  # syntax first
    assert first([(U, 3, 7, 1), (U, 3, 7, 2), none]) == (U, 3, 7, 1)  # ties: the earlier
    assert first([(S, 1, 0, 1), none, (S, 2, 0, 5)], lex_first=True) == (S, 2, 0, 5)
