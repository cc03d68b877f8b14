"""jaxcc.exec_cache: the CLI's compiled compiler jits stored and loaded without tracing.

A loaded executable must give exactly what compiling gives; a damaged entry is a miss,
never an error; the key changes with anything that decides the executable."""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxcc import compiler, exec_cache, isa
from jaxcc.limits import CLI

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = "def f(n: int) -> int:\n    return n * 3 + 1\nprint(f(4))\nprint(1 // 0)\n"


@pytest.fixture
def cache(tmp_path):
    # executables this process already ran do not serialize on the CPU (the compiler
    # stores before running; jit shares one executable per shape): compile afresh
    jax.clear_caches()
    exec_cache.enable(str(tmp_path / "exe"))
    before = dict(exec_cache.STATS)
    yield tmp_path / "exe", before
    exec_cache.enable(None)


def _delta(before):
    return {k: exec_cache.STATS[k] - before[k] for k in before}


def _same(a, b):
    (pa, ea, da), (pb, eb, db) = a, b
    for f in isa.Program._fields:
        np.testing.assert_array_equal(getattr(pa, f), getattr(pb, f), err_msg=f)
    for x, y in zip(ea, eb, strict=True):
        np.testing.assert_array_equal(x, y)
    assert [str(d) for d in da] == [str(d) for d in db]


def test_stored_then_loaded_gives_the_same_compile(cache):
    path, before = cache
    sources = [SOURCE, "x = 1 +\n"]
    first = compiler.compile_many(sources, CLI, optimize=1)
    second = compiler.compile_many(sources, CLI, optimize=1)
    if not (compiler.fast_compile(2) or compiler.split_compile(2)):
        pytest.skip(
            "JAXCC_SPLIT_COMPILE=0 off the CPU: compile_many compiles one jit, which the executable cache does not cover"
        )
    # the first call compiled and stored; the second loaded what it stored
    assert _delta(before) == {"hits": 1, "misses": 1, "stores": 1, "dropped": 0}
    assert len(list(path.rglob("*.pkl"))) == 1
    _same(first, second)
    exec_cache.enable(None)  # and both equal the uncached compile
    _same(first, compiler.compile_many(sources, CLI, optimize=1))
    assert first[1].code.tolist()[1] != 0  # the second source's syntax error survives


def test_a_damaged_entry_is_a_miss_and_is_rewritten(cache):
    path, before = cache
    want = compiler.compile_many([SOURCE], CLI)
    if not (compiler.fast_compile(1) or compiler.split_compile(1)):
        pytest.skip(
            "JAXCC_SPLIT_COMPILE=0 off the CPU: compile_many compiles one jit, which the executable cache does not cover"
        )
    entries = list(path.rglob("*.pkl"))
    assert len(entries) == 1
    entries[0].write_bytes(b"not a pickle")
    jax.clear_caches()  # a fresh executable to store again
    got = compiler.compile_many([SOURCE], CLI)
    # the empty cache missed, then the damaged entry missed and was rewritten
    assert _delta(before) == {"hits": 0, "misses": 2, "stores": 2, "dropped": 0}
    _same(want, got)
    _same(want, compiler.compile_many([SOURCE], CLI))
    assert _delta(before)["hits"] == 1


def test_an_entry_that_does_not_run_is_dropped(cache):
    """``call``: executables that load but fail when run are dropped, and freshly
    compiled ones (stored again) give the result."""
    path, before = cache
    k = exec_cache.key("test", 1)
    made = []

    def compile_all(fresh):
        assert fresh  # what is stored is compiled bypassing JAX's persistent cache
        made.append([jax.jit(lambda x: x + 1).lower(1).compile()])
        return made[-1]

    assert int(exec_cache.call(k, compile_all, lambda e: e[0](41))) == 42 and len(made) == 1
    assert exec_cache.load(k) is not None

    def run(execs):  # as XLA:CPU does with a bad entry: only fresh executables run
        if execs is not made[-1]:
            raise RuntimeError("Function iota.309_kernel not found")
        return execs[0](41)

    assert int(exec_cache.call(k, compile_all, run)) == 42 and len(made) == 2
    assert _delta(before) == {"hits": 0, "misses": 2, "stores": 2, "dropped": 1}
    assert exec_cache.load(k) is not None  # the fresh ones, stored in its place
    assert int(exec_cache.call(k, compile_all, lambda e: e[0](41))) == 42 and len(made) == 2
    assert _delta(before)["hits"] == 1


def test_the_key_changes_with_what_decides_the_executable(monkeypatch):
    base = exec_cache.key("x", (1, 1024), CLI)
    assert exec_cache.key("x", (1, 1024), CLI) == base
    assert exec_cache.key("x", (2, 1024), CLI) != base
    assert exec_cache.key("x", (1, 1024), CLI._replace(max_code=CLI.max_code // 2)) != base
    assert exec_cache.key("y", (1, 1024), CLI) != base
    monkeypatch.setattr(exec_cache, "code_hash", lambda: "another jaxcc")
    assert exec_cache.key("x", (1, 1024), CLI) != base


def test_off_unless_enabled(tmp_path):
    assert not exec_cache.enabled()
    assert exec_cache.load("0" * 64) is None
    exec_cache.store("0" * 64, [])  # a no-op, not an error
    assert not any(tmp_path.iterdir())


def test_cli_warm_run_loads_the_compiler_and_prints_the_same(tmp_path):
    """Two `jaxcc run`s sharing a cache directory: the second loads the stored
    executables (the directory holds them) and prints exactly what the first did."""
    f = tmp_path / "p.py"
    f.write_text(SOURCE)
    env = {**os.environ, "JAXCC_CACHE_DIR": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    runs = [
        subprocess.run(
            [sys.executable, "-m", "jaxcc", "run", str(f)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=600,
        )  # fmt: skip
        for _ in range(2)
    ]
    assert runs[0].stdout == runs[1].stdout == "13\n"
    assert "ZeroDivisionError" in runs[0].stderr and runs[0].stderr == runs[1].stderr
    assert runs[0].returncode == runs[1].returncode == 1
    assert list((tmp_path / "cache" / "executables").rglob("*.pkl"))
