"""Benchmark output: run metadata, JSON, the markdown tables and the PNG plots.

Every file written carries the same metadata (device kind, jax/jaxlib/python versions,
date), so a number never travels without the machine that produced it.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import sys


def meta(argv=None) -> dict:
    """Where and when: device, versions, host, date (UTC), command line."""
    import jax
    import jaxlib
    import numpy as np

    devs = jax.devices()
    return {
        "device_kind": devs[0].device_kind,
        "platform": devs[0].platform,
        "n_devices": len(devs),
        "n_processes": jax.process_count(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "host_cpus": os.cpu_count(),
        "machine": platform.machine(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "argv": list(sys.argv if argv is None else argv),
    }


def meta_line(m: dict) -> str:
    return (
        f"{m['device_kind']} x{m['n_devices']} ({m['platform']}), jax {m['jax']}, "
        f"jaxlib {m['jaxlib']}, python {m['python']}, {m['date']}"
    )


def write_json(path: str, meta_: dict, **payload) -> None:
    with open(path, "w") as f:
        json.dump({"meta": meta_, **payload}, f, indent=1, default=_jsonable)


def _jsonable(x):
    try:
        return x.item()  # numpy scalars
    except AttributeError:
        return str(x)


def merge_rows(path: str, meta_: dict, rows: list[dict], ran: set[str]) -> list[dict]:
    """Rows of an earlier results.json in the same directory for entries not run now
    (same device kind only), followed by this run's rows: several ``--only`` runs (each
    within a time limit) add up to one report."""
    if not os.path.exists(path):
        return rows
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return rows
    if old.get("meta", {}).get("device_kind") != meta_["device_kind"]:
        return rows
    kept = [r for r in old.get("rows", []) if r.get("entry") not in ran]
    return kept + rows


def fmt_num(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if isinstance(x, str):
        return x
    if isinstance(x, (list, tuple, dict)):  # e.g. a breakdown row's top_kernels: in the JSON
        return f"({len(x)} items)"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int) and abs(x) < 100_000:
        return str(x)
    ax = abs(float(x))
    if ax == 0:
        return "0"
    if ax >= 1e5 or ax < 1e-3:
        return f"{x:.3g}"
    if ax >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def markdown(rows: list[dict], cols: list[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(fmt_num(r.get(c)) for c in cols) + " |")
    return "\n".join(lines)


ROW_COLS = ["entry", "bench", "variant", "stage", "size", "batch", "devices", "seconds", "throughput", "unit",
            "bytes_per_program", "note"]  # fmt: skip
SUMMARY_COLS = ["bench", "variant", "stage", "size", "throughput", "unit", "batch", "seconds", "latency_b1_s",
                "bytes_per_program", "note"]  # fmt: skip


def summary(rows: list[dict]) -> list[dict]:
    """One row per (bench, size): the best throughput over batch sizes and devices,
    with the batch it was reached at and the time at batch 1; skipped entries and
    errors are listed with their reason."""
    best: dict = {}
    b1: dict = {}
    order: list = []
    for r in rows:
        key = (r.get("bench"), r.get("size"), r.get("variant"), r.get("stage"))
        if key not in best:
            order.append(key)
        if r.get("batch") == 1 and r.get("seconds") is not None:
            b1[key] = r["seconds"]
        cur = best.get(key)
        tp = r.get("throughput")
        cur_tp = None if cur is None else cur.get("throughput")
        # the best throughput; among rows without one, the last (largest batch)
        if (
            cur is None
            or (tp is not None and (cur_tp is None or tp > cur_tp))
            or (tp is None and cur_tp is None)
        ):
            best[key] = r
    out = []
    for key in order:
        r = dict(best[key])
        r["latency_b1_s"] = b1.get(key)
        out.append(r)
    return out


def write_markdown(path: str, meta_: dict, rows: list[dict]) -> str:
    text = "\n".join(
        [
            "# jaxcc benchmark results",
            "",
            f"Device: {meta_line(meta_)}",
            f"Command: `{' '.join(meta_['argv'])}`",
            "",
            "## Summary (best over batch sizes)",
            "",
            markdown(summary(rows), SUMMARY_COLS),
            "",
            "## All measurements",
            "",
            markdown(rows, ROW_COLS),
            "",
        ]
        + _breakdown_section(rows)
    )
    with open(path, "w") as f:
        f.write(text)
    return text


def _breakdown_section(rows: list[dict]) -> list[str]:
    """The breakdown entry's rows as their own table (bench/breakdown.py), if any."""
    if not any(r.get("bench") == "breakdown" and r.get("stage") for r in rows):
        return []
    from bench import breakdown

    return ["## Per-stage breakdown of the loop (issue 14)", "", breakdown.table(rows), ""]


