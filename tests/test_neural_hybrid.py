"""The hybrid compiler (jaxcc/neural/hybrid.py, paper Algorithm 3) on the CPU with a tiny
random-init model.

A random model's samples are (almost) never accepted, so the candidates of these tests
are the model's samples plus two injected ones (``propose``): the deterministic code
with one unreachable NOP appended (equivalent, but not the same arrays; its frame made
one slot larger in programs with functions, which the hybrid must refuse: TOO_LARGE) and
a mutant with every constant + 1 (wrong). Every test uses ONE jitted function at ONE
shape (the XLA compile of the model's sampler and the whole compiler takes about a
minute and a half on a small CPU); it calls ``hybrid_compile`` inside its own jit.
"""

from __future__ import annotations

import importlib.util

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcc import isa, lexer
from jaxcc.errors import Code
from jaxcc.neural import hybrid as H
from jaxcc.neural import model as M
from jaxcc.neural import router
from jaxcc.neural.hybrid import Path
from jaxcc.neural.verify import Reason
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.interp import run_program
from property_tests.limits import NEURAL_SMALL

LIM = NEURAL_SMALL
VL = LIM._replace(max_steps=500)
CFG = M.Config(d_model=32, n_layers=1, n_heads=2, d_ff=64, max_src=96, max_out=96, remat=False)
# candidates (2 sampled + 2 injected), sub-batch capacity, probes per function (with 8, only
# the 9 boundary probes run and the constants mutant of f passes: see test_paths_and_results)
K, CAP, N_PROBES = 4, 3, 16

F_SRC = "def f(a, b):\n    if a < 10:\n        return a + b\n    return a - b\nprint(f(20, 2))\n"
LOOP = "x = 3\nwhile x > 0:\n    x -= 1\n    print(x)\n"
BAD = "print(1 +)\n"
G_SRC = "def g(n):\n    return n * 2 + 1\nprint(g(4))\n"
P_SRC = "print(7 // 2, 7 % 3)\n"
Y_SRC = "y = 5\nprint(y - 1)\n"
# batch A: routed (no loop) programs 0, 3, 4 fill the sub-batch; 5 overflows it
BATCH_A = [F_SRC, LOOP, BAD, G_SRC, P_SRC, Y_SRC]
PATHS_A = [Path.FALLBACK, Path.DETERMINISTIC, Path.INELIGIBLE, Path.FALLBACK, Path.NEURAL,
           Path.OVERFLOW]  # fmt: skip
# batch B: programs 3 and 4 as in A but in other slots (0 and 1); 5 now gets slot 2
BATCH_B = ["i = 0\nwhile i < 2:\n    i += 1\n", "x = (\n", "for i in range(3):\n    print(i)\n",
           G_SRC, P_SRC, Y_SRC]  # fmt: skip


def _router():
    """A router that sends programs with a loop to the deterministic compiler (score
    sigmoid(5 - 10 log 2) = 0.13) and the others to the neural path (0.99)."""
    n = len(router.FEATURES)
    w = np.zeros(n, np.float32)
    w[router.FEATURES.index("loops")] = -10.0
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return {"w": f32(w), "b": f32(5.0), "mean": f32(np.zeros(n)), "std": f32(np.ones(n))}


def _propose(params, tokens, ref, keys):
    """The model's K - 2 samples, then the NOP-appended copy and the constants mutant."""
    cands, ok, bound = H.sample_each(tokens, params, keys, K - 2, LIM, 0.8, 0.95, True, CFG)
    with_fns = (ref.n_funcs > 1)[:, None]
    nop = ref._replace(
        n_code=ref.n_code + 1, fn_maxstack=ref.fn_maxstack + jnp.where(with_fns, 1, 0)
    )
    consts = ref._replace(arg=jnp.where(ref.op == isa.Op.LOAD_CONST, ref.arg + 1, ref.arg))
    extra = jax.tree.map(lambda a, b: jnp.stack([a, b], axis=1), nop, consts)
    both = jax.tree.map(lambda c, e: jnp.concatenate([c, e], axis=1), cands, extra)
    return both, jnp.concatenate([ok, jnp.ones_like(ok[:, :2])], axis=1), bound


