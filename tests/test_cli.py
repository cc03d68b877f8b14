"""The jaxcc command line (in-process through jaxcc.cli.main, and as `python -m jaxcc`)
and the error formatting it prints (jaxcc.format)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxcc import __version__, cli, isa
from jaxcc import format as fmt
from jaxcc.errors import Code, Error
from jaxcc.limits import CLI, Limits

ROOT = pathlib.Path(__file__).resolve().parent.parent


def write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def jaxcc(capsys, *argv) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of cli.main(argv).

    These tests are about the command line itself, so they pin the (fast to start)
    reference backends unless a test names one; tests/test_examples.py and
    tests/test_edges.py run the JAX path.
    """
    argv = [str(a) for a in argv]
    if argv and argv[0] == "run":
        if "--compiler" not in argv:
            argv[1:1] = ["--compiler", "python"]
        if "--vm" not in argv:
            argv[1:1] = ["--vm", "python"]
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def cpython(path: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, path], capture_output=True, text=True, check=False)


HELLO = "def sq(x: int) -> int:\n    return x * x\n\n\nprint(sq(7), sq(-3) > 8)\n"
ZERO = "print(1)\n\n\ndef f(a):\n    return 10 // a\n\n\nprint(f(0))\n"


def test_run_prints_and_exits_0(tmp_path, capsys):
    f = write(tmp_path, "hello.py", HELLO)
    assert jaxcc(capsys, "run", f) == (0, "49 True\n", "")


def test_run_error_goes_to_stderr_like_cpython(tmp_path, capsys):
    f = write(tmp_path, "zero.py", ZERO)
    status, out, err = jaxcc(capsys, "run", f)
    py = cpython(f)
    assert (status, out) == (1, py.stdout)
    assert err.splitlines()[0] == "Traceback (most recent call last):"
    assert f'  File "{f}", line 5, in f' in err.splitlines()
    assert "    return 10 // a" in err.splitlines()
    assert err.splitlines()[-1] == py.stderr.splitlines()[-1]


def test_run_many_files_one_batch(tmp_path, capsys):
    a = write(tmp_path, "a.py", "print(1)\n")
    b = write(tmp_path, "b.py", ZERO)
    c = write(tmp_path, "c.py", "print(3)\n")
    status, out, err = jaxcc(capsys, "run", a, b, c)
    assert (status, out) == (1, "1\n1\n3\n")
    assert err.count("Traceback") == 1
    assert jaxcc(capsys, "run", a, c) == (0, "1\n3\n", "")


def test_json_shape(tmp_path, capsys):
    ok = write(tmp_path, "ok.py", HELLO)
    bad = write(tmp_path, "bad.py", ZERO)
    syn = write(tmp_path, "syn.py", "x = (1 +\n")
    status, out, err = jaxcc(capsys, "run", "--json", ok, bad, syn)
    rows = [json.loads(line) for line in out.splitlines()]
    assert status == 1 and err == ""
    assert [r["file"] for r in rows] == [ok, bad, syn]
    for r in rows:
        assert set(r) == {"file", "stdout", "error", "exit"}
        assert r["exit"] == int(r["error"] is not None)
        if r["error"] is not None:
            assert set(r["error"]) == {"type", "message", "line"}
    assert rows[0]["error"] is None and rows[0]["stdout"] == "49 True\n"
    assert rows[1]["error"] == {
        "type": "ZeroDivisionError",
        "message": "integer division or modulo by zero",
        "line": 5,
    }
    assert rows[1]["stdout"] == "1\n"
    assert rows[2]["error"]["type"] == "SyntaxError" and rows[2]["error"]["line"] == 1
    assert rows[2]["stdout"] == ""


ENTRY = """print(0)


def add(a: int, b: int) -> int:
    print(a, b)
    return a + b


def even(n: int) -> bool:
    return n % 2 == 0


def hello():
    print(5)


def div(a: int, b: int) -> int:
    return a // b
"""


