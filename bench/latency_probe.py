"""Where a single jitted call's time goes beyond its kernels (issue 14's parser target).

A call of a jitted function on a GPU costs its kernels plus a fixed part: the host's
dispatch (arguments in, the executable launched, one Python array made per output) and
the wait for the result. This probe separates the two for the parser as the ``parser``
entry of bench/run.py calls it, and for trivial jits with 1 and 16 outputs of the same
shapes (so the cost per output is seen apart from any parser work):

    PYTHONPATH=. python bench/latency_probe.py --out $OUT/latency.json [--sizes small,medium]

For each function: ``dispatch_ms`` (the call returns, nothing waited for), ``wait_ms``
(block_until_ready after that), ``single_ms`` (call and wait, the entry's measure),
``queued_ms`` (20 calls queued, one wait, per call). Medians of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench import corpus  # noqa: E402
from jaxcc import parser  # noqa: E402
from jaxcc.reference import host_lex  # noqa: E402


def _time(fn, args, repeats: int, queue: int = 20) -> dict:
    jax.block_until_ready(fn(*args))  # compile + warm
    jax.block_until_ready(fn(*args))
    disp, wait, single = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(*args)
        t1 = time.perf_counter()
        jax.block_until_ready(out)
        t2 = time.perf_counter()
        disp.append(t1 - t0)
        wait.append(t2 - t1)
        single.append(t2 - t0)
        del out
    t0 = time.perf_counter()
    outs = [fn(*args) for _ in range(queue)]
    jax.block_until_ready(outs)
    queued = (time.perf_counter() - t0) / queue
    del outs
    ms = lambda xs: round(statistics.median(xs) * 1e3, 4)  # noqa: E731
    return dict(dispatch_ms=ms(disp), wait_ms=ms(wait), single_ms=ms(single),
                min_single_ms=round(min(single) * 1e3, 4), queued_ms=round(queued * 1e3, 4))  # fmt: skip


def _timeline(fn, args, path: str) -> dict:
    """Three single calls (call, wait, 50 ms pause) under the profiler: for the last one,
    every host and GPU event of 10 us or more, in time order, relative to its first event
    (where a call's time goes before its first kernel and after its last)."""
    import glob
    import gzip

    jax.block_until_ready(fn(*args))
    with jax.profiler.trace(path, create_perfetto_trace=True):
        for _ in range(3):
            time.sleep(0.05)
            jax.block_until_ready(fn(*args))
    files = glob.glob(os.path.join(path, "**", "*.trace.json.gz"), recursive=True)
    with gzip.open(files[0]) as f:
        tr = json.load(f)
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    pids = {e["pid"]: e["args"]["name"] for e in ev
            if e.get("ph") == "M" and e.get("name") == "process_name"}  # fmt: skip
    xs = sorted((e["ts"], e["dur"], pids.get(e["pid"], "?"), e["name"][:80]) for e in ev
                if e.get("ph") == "X" and "dur" in e)  # fmt: skip
    # the last call: the events after the last pause
    after = max(x[0] + x[1] for x in xs if "sleep" in x[3])
    last = [x for x in xs if x[0] >= after]
    t0 = last[0][0]
    gpu = [x for x in last if "GPU" in x[2] or "/device" in x[2]]
    return dict(
        span_us=round(max(x[0] + x[1] for x in last) - t0, 1),
        first_gpu_us=round(gpu[0][0] - t0, 1) if gpu else None,
        last_gpu_end_us=round(max(x[0] + x[1] for x in gpu) - t0, 1) if gpu else None,
        events=[(round(x[0] - t0, 1), round(x[1], 1), x[2][:30], x[3]) for x in last if x[1] >= 10][
            :400
        ],
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="small,medium")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument(
        "--lexer-chunks",
        default="",
        help="also time lexer.lex on the large corpus at these chunks (N: None)",
    )
    ap.add_argument("--trace", help="trace three single parse calls under this directory")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    res = dict(device=jax.devices()[0].device_kind, jax=jax.__version__, rows=[])

    def add(**row):
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1)

    for size in a.sizes.split(","):
        lim = corpus.LIMITS[size]
        progs = corpus.generate(0, size, 512, with_tests=False)
        toks = jax.tree.map(
            np.asarray, host_lex.host_lex_many([p["source"] for p in progs], lim)[0]
        )
        sel = np.arange(a.batch) % toks.kind.shape[0]
        args = (jax.device_put(jax.tree.map(lambda x, sel=sel: x[sel], toks)),)
        full = jax.jit(lambda t, lim=lim: parser.parse(t, lim))
        add(size=size, fn="parse (the entry's jit)", n_out=16, **_time(full, args, a.repeats))
        if a.trace:
            add(size=size, fn="parse timeline", **_timeline(full, args, f"{a.trace}_{size}"))
        # the same parse, every output packed into one array: one Python array per call
        packed = jax.jit(lambda t, lim=lim: jnp.concatenate(
            [x.reshape(a.batch, -1).astype(jnp.int32) for x in jax.tree.leaves(parser.parse(t, lim))],
            axis=1))  # fmt: skip
        add(size=size, fn="parse, outputs packed", n_out=1, **_time(packed, args, a.repeats))
        # the parse's arguments, touched trivially, 16 outputs against 1
        kind = args[0].kind
        many = jax.jit(lambda k: tuple(k + i for i in range(16)))
        one = jax.jit(lambda k: sum(k + i for i in range(16)))
        add(size=size, fn="trivial, 16 outputs", n_out=16, **_time(many, (kind,), a.repeats))
        add(size=size, fn="trivial, 1 output", n_out=1, **_time(one, (kind,), a.repeats))
        tiny = jnp.zeros((8,), jnp.int32)
        add(size=size, fn="trivial on 8 ints, 1 output", n_out=1,
            **_time(jax.jit(lambda k: k + 1), (tiny,), a.repeats))  # fmt: skip
    if a.lexer_chunks:
        from jaxcc import lexer

        lim = corpus.LIMITS["large"]
        progs = corpus.generate(0, "large", 512, with_tests=False)
        src, ln = lexer.encode([p["source"] for p in progs], lim)
        idx = np.arange(a.batch) % len(progs)
        args = jax.device_put((np.asarray(src)[idx], np.asarray(ln)[idx]))
        real = int(np.asarray(ln)[idx].sum())
        ref = None
        for c in a.lexer_chunks.split(","):
            chunk = None if c == "N" else int(c)
            fn = jax.jit(lambda s, n, chunk=chunk: lexer.lex(s, n, lim, chunk=chunk))
            t0 = time.perf_counter()
            out = jax.block_until_ready(fn(*args))
            first = time.perf_counter() - t0
            same = None
            if ref is None:
                ref = jax.tree.map(np.asarray, out)
            else:
                got = jax.tree.leaves(jax.tree.map(np.asarray, out))
                same = all(map(np.array_equal, jax.tree.leaves(ref), got))
            del out
            t = _time(fn, args, 7, queue=5)
            add(size="large", fn=f"lexer.lex chunk={c}", first_s=round(first, 2), equal=same,
                real_bytes_per_s=real / (t["single_ms"] / 1e3), **t)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
