"""jaxcc.dis: instruction records, CPython's column layout, the sections per function,
and the two command lines (python -m jaxcc.dis, jaxcc dis)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from jaxcc.dis import Instruction, dis, format_dis, format_instruction, functions, get_instructions
from jaxcc.isa import Op
from jaxcc.reference.compiler import compile_source

ROOT = os.path.join(os.path.dirname(__file__), "..")

SRC = """def f(a, b):
    if a < b < 10:
        return a
    return b

for i in range(3):
    if i == 1:
        break
    print(i, f(i, 2), i > 0)
"""


def compiled():
    c = compile_source(SRC)
    assert c.error.code == 0, c.debug.message
    return c


def test_records():
    c = compiled()
    ins = get_instructions(c.program, c.debug)
    assert [i.offset for i in ins] == list(range(int(c.program.n_code)))
    assert [i.opcode for i in ins] == c.program.op[: int(c.program.n_code)].tolist()
    entry_f = int(c.program.fn_entry[1])
    assert {i.fn for i in ins[:entry_f]} == {0} and {i.fn for i in ins[entry_f:]} == {1}
    by_name = {(i.opname, i.argrepr) for i in ins}
    assert ("STORE_VAR", "i") in by_name and ("LOAD_VAR", "a") in by_name
    assert ("CALL", "f") in by_name and ("STORE_VAR", "$cmp") in by_name
    targets = {i.arg for i in ins if i.opname.startswith(("JUMP", "FOR_RANGE"))}
    assert {i.offset for i in ins if i.is_jump_target} == targets
    for i in ins:
        if i.opname.startswith(("JUMP", "FOR_RANGE")):
            assert i.argrepr == f"to {i.arg}" and i.argval == i.arg
        if i.opname in ("RETURN_VALUE", "ADD", "LT", "PRINT_NEWLINE", "POP_TOP"):
            assert i.arg is None and i.argrepr == ""
    # starts_line marks each change of line within a function (and each function's start)
    prev = {}
    for i in ins:
        assert (i.starts_line is not None) == (prev.get(i.fn) != i.line)
        prev[i.fn] = i.line
    assert ins[0].starts_line == 6 and ins[entry_f].starts_line == 2


def test_functions_table():
    c = compiled()
    fs = functions(c.program, c.debug)
    assert [(f.id, f.name, f.nparams, f.nlocals) for f in fs] == [
        (0, "<module>", 0, 1),
        (1, "f", 2, 3),
    ]
    assert fs[0].end == fs[1].entry and fs[1].end == int(c.program.n_code)


# lines CPython 3.11's dis prints, rebuilt from the same fields
CPYTHON_LINES = [
    (Instruction(0, 2, 100, "LOAD_CONST", 0, 1, "1", 1, 1, False), "  1           2 LOAD_CONST               0 (1)"),
    (Instruction(0, 4, 90, "STORE_NAME", 0, "x", "x", 1, None, False), "              4 STORE_NAME               0 (x)"),
    (Instruction(0, 10, 101, "LOAD_NAME", 0, "x", "x", 3, 3, True), "  3     >>   10 LOAD_NAME                0 (x)"),
    (Instruction(0, 26, 83, "RETURN_VALUE", None, None, "", 2, None, False), "             26 RETURN_VALUE"),
    (Instruction(0, 28, 100, "LOAD_CONST", 1, None, "None", 2, None, True), "        >>   28 LOAD_CONST               1 (None)"),
]  # fmt: skip


@pytest.mark.parametrize("ins,line", CPYTHON_LINES)
def test_cpython_columns(ins, line):
    assert format_instruction(ins) == line


def test_format_dis_sections():
    c = compiled()
    text = format_dis(c.program, c.debug)
    assert text.startswith(
        "Disassembly of <module> (function 0: 0 params, 1 locals, maxstack 7, returns None):\n"
    )
    assert "\nDisassembly of f (function 1: 2 params, 3 locals, maxstack 2, returns int):\n" in text
    assert "  6           0 LOAD_CONST               0\n" in text
    assert "        >>    3 FOR_RANGE               24 (to 24)\n" in text
    assert "             14 CALL                     1 (f)\n" in text
    assert "             28 STORE_VAR                2 ($cmp)\n" in text
    # a blank line before each new source line, as CPython
    assert "\n\n  7           5 LOAD_VAR                 0 (i)\n" in text


def test_dis_source_and_program():
    out = io.StringIO()
    assert dis(SRC, file=out) is None
    c = compiled()
    assert out.getvalue() == format_dis(c.program, c.debug)
    out2 = io.StringIO()
    dis(c.program, c.debug, file=out2)
    assert out2.getvalue() == out.getvalue()
    with pytest.raises(ValueError, match="NameError"):
        dis("print(y)\n", file=io.StringIO())


def test_without_debug_info():
    c = compiled()
    text = format_dis(c.program)
    assert (
        "CALL                     1 (<function 1>)" in text
        and "LOAD_VAR                 0\n" in text
    )


def _run(args, tmp_path, src):
    p = tmp_path / "prog.py"
    p.write_text(src)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(ROOT), JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", *args, str(p)], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip


def test_module_command_line(tmp_path):
    r = _run(["jaxcc.dis"], tmp_path, SRC)
    assert r.returncode == 0, r.stderr
    c = compiled()
    assert r.stdout == format_dis(c.program, c.debug)
    r = _run(["jaxcc.dis"], tmp_path, "x = 1\nprint(y)\n")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.endswith("NameError: name 'y' is not defined\n")
    assert "line 2" in r.stderr and "print(y)" in r.stderr
    r = _run(["jaxcc.dis"], tmp_path, "x = (1 +\n")
    assert r.returncode == 1 and r.stderr.rstrip().endswith("SyntaxError: '(' was never closed")


def test_jaxcc_dis_command(tmp_path, capsys):
    from jaxcc import cli

    p = tmp_path / "prog.py"
    p.write_text(SRC)
    assert cli.main(["dis", "-O0", "--compiler", "python", str(p)]) == 0
    c = compiled()
    assert capsys.readouterr().out == format_dis(c.program, c.debug)


def test_opnames_cover_op():
    c = compiled()
    names = {i.opname for i in get_instructions(c.program, c.debug)}
    assert names <= {op.name for op in Op}