def test_entry_and_args(tmp_path, capsys):
    f = write(tmp_path, "e.py", ENTRY)
    assert jaxcc(capsys, "run", f, "--entry", "add", "--args", "3", "-4") == (
        0,
        "0\n3 -4\n-1\n",
        "",
    )
    assert jaxcc(capsys, "run", f, "--entry", "even", "--args", "6") == (0, "0\nTrue\n", "")
    assert jaxcc(capsys, "run", f, "--entry", "even", "--args", "7") == (0, "0\nFalse\n", "")
    assert jaxcc(capsys, "run", f, "--entry", "hello") == (0, "0\n5\n", "")
    status, out, err = jaxcc(capsys, "run", f, "--entry", "div", "--args", "1", "0")
    assert (status, out) == (1, "0\n") and err.splitlines()[-1].startswith("ZeroDivisionError")
    assert "line 18, in div" in err
    status, out, err = jaxcc(capsys, "run", f, "--entry", "add", "--args", "1")
    assert (status, out) == (1, "0\n") and err.startswith("TypeError: add() takes 2")
    status, out, err = jaxcc(capsys, "run", f, "--entry", "nope")
    assert (status, out) == (1, "0\n") and err.startswith("NameError: name 'nope'")
    status, out, _ = jaxcc(capsys, "run", "--json", f, "--entry", "even", "--args", "2")
    row = json.loads(out)
    assert (row["stdout"], row["result"], row["exit"]) == ("0\nTrue\n", "True", 0)


def test_limit_options(tmp_path, capsys):
    loop = write(tmp_path, "loop.py", "n = 0\nwhile True:\n    n += 1\n")
    status, _, err = jaxcc(capsys, "run", loop, "--max-steps", "1000")
    assert status == 1 and err.splitlines()[-1].startswith("TimeoutError")
    many = write(tmp_path, "many.py", "for i in range(10):\n    print(i)\n")
    status, out, err = jaxcc(capsys, "run", many, "--max-output", "5")
    assert (status, out) == (1, "0\n1\n2") and "OutputLimitError" in err  # 5 items
    rec = write(tmp_path, "rec.py", "def f(n: int) -> int:\n    return 0 if n == 0 else f(n - 1)\n"
                "\n\nprint(f(10))\n")  # fmt: skip
    assert jaxcc(capsys, "run", rec, "--max-depth", "12")[:2] == (0, "0\n")
    status, _, err = jaxcc(capsys, "run", rec, "--max-depth", "11")
    assert status == 1 and err.splitlines()[-1].startswith("RecursionError")
    status, _, err = jaxcc(capsys, "run", rec, "--max-code", "4")
    assert status == 1 and err.splitlines()[-1].startswith("LimitError")


def test_neural_options_are_checked(tmp_path, capsys):
    hello = write(tmp_path, "hello.py", HELLO)
    for argv, what in (
        (
            ("--samples", "4", "--branches", "4"),
            "--branches must be from 0 to --samples - 1 (3): 4",
        ),
        (("--branches", "-1"), "--branches must be from 0"),
        (("--samples", "0"), "--samples must be >= 1: 0"),
    ):
        with pytest.raises(SystemExit, match=what.replace("(", r"\(").replace(")", r"\)")):
            jaxcc(capsys, "run", hello, *argv)
    # the defaults: half the candidates are branches for hybrid (checked against the
    # deterministic code), none for neural (majority choice)
    ns = cli.build_parser().parse_args(["run", "--compiler", "hybrid", hello])
    assert cli._neural_options(ns)["branches"] == 8
    ns = cli.build_parser().parse_args(["run", "--compiler", "neural", "--samples", "4", hello])
    assert cli._neural_options(ns)["branches"] == 0
    # in range: accepted (the python compiler ignores them)
    assert jaxcc(capsys, "run", hello, "--samples", "4", "--branches", "3")[:2] == (0, "49 True\n")


