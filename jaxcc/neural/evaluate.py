"""Measure the neural compiler: pass@k on held-out programs, hand-written programs,
throughput, and the data the hybrid's router is trained on.

    python -m jaxcc.neural.evaluate --out DIR [--weights FILE] [--n 256] [--k 32]

"Pass" is decided by the VM, never by tokens: a candidate passes when its behaviour
equals the deterministic compiler's code (``verify.verify_against``: the module body's
status, error line and output, and every function's status and result on
``--probes`` boundary and random inputs). Per held-out program (seeds of
``data.HELDOUT_SEEDS``, never trained on):

* greedy pass@1: the single greedy sample passes;
* pass@k for k = 1, 2, 4, 8, 16 by the unbiased estimator of Chen et al. (2021),
  ``1 - C(n - c, k) / C(n, k)``, from n = ``--k`` temperature samples of which c pass;
* p_correct = c / n (the paper's eq. 6 quantity) and the program's complexity features.

Results go to ``DIR/eval.json`` (summary) and ``DIR/programs.jsonl``-like arrays in
``DIR/eval_programs.npz`` (per program: level, features, c, n, greedy pass).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

import jax
import numpy as np

from jaxcc import isa, lexer
from jaxcc.neural import api, inputs, router, verify
from jaxcc.neural import sample as S


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021, numerically stable product form)."""
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def heldout_sources(level: int, n: int, textbook_version: int | None = None) -> list[str]:
    """The n held-out programs of a level that ``main`` judges (and ``by_bounds`` splits);
    level 4 from ``textbook.program``'s newest version unless ``textbook_version``."""
    from jaxcc.neural import corpus

    seed = corpus.HELDOUT_SEEDS[0] + 1000 * level
    return corpus.generate(seed, n, level, split="heldout", textbook_version=textbook_version)


def reference_programs(sources, nl):
    """The deterministic reference compiler's code at the neural shapes (host), and ok."""
    from jaxcc.reference.compiler import compile_source

    progs, ok = [], []
    for s in sources:
        c = compile_source(s, nl)
        ok.append(int(c.error.code) == 0)
        progs.append(c.program)
    stacked = isa.Program(*(np.stack([np.asarray(getattr(p, f)) for p in progs]).astype(np.int32)
                            for f in isa.Program._fields))  # fmt: skip
    return stacked, np.array(ok)


def judge(sources, cfg, params, key, k, temperature, greedy_first, n_probes, nl, vl, batch=64,
          typed=True, branches=0, log=None, tiers=None, by_length=False,
          reference=None):  # fmt: skip
    """Bool[len, k]: which of k samples per source behave as the reference; and timing.
    Each batch samples at the smallest budget that holds its longest source
    (``sample.tier``; ``tiers``: only those source budgets, ``sample.tier``'s ``among``).
    ``by_length``: batches of sources in order of length (shortest first), so that few
    batches need a large budget; the default is source order. ``typed``, ``branches``:
    ``judged``'s. ``log``: called with one line per batch (its rows, tier, seconds and
    the rows with no right candidate), so that a run cut short by a device's time limit
    still says what it judged. ``reference``: ``reference_programs(sources, nl)`` when the
    caller has it already (None: made here)."""
    ref, ok = reference if reference is not None else reference_programs(sources, nl)
    n_src = S.n_source_tokens(sources, nl)
    order = np.argsort(n_src, kind="stable") if by_length else np.arange(len(sources))
    out = np.zeros((len(sources), k), bool)
    t_sample = 0.0
    for i in range(0, len(sources), batch):
        idx = sorted(order[i : i + batch].tolist())
        pad = idx + [idx[-1]] * (batch - len(idx))
        src, length = lexer.encode([sources[j] for j in pad], nl)
        sel = np.asarray(pad)
        r = jax.tree.map(lambda x, sel=sel: x[sel], ref)
        tier = S.tier(int(n_src[idx].max()), cfg, tiers)
        t0 = time.time()
        # the front end's print items and return types in a jit of their own: one compile
        # per batch shape, not one per sampling tier
        items = _typing_jit(src, length, nl) if typed else None
        v = _judge_jit(src, length, params, jax.random.fold_in(key, i), r, temperature, cfg, k,
                       greedy_first, n_probes, nl, vl, tier, items, branches)  # fmt: skip
        acc = np.asarray(jax.device_get(v))
        t_sample += time.time() - t0
        out[idx] = acc[: len(idx)] & ok[idx, None]
        if log is not None:
            none = [j for j in idx if ok[j] and not out[j].any()]
            rows = (
                f"{idx[0]}-{idx[-1]}"
                if idx[-1] - idx[0] == len(idx) - 1
                else f"{len(idx)} of {idx[0]}-{idx[-1]}"
            )
            log(f"judge rows {rows} tier {tier} k {k}: {time.time() - t0:.1f} s, "
                f"{int(ok[idx].sum())} live, none right: {none}")  # fmt: skip
    return out, ok, t_sample


