"""Where a cold compile of the whole loop goes, pass by pass (issue 14's compile time).

XLA marks each HLO pass, pipeline and backend step with a profiler event, so one
``jax.profiler`` trace around ``Lowered.compile()`` shows the compile's time by pass:

    PYTHONPATH=. python bench/compile_profile.py --out $OUT/compile_profile.json \
        [--size small] [--batch 65536] [--backend pallas] [--sets default,NAME,...] \
        [--tiers auto|on|off]

The loop is bench/run.py's ``loop_fn`` (the `loop` / `loop_pallas` entries' function),
lowered from the shapes alone (no corpus needed), with no persistent cache; ``--tiers``
forces the lexer's and the middle end's narrow widths on or off (``lexer.use_tiers``:
on a GPU from 4,096 programs, each width more copies of those stages). Per option
set (``SETS``: XLA flags; each set in a fresh process, since XLA reads its flags once):
``lower_s``, ``compile_s``, and with ``--trace`` (the default set only) the events'
self time (their time minus their children's, on the same thread) summed by name, the
top ``--top``, plus each thread's busy time, so that work on XLA's thread pools shows
apart from the main thread's. Rows are printed and written as JSON lines.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.trace_kernels import trace_events  # noqa: E402

SETS = {
    "default": {},
    # candidate passes whose cost grows with the module (tried one at a time)
    "no_command_buffer": {"xla_gpu_enable_command_buffer": ""},
    "no_lhs": {"xla_gpu_enable_latency_hiding_scheduler": False},
    "autotune0": {"xla_gpu_autotune_level": 0},
    "no_while_unroll": {"xla_gpu_enable_while_loop_unrolling": "WHILE_LOOP_UNROLLING_NO_UNROLL"},
    "parallelism16": {"xla_gpu_force_compilation_parallelism": 16},
}


def thread_self_times(trace_dir: str) -> dict[str, tuple]:
    """Per thread (by name; unnamed ones by (pid, tid)) of the trace under ``trace_dir``:
    self microseconds and counts by event name (an event's time less its children's on
    the same thread), and busy microseconds (its top-level events)."""
    by_tid = collections.defaultdict(list)
    names = {}
    for e in trace_events(trace_dir):
        if e.get("ph") == "X" and "dur" in e:
            by_tid[(e.get("pid"), e.get("tid"))].append(e)
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = e["args"]["name"]
    out: dict = {}
    for key, evs in by_tid.items():
        name = str(names.get(key, key))  # threads of one name add up
        total, count, busy = out.get(name) or (collections.Counter(), collections.Counter(), 0.0)
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list] = []  # [end, event, children's time]

        def close(stack, total=total, count=count):
            _, ev, kids = stack.pop()
            total[ev["name"]] += ev["dur"] - kids
            count[ev["name"]] += 1
            if stack:
                stack[-1][2] += ev["dur"]

        for e in evs:
            while stack and stack[-1][0] <= e["ts"]:
                close(stack)
            if not stack:
                busy += e["dur"]
            stack.append([e["ts"] + e["dur"], e, 0.0])
        while stack:
            close(stack)
        out[name] = (total, count, busy)
    return out


def summed(per_thread: dict, thread: str | None = None) -> tuple[list, dict]:
    """(name, self seconds, count) summed over ``thread_self_times``' threads (or only
    ``thread``), biggest first, and each of those threads' busy seconds."""
    total, count, busy = collections.Counter(), collections.Counter(), {}
    for name, (t, c, b) in per_thread.items():
        if thread is None or name == thread:
            total.update(t)
            count.update(c)
            busy[name] = round(b / 1e6, 3)
    return [(n, v / 1e6, count[n]) for n, v in total.most_common()], busy


def self_times(trace_dir: str, thread: str | None = None) -> tuple[list, dict]:
    """``summed(thread_self_times(trace_dir), thread)``."""
    return summed(thread_self_times(trace_dir), thread)