def _outer(source, length, params, rparams, key):
    """The caller's own jitted code around hybrid_compile (jit composability)."""
    h = H.hybrid_compile(source, length, params, rparams, jnp.float32(0.5), key, cfg=CFG, k=K,
                         m=CAP, limits=LIM, nl=LIM, vl=VL, n_probes=N_PROBES,
                         propose=_propose)  # fmt: skip
    return h, jnp.sum(jnp.where(h.path == Path.NEURAL, h.program.n_code, 0))


@pytest.fixture(scope="module")
def run():
    chex.clear_trace_counter()
    f = jax.jit(chex.assert_max_traces(_outer, n=1))  # once per shape, or it raises
    params, rparams = M.init_params(CFG, 0), _router()

    def go(sources, seed=0):
        src, length = lexer.encode(sources, LIM)
        return jax.device_get(f(src, length, params, rparams, jax.random.key(seed)))

    return go


def _row(tree, i):
    return jax.tree.map(lambda x: np.asarray(x)[i], tree)


def _same(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b, strict=True))


def test_paths_and_results(run):
    h, total = run(BATCH_A)
    assert np.asarray(h.path).tolist() == PATHS_A, (H.path_counts(h.path), h.reason, h.best)
    assert np.asarray(h.slot).tolist() == [0, -1, -1, 1, 2, -1]
    assert np.asarray(h.error.code).tolist() == [0, 0, Code.SYNTAX, 0, 0, 0]
    score = np.asarray(h.score)
    assert score[1] < 0.5 < min(score[0], score[3], score[4], score[5])
    reason = np.asarray(h.reason)
    for i in (1, 2, 5):  # not sampled
        assert (reason[i] == H.NOT_SAMPLED).all() and int(h.steps[i]) == -1
    # the injected candidates: the larger frame is refused, the mutant is wrong
    assert reason[[0, 3], K - 2].tolist() == [Reason.TOO_LARGE] * 2
    assert reason[4, K - 2] == Reason.ACCEPTED
    # f(21, 3) prints 18 as f(20, 2) does: only the probes at a = 10 tell them apart
    assert (
        reason[[0, 3, 4], K - 1].tolist() == [Reason.FUNCTION_RESULT] + [Reason.MODULE_OUTPUT] * 2
    )
    assert set(reason[[0, 3, 4], : K - 2].ravel()) <= set(int(r) for r in Reason)
    assert int(h.best[4]) >= 0 and reason[4, int(h.best[4])] == Reason.ACCEPTED
    assert np.asarray(h.best)[[0, 1, 2, 3, 5]].tolist() == [-1] * 5

    for i, s in enumerate(BATCH_A):
        want = compile_source(s, LIM)
        got = _row(h.program, i)
        if PATHS_A[i] != Path.NEURAL:  # exactly the deterministic compiler's code
            assert _same(got, want.program), i
            continue
        # the verified candidate: another program (one more instruction) ...
        if int(h.best[i]) == K - 2:
            assert int(got.n_code) == int(want.program.n_code) + 1
        assert int(total) == int(got.n_code)
        # ... that behaves as the deterministic code (the reference interpreter's run)
        a, b = run_program(got, LIM), run_program(want.program, LIM)
        for field in ("status", "n_out", "out_kind", "out_val"):
            assert np.array_equal(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)))
    # the chosen program's steps on the probes: the NOP changes nothing
    assert int(h.steps[4]) == int(h.ref_steps[4]) > 0