@jax.jit
def _noop(x):
    return x


def judged(src, length, params, key, ref, temperature, cfg, k, greedy_first, n_probes, nl, vl,
           tier=None, span_decode=None, typed=True, items=None, branches=0):  # fmt: skip
    """(Candidates, Bool[B, k] accepted): k samples per source (top-p off), each judged
    against ``ref`` on the module body and ``n_probes`` inputs per function. ``typed``
    (static): sample with the typed decoding mask (the front end's print items, as
    ``compile_many`` and ``hybrid_compile`` do: ``items``, the pair (print items,
    return types) of ``inputs.typing``, or computed here from the tokens when None);
    False: the untyped mask. ``branches`` (static): that many of
    the k candidates are branches of the greedy sequence (``sample.compile``'s)."""
    ks, kp = jax.random.split(key)
    tokens, lex_error = lexer.lex(src, length, nl)
    if typed and items is None:
        items = inputs.typing(tokens, nl, lex_error)
    pt, rt = items if typed else (None, None)
    c = S.compile(tokens, params, ks, nl, k, temperature, 1.0, greedy_first, cfg=cfg,
                  nlimits=tier, span_decode=span_decode, print_items=pt, ret_types=rt,
                  branches=branches)  # fmt: skip
    probes = verify.make_probes(tokens, ref.fn_nparams, kp, n_probes)
    v = verify.verify_against(c.program, ref, probes, vl)
    return c, v.accepted & c.ok


def _judge_impl(src, length, params, key, ref, temperature, cfg, k, greedy_first, n_probes, nl, vl,
                tier=None, items=None, branches=0):  # fmt: skip
    return judged(src, length, params, key, ref, temperature, cfg, k, greedy_first, n_probes, nl,
                  vl, tier, typed=items is not None, items=items, branches=branches)[1]  # fmt: skip


_judge_jit = jax.jit(
    _judge_impl,
    static_argnames=("cfg", "k", "greedy_first", "n_probes", "nl", "vl", "tier", "branches"),
)


@functools.partial(jax.jit, static_argnames=("limits",))
def _typing_jit(src, length, limits):
    tokens, lex_error = lexer.lex(src, length, limits)
    return inputs.typing(tokens, limits, lex_error)