def test_every_limit_has_an_option():
    ns = cli.build_parser().parse_args(["run", "x.py"])
    assert cli._limits(ns) == CLI
    argv = ["run", "x.py"]
    for i, field in enumerate(Limits._fields):
        argv += ["--" + field.replace("_", "-"), str(100 + i)]
    ns = cli.build_parser().parse_args(argv)
    assert cli._limits(ns) == Limits(*range(100, 100 + len(Limits._fields)))


def test_unbound_names(tmp_path, capsys):
    mod = write(tmp_path, "m.py", "if False:\n    x = 1\nprint(x)\n")
    fn = write(
        tmp_path, "f.py", "def f():\n    if False:\n        y = 1\n    return y\n\n\nprint(f())\n"
    )
    for path in (mod, fn):
        status, out, err = jaxcc(capsys, "run", path)
        py = cpython(path)
        assert (status, out) == (1, py.stdout)
        assert err.splitlines()[-1] == py.stderr.splitlines()[-1]


def test_missing_file_and_unknown_backend(tmp_path, capsys):
    ok = write(tmp_path, "ok.py", "print(2)\n")
    status, out, err = jaxcc(capsys, "run", ok, str(tmp_path / "missing.py"))
    assert (status, out) == (1, "2\n") and "can't open file" in err
    with pytest.raises(SystemExit, match="unknown or unavailable vm"):
        cli.main(["run", ok, "--vm", "nonesuch"])
    with pytest.raises(SystemExit, match="unknown or unavailable compiler"):
        cli.main(["run", ok, "--compiler", "nonesuch"])
    assert "python" in cli.vms() and "python" in cli.compilers()


def test_backend_import_errors_surface(tmp_path, monkeypatch):
    """A backend that fails to import raises its error, not "unavailable compiler"."""
    ok = write(tmp_path, "ok.py", "print(2)\n")
    monkeypatch.setitem(sys.modules, "jaxcc.compiler", None)  # import raises ImportError
    with pytest.raises(ImportError, match="jaxcc.compiler"):
        cli.main(["run", ok, "--compiler", "jax", "--vm", "python"])


def test_dis(tmp_path, capsys):
    f = write(tmp_path, "d.py", HELLO)
    status, out, err = jaxcc(capsys, "dis", f)
    assert status == 0 and err == ""
    assert "Disassembly of <module>" in out and "sq" in out
    for op in ("LOAD_VAR", "MUL", "RETURN_VALUE", "CALL", "PRINT_INT", "PRINT_BOOL"):
        assert op in out
    bad = write(tmp_path, "bad.py", "x = (1 +\n")
    status, out, err = jaxcc(capsys, "dis", bad)
    assert (status, out) == (1, "") and err.splitlines()[-1].startswith("SyntaxError")


def test_jax_vm_agrees(tmp_path, capsys):
    assert "jax" in cli.vms()  # jaxcc.vm is part of the project: it must import
    progs = [HELLO, ZERO, ENTRY, "for i in range(3):\n    print(i, i * i, i > 0)\n"]
    paths = [write(tmp_path, f"p{i}.py", s) for i, s in enumerate(progs)]
    small = ["--max-stack", "256", "--max-output", "64", "--max-steps", "10000",
             "--max-depth", "16"]  # fmt: skip
    ref = jaxcc(capsys, "run", "--json", *paths, *small)
    got = jaxcc(capsys, "run", "--json", "--vm", "jax", *paths, *small)
    assert got == ref


def test_subprocess_version_help_and_run(tmp_path):
    def py(*argv):
        return subprocess.run([sys.executable, "-m", "jaxcc", *argv], capture_output=True,
                              text=True, check=False, cwd=ROOT)  # fmt: skip

    p = py("--version")
    assert (p.returncode, p.stdout.strip()) == (0, f"jaxcc {__version__}")
    p = py("--help")
    assert p.returncode == 0 and "run" in p.stdout and "dis" in p.stdout
    p = py("run", "--help")
    for opt in ("--json", "--entry", "--args", "--compiler", "--vm", "--max-steps", "--max-stack"):
        assert opt in p.stdout
    f = write(tmp_path, "z.py", ZERO)
    p = py("run", f)
    assert (p.returncode, p.stdout) == (1, "1\n")
    assert p.stderr.splitlines()[-1].startswith("ZeroDivisionError")
    p = py()
    assert p.returncode == 2


