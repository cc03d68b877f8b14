"""Benchmark of the JAX lexer (jaxcc.lexer.lex): source bytes/s vs batch size.

The workload is the seeded "medium" corpus of bench/corpus.py (~150 tokens, ~0.5-1 KB per
program; limits LIMITS["medium"]: 1024-byte sources, 256 tokens), encoded on the host,
tiled to each batch size and moved to the device once. Timing: the jitted lex, a warm-up
call first (compilation), then the median of --repeats calls, each ended by
block_until_ready. bytes/s counts the programs' real bytes (padded_bytes/s the padded
N per program). Every program must lex without error and agree with host_lex (checked
on the distinct programs once). A batch size that runs out of memory is reported and
skipped. Target on one H200: 50 GB/s.

    python bench/bench_lexer.py --out /tmp/lexer_bench            # GPU: 1k .. 256k
    python bench/bench_lexer.py --quick --out /tmp/lexer_bench    # CPU smoke (< 1 min)
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
from jaxcc import lexer  # noqa: E402
from jaxcc.errors import Code  # noqa: E402
from jaxcc.limits import Limits  # noqa: E402
from jaxcc.reference.host_lex import host_lex_many  # noqa: E402


def _tile(x: np.ndarray, b: int) -> np.ndarray:
    reps = -(-b // x.shape[0])
    return np.concatenate([x] * reps)[:b]


def check(src: np.ndarray, n: np.ndarray, sources: list[str], limits: Limits) -> None:
    toks, err = lexer.lex(src, n, limits)
    if int(jnp.sum(err.code != Code.OK)):
        raise AssertionError("some corpus programs failed to lex")
    h_toks, _ = host_lex_many(sources, limits)
    for f in toks._fields:
        if not np.array_equal(np.asarray(getattr(toks, f)), getattr(h_toks, f)):
            raise AssertionError(f"lexer disagrees with host_lex on {f}")


def bench_one(src: np.ndarray, n: np.ndarray, b: int, limits: Limits, repeats: int) -> dict:
    sb = jnp.asarray(_tile(src, b))
    nb = jnp.asarray(_tile(n, b))

    def run():
        return lexer.lex(sb, nb, limits)

    t0 = time.perf_counter()
    toks, err = jax.block_until_ready(run())
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run())
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    n_bytes = int(np.sum(_tile(n, b), dtype=np.int64))
    n_tok = int(jnp.sum(toks.n_tokens))
    return {
        "batch": b,
        "seconds": t,
        "first_call_s": first,
        "bytes": n_bytes,
        "bytes_per_s": n_bytes / t,
        "padded_bytes_per_s": b * limits.max_source_bytes / t,
        "tokens_per_s": n_tok / t,
        "programs_per_s": b / t,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small batches (CPU smoke run)")
    ap.add_argument("--batches", type=int, nargs="*", default=None)
    ap.add_argument("--programs", type=int, default=256, help="distinct programs (tiled)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="directory for results JSON")
    args = ap.parse_args(argv)

    batches = args.batches or ([64, 256] if args.quick else [1 << k for k in range(10, 19)])
    repeats = 2 if args.quick else args.repeats
    limits = corpus.LIMITS["medium"]
    progs = corpus.generate(args.seed, "medium", 16 if args.quick else args.programs, False)
    sources = [p["source"] for p in progs]
    src, n = lexer.encode(sources, limits)
    check(src, n, sources, limits)
    dev = jax.devices()[0]
    print(f"device: {dev.device_kind} ({dev.platform}); {len(progs)} distinct programs, "
          f"{float(np.mean(n)):.0f} bytes each on average; N={limits.max_source_bytes}, "
          f"T={limits.max_tokens}")  # fmt: skip
    rows = []
    for b in batches:
        try:
            r = bench_one(src, n, b, limits, repeats)
        except Exception as e:  # out of device memory: report and go on
            print(f"B={b:>7}  failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
            rows.append({"batch": b, "error": f"{type(e).__name__}: {str(e)[:500]}"})
            continue
        rows.append(r)
        print(f"B={b:>7}  {r['seconds'] * 1e3:9.2f} ms  {r['bytes_per_s'] / 1e9:8.3f} GB/s  "
              f"(padded {r['padded_bytes_per_s'] / 1e9:.3f} GB/s)  {r['tokens_per_s']:.3e} tokens/s  "
              f"{r['programs_per_s']:.3e} programs/s  (first call {r['first_call_s']:.1f} s)",
              flush=True)  # fmt: skip
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "bench_lexer.json")
        meta = {
            "device_kind": dev.device_kind,
            "platform": dev.platform,
            "jax": jax.__version__,
            "argv": sys.argv if argv is None else argv,
            "limits": limits._asdict(),
            "seed": args.seed,
            "targets": {"bytes_per_s": 50e9},
        }
        with open(path, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
