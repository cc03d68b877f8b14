"""The hand-written held-out programs of tests/neural_holdout/ (never trained on).

Small textbook-style programs of the language (docs/language.md), each ``NAME.py`` with
its expected stdout in ``NAME.out``; a program that stops with a run-time error names the
exception on its first line (``# expect: ZeroDivisionError``) and its ``.out`` holds the
stdout printed before the error. ``jaxcc.neural.evaluate`` reads the directory to measure
the neural compiler on them; these tests only check that the set itself is right: on the
pure-Python reference compiler and interpreter (under the strict ``limits.DEFAULT``) and
on CPython. ``load()`` gives the programs to other code.
"""

from __future__ import annotations

import io
import keyword
import pathlib
import subprocess
import sys
import tokenize

import pytest

from jaxcc import isa
from jaxcc.errors import EXCEPTION_NAME, Code
from jaxcc.limits import DEFAULT
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.interp import run_program

HOLDOUT = pathlib.Path(__file__).resolve().parent / "neural_holdout"
EXPECT = "# expect:"


def expected_exception(source: str) -> str | None:
    """The exception named by a first line ``# expect: NAME``, else None."""
    first = source.splitlines()[0] if source else ""
    return first[len(EXPECT) :].strip() if first.startswith(EXPECT) else None


def load(directory: pathlib.Path | str = HOLDOUT) -> list[tuple[str, str, str, str | None]]:
    """[(name, source, expected_stdout, expected_exception_or_None)], sorted by name."""
    rows = []
    for path in sorted(pathlib.Path(directory).glob("*.py")):
        source = path.read_text()
        rows.append((path.stem, source, path.with_suffix(".out").read_text(),
                     expected_exception(source)))  # fmt: skip
    return rows


PROGRAMS = load()
IDS = [p[0] for p in PROGRAMS]


def test_the_set():
    assert len(PROGRAMS) >= 60
    stems = {p.stem for p in HOLDOUT.glob("*.py")}
    assert stems == {p.stem for p in HOLDOUT.glob("*.out")}
    assert len([p for p in PROGRAMS if p[3] is not None]) <= 3
    assert not (HOLDOUT / "__init__.py").exists()


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_small(prog):
    """Within the sizes the set promises (and well within the neural path's bounds)."""
    _, source, expected, _ = prog
    toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER)]  # fmt: skip
    names = {t.string for t in toks if t.type == tokenize.NAME and not keyword.iskeyword(t.string)}
    assert len(toks) <= 250
    assert len(names) <= 40
    assert sum(t.type == tokenize.NUMBER for t in toks) <= 60
    assert 5 <= len(source.splitlines()) <= 40
    assert source.isascii()
    assert len(expected.split()) + expected.count("\n") <= 32  # printed items


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_reference(prog):
    name, source, expected, exc = prog
    compiled = compile_source(source, DEFAULT)
    assert int(compiled.error.code) == Code.OK, (name, compiled.error, compiled.debug.message)
    r = run_program(compiled.program, DEFAULT)
    assert isa.format_output(r.out_kind, r.out_val, r.n_out) == expected
    status = Code(int(r.status))
    if exc is None:
        assert status == Code.OK
    else:
        assert EXCEPTION_NAME[status] == exc


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_cpython(prog):
    name, _, expected, exc = prog
    p = subprocess.run([sys.executable, str(HOLDOUT / f"{name}.py")], capture_output=True,
                       text=True, timeout=10, check=False)  # fmt: skip
    assert p.stdout == expected
    if exc is None:
        assert p.returncode == 0, p.stderr
    else:
        assert p.returncode == 1
        assert p.stderr.strip().splitlines()[-1].split(":")[0] == exc