def one(set_name: str, args) -> dict:
    if SETS[set_name]:
        flags = " ".join(f"--{k}={v}" for k, v in SETS[set_name].items())
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_compilation_cache", False)
    from bench import corpus
    from jaxcc import lexer

    if args.tiers != "auto":  # both stages' widths follow lexer.use_tiers' rule
        on = args.tiers == "on"
        lexer.use_tiers = lambda tiers, batch: on if tiers is None else tiers
    from bench.run import loop_fn

    lim = corpus.LIMITS[args.size]
    B = args.batch
    k = corpus.N_TESTS
    shapes = (
        jax.ShapeDtypeStruct((B, lim.max_source_bytes), jnp.uint8),
        jax.ShapeDtypeStruct((B,), jnp.int32),
        jax.ShapeDtypeStruct((B,), jnp.int32),
        jax.ShapeDtypeStruct((B, k, 2), jnp.int32),
        jax.ShapeDtypeStruct((B, k), jnp.int32),
    )
    row = {"set": set_name, "options": SETS[set_name], "size": args.size, "batch": B,
           "backend": args.backend, "tiers": args.tiers,
           "device": jax.devices()[0].device_kind}  # fmt: skip
    t0 = time.perf_counter()
    lowered = jax.jit(loop_fn(lim, backend=args.backend)).lower(*shapes)
    row["lower_s"] = round(time.perf_counter() - t0, 2)
    row["stablehlo_chars"] = len(lowered.as_text())
    trace = args.trace and set_name == "default"
    t0 = time.perf_counter()
    if trace:
        d = f"/tmp/compile_profile_{os.getpid()}"
        with jax.profiler.trace(d):
            compiled = lowered.compile()
    else:
        compiled = lowered.compile()
    row["compile_s"] = round(time.perf_counter() - t0, 2)
    hlo = compiled.as_text()
    row["hlo_lines"] = hlo.count("\n")
    row["fusions"] = hlo.count(" fusion(")
    row["whiles"] = hlo.count(" while(")
    row["custom_calls"] = hlo.count(" custom-call(")
    if trace:
        per_thread = thread_self_times(d)
        rows, busy = summed(per_thread)
        row["top"] = [[n, round(s, 3), c] for n, s, c in rows[: args.top]]
        row["thread_busy_s"] = busy
        # the busiest threads' own shares: what runs on one thread is the compile's
        # serial part, what the pool's threads do runs beside it
        row["thread_top"] = {
            t: [[n, round(s, 3), c] for n, s, c in summed(per_thread, t)[0][:15]]
            for t in sorted(busy, key=busy.get, reverse=True)[:3]
        }
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="small")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--backend", default="pallas")
    ap.add_argument("--sets", default="default")
    ap.add_argument(
        "--tiers",
        choices=("auto", "on", "off"),
        default="auto",
        help="the lexer's and the middle end's narrow widths: their rule, or forced",
    )
    ap.add_argument("--trace", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--top", type=int, default=60)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print("ROW " + json.dumps(one(args.one, args)), flush=True)
        return
    for name in args.sets.split(","):
        cmd = [sys.executable, __file__, "--one", name] + [
            a for a in sys.argv[1:] if not a.startswith("--one")
        ]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        rows = [json.loads(line[4:]) for line in p.stdout.splitlines() if line.startswith("ROW ")]
        row = rows[0] if rows else {"set": name, "error": p.stderr[-2000:]}
        row["process_s"] = round(time.perf_counter() - t0, 2)
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        short = {k: v for k, v in row.items() if k not in ("top", "thread_top")}
        print(json.dumps(short), flush=True)
        tops = {"all threads": row.get("top", [])[:40], **row.get("thread_top", {})}
        for key, top in tops.items():
            print(f"  {key}:", flush=True)
            for n, s, c in top:
                print(f"   {s:9.3f} s {c:6d}  {n}", flush=True)


if __name__ == "__main__":
    main()
