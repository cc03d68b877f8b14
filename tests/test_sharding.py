"""jaxcc.sharding: a batch split over 4 (fake CPU) devices gives what one device gives.

The device count of the CPU backend is fixed when JAX initialises, so the checks run in
a child process started with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``;
the child is this file run as a script (``python tests/test_sharding.py --child NAME``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_DEVICES = 4


def _child(name: str) -> subprocess.CompletedProcess:
    from conftest import FAST, FAST_XLA_FLAGS  # noqa: PLC0415  (the parent only)

    env = dict(os.environ)
    # the suite's fast-compile flags (conftest.py), which a child does not inherit
    env["XLA_FLAGS"] = " ".join(
        [
            env.get("XLA_FLAGS", ""),
            FAST_XLA_FLAGS if FAST else "",
            f"--xla_force_host_platform_device_count={N_DEVICES}",
        ]
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", name],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    "name", ["toy", "vm", "pipeline", "parser_pallas", "lexer_tiers", "middle_tiers"]
)
def test_sharded_equals_one_device(name):
    proc = _child(name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"OK {name}" in proc.stdout, proc.stdout + proc.stderr


# ---------------------------------------------------------------- child process


def _setup():
    import jax

    jax.config.update("jax_numpy_dtype_promotion", "strict")
    jax.config.update("jax_numpy_rank_promotion", "raise")
    jax.config.update("jax_compilation_cache_dir", os.path.join(ROOT, ".jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    assert jax.device_count() == N_DEVICES, jax.devices()
    return jax


def _same(a, b):
    import jax
    import numpy as np

    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        np.testing.assert_array_equal(x, y)


def _toy_lane_loop(x, cap):
    """Per lane: Collatz steps of x (at most cap), with a while_loop over the whole batch,
    the shape of the VM's and parser's loops (stops when every lane is done)."""
    import jax.numpy as jnp
    from jax import lax

    def cond(s):
        return jnp.any(s[1])

    def body(s):
        v, active, n = s
        nxt = jnp.where(v % 2 == 0, v // 2, 3 * v + 1)
        v = jnp.where(active, nxt, v)
        n = n + active.astype(jnp.int32)
        active = active & (v != 1) & (n < cap)
        return v, active, n

    v, _, n = lax.while_loop(cond, body, (x, x > 1, jnp.zeros_like(x)))
    return {"v": v, "n": n, "rows": jnp.stack([v, n], axis=1)}


def child_toy():
    jax = _setup()
    import jax.numpy as jnp
    import numpy as np

    from jaxcc import sharding

    mesh = sharding.make_mesh()
    assert mesh.size == N_DEVICES
    run1 = jax.jit(_toy_lane_loop, static_argnums=1)
    runn = sharding.sharded(_toy_lane_loop, mesh)
    rng = np.random.default_rng(0)
    for b in (1, 3, 4, 10, 37):  # fewer lanes than devices, exact, and ragged
        x = rng.integers(1, 10_000, size=b).astype(np.int32)
        want = run1(jnp.asarray(x), 500)
        got = runn(x, 500)
        _same(got, want)
        assert got["rows"].shape == (b, 2)
    # the padded, placed arrays are split over all devices
    placed, pad = sharding.shard_batch({"x": np.arange(10, dtype=np.int32)}, mesh)
    assert pad == 2 and placed["x"].shape == (12,)
    assert len(placed["x"].sharding.device_set) == N_DEVICES
    assert [s.data.shape for s in placed["x"].addressable_shards] == [(3,)] * N_DEVICES
    np.testing.assert_array_equal(np.asarray(placed["x"])[10:], 0)
    # one wrapped function per argument structure and static values (jit handles shapes)
    assert len(runn.cache) == 1
    print("OK toy")


def _vm_programs():
    """Bytecode for a batch: the reference compiler's output for generated programs with
    mixed lengths and errors, so that lanes finish at different steps."""
    from bench import corpus
    from jaxcc.reference import compiler

    progs = corpus.generate(seed=7, size="small", n=13, with_tests=False) + [
        "x = 0\nfor i in range(1000):\n    x += i\nprint(x)\n",
        "def f(n):\n    return f(n + 1)\nprint(f(0))\n",
        "print(1 // 0)\n",
    ]
    return [p if isinstance(p, str) else p["source"] for p in progs], compiler


def child_vm():
    jax = _setup()
    import functools

    from bench import corpus
    from jaxcc import sharding, vm

    limits = corpus.LIMITS["small"]
    sources, compiler = _vm_programs()
    comp = compiler.compile_many(sources, limits)
    program = comp.program if hasattr(comp, "program") else comp[0]
    one = jax.jit(functools.partial(vm.run, limits=limits))(program)
    many = sharding.sharded(functools.partial(vm.run, limits=limits))(program)
    _same(many, one)
    assert len({int(s) for s in jax.device_get(one.status)}) >= 2  # OK and errors mixed
    print("OK vm")


def child_pipeline():
    """The whole pipeline (source -> lexer -> parser -> middle end -> VM) sharded."""
    jax = _setup()

    from bench import corpus
    from bench.run import compile_fn, encode
    from jaxcc import sharding, vm

    limits = corpus.LIMITS["small"]
    sources = [p["source"] for p in corpus.generate(seed=11, size="small", n=4, with_tests=False)]
    sources += ["x = (1\n", "def f(n):\n    return f(n + 1)\nprint(f(0))\n"]
    src, length = encode(sources, limits)  # 6 programs: 2 per device and 2 pad lanes
    comp = compile_fn(limits)

    def pipeline(src, length):
        prog, err = comp(src, length)
        return prog, err, vm.run(prog, limits)

    one = jax.jit(pipeline)(src, length)
    many = sharding.sharded(pipeline)(src, length)
    _same(many, one)
    codes = [int(c) for c in jax.device_get(one[1].code)]
    status = [int(c) for c in jax.device_get(one[2].status)]
    assert codes[:4] == [0] * 4 and codes[4] != 0, codes  # the syntax error is found
    assert status[:4] == [0] * 4 and status[5] != 0, status  # the runaway recursion stops
    print("OK pipeline")


def child_parser_pallas():
    """The parser's Pallas kernel (interpret mode here) in each device's block equals the
    XLA loop on one device: the kernel's grid and padding per shard."""
    jax = _setup()
    import functools

    from bench import corpus
    from jaxcc import lexer, parser, sharding

    limits = corpus.LIMITS["small"]
    sources = [p["source"] for p in corpus.generate(seed=5, size="small", n=5, with_tests=False)]
    sources += ["x = = 1\n", "if x:\npass\n", "a = 1 = b\n"]
    src, length = lexer.encode(sources, limits)  # 8 programs: 2 per device
    tokens, lex_error = lexer.lex(src, length, limits)
    one = parser.parse_with_info(tokens, limits, lex_error, backend="xla")
    kernel = functools.partial(parser.parse_with_info, limits=limits, backend="pallas")
    many = sharding.sharded(lambda t, e: kernel(t, lex_error=e))(tokens, lex_error)
    _same(many, one)
    codes = [int(c) for c in jax.device_get(one[1].code)]
    assert codes[:5] == [0] * 5 and all(c != 0 for c in codes[5:]), codes
    print("OK parser_pallas")