def throughput(cfg, params, sources, nl, ks=(16, 256, 1000), budget_s: float = 60.0,
               span_decode: bool | None = None, typed: bool = True):  # fmt: skip
    """Candidates per second (sampling + assembly) at each k, one program batch per k
    (``span_decode``: ``sample.sample``'s). ``typed``: sample with the typed mask, as
    ``jaxcc run --compiler neural`` does; the front end's print items and return types
    (``inputs.typing``, once per program whatever k) are computed before the clock
    starts and timed apart (``typing_seconds``); False: the untyped mask."""
    rows = []
    t_end = time.time() + budget_s
    tier = S.tier(int(S.n_source_tokens(sources, nl).max()), cfg)
    for k in ks:
        b = max(1, min(64, 4096 // k))
        src, length = lexer.encode((sources * b)[:b], nl)
        tokens, _ = jax.jit(lexer.lex, static_argnames=("limits",))(src, length, nl)
        t_typing = None
        items = (None, None)
        if typed:
            jax.block_until_ready(_typing_jit(src, length, nl))  # compile
            t0 = time.time()
            items = jax.block_until_ready(_typing_jit(src, length, nl))
            t_typing = time.time() - t0
        f = jax.jit(
            lambda t, key, pt, rt, k=k: S.compile(
                t, params, key, nl, k, 0.8, 0.95, True, cfg=cfg, nlimits=tier,
                span_decode=span_decode, print_items=pt, ret_types=rt,
            ).program.n_code
        )  # fmt: skip
        jax.block_until_ready(f(tokens, jax.random.key(0), *items))  # compile
        times = []
        for r in range(3):
            t0 = time.time()
            jax.block_until_ready(f(tokens, jax.random.key(r + 1), *items))
            times.append(time.time() - t0)
        med = float(np.median(times))
        rows.append({"k": k, "programs": b, "candidates": b * k, "seconds": med, "tier": list(tier),
                     "span_decode": span_decode, "typed_mask": typed,
                     "typing_seconds": t_typing, "candidates_per_s": b * k / med})  # fmt: skip
        if time.time() > t_end:
            break
    return rows


def throughput_sources(nl, max_tokens: int | None = 256, n: int = 8) -> list[str]:
    """The ``n`` held-out level-2 programs that ``throughput`` measures: the first of at
    most ``max_tokens`` model tokens each (None: any length), so that the batch samples at
    the (256, 512) tier rather than at the budget of its one longest program. From
    ``jaxcc.neural.data``'s generator (docs/neural.md section 4's table; until 2026-11-27
    ``main`` took the first 8 of ``corpus``'s, whatever their length)."""
    from jaxcc.neural import data

    srcs = data.generate(data.HELDOUT_SEEDS[0] + 99, 64 if max_tokens else n, 2, split="heldout")
    if max_tokens:
        n_tok = S.n_source_tokens(srcs, nl)
        srcs = [s for s, t in zip(srcs, n_tok, strict=True) if t <= max_tokens]
    return srcs[:n]


def by_bounds(eval_dir: str, n: int) -> dict:
    """A finished evaluation's held-out results split by the neural bounds (host only).

    Regenerates the ``n`` held-out programs of each level that ``main`` judged (the same
    seeds, in the same order as ``eval_dir/eval_programs.npz``'s rows), asks the labeller
    whether each fits the evaluated model's bounds (``corpus.label`` at its config's
    ``nlimits``: source tokens, literal slots, lines, names, output tokens) and reports
    greedy pass@1, pass@16 and p_correct over the programs inside and outside them.
    A program outside them is never given to the model (``Bound``): it counts as failed
    in ``main``'s table, and the hybrid sends it to the deterministic compiler."""
    from jaxcc.neural import corpus
    from jaxcc.neural.model import Config

    with open(os.path.join(eval_dir, "eval.json")) as f:
        summary = json.load(f)
    z = np.load(os.path.join(eval_dir, "eval_programs.npz"))
    nl = Config(**summary["weights_info"]["config"]).nlimits
    k = int(z["n"])
    report = {}
    for level in sorted(int(x) for x in summary["levels"]):
        # evaluations before textbook version 2 (stages 4-6) recorded none
        srcs = heldout_sources(level, n, summary.get("textbook_version", 1))
        _, ok = reference_programs(srcs, api.NEURAL_LIMITS)  # main's "live" programs
        live = [s for s, o in zip(srcs, ok, strict=True) if o]
        rows = np.nonzero(z["level"] == level)[0]
        if len(rows) != len(live):
            raise ValueError(f"level {level}: {len(rows)} rows but {len(live)} programs")
        why = np.array([corpus.label(s, api.NEURAL_LIMITS, nl).reason for s in live])
        inside = why == "ok"
        c, g = z["correct"][rows], z["greedy"][rows]
        report[level] = {
            "programs": len(live),
            "outside": {str(r): int(np.sum(why == r)) for r in set(why) - {"ok"}},
            "inside": _pass_stats(c[inside], g[inside], k),
            "all": _pass_stats(c, g, k),
            "outside_correct": int(np.sum(c[~inside] > 0)),
        }
    return report


def _pass_stats(correct, greedy, k: int) -> dict:
    """Greedy pass@1, pass@16, mean p_correct and programs never correct, over programs
    with ``correct`` of ``k`` samples passing (None where there are none)."""
    some = len(correct) > 0
    return {"programs": len(correct),
            "greedy_pass@1": float(np.mean(greedy)) if some else None,
            "pass@16": float(np.mean([pass_at_k(k, int(c), 16) for c in correct]))
            if some and k >= 16 else None,
            "p_correct_mean": float(np.mean(correct / k)) if some else None,
            "never_correct": int(np.sum(correct == 0))}  # fmt: skip


def main(argv=None) -> int:
    from jaxcc.neural import textbook, weights

    p = argparse.ArgumentParser(prog="python -m jaxcc.neural.evaluate")
    p.add_argument("--out", required=True)
    p.add_argument("--weights", default=weights.DEFAULT)
    p.add_argument("--n", type=int, default=256, help="held-out programs per level")
    p.add_argument(
        "--k",
        type=int,
        default=32,
        help="temperature samples per program (0: the greedy sample alone)",
    )
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--probes", type=int, default=128)
    p.add_argument("--levels", default="0,1,2,3,4", help="4: textbook-style (corpus.TEXTBOOK)")
    p.add_argument("--handwritten", default="tests/neural_holdout")
    p.add_argument("--throughput", action="store_true")
    p.add_argument("--untyped", action="store_true",
                   help="sample with the untyped mask (no print items from the front end; "
                   "how stages 4-9 were evaluated)")  # fmt: skip
    p.add_argument("--branches", type=int, default=0,
                   help="make that many of the --k candidates branches of the greedy sequence "
                   "(sample.compile's branches; candidate 0 is the greedy one, the rest "
                   "temperature samples); pass@k is then only reported for k = --k, as "
                   "any of the --k candidates")  # fmt: skip
    p.add_argument("--batch", type=int, default=64,
                   help="programs per judging call (x k samples: 16 fits a 24 GB CPU)")  # fmt: skip
    p.add_argument("--chunk", type=int, default=None,
                   help="hand-written files compiled per call (default: all at once)")  # fmt: skip
    p.add_argument("--tiers", default=None,
                   help="sample only at these source budgets, e.g. 256,768 (sample.tier's "
                   "among: each budget used is one more compile; default all)")  # fmt: skip
    p.add_argument("--by-length", action="store_true",
                   help="judge each level's programs in batches of similar length (fewer "
                   "batches at a large budget) instead of in source order")  # fmt: skip
    p.add_argument("--cache", default=None,
                   help="a persistent XLA compilation cache directory (a later run with the "
                   "same shapes skips the compiles)")  # fmt: skip
    p.add_argument("--by-bounds", action="store_true",
                   help="no model run: split the evaluation in --out (made with --n) by the "
                   "neural bounds (by_bounds) and write --out/by_bounds.json")  # fmt: skip
    ns = p.parse_args(argv)
    if ns.by_bounds:
        rep = by_bounds(ns.out, ns.n)
        with open(os.path.join(ns.out, "by_bounds.json"), "w") as f:
            json.dump(rep, f, indent=1)
        for level, r in rep.items():
            print(level, r["inside"], r["outside"], flush=True)
        return 0
    os.makedirs(ns.out, exist_ok=True)
    if ns.cache:
        jax.config.update("jax_compilation_cache_dir", ns.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    tiers = tuple(int(x) for x in ns.tiers.split(",")) if ns.tiers else None
    cfg, params = weights.load(ns.weights)
    nl, vl = api.NEURAL_LIMITS, api.VERIFY_LIMITS
    key = jax.random.key(1234)
    summary = {"device": jax.devices()[0].device_kind, "weights": ns.weights,
               "weights_info": {k: v for k, v in weights.info(ns.weights).items() if k != "history"},
               "k": ns.k, "temperature": ns.temperature, "probes": ns.probes,
               "textbook_version": textbook.VERSION, "typed_mask": not ns.untyped,
               "branches": ns.branches, "n": ns.n, "batch": ns.batch, "tiers": ns.tiers,
               "by_length": ns.by_length,
               "levels": {}}  # fmt: skip
    rows = []

    def dump():
        with open(os.path.join(ns.out, "eval.json"), "w") as f:
            json.dump(summary, f, indent=1)

    def log(line):
        print(f"[level {level}] {line}", file=sys.stderr, flush=True)

    for level in [int(x) for x in ns.levels.split(",") if x]:
        srcs = heldout_sources(level, ns.n)
        reference = reference_programs(srcs, nl)  # once a level: each judge call reads it
        typed = not ns.untyped
        if ns.branches:  # candidate 0 is the greedy sequence: no separate greedy run
            samp, ok, ts = judge(srcs, cfg, params, key, ns.k, ns.temperature, True, ns.probes,
                                 nl, vl, ns.batch, typed, ns.branches, log, tiers,
                                 ns.by_length, reference)  # fmt: skip
            greedy, tg = samp[:, :1], 0.0
        else:
            greedy, ok, tg = judge(srcs, cfg, params, key, 1, 0.0, True, ns.probes, nl, vl,
                                   ns.batch, typed, log=log, tiers=tiers,
                                   by_length=ns.by_length, reference=reference)  # fmt: skip
            samp, ts = greedy, 0.0  # --k 0: the greedy sample alone
            if ns.k:
                samp, _, ts = judge(srcs, cfg, params, key, ns.k, ns.temperature, False,
                                    ns.probes, nl, vl, ns.batch, typed, log=log, tiers=tiers,
                                    by_length=ns.by_length, reference=reference)  # fmt: skip
        c = samp.sum(axis=1)
        live = ok
        # the unbiased estimator needs independent samples; branches are not: any of k only
        pk = {kk: float(np.mean([pass_at_k(ns.k, int(ci), kk) for ci in c[live]]))
              for kk in (1, 2, 4, 8, 16) if kk <= ns.k and (kk == ns.k or not ns.branches)}  # fmt: skip
        summary["levels"][level] = {
            "programs": int(live.sum()), "greedy_pass@1": float(greedy[live, 0].mean()),
            "pass@k": pk, "p_correct_mean": float((c[live] / samp.shape[1]).mean()),
            "any_of_k": float((c[live] > 0).mean()), "seconds_greedy": tg, "seconds_sampled": ts,
            "none_right": [int(i) for i in np.flatnonzero(live & (c == 0))],
            "greedy_wrong": [int(i) for i in np.flatnonzero(live & ~greedy[:, 0])],
        }  # fmt: skip
        print(level, summary["levels"][level], flush=True)
        dump()  # after each level: a run cut short by a time limit keeps the levels it judged
        toks, _ = jax.tree.map(np.asarray, lexer.lex(*lexer.encode(srcs, nl), nl))
        ref, _ = reference
        feats = np.asarray(router.features(toks, ref.n_code))
        for i in range(len(srcs)):
            if live[i]:
                rows.append((level, feats[i], int(c[i]), bool(greedy[i, 0])))
    if rows:
        np.savez(os.path.join(ns.out, "eval_programs.npz"), level=np.array([r[0] for r in rows]),
             features=np.stack([r[1] for r in rows]), correct=np.array([r[2] for r in rows]),
             greedy=np.array([r[3] for r in rows]), n=max(ns.k, 1))  # fmt: skip
    # hand-written programs and examples: the neural path alone (level 2) at k = 16
    hand = []
    for d in (ns.handwritten, "examples") if ns.handwritten else ():
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if f.endswith(".py") and os.path.exists(os.path.join(d, f[:-3] + ".out")):
                    hand.append(os.path.join(d, f))
    if hand:
        summary["handwritten"] = handwritten(hand, weights_path=ns.weights, chunk=ns.chunk,
                                             typed=not ns.untyped, branches=ns.branches)  # fmt: skip
        print(
            "handwritten",
            summary["handwritten"]["correct"],
            "/",
            summary["handwritten"]["total"],
            flush=True,
        )
    if ns.throughput:
        srcs = throughput_sources(nl)
        summary["throughput"] = throughput(cfg, params, srcs, nl, budget_s=200.0,
                                           typed=not ns.untyped)  # fmt: skip
        print("throughput", summary["throughput"], flush=True)
    dump()
    return 0


def expected_outcome(path: str) -> tuple[str, str | None]:
    """(stdout, exception name or None) of a correct compile of the program at ``path``:
    stdout is ``PATH.out`` (without ``.py``); the exception is the first line's
    ``expect: NAME`` tag where there is one, else what CPython raises (a compile-time
    error such as SyntaxError included), except where CPython prints more than
    ``PATH.out``: a result outside int32, jaxcc's OverflowError (docs/language.md)."""
    import subprocess
    import sys

    want = open(path[:-3] + ".out").read()
    first = open(path).readline()
    if "expect:" in first:
        return want, first.split("expect:")[1].strip() or None
    py = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120,
                        check=False)  # fmt: skip
    if py.stdout != want and py.stdout.startswith(want):
        return want, "OverflowError"
    last = py.stderr.strip().splitlines()[-1] if py.returncode and py.stderr.strip() else ""
    return want, (last.split(":")[0].strip() or None) if py.returncode else None


def handwritten(paths, k: int = 16, weights_path: str | None = None, chunk: int | None = None,
                typed: bool = True, branches: int = 0):  # fmt: skip
    """Compile each file with the neural path alone (as ``jaxcc run --compiler neural``
    does, with the weights at ``weights_path``, default the shipped ones), run it, and
    compare what it prints and the error it ends with (none, a run-time error, or the
    front end's compile-time error, which the model is never asked about) with
    ``expected_outcome``. ``chunk``: compile that many files per call (memory: all 83
    at once needed 21 GB on the CPU); None: all in one call. ``typed``, ``branches``:
    compile_many's."""
    if chunk and len(paths) > chunk:
        parts = [
            handwritten(paths[i : i + chunk], k, weights_path, typed=typed, branches=branches)
            for i in range(0, len(paths), chunk)
        ]
        files = [f for part in parts for f in part["files"]]
        return {"k": k, "total": len(files), "correct": sum(f["ok"] for f in files), "files": files}
    from jaxcc import vm
    from jaxcc.errors import EXCEPTION_NAME, Code
    from jaxcc.limits import CLI

    sources = [open(p).read() for p in paths]
    lim = CLI._replace(max_stack=4096, max_depth=200, max_output=4096, max_steps=5_000_000,
                       max_code=4096, max_source_bytes=8192, max_tokens=4096, max_nodes=4096)  # fmt: skip
    prog, err, _ = api.compile_many(sources, lim, mode="neural", k=k, weights_path=weights_path,
                                    typed=typed, branches=branches)  # fmt: skip
    res = jax.device_get(vm.run(prog, lim))
    per = []
    for i, pth in enumerate(paths):
        want, want_exc = expected_outcome(pth)
        if int(err.code[i]) != Code.OK:
            got, exc = "", EXCEPTION_NAME.get(Code(int(err.code[i])), str(int(err.code[i])))
            why = f"{exc} {int(err.code[i])}/{int(err.detail[i])} at compile time"
        else:
            got = isa.format_output(res.out_kind[i], res.out_val[i], res.n_out[i])
            st = int(res.status[i])
            exc = None if st == Code.OK else EXCEPTION_NAME.get(Code(st), str(st))
            why = exc or ""
        per.append({"file": pth, "ok": got == want and exc == want_exc, "why": why})
    return {"k": k, "total": len(per), "correct": sum(r["ok"] for r in per), "files": per}


if __name__ == "__main__":
    raise SystemExit(main())
