"""Probe the Pallas parser kernel (jaxcc/parser_pallas.py) on a GPU: is it right, how fast?

For each corpus size: the seeded corpus programs (bench/corpus.py, as bench/run.py builds
them), a few hundred error programs (the corpus programs cut or garbled at random
places) and random hostile token arrays, lexed on the device, tiled to the batch. Each
backend configuration is compared with the XLA loop in every output field (Ast, Error,
ParseInfo), then timed: first call (compile) apart, then the median of --repeats calls.

    PYTHONPATH=. python bench/parser_pallas_probe.py --out $OUT/parser_pallas.json
    PYTHONPATH=. python bench/parser_pallas_probe.py --quick     # CPU smoke: interpret mode
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench import corpus  # noqa: E402
from jaxcc import lexer, parser, parser_pallas  # noqa: E402
from jaxcc.errors import Code, Error  # noqa: E402
from jaxcc.tokens import N_TOK, Tokens  # noqa: E402


def _garbled(sources: list[str], rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        s = rng.choice(sources)
        i = rng.randrange(len(s) + 1)
        out.append(s[:i] + rng.choice(["", ")", "(", ":", "= =", "\n  ", "1 = x", "def"]) + s[i:])
    return out


def _hostile(rng: np.random.Generator, b: int, t: int) -> tuple[Tokens, Error]:
    kind = rng.integers(-3, N_TOK + 3, (b, t)).astype(np.int32)
    tok = Tokens(
        kind=kind,
        value=rng.integers(-5, 50, (b, t)).astype(np.int32),
        **{f: rng.integers(0, 40, (b, t)).astype(np.int32)
           for f in Tokens._fields if f not in ("kind", "value", "n_tokens")},
        n_tokens=rng.integers(-2, t + 3, b).astype(np.int32),
    )  # fmt: skip
    code = np.where(rng.random(b) < 0.3, int(Code.SYNTAX), 0).astype(np.int32)
    err = Error(code, rng.integers(0, 9, b).astype(np.int32), np.zeros(b, np.int32), code)
    return tok, err


def _config(text: str) -> tuple[int, int, dict]:
    """ "B/K[/W][/nobarrier][/nolean]" -> (block, steps_per_iter, the other
    knobs): W Triton's num_warps; the words turn a knob of parser_pallas off."""
    parts = text.split("/")
    kw = {}
    for part in parts[2:]:
        if part.isdigit():
            kw["num_warps"] = int(part)
        elif part in ("nobarrier", "nolean"):
            kw[part[2:]] = False
        else:
            raise ValueError(f"unknown knob {part!r} in {text!r}")
    return int(parts[0]), int(parts[1]), kw


def _tile(tree, b: int):
    return jax.tree.map(lambda x: jnp.asarray(np.resize(np.asarray(x), (b,) + x.shape[1:])), tree)