def test_batch_isolation_and_one_trace(run):
    a, _ = run(BATCH_A)
    b, _ = run(BATCH_B)  # same shape: no new trace (assert_max_traces)
    assert np.asarray(b.slot).tolist() == [-1, -1, -1, 0, 1, 2]
    assert int(b.path[5]) == Path.NEURAL  # had no room in batch A
    for i in (3, 4):  # the same program at the same index, in another slot
        for field in H.Hybrid._fields:
            if field == "slot":
                continue
            assert _same(jax.tree.leaves(_row(getattr(a, field), i)),
                         jax.tree.leaves(_row(getattr(b, field), i))), (i, field)  # fmt: skip
    # another key: other samples (the sampled candidates' reasons may change), the same
    # result wherever the deterministic code is kept
    c, _ = run(BATCH_A, seed=1)
    assert np.asarray(c.path).tolist() == PATHS_A
    for i in (0, 1, 2, 3, 5):
        assert _same(_row(c.program, i), _row(a.program, i))


def test_slots():
    routed = jnp.asarray([False, True, True, False, True])
    rows, live, slot = H._slots(routed, 2)
    assert np.asarray(rows).tolist() == [1, 2] and np.asarray(live).tolist() == [True, True]
    assert np.asarray(slot).tolist() == [-1, 0, 1, -1, -1]
    rows, live, slot = H._slots(routed, 8)  # more room than programs
    assert np.asarray(rows)[:3].tolist() == [1, 2, 4]
    assert np.asarray(live).tolist() == [True] * 3 + [False] * 5
    assert np.asarray(slot).tolist() == [-1, 0, 1, -1, 2]
    rows, live, slot = H._slots(jnp.zeros(3, bool), 2)
    assert not np.asarray(live).any() and (np.asarray(slot) == -1).all()


def test_claims_quick(tmp_path):
    """``python -m jaxcc.neural.claims --quick`` (tiny random model, no timing, no k = 1000
    curve): results.json holds every claim's numbers, and they are consistent."""
    import json

    from jaxcc.neural import claims

    assert claims.main(["--out", str(tmp_path), "--quick", "--no-timing", "--big-k", "0"]) == 0
    r = json.loads((tmp_path / "results.json").read_text())
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "p_success.png").exists() and r["plots"] == ["p_success.png"]
    else:  # the test extra has no matplotlib: the numbers are written, the plots skipped
        assert r["plots"] == [] and not (tmp_path / "p_success.png").exists()
    assert r["programs"] >= 2 and set(r["classes"]) <= {"level0", "handwritten"}
    for c in r["classes"].values():
        p, n = c["p_correct_mean"], c["samples_per_program"]
        assert 0 <= p <= 1 and n == 4 and c["eq6_range"] == [0.3, 0.5]
        obs = [c["p_success_observed"][k] for k in sorted(c["p_success_observed"], key=int)]
        assert obs[0] == pytest.approx(p)
        assert all(a <= b + 1e-9 for a, b in zip(obs[:-1], obs[1:], strict=True))
        assert c["p_success_eq7"]["1"] == pytest.approx(p)
        assert c["p_correct_recheck_mean"] <= p + 1e-9  # truth: level 3 and the re-check
        assert c["p_success_observed_big_k"] == {} and c["big_k_programs"] == 0  # --big-k 0
    for level in ("1", "2", "3"):
        w = r["wrong_but_accepted"][level]
        assert 0 <= w["wrong_accepted"] <= min(w["accepted"], w["wrong"])
        assert w["chosen_wrong"] <= w["chosen"] <= w["programs"]
    # one example per distinct wrong program level 3 accepted, each naming what differed
    ex = r["wrong_accepted_examples_level3"]
    assert sum(e["samples"] for e in ex) == r["wrong_but_accepted"]["3"]["wrong_accepted"]
    assert all(e["differs"] != "ACCEPTED" and 0 <= e["source"] < r["programs"] for e in ex)
    n_acc = r["reasons_level3"]["ACCEPTED"]
    assert r["wrong_but_accepted"]["3"]["accepted"] == n_acc
    assert sum(r["reasons_level3"].values()) == 4 * r["programs"]
    lc = r["learned_code"]
    assert (
        lc["programs_with_correct"] <= r["programs"] and lc["faster"] <= lc["programs_with_correct"]
    )