def child_lexer_tiers():
    """The lexer at two widths (``tiers=True``) in each device's block equals the one-width
    lexer on one device: each block sorts and chooses its widths on its own (blocks of
    short programs, of long ones only, and mixed)."""
    jax = _setup()
    import functools

    from bench import corpus
    from jaxcc import lexer, sharding

    limits = corpus.LIMITS["small"]  # N = 512: programs longer than 256 bytes are long
    short = [p["source"] for p in corpus.generate(seed=3, size="small", n=6, with_tests=False)]
    long = ["x = 1\n" * 50, "y = (1 +\n" + "  2 +\n" * 60 + "  3)\n", "z = 0x\n" + "#" * 300,
            "w" * 600, "if x:\n" + "    v = 1\n" * 40]  # fmt: skip
    sources = short[:3] + long[:3] + [long[3]] + short[3:5] + [long[4], short[5], ""]
    src, length = lexer.encode(sources, limits)  # 12 programs: 3 per device
    one = lexer.lex(src, length, limits, tiers=False)
    many = sharding.sharded(functools.partial(lexer.lex, limits=limits, tiers=True))(src, length)
    _same(many, one)
    codes = [int(c) for c in jax.device_get(one[1].code)]
    assert sum(c != 0 for c in codes) >= 2 and codes[:3] == [0] * 3, codes
    print("OK lexer_tiers")


def child_middle_tiers():
    """The middle end at two widths (``tiers=True``, on by default on a GPU for large
    batches) in each device's block equals the one-width middle end on one device: each
    block sorts and chooses its widths on its own (a block of small programs, one of large
    ones only, and mixed; a lexical error among them)."""
    jax = _setup()

    from bench import corpus
    from jaxcc import lexer, middle, parser, sharding

    limits = corpus.LIMITS["small"]  # 128 nodes: programs of more than 64 are large
    small = [p["source"] for p in corpus.generate(seed=4, size="small", n=6, with_tests=False)]
    large = ["x = 1 + 1 + 1\n" * k for k in (10, 12, 15, 11, 13)]  # 71-106 nodes
    sources = small[:3] + large[:3] + [large[3]] + small[3:5] + [large[4], small[5], "x = $\n"]
    src, length = lexer.encode(sources, limits)  # 12 programs: 3 per device
    tokens, err = lexer.lex(src, length, limits)
    ast, err = parser.parse(tokens, limits, err)
    n = [int(x) for x in jax.device_get(ast.n_nodes)]
    assert sum(x > 64 for x in n) == 5 and max(n) <= 128, n
    one = middle.middle_end(ast, None, limits, err, tiers=False)
    two = sharding.sharded(lambda a, e: middle.middle_end(a, None, limits, e, tiers=True))
    many = two(ast, err)
    _same(many, one)
    codes = [int(c) for c in jax.device_get(one[1].code)]
    assert codes[-1] != 0 and codes[:3] == [0] * 3, codes
    print("OK middle_tiers")


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--child":
    globals()["child_" + sys.argv[2]]()
