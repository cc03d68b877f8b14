"""Test-wide settings: strict JAX promotion, the persistent compilation cache, --slow,
Hypothesis profiles (fixed examples by default, fresh ones with --slow)."""

import gc
import os
import sys

import jax
import pytest
from hypothesis import settings

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
_CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".jax_cache")
jax.config.update("jax_compilation_cache_dir", _CACHE)
# CLI subprocesses started by tests share the same cache
os.environ.setdefault("JAXCC_CACHE_DIR", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)

# XLA:CPU's fast-compile options (jaxcc.compiler.CPU_FAST_COMPILE, spelled out here because
# nothing may start the backend first; tests/test_pipeline.py checks the two agree) for every jit the
# suite compiles in its own processes: the suite is mostly XLA compiles of small batches,
# and at LLVM -O0 they take about half the CPU (tests/test_bench_breakdown.py 86 -> 35 s
# of CPU, the shipped model's level-0 test 120 -> 87 s; the suite took 37 min on a 2-core
# Intel Xeon without them). Integer code computes the same at any level, and the
# compiler's jits run with these options in the CLI anyway (compiler.fast_compile). The
# backend reads XLA_FLAGS once, at the first compile, so one is made here; then the
# variable is put back, and the CLI subprocesses that tests start run with XLA's defaults,
# as users run them (their wall-clock limits are tuned to those; tests/test_sharding.py
# gives its child these flags itself). JAXCC_TEST_XLA_DEFAULTS=1: XLA's defaults throughout.
_FAST = {
    "xla_backend_optimization_level": (0, 3),  # (fast, XLA's default)
    "xla_cpu_use_fusion_emitters": (False, True),
    "xla_llvm_disable_expensive_passes": (True, False),
    "xla_cpu_parallel_codegen_split_count": (1, 32),
}
if jax.__version_info__ >= (0, 11):
    # jax 0.11's XLA:CPU has no fusion-emitter option, and an unknown option in XLA_FLAGS
    # aborts the process (compiler.cpu_fast_compile drops it the same way for the CLI)
    del _FAST["xla_cpu_use_fusion_emitters"]
FAST_XLA_FLAGS = " ".join(f"--{k}={str(v[0]).lower()}" for k, v in _FAST.items())
# the options that FAST_XLA_FLAGS lowers, at XLA's defaults: for a test's own jit whose
# run time, not its compile, is what the test spends
OPTIMIZED = {k: v[1] for k, v in _FAST.items()}
# jaxcc's lexer reads source as CPython 3.11's tokenize does (docs/lexer.md); the host
# reference (jaxcc.reference.host_lex) asks the running interpreter's tokenize, which
# 3.12 rebuilt on its C tokenizer: there some error positions and codes, the end column
# of a comment's NL at the end of a file without a newline and glued numbers ("0or 1")
# come out differently (the suite on Python 3.12.3, jax 0.11.2, 2026-11-28: these seven
# tests failed, the other 1,514 passed). The tests, and the assertions, that compare
# the two on such input run on 3.11 only.
TOKENIZE_IS_311 = sys.version_info[:2] == (3, 11)
TOKENIZE_311 = pytest.mark.skipif(
    not TOKENIZE_IS_311,
    reason="compares with the running tokenize, which differs from 3.11's (docs/lexer.md)",
)
FAST = os.environ.get("JAXCC_TEST_XLA_DEFAULTS", "0") != "1"
if FAST:
    _before = os.environ.get("XLA_FLAGS")
    os.environ["XLA_FLAGS"] = ((_before or "") + " " + FAST_XLA_FLAGS).strip()
    jax.jit(lambda x: x + 1)(1)  # starts the backend: XLA_FLAGS is read now
    if _before is None:
        del os.environ["XLA_FLAGS"]
    else:
        os.environ["XLA_FLAGS"] = _before


@pytest.fixture(autouse=True, scope="module")
def _release_executables():
    """Drop every compiled function after each test module.

    XLA:CPU maps a few thousand memory regions per large executable and keeps them while
    the jit caches hold it; one process running the whole suite passes Linux's default
    vm.max_map_count (65,530) and the next compile segfaults. Later modules reload what
    they need from the persistent cache.
    """
    yield
    jax.clear_caches()
    gc.collect()


@pytest.fixture
def triton_modules(monkeypatch):
    """The Triton modules that Pallas' Triton lowering makes while the test runs (a list,
    filled as kernels are lowered): what tests of the Pallas kernels verify and read."""
    from jax._src.pallas.triton import lowering  # internal: to see the Triton module

    modules = []
    lower = lowering.lower_jaxpr_to_triton_module

    def keep(*a, **k):
        res = lower(*a, **k)
        modules.append(res.module)
        return res

    monkeypatch.setattr(lowering, "lower_jaxpr_to_triton_module", keep)
    return modules


def pytest_addoption(parser):
    parser.addoption(
        "--slow", action="store_true", default=False, help="run many more generated programs"
    )


def pytest_configure(config):
    # property tests read this to scale their example counts
    slow = config.getoption("--slow")
    os.environ["JAXCC_SLOW"] = "1" if slow else "0"
    # The default run (and CI) draws the same examples every time, so that a result is
    # reproducible and a submission cannot fail on a lucky draw; --slow explores new ones
    # (and keeps failures in .hypothesis/ to replay them).
    settings.register_profile("jaxcc-fixed", derandomize=True, database=None)
    settings.register_profile("jaxcc-explore", derandomize=False)
    settings.load_profile("jaxcc-explore" if slow else "jaxcc-fixed")
    if not slow:
        _no_local_constants()


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` run only with --slow (each is a costlier form of a check the
    default run makes otherwise, e.g. by its parts)."""
    if config.getoption("--slow"):
        return
    for item in items:
        mark = item.get_closest_marker("slow")
        if mark is not None:
            why = mark.kwargs.get("reason", "long-running")
            item.add_marker(pytest.mark.skip(reason=f"{why}; run with --slow"))


def _no_local_constants():
    """Hypothesis (>= 6.131) also draws the literals of the project's modules imported so
    far (``providers._get_local_constants``), so a test's examples depended on what earlier
    tests had imported: test_isa's generated programs changed after any test that imported
    jaxcc.cli, and under pytest-xdist a worker's history depends on scheduling. With no
    local constants a derandomized test draws the same examples in any order. (Private
    Hypothesis API: where it is missing the draws are order-dependent as before.)"""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return
    empty = getattr(providers, "_local_constants", None)  # none found yet: no test has run
    if hasattr(providers, "_get_local_constants") and empty is not None and not len(empty):
        providers._get_local_constants = lambda: empty