def test_claims_quick_values_yield_to_given_options():
    from jaxcc.neural import claims

    ns = claims.parse_args(["--out", "x", "--quick", "--big-k", "0", "--n", "5"])
    assert (ns.big_k, ns.n, ns.samples, ns.levels) == (0, 5, 4, "0")  # given; --quick's
    ns = claims.parse_args(["--out", "x"])
    assert (ns.big_k, ns.n, ns.samples, ns.levels) == (1000, 32, 32, "0,1,2,3")  # no --quick


def test_claims_timing_stops_at_the_memory_limit(monkeypatch):
    """``claims.timing``: a batch size that runs out of device memory is recorded as the
    device's limit and ends the sweep; any other error propagates; results are saved
    after every batch size; every size sees the same shuffled programs."""
    import types

    from jaxcc.neural import claims

    seen = []

    def fake_batch(ns, jits, params, inputs, b, k, rp, thr, out):
        seen.append((b, list(inputs.sources)))
        assert [inputs.sources[i] for i in inputs.take(b)] == (inputs.sources * 13)[:b]
        if b >= 64:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        out["neural"].append({"batch": b})

    monkeypatch.setattr(claims, "_timing_batch", fake_batch)
    ns = types.SimpleNamespace(timing_budget_s=1e9, timing_k=4, det_batches="",
                               batches="1,16,64,256", no_cpython=True)  # fmt: skip
    saved = []
    sources = [f"print({i})\n" for i in range(20)]
    out = claims.timing(ns, None, None, sources, None, None, 4, save=lambda o: saved.append(len(o["neural"])))  # fmt: skip
    assert [r["batch"] for r in out["neural"]] == [1, 16]
    assert out["limit"]["batch"] == 64 and "RESOURCE_EXHAUSTED" in out["limit"]["error"]
    assert [b for b, _ in seen] == [1, 16, 64] and saved == [1, 2, 2]
    assert all(s == seen[0][1] for _, s in seen) and sorted(seen[0][1]) == sorted(sources)
    assert seen[0][1] != sources  # a seeded shuffle, not the classes' order

    def broken(*args):
        raise ValueError("not a memory problem")

    monkeypatch.setattr(claims, "_timing_batch", broken)
    with pytest.raises(ValueError):
        claims.timing(ns, None, None, sources, None, None, 4)


def test_claims_timing_budget_counts_after_the_precompile(monkeypatch):
    """The neural sweep's --timing-budget-s starts after the precompile: a precompile
    longer than the budget does not end the sweep before its second batch size; a
    batch size that overruns the budget is the last."""
    import time
    import types

    from jaxcc.neural import claims

    clock = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])

    def slow_precompile(*args):
        clock[0] += 100.0  # longer than the budget
        return {"seconds": 100.0}

    def fake_batch(ns, jits, params, inputs, b, k, rp, thr, out):
        clock[0] += 6.0 if b < 64 else 20.0
        out["neural"].append({"batch": b})

    monkeypatch.setattr(claims, "precompile", slow_precompile)
    monkeypatch.setattr(claims, "timing_jits", lambda *a: object())
    monkeypatch.setattr(claims, "_timing_batch", fake_batch)
    monkeypatch.setattr(claims.router, "load", lambda: None)
    ns = types.SimpleNamespace(timing_budget_s=30.0, timing_k=4, det_batches="",
                               batches="1,16,64,256,1024", no_cpython=True,
                               precompile_threads=2, probes=4)  # fmt: skip
    sources = [f"print({i})\n" for i in range(20)]
    out = claims.timing(ns, object(), None, sources, None, None, 4)
    assert [r["batch"] for r in out["neural"]] == [1, 16, 64]
    assert "before batch 256" in out["stopped"]
