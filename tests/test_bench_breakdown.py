"""bench/breakdown.py (issue 14's per-stage breakdown): on the CPU at batch 4, every stage
row is there, the stages' outputs are the whole loop's (pipeline.evaluate, called here
directly), and the cost and memory analyses give numbers."""

from __future__ import annotations

import time

import jax
import numpy as np

from bench import breakdown, corpus, run
from jaxcc import middle, pipeline


def test_peak_bandwidth_table():
    assert breakdown.peak_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert breakdown.peak_bandwidth("NVIDIA H200") == 4.8e12
    assert breakdown.peak_bandwidth("cpu") is None


def test_cost_accepts_every_shape():
    class C:
        def __init__(self, ca):
            self.ca = ca

        def cost_analysis(self):
            return self.ca

    d = {"flops": 2.0, "bytes accessed": 8.0}
    assert breakdown.cost(C(d)) == {"flops": 2.0, "bytes_accessed": 8.0}
    assert breakdown.cost(C([d, d])) == {"flops": 4.0, "bytes_accessed": 16.0}
    assert breakdown.cost(C(None)) == {"flops": None, "bytes_accessed": None}


def test_optimizer_stage_sits_before_the_vm():
    from jaxcc.limits import DEFAULT

    plain = [st.name for st in breakdown.stages(DEFAULT)]
    o1 = [st.name for st in breakdown.stages(DEFAULT, optimize=True)]
    assert "optimize" not in plain and o1.index("optimize") == o1.index("vm") - 1
    assert [n for n in o1 if n != "optimize"] == plain
    assert plain[:2] == ["lexer", "parser"] and plain[-2:] == ["vm", "judge"]


def test_breakdown_equals_the_whole_loop(tmp_path):
    b = 4
    args = run.parse_args(["--quick", "--sizes", "small", "--batches", str(b), "--out",
                           str(tmp_path)])  # fmt: skip
    progs = corpus.generate(0, "small", b)
    ctx = run.Ctx(args, {"small": progs}, {})
    ctx.entry, ctx.entry_t0 = "breakdown", time.perf_counter()
    ctx.breakdown_outputs = {}
    run.bench_breakdown(ctx)

    rows = {r["stage"]: r for r in ctx.rows if r.get("stage")}
    names = ["lexer", "parser", *(f"middle:{n}" for n, _ in middle.PASSES), breakdown.MIDDLE,
             "vm", "judge", breakdown.SUM, breakdown.LOOP]  # fmt: skip
    assert list(rows) == names
    for name, r in rows.items():
        assert r["size"] == "small" and r["batch"] == b and r["seconds"] > 0, name
        assert r["throughput"] == b / r["seconds"]
        if name != breakdown.SUM:
            # the CPU backend gives a cost analysis and a memory analysis
            assert r["bytes_accessed"] > 0 and r["flops"] >= 0, name
            assert r["bytes_per_program"] > 0 and r["achieved_Bps"] > 0, name
            assert r["peak_Bps"] is None and r["frac_peak"] is None  # unknown device
            assert r["while_loops"] is not None
    assert rows["vm"]["while_loops"] > 0  # the VM's step loop
    in_loop = [r for r in rows.values() if r.get("in_loop")]
    assert len(in_loop) == len(names) - 3 and not rows[breakdown.MIDDLE]["in_loop"]
    assert np.isclose(rows[breakdown.SUM]["seconds"], sum(r["seconds"] for r in in_loop))
    loop = rows[breakdown.LOOP]
    assert loop["equal_to_stages"] and loop["agree"] == b

    out = ctx.breakdown_outputs[("small", b, False)]
    carry, ev = out["carry"], out["carry"]["evaluation"]
    # pipeline.evaluate called directly on the same inputs: the split calls the real
    # composition, stage by stage
    direct = jax.device_get(
        pipeline.evaluate(
            carry["source"], carry["length"], carry["cases"], limits=ctx.limits("small")
        )
    )
    assert breakdown.same(out["loop"], direct)
    np.testing.assert_array_equal(ev.verdict, direct.verdict)
    np.testing.assert_array_equal(ev.per_case, direct.per_case)
    assert breakdown.same(carry["program"], direct.program)  # the middle end's passes
    assert breakdown.same(carry["error"], direct.error)
    assert ((np.asarray(ev.verdict) == pipeline.Verdict.PASS) == out["want"]).all()  # CPython's