def _diff(got, want) -> list[str]:
    bad = []
    for path, g, w in zip(
        jax.tree_util.tree_flatten_with_path(want)[0],
        jax.tree.leaves(got),
        jax.tree.leaves(want),
        strict=True,
    ):
        g, w = np.asarray(g), np.asarray(w)
        if not np.array_equal(g, w):
            lanes = np.nonzero((g != w).reshape(g.shape[0], -1).any(axis=1))[0]
            bad.append(f"{jax.tree_util.keystr(path[0])}: {len(lanes)} lanes, first {lanes[:5]}")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="small,medium")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--configs", default="128/32,64/32,256/32,128/16,128/64",
                    help="block/steps_per_iter[/num_warps[/nobarrier]] of the kernel")  # fmt: skip
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--trace",
        help="also trace the default parse per size into this "
        "directory and record its heaviest kernels (bench/trace_kernels.py)",
    )
    ap.add_argument(
        "--hlo",
        help="with --trace: write the traced parse's optimized HLO "
        "here (DIR/parse_SIZE.hlo.txt), to look its kernels up",
    )
    ap.add_argument(
        "--pipelined",
        type=int,
        default=0,
        help="also time this many calls queued before one wait (per call)",
    )
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.batch, a.repeats, a.configs = "small", 96, 1, "32/32"
    dev = jax.devices()[0]
    res = dict(device=dev.device_kind, jax=jax.__version__, batch=a.batch, checks=[], timings=[])
    print(res["device"], flush=True)

    def save():
        if a.out:
            os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1)

    for size in a.sizes.split(","):
        lim = corpus.LIMITS[size]
        progs = corpus.generate(0, size, 64 if a.quick else 256, with_tests=False)
        srcs = [p["source"] for p in progs]
        rng = random.Random(1)
        bad_srcs = _garbled(srcs, rng, 32 if a.quick else 512)
        sets = {}
        for name, ss in (("corpus", srcs), ("errors", bad_srcs)):
            src, ln = lexer.encode(ss, lim)
            sets[name] = lexer.lex(src, ln, lim)
        sets["hostile"] = _hostile(np.random.default_rng(2), 64 if a.quick else 4096,
                                   lim.max_tokens)  # fmt: skip
        n_tok = float(np.sum(np.asarray(sets["corpus"][0].n_tokens)))
        configs = [_config(c) for c in a.configs.split(",")]
        for name, (tok, lerr) in sets.items():
            b = a.batch if name == "corpus" else tok.kind.shape[0]
            tok, lerr = _tile(tok, b), _tile(lerr, b)
            want = jax.block_until_ready(parser.parse_with_info(tok, lim, lerr, backend="xla"))
            codes = np.bincount(np.asarray(want[1].code) % 32, minlength=16).tolist()
            for block, k, kw in configs if name == "corpus" else configs[:1]:
                got = parser_pallas.parse_with_info(
                    tok, lim, lerr, steps_per_iter=k, block=block, **kw
                )
                diff = _diff(jax.block_until_ready(got), want)
                rec = dict(size=size, set=name, block=block, steps=k, batch=b, equal=not diff,
                           diff=diff[:6], codes=codes, **kw)  # fmt: skip
                res["checks"].append(rec)
                print(json.dumps(rec), flush=True)
                save()
            if name != "corpus":
                continue
            args = (tok, lim, lerr)
            if a.trace:
                from bench.trace_kernels import gaps, trace_top

                c = jax.jit(lambda t, e, lim=lim: parser.parse_with_info(t, lim, e))
                c = c.lower(tok, lerr).compile()
                if a.hlo:
                    os.makedirs(a.hlo, exist_ok=True)
                    with open(os.path.join(a.hlo, f"parse_{size}.hlo.txt"), "w") as f:
                        f.write(c.as_text())
                top = trace_top(c, (tok, lerr), os.path.join(a.trace, size), top=30)
                res.setdefault("kernels", {})[size] = top
                res.setdefault("timeline", {})[size] = gaps(os.path.join(a.trace, size))
                print(size, json.dumps(res["timeline"][size]), flush=True)
                for row in top:
                    print(size, json.dumps(row), flush=True)
                save()
            xla = functools.partial(parser.parse_with_info, *args, 32, backend="xla")
            runs = [("xla", 32, xla)]
            for block, k, kw in configs:
                fn = functools.partial(parser_pallas.parse_with_info, *args, steps_per_iter=k,
                                       block=block, **kw)  # fmt: skip
                label = f"pallas b{block}" + "".join(f" {n}={v}" for n, v in kw.items())
                runs.append((label, k, fn))
            # the default parse as bench/run.py's parser entry calls it: one jitted call
            whole = jax.jit(lambda t, e, lim=lim: parser.parse(t, lim, e))
            whole = whole.lower(tok, lerr).compile()
            runs.append(("jit(parse)", parser.STEPS_PER_ITER, functools.partial(whole, tok, lerr)))
            for label, k, fn in runs:
                t0 = time.perf_counter()
                jax.block_until_ready(fn())
                first = time.perf_counter() - t0
                ts = []
                for _ in range(a.repeats):
                    t0 = time.perf_counter()
                    jax.block_until_ready(fn())
                    ts.append(time.perf_counter() - t0)
                med = statistics.median(ts)
                if a.pipelined:  # calls queued back to back, one wait: no per-call latency
                    t0 = time.perf_counter()
                    outs = [fn() for _ in range(a.pipelined)]
                    jax.block_until_ready(outs)
                    piped = (time.perf_counter() - t0) / a.pipelined
                    del outs
                rec = dict(size=size, backend=label, steps=k, batch=b, first_s=round(first, 2),
                           ms=round(med * 1e3, 3), min_ms=round(min(ts) * 1e3, 3),
                           tokens_per_s=n_tok / len(srcs) * b / med,
                           programs_per_s=b / med)  # fmt: skip
                if a.pipelined:
                    rec.update(pipelined_ms=round(piped * 1e3, 3),
                               pipelined_tokens_per_s=n_tok / len(srcs) * b / piped)  # fmt: skip
                res["timings"].append(rec)
                print(json.dumps(rec), flush=True)
                save()


if __name__ == "__main__":
    main()
