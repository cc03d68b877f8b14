"""bench/compile_profile.py's self times: an event's time minus its children's on the
same thread, summed by name, on a synthetic trace and on a real compile's trace."""

from __future__ import annotations

import gzip
import json
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, "bench")
import compile_profile as cp  # noqa: E402


def _write(tmp_path, events):
    d = tmp_path / "plugins" / "profile" / "run"
    os.makedirs(d)
    with gzip.open(d / "host.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": events}, f)
    return str(tmp_path)


def test_self_times_subtract_children_per_thread(tmp_path):
    x = lambda name, ts, dur, tid=1: {"ph": "X", "name": name, "ts": ts, "dur": dur,  # noqa: E731
                                      "pid": 1, "tid": tid}  # fmt: skip
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        x("compile", 0, 10_000_000),  # 10 s, of which its children take 6 s
        x("fusion", 1_000_000, 4_000_000),  # 4 s, of which 1 s is a nested pass
        x("algsimp", 2_000_000, 1_000_000),
        x("algsimp", 6_000_000, 2_000_000),  # a sibling of fusion, after it ended
        x("algsimp", 0, 5_000_000, tid=2),  # another thread: never anyone's child
    ]
    rows, busy = cp.self_times(_write(tmp_path, events))
    got = {n: (round(s, 6), c) for n, s, c in rows}
    assert got == {"compile": (4.0, 1), "fusion": (3.0, 1), "algsimp": (8.0, 3)}
    assert rows[0][0] == "algsimp"  # biggest first
    assert busy == {"main": 10.0, "(1, 2)": 5.0}
    rows, busy = cp.self_times(_write(tmp_path / "again", events), thread="main")
    assert {n: round(s, 6) for n, s, _ in rows} == {"compile": 4.0, "fusion": 3.0, "algsimp": 3.0}
    assert busy == {"main": 10.0}


def test_self_times_of_a_real_compile(tmp_path):
    lowered = jax.jit(lambda v: jnp.cumsum(jnp.sin(v)) * 3).lower(jnp.ones(256))
    with jax.profiler.trace(str(tmp_path)):
        lowered.compile()
    rows, busy = cp.self_times(str(tmp_path))
    names = [n for n, _, _ in rows]
    assert all(s >= -1e-6 for _, s, _ in rows), rows  # no child outlasts its parent
    assert any("ompile" in n for n in names), names[:20]  # XLA's compile events are there
    assert busy and max(busy.values()) > 0
