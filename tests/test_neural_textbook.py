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


def _prints(src: str) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(src))
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "print"]  # fmt: skip


def _self_checks(src: str) -> int:
    """Module-level ``FLAG = True`` directly followed by a ``for`` whose body clears it."""
    body = ast.parse(src).body
    return sum(
        isinstance(a, ast.Assign) and isinstance(a.value, ast.Constant) and a.value.value is True
        and isinstance(b, ast.For)
        and any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                and n.value.value is False and n.targets[0].id == a.targets[0].id
                for n in ast.walk(b))
        for a, b in zip(body, body[1:], strict=False)
    )  # fmt: skip


def test_version_2_prints_more_values_and_checks_itself_version_1_is_kept():
    """Version 2 (stage 7) prints up to six values and has the self-check loop (a flag
    set True, cleared in a loop over calls, printed); version 1 (what stages 4-6 trained
    and were evaluated on) printed at most three values and has no such loop."""
    v1 = [textbook.program(s, 1) for s in range(150)]
    v2 = [textbook.program(s, 2) for s in range(150)]
    assert textbook.program(3) == v2[3]  # the default is the newest
    assert max(len(c.args) for s in v1 for c in _prints(s)) <= 3
    assert sum(map(_self_checks, v1)) == 0
    wide = [len(c.args) for s in v2 for c in _prints(s)]
    assert max(wide) == 6 and sum(n >= 4 for n in wide) >= 20, wide
    assert sum(map(_self_checks, v2)) >= 5
    for s in v2[:60]:  # still in the subset
        assert int(compile_source(s, DEFAULT).error.code) == 0, s
    # level 4's held-out programs of the stage 4-6 evaluations regenerate from version 1
    seed = corpus.HELDOUT_SEEDS[0] + 4000
    s1 = corpus.generate(seed, 32, corpus.TEXTBOOK, "heldout", textbook_version=1)
    s2 = corpus.generate(seed, 32, corpus.TEXTBOOK, "heldout")
    assert s1 != s2 and max(len(c.args) for s in s1 for c in _prints(s)) <= 3