# --- jaxcc.format directly -----------------------------------------------------------------


def test_format_compile_error_caret():
    src = "def f():\n    if True:\n        x = (1 +\n"
    text = fmt.format_error(Error(Code.SYNTAX, 3, 12, 4), src, "f.py")
    assert text.splitlines() == [
        '  File "f.py", line 3',
        "    x = (1 +",
        "        ^",
        "SyntaxError: '(' was never closed",
    ]
    # names read back from the source when there is no compiler message
    text = fmt.format_error(Error(Code.NAME, 1, 6, 0), "print(yy)\n", "g.py")
    assert text.splitlines()[-1] == "NameError: name 'yy' is not defined"
    assert fmt.format_error(Error(Code.OK, 0, 0, 0), "", "x.py") == ""


@pytest.mark.parametrize("bad", ["\x0b", "\x1c", "\x01", "$"])
def test_invalid_characters_read_like_cpython(tmp_path, capsys, bad):
    # \v and \x1c are line breaks to str.splitlines but not to Python: the caret line
    # and the message must still match CPython's
    f = write(tmp_path, "bad.py", f"x = 1\f+ 2{bad} + 3\nprint(x)\n")
    status, out, err = jaxcc(capsys, "run", f)
    py = cpython(f)
    assert (status, out) == (1, py.stdout)
    assert err.splitlines()[-1] == py.stderr.splitlines()[-1]
    assert err.splitlines()[0] == f'  File "{f}", line 1'


def _rr(status, line, fn, pc=0, detail=0):
    z = np.zeros(4, np.int32)
    i = np.int32
    return isa.RunResult(i(status), i(detail), i(pc), i(line), i(fn), i(0), z, z, i(0), i(1))


def test_format_runtime_errors():
    src = "def g(a):\n    assert a > 0\n    return a\n\n\nprint(g(-1))\n"

    class Dbg:
        fn_names = ("<module>", "g")
        local_names = (("t",), ("a",))

    text = fmt.format_error(_rr(Code.ASSERTION, 2, 1), src, "a.py", Dbg)
    assert text.splitlines() == [
        "Traceback (most recent call last):",
        '  File "a.py", line 2, in g',
        "    assert a > 0",
        "AssertionError",
    ]
    text = fmt.format_error(_rr(Code.VALUE, 6, 0, detail=2), src, "a.py")
    assert text.splitlines()[1] == '  File "a.py", line 6, in <module>'
    assert text.splitlines()[-1] == "ValueError: range() arg 3 must not be zero"
    prog = isa.Program(*(np.zeros(4, np.int32) for _ in range(10)))
    text = fmt.format_error(_rr(Code.UNBOUND_LOCAL, 3, 1), src, "a.py", Dbg, prog)
    assert text.splitlines()[-1] == (
        "UnboundLocalError: cannot access local variable 'a' where it is not associated "
        "with a value"
    )
    text = fmt.format_error(_rr(Code.UNBOUND_LOCAL, 6, 0), src, "a.py", Dbg, prog)
    assert text.splitlines()[-1] == "NameError: name 't' is not defined"
    for code, name in [(Code.TIMEOUT, "TimeoutError"), (Code.OUTPUT_LIMIT, "OutputLimitError"),
                       (Code.INVALID_BYTECODE, "InvalidBytecode"), (99, "Error")]:  # fmt: skip
        assert fmt.format_error(_rr(code, 0, 7), src, "a.py").splitlines()[-1].startswith(name)
    assert fmt.format_error(_rr(Code.OK, 0, 0), src, "a.py") == ""


