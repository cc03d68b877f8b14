"""bench/: the corpus is deterministic and correct, and `bench/run.py --quick` runs end to
end in a subprocess and writes its JSON and markdown."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp

from bench import baselines, corpus, report
from jaxcc import arrays
from property_tests import oracle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_corpus_is_deterministic_and_sized():
    a = corpus.generate(3, "small", 6)
    b = corpus.generate(3, "small", 6)
    assert a == b
    assert a != corpus.generate(4, "small", 6)
    for size, target in corpus.SIZES.items():
        progs = corpus.generate(1, size, 4, with_tests=False)
        for p in progs:
            assert 0.75 * target <= p["n_tokens"] <= 1.25 * target, (size, p["n_tokens"])
            assert p["n_bytes"] <= corpus.LIMITS[size].max_source_bytes
            assert p["n_tokens"] <= corpus.LIMITS[size].max_tokens


def test_corpus_expectations_match_cpython():
    # the expected result of each test is what CPython (int32 semantics) gives for the call
    for p in corpus.generate(5, "medium", 4):
        body = p["source"].rsplit("print(", 1)[0]
        assert corpus.n_tokens(body) > 0
        for t in p["tests"]:
            call = f"{t['func']}({t['args'][0]}, {t['args'][1]})"
            out, err = oracle.run(body + f"print({call})\n")
            assert err == t["error"]
            if err is None:
                assert out == t["stdout"] + f"{t['result']}\n"
        # plain CPython agrees on these programs (values stay far inside int32)
        assert baselines.cpython_program(p) == all(t["error"] is None for t in p["tests"])


def test_items_round_trip():
    from jaxcc import isa

    text = "1 True -3\nFalse\n7\n"
    its = corpus.items(text)
    assert isa.format_output([k for k, _ in its], [v for _, v in its], len(its)) == text


def test_test_arrays_layout():
    progs = corpus.generate(2, "small", 3)
    t = baselines.test_arrays(progs)
    assert t["args"].shape == (3, corpus.N_TESTS, 2)
    assert t["expected"].shape == (3, corpus.N_TESTS)
    assert [int(e) for e in t["entry"]] == [p["tests"][0]["entry"] for p in progs]


def test_summary_picks_best_throughput():
    rows = [
        {"bench": "vm", "size": "small", "batch": 1, "seconds": 2.0, "throughput": 1.0},
        {"bench": "vm", "size": "small", "batch": 16, "seconds": 2.0, "throughput": 8.0},
        {"bench": "vm", "size": "small", "batch": 256, "seconds": 90.0, "throughput": 3.0},
        {"bench": "lexer", "note": "skipped: no lexer"},
    ]
    s = report.summary(rows)
    assert [(r["bench"], r.get("batch")) for r in s] == [("vm", 16), ("lexer", None)]
    assert s[0]["latency_b1_s"] == 2.0
    assert "| vm |" in report.markdown(s, report.SUMMARY_COLS)


def test_baseline_ratios_divide_by_the_pool_of_the_same_size():
    curves = {
        "loop_pallas small": [(65536, 3.0e6), (1024, 3.0e5)],
        "loop_pallas medium": [(65536, 1.0e6)],
        "loop large": [(256, 5.0)],  # no pool row of its size: left out
    }
    flat = {"cpython_pool small": 1.5e5, "cpython_pool medium": 5.0e4, "cpython small": 6e3}
    got = report.baseline_ratios(curves, flat)
    assert got == [
        ("loop_pallas medium", 65536, 1.0e6, 20.0),
        ("loop_pallas small", 65536, 3.0e6, 20.0),
    ]


def _kernel_source(x, idx):
    y = jnp.sin(x) * 3.0 + 1.0  # KERNEL-LINE-A
    return arrays.gather(y, idx) * 2.0  # KERNEL-LINE-B


def test_fusion_lines_names_the_source_lines_of_a_kernel():
    """bench.trace_kernels.fusion_lines on XLA:CPU's optimized HLO (the GPU's has the same
    metadata): each fusion's operations map to this file's lines, through the module's
    stack-frame tables; arrays.py's helper frames are skipped for their caller's."""
    import re

    from bench.trace_kernels import fusion_lines

    text = jax.jit(_kernel_source).lower(jnp.ones(64), jnp.arange(8)).compile().as_text()
    mine = open(__file__).read().splitlines()
    line = {tag: mine.index(next(m for m in mine if m.endswith(f"# {tag}"))) + 1
            for tag in ("KERNEL-LINE-A", "KERNEL-LINE-B")}  # fmt: skip
    names = re.findall(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = [^=]*\bfusion\(", text, re.M)
    found = " ".join(fusion_lines(text, n) for n in names)
    assert f"test_bench.py:{line['KERNEL-LINE-A']}" in found, (names, found)
    assert f"test_bench.py:{line['KERNEL-LINE-B']}" in found, (names, found)
    assert "arrays.py" not in found  # the helper's frames give way to the caller's
    raw = " ".join(fusion_lines(text, n, skip=()) for n in names)
    assert "arrays.py" in raw
    assert fusion_lines(text, "no_such_kernel") == ""


def test_fusion_lines_skips_ops_named_for_a_jit_call():
    """An operation whose op_name ends in a jit scope (no primitive: XLA gives such ops
    the call site's frame, e.g. `lexer.lex`'s call of its inner jit, thousands of them)
    says nothing about where a kernel's work comes from; the add's own line counts."""
    from bench.trace_kernels import fusion_lines

    text = "\n".join([
        "HloModule m", "",
        "FileNames", '1 "/x/stage.py"', "",
        "FunctionNames", '1 "outer"', '2 "inner"', "",
        "FileLocations",
        "1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=0 end_column=1}",
        "2 {file_name_id=1 function_name_id=2 line=20 end_line=20 column=0 end_column=1}", "",
        "StackFrames", "1 {file_location_id=1 parent_frame_id=1}",
        "2 {file_location_id=2 parent_frame_id=2}", "",
        "%fused_computation (p: s32[4]) -> s32[4] {",
        "  %p = s32[4]{0} parameter(0)",
        '  %c = s32[] constant(1), metadata={op_name="jit(f)/jit(g)" stack_frame_id=1}',
        '  %b = s32[4]{0} broadcast(%c), metadata={op_name="jit(f)/jit(g)" stack_frame_id=1}',
        '  ROOT %a = s32[4]{0} add(%p, %b), metadata={op_name="jit(f)/jit(g)/add" stack_frame_id=2}',
        "}", "",
        "ENTRY %main (x: s32[4]) -> s32[4] {",
        "  %x = s32[4]{0} parameter(0)",
        "  ROOT %loop_add_fusion = s32[4]{0} fusion(%x), kind=kLoop, calls=%fused_computation",
        "}",
    ])  # fmt: skip
    assert fusion_lines(text, "loop_add_fusion") == "stage.py:20 x1"


def test_run_quick_end_to_end(tmp_path):
    out = tmp_path / "bench"
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    cmd = [sys.executable, os.path.join(ROOT, "bench", "run.py"), "--quick", "--out", str(out),
           "--only", "cpython,cpython_pool,reference,vm,nosuchstage_check", "--n-corpus", "8",
           "--batches", "1,4"]  # fmt: skip
    # an unknown entry name is refused before anything runs
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "unknown entries" in proc.stdout
    cmd[cmd.index("--only") + 1] = "cpython,cpython_pool,reference,vm"
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    for key in ("device_kind", "jax", "jaxlib", "python", "date"):
        assert data["meta"][key]
    assert data["status"] == {
        "cpython": "ok", "cpython_pool": "ok", "reference": "ok", "vm": "ok"
    }  # fmt: skip
    rows = {(r["bench"], r.get("batch")): r for r in data["rows"]}
    assert rows[("cpython", 64)]["passed"] == 64  # the corpus is tiled to 64 programs
    assert rows[("reference", 8)]["passed"] == 8
    vm1, vm4 = rows[("vm", 1)], rows[("vm", 4)]
    assert vm1["throughput"] > 0 and vm4["ok"] == 4 and vm4["steps_per_program"] > 5
    assert vm4["bytes_per_program"] > 0
    md = (out / "results.md").read_text()
    assert data["meta"]["device_kind"] in md and "| cpython |" in md
    assert proc.stdout.rstrip().splitlines()[-1].startswith("|")  # the table comes last
    corp = json.loads((out / "corpus.json").read_text())
    assert corp["meta"]["jax"] and len(corp["corpus"]["small"]) == 8


def test_scan_forms_agree_with_lax(tmp_path, monkeypatch):
    """bench/scan_forms.py times each form of the prefix scans; every form it times must
    give ``lax``'s result (its rows say so), forward and reverse, int16 and int32."""
    from bench import scan_forms

    argv = ["scan_forms", "--out", str(tmp_path), "--batch", "4", "--widths", "64",
            "--calls", "1", "--chain", "2"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    scan_forms.main()
    rows = [json.loads(x) for x in open(tmp_path / "scan_forms.jsonl")]
    assert {r["form"] for r in rows} >= {"lax", "assoc", "barrier", "block16", "dot_i8"}
    assert {r["op"] for r in rows} == {"cumsum", "cummax", "rcummin"}
    assert all(r.get("equal_to_lax") is True for r in rows), [r for r in rows if "error" in r]