def plots(out_dir: str, meta_: dict, rows: list[dict]) -> list[str]:
    """Throughput against batch size (log-log), one PNG per bench and one line per size
    and variant; the scaling bench against device count. Needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots: matplotlib is not importable; skipping the PNG plots")
        return []
    groups: dict = {}
    for r in rows:
        if r.get("throughput") is None or r.get("batch") is None or r.get("stage"):
            continue  # (the breakdown's stages are one point each: its table says it)
        xkey = "devices" if r.get("bench", "").startswith("scaling") else "batch"
        groups.setdefault((r["bench"], xkey), []).append(r)
    written = []
    for (bench, xkey), rs in sorted(groups.items()):
        lines: dict = {}
        for r in rs:
            label = " ".join(str(r[k]) for k in ("size", "variant") if r.get(k))
            if xkey == "devices":
                label = f"{label} B={r.get('batch')}"
            lines.setdefault(label, []).append((r[xkey], r["throughput"]))
        if not any(len(v) > 1 for v in lines.values()) and xkey == "batch" and len(lines) < 2:
            continue  # a single point says nothing as a plot (it is in the tables)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, pts in sorted(lines.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("devices" if xkey == "devices" else "batch size (programs in one call)")
        ax.set_ylabel(rs[0].get("unit", "throughput"))
        ax.set_title(f"jaxcc {bench}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.text(0.01, 0.01, meta_line(meta_), fontsize=6, alpha=0.7)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        path = os.path.join(out_dir, f"plot_{bench}.png")
        fig.savefig(path, dpi=120, metadata={"Description": json.dumps(meta_)})
        plt.close(fig)
        written.append(path)
    path = _plot_vs_baselines(plt, out_dir, meta_, rows)
    if path:
        written.append(path)
    return written


def baseline_ratios(curves: dict, flat: dict) -> list[tuple[str, int, float, float]]:
    """(curve, batch, throughput, ratio) at each curve's largest batch: its throughput
    over the ``cpython_pool`` baseline of the same size (curves and baselines keyed
    "BENCH SIZE", as ``_plot_vs_baselines`` groups them); curves of a size without a
    pool row are left out."""
    out = []
    for label, pts in sorted(curves.items()):
        pool = flat.get(f"cpython_pool {label.split()[-1]}")
        if pool:
            x, y = max(pts)
            out.append((label, x, y, y / pool))
    return out


def _plot_vs_baselines(plt, out_dir: str, meta_: dict, rows: list[dict]) -> str | None:
    """The loop (with each VM: ``loop``, ``loop_pallas``) and the cpu_centric pipeline
    against batch size, with the CPython baselines (one number each, independent of
    batch) as horizontal lines, each in its own colour and style and labelled on the
    plot with its rate; each curve's last point says how many times the pool of its
    size it is (``baseline_ratios``)."""
    curves: dict = {}
    flat: dict = {}
    for r in rows:
        if r.get("throughput") is None or r.get("unit") != "programs/s":
            continue
        if r.get("bench") in ("loop", "loop_pallas", "cpu_centric") and r.get("batch"):
            curves.setdefault(f"{r['bench']} {r.get('size')}", []).append(
                (r["batch"], r["throughput"])
            )
        elif r.get("bench") in ("cpython", "cpython_pool", "reference"):
            flat[f"{r['bench']} {r.get('size')}"] = r["throughput"]
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    xs = [p[0] for pts in curves.values() for p in pts]
    for i, (label, pts) in enumerate(sorted(curves.items())):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                color=colors[i % len(colors)])  # fmt: skip
    for _curve, x, y, ratio in baseline_ratios(curves, flat):
        ax.annotate(f"{ratio:.1f}x cpython_pool", (x, y), textcoords="offset points",
                    xytext=(-4, 6), ha="right", fontsize=7)  # fmt: skip
    styles = ("--", ":", "-.")
    for j, (label, y) in enumerate(sorted(flat.items())):
        c = colors[(len(curves) + j) % len(colors)]
        ax.axhline(y, linestyle=styles[j % len(styles)], linewidth=1.2, color=c, label=label)
        ax.annotate(f"{label}: {fmt_num(y)}/s", (min(xs), y), textcoords="offset points",
                    xytext=(2, 3), fontsize=7, color=c)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (programs in one call)")
    ax.set_ylabel("programs/s (compile, run, test)")
    ax.set_title("jaxcc compile-run-test loop vs host baselines")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center right")
    fig.text(0.01, 0.01, meta_line(meta_), fontsize=6, alpha=0.7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = os.path.join(out_dir, "plot_loop_vs_baselines.png")
    fig.savefig(path, dpi=120, metadata={"Description": json.dumps(meta_)})
    plt.close(fig)
    return path


def main(argv=None) -> int:
    """``python bench/report.py DIR...``: redraw each DIR's plots from its results.json
    (the plots of an earlier run, drawn again with this file's code)."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("dirs", nargs="+")
    for d in p.parse_args(argv).dirs:
        with open(os.path.join(d, "results.json")) as f:
            res = json.load(f)
        for path in plots(d, res["meta"], res["rows"]):
            print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