def test_trace(tmp_path, capsys):
    f = write(tmp_path, "t.py", "x = 3\nprint(x * 2)\n")
    status, out, err = jaxcc(capsys, "run", "-O0", "--trace", f)  # -O1 folds x * 2 to 6
    assert (status, out) == (0, "6\n")
    lines = err.splitlines()
    assert lines[0].split()[:5] == ["0", "fn", "0", "0", "LOAD_CONST"]
    assert any("MUL" in ln and ln.endswith("[3, 2]") for ln in lines)
    assert lines[-1].split()[4] == "RETURN_VALUE"
    # the JAX VM traces too (tests/test_debuginfo.py compares the two traces)
    status, out, err = jaxcc(capsys, "run", "-O0", "--trace", "--vm", "jax", f)
    assert (status, out) == (0, "6\n")
    assert any("MUL" in ln and ln.endswith("top 2") for ln in err.splitlines())


def test_cpu_while_loop_hoisting_is_set_before_the_backend_starts(monkeypatch):
    """``jaxcc run`` with the jax VM asks XLA:CPU to compile the VM's loops (of a few lanes)
    as one function (cli.hoist_cpu_while_loops): in a fresh process, before the backend
    starts, it adds the option to XLA_FLAGS; a user's own backend options are kept as they
    are; in a process whose backend has started (this one) nothing changes."""
    code = "import os; from jaxcc import cli; cli.hoist_cpu_while_loops(); print(os.environ['XLA_FLAGS'])"

    def flags(env_flags):
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        if env_flags is not None:
            env["XLA_FLAGS"] = env_flags
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        return out.stdout.strip()

    want = f"{cli._HOIST_FLAG}{cli.CPU_WHILE_LOOP_BYTES}"
    assert flags(None) == want
    assert flags("--xla_cpu_enable_fast_math=false") == f"--xla_cpu_enable_fast_math=false {want}"
    mine = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=5"
    assert flags(mine) == mine
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    cli.hoist_cpu_while_loops()
    assert "XLA_FLAGS" not in os.environ


def test_device_choice_before_the_backend_starts(monkeypatch):
    """``--device``: ``auto`` means the CPU for a run of at most CPU_MAX_FILES files with
    the jax or python compiler (not for more files, not for the neural compiler, not
    when JAX_PLATFORMS is set), ``cpu`` always, ``default`` never. In a fresh process
    choose_device points JAX at the CPU before its backend starts; in a process whose
    backend has started nothing changes, and ``cpu`` there is an error unless that
    backend is the CPU."""

    def want(args, env=None):
        return cli.wanted_device(cli.build_parser().parse_args(args), env)

    few, many = ["run", "a.py"], ["run", *[f"{i}.py" for i in range(cli.CPU_MAX_FILES + 1)]]
    assert want(few) == want(["dis", "a.py"]) == want([*few, "--compiler", "python"]) == "cpu"
    assert want(many) == want([*few, "--compiler", "neural"]) == "default"
    assert want([*few, "--device", "default"]) == "default"
    assert want(few, "cuda,cpu") == "default"  # the user's choice stands
    assert want([*many, "--device", "cpu"], "cuda,cpu") == "cpu"
    code = (
        "import sys; from jaxcc import cli; import jax\n"
        "cli.choose_device(cli.build_parser().parse_args(sys.argv[1:]))\n"
        "print(jax.config.jax_platforms, jax.default_backend())"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run([sys.executable, "-c", code, *few], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.split() == ["cpu", "cpu"]
    # this process: its backend (the CPU here) has started
    ns = cli.build_parser().parse_args([*few, "--device", "cpu"])
    before = jax.config.jax_platforms
    cli.choose_device(ns)
    assert jax.config.jax_platforms == before
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    with pytest.raises(SystemExit, match="already runs on gpu"):
        cli.choose_device(ns)
    cli.choose_device(cli.build_parser().parse_args(few))  # auto: left alone
    assert jax.config.jax_platforms == before
