"""jaxcc.neural.textbook (curriculum level 4): deterministic, in the subset, labelled,
and never the hand-written held-out programs."""

import ast
import pathlib

from jaxcc.limits import DEFAULT
from jaxcc.neural import corpus, textbook, train
from jaxcc.reference.compiler import compile_source

HOLDOUT = pathlib.Path(__file__).resolve().parent / "neural_holdout"


def test_a_pure_function_of_the_seed():
    assert textbook.program(7) == textbook.program(7)
    assert len({textbook.program(s) for s in range(20)}) == 20


def test_programs_are_python_and_in_the_subset():
    # CPython parses every one; the reference compiler (the labeller) accepts every one
    for s in range(60):
        src = textbook.program(s)
        ast.parse(src)
        c = compile_source(src, DEFAULT)
        assert int(c.error.code) == 0, (s, c.error, src)


def test_most_programs_label_within_the_neural_bounds():
    reasons = [corpus.label(corpus.generate_one(s, corpus.TEXTBOOK)).reason for s in range(60)]
    assert reasons.count("ok") >= 54, reasons


def test_held_out_programs_are_not_generated():
    hand = {ast.dump(ast.parse(p.read_text())) for p in HOLDOUT.glob("*.py")}
    made = {ast.dump(ast.parse(textbook.program(s))) for s in range(200)}
    assert not hand & made


def test_the_textbook_cycle_mixes_level_4_in_after_the_curriculum():
    assert {train.level_of(i, 1000, curriculum=False, textbook=True) for i in range(8)} == {
        0, 1, 2, 3, 4,
    }  # fmt: skip
    assert 4 not in {train.level_of(i, 1000, curriculum=False) for i in range(8)}
    assert 4 not in {train.level_of(i, 1000, textbook=True) for i in range(100)}
