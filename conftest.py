"""Test-wide settings: strict JAX promotion, the persistent compilation cache, --slow."""

import os

import jax

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
_CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".jax_cache")
jax.config.update("jax_compilation_cache_dir", _CACHE)
# CLI subprocesses started by tests share the same cache
os.environ.setdefault("JAXCC_CACHE_DIR", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def pytest_addoption(parser):
    parser.addoption(
        "--slow", action="store_true", default=False, help="run many more generated programs"
    )


def pytest_configure(config):
    # property tests read this to scale their example counts
    os.environ["JAXCC_SLOW"] = "1" if config.getoption("--slow") else "0"
