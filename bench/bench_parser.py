"""Benchmark of the JAX parser (jaxcc.parser.parse): tokens/s and programs/s vs batch size.

The workload is the seeded "medium" corpus of bench/corpus.py (~150 tokenize tokens per
program, limits LIMITS["medium"]: 256 tokens, 256 nodes, parse depth 128), lexed on the
host by reference.host_lex (lexing is not timed), tiled to each batch size and moved to
the device once. Timing: the jitted parse, a warm-up call first (compilation), then the
median of --repeats calls, each ended by block_until_ready. tokens/s counts every token
of the programs (COMMENT and NL included, as the lexer emits them). Every program must
parse without error (checked once per batch size).

    python bench/bench_parser.py --out /tmp/parser_bench            # GPU: 1k .. 256k
    python bench/bench_parser.py --quick --out /tmp/parser_bench    # CPU smoke (< 1 min)
    python bench/bench_parser.py --steps-per-iter 8 16 32          # tune K
    python bench/bench_parser.py --backend xla                      # the XLA loop on a GPU
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
from jaxcc.errors import Code, Error  # noqa: E402
from jaxcc.reference.host_lex import host_lex_many  # noqa: E402
from jaxcc.tokens import Tokens  # noqa: E402


def _tile(x: np.ndarray, b: int) -> np.ndarray:
    reps = -(-b // x.shape[0])
    return np.concatenate([x] * reps)[:b]


def bench_one(toks: Tokens, lerr: Error, b: int, limits, k: int, repeats: int,
              backend: str = "auto") -> dict:  # fmt: skip
    tb = Tokens(*[jnp.asarray(_tile(np.asarray(x), b)) for x in toks])
    eb = Error(*[jnp.asarray(_tile(np.asarray(x), b)) for x in lerr])
    tabs = parser._tables()

    def run():
        return parser._parse_batch(tb, eb, tabs, limits, k, parser.resolve_backend(backend))

    t0 = time.perf_counter()
    tree, err, info = jax.block_until_ready(run())
    compile_s = time.perf_counter() - t0
    n_bad = int(jnp.sum(err.code != Code.OK))
    if n_bad:
        raise AssertionError(f"{n_bad} of {b} programs failed to parse")
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run())
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    n_tok = int(jnp.sum(tb.n_tokens))
    return {
        "batch": b,
        "steps_per_iter": k,
        "seconds": t,
        "first_call_s": compile_s,
        "tokens": n_tok,
        "tokens_per_s": n_tok / t,
        "programs_per_s": b / t,
        "automaton_steps_max": int(jnp.max(info.steps)),
        "automaton_steps_mean": float(jnp.mean(info.steps)),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small batches (CPU smoke run)")
    ap.add_argument("--batches", type=int, nargs="*", default=None)
    ap.add_argument("--steps-per-iter", type=int, nargs="*", default=[parser.STEPS_PER_ITER])
    ap.add_argument("--backend", default="auto", help="xla, pallas or auto (parser.parse's)")
    ap.add_argument("--programs", type=int, default=256, help="distinct programs (tiled)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="directory for results JSON")
    args = ap.parse_args(argv)

    batches = args.batches or ([256, 1024] if args.quick else [1 << k for k in range(10, 19)])
    repeats = 2 if args.quick else args.repeats
    limits = corpus.LIMITS["medium"]
    progs = corpus.generate(args.seed, "medium", 64 if args.quick else args.programs, False)
    toks, lerr = host_lex_many([p["source"] for p in progs], limits)
    assert np.all(lerr.code == Code.OK)
    dev = jax.devices()[0]
    print(f"device: {dev.device_kind} ({dev.platform}); {len(progs)} distinct programs, "
          f"{float(np.mean(toks.n_tokens)):.0f} tokens each on average; {limits}")  # fmt: skip
    rows = []
    for k in args.steps_per_iter:
        for b in batches:
            r = bench_one(toks, lerr, b, limits, k, repeats, args.backend)
            rows.append(r)
            print(f"B={b:>7} K={k:>3}  {r['seconds'] * 1e3:9.2f} ms  "
                  f"{r['tokens_per_s']:.3e} tokens/s  {r['programs_per_s']:.3e} programs/s  "
                  f"(steps max {r['automaton_steps_max']}, first call {r['first_call_s']:.1f} s)",
                  flush=True)  # fmt: skip
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "bench_parser.json")
        meta = {
            "device_kind": dev.device_kind,
            "platform": dev.platform,
            "jax": jax.__version__,
            "argv": sys.argv if argv is None else argv,
            "limits": limits._asdict(),
            "seed": args.seed,
            "backend": parser.resolve_backend(args.backend),
            "targets": {"tokens_per_s": 2e9, "programs_per_s": 5e6},
        }
        with open(path, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
