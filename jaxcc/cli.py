"""The jaxcc command line: ``jaxcc run FILE...``, ``jaxcc dis FILE``, ``--version``.

Implementations are chosen through two small registries (name -> callable):

* compilers: ``compile_many(sources: list[str], limits) -> (Program batched, Error batched,
  list[DebugInfo])``; ``python`` is jaxcc.reference.compiler, ``jax`` is jaxcc.compiler;
  ``neural`` and ``hybrid`` are jaxcc.neural.api (offered only when its weights exist).
* vms: ``run(program_batched, limits, entry=None, args=None) -> RunResult`` (batched);
  ``python`` is the reference interpreter, ``jax`` is jaxcc.vm.run.

Backends are imported only when asked for; an error while importing one propagates.

All files given to ``run`` are compiled as one batch and run as one batch. The ``jax`` VM
runs it in slices (jaxcc.driver): each file's result is printed as soon as it and every
file before it have finished (input order), ``--timeout`` stops programs still running
after that many seconds of run time with TimeoutError, and Ctrl-C stops the run between
slices, prints what finished and exits with 130. Other VMs run the batch in one call.

``-O1`` (the default of ``run`` and ``dis``) optimizes the bytecode of the jax compiler
(jaxcc.optimize, on the device) and of the python compiler (jaxcc.reference.optimize)
with the cheap preset the loop uses; ``-O2`` runs every pass to a fixpoint; ``-O0``
shows and runs the compiler's code as it is; ``--passes``/``--no-pass`` choose the
optimizer's passes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from jaxcc import __version__, isa
from jaxcc import format as fmt
from jaxcc.errors import Code
from jaxcc.limits import CLI, Limits

DEFAULT_COMPILER = "jax"
DEFAULT_VM = "jax"


def _process_start() -> float:
    """When this process started, on time.monotonic's clock (Linux: /proc/self/stat's
    start time; elsewhere, or if that looks wrong, now: this module is imported first)."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        start = ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return start if 0 <= now - start < 60 else now


# the process's start, for the default time limit of its first `jaxcc run`
_T_START = _process_start()
_FIRST_RUN = [True]


def _run_start() -> float:
    """When this `jaxcc run` began, for its default time limit: the process's start for
    the process's first run (interpreter start-up and imports belong to it), the call
    itself for any later one (``main`` called again in one process, as the tests do)."""
    if _FIRST_RUN[0]:
        _FIRST_RUN[0] = False
        return _T_START
    return time.monotonic()


# `jaxcc run --timeout`: seconds of run time (compiles not counted) for the whole batch.
# Without --timeout the limit is DefaultTimeout(): 20 s of run time, fewer when start-up
# and compiling took long, so that a runaway program ends about 28 s after jaxcc started
# (a cold H100 spends 13-26 s in start-up and compiles), never fewer than 2 s (5 s until
# 2026-11-28: after a 25.6 s start a runaway then ended at 31.9 s). On the 2-core CPU every
# examples/*.py finishes in ~3 s of run time as one batch (the "serial" VM; 12-16 s in
# lockstep; bits.py's 1.8M steps are the longest), and `while True: pass` ends after
# 20 s + ~5 s of start-up and compile: docs/vm.md ("Budgets", "Backends").
DEFAULT_TIMEOUT = 20.0


class DefaultTimeout(NamedTuple):
    """The default --timeout: at most ``most`` seconds of run time, ending the run
    ``end_s`` seconds after ``start`` (time.monotonic) when start-up and compiling took
    longer than ``end_s - most``, but never before ``least`` seconds of run time
    (``start`` None: ``most``, no start-up counted)."""

    most: float = DEFAULT_TIMEOUT
    end_s: float = 28.0
    least: float = 2.0
    start: float | None = None  # _cmd_run: _run_start()

    def seconds(self, now: float) -> float:
        """The run time allowed to a run whose programs start running at ``now``."""
        if self.start is None:
            return self.most
        return min(self.most, max(self.least, self.start + self.end_s - now))

    def describe(self) -> str:
        return (f"the default limit ends a run {self.end_s:g} s after jaxcc started, with "
                f"{self.least:g} to {self.most:g} s of run time")  # fmt: skip


def _reference_compile_many(sources, limits):
    from jaxcc.reference import compiler

    return compiler.compile_many(sources, limits)


def _reference_run(program, limits, entry=None, args=None):
    from jaxcc.reference import interp

    return interp.run_batch(program, limits, entry, args)


def _lazy(module: str, attr: str) -> Callable:
    """module.attr, imported only when asked for (jax and flax are slow to import). An
    error while importing it propagates: a bug in a backend must not read as "unavailable"."""
    return getattr(importlib.import_module(module), attr)


def compilers(name: str | None = None, **neural) -> dict[str, Callable]:
    """The compiler registry. With ``name``, only that entry is looked up (lazily).
    ``neural``: options of the neural and hybrid compilers (k, temperature, seed)."""
    reg: dict[str, Callable] = {"python": _reference_compile_many}
    if name in (None, "jax"):
        reg["jax"] = _lazy("jaxcc.compiler", "compile_many")
    if name in (None, "neural", "hybrid"):
        # offered only when the weights are there (they are a separate download)
        if _lazy("jaxcc.neural.weights", "available")():
            neural_compile = _lazy("jaxcc.neural.api", "compile_many")
            for mode in ("neural", "hybrid"):
                reg[mode] = functools.partial(neural_compile, mode=mode, **neural)
    return reg


def vms(name: str | None = None) -> dict[str, Callable]:
    """The VM registry. With ``name``, only that entry is looked up (lazily)."""
    reg: dict[str, Callable] = {"python": _reference_run}
    if name in (None, "jax"):
        reg["jax"] = _lazy("jaxcc.vm", "run")
    return reg


_LIMIT_HELP = {
    "max_source_bytes": "bytes of source per file",
    "max_tokens": "tokens per file (comments and blank lines included)",
    "max_indent": "nesting depth of indented blocks",
    "max_parse_depth": "parser stack depth (expression nesting)",
    "max_nodes": "syntax-tree nodes per file",
    "max_code": "bytecode instructions per file",
    "max_funcs": "functions per file (the module body counts as one)",
    "max_locals": "variable slots per function (params, locals, temporaries)",
    "max_stack": "value-stack slots per run (all frames' locals and operands)",
    "max_depth": "call depth (RecursionError beyond it)",
    "max_output": "printed items per run: each value and each newline (OutputLimitError)",
    "max_steps": "instructions per run (TimeoutError beyond it)",
}


def _add_limit_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "limits (a program over a compile-time limit gets LimitError, never truncation; "
        "the run-time ones raise the error named)"
    )
    for field in Limits._fields:
        g.add_argument(
            "--" + field.replace("_", "-"),
            type=int,
            default=getattr(CLI, field),
            metavar="N",
            help=f"{_LIMIT_HELP.get(field, field)} (default {getattr(CLI, field)})",
        )


def _add_backend_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compiler",
        default=DEFAULT_COMPILER,
        metavar="NAME",
        help="compiler implementation: 'python' (the host reference compiler), 'jax' "
        "(the JAX compiler), 'neural' (the shipped transformer, after the JAX front end "
        "has checked the program and typed its printed values: K "
        "candidates per program, the one whose behaviour most candidates share is kept; "
        "no test decides it, so it can be wrong: docs/neural.md) or 'hybrid' (a router "
        "sends simple programs to the neural compiler, whose candidates must behave "
        "exactly as the deterministic compiler's code on probe inputs, and everything "
        f"else to 'jax'); default {DEFAULT_COMPILER}",
    )
    p.add_argument(
        "--samples",
        type=int,
        default=16,
        metavar="K",
        help="neural/hybrid: candidates sampled per program (default 16)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        metavar="T",
        help="neural/hybrid: sampling temperature (0: all greedy; default 0.8)",
    )
    p.add_argument(
        "--branches",
        type=int,
        default=None,
        metavar="N",
        help="neural/hybrid: make N of the K candidates the greedy one with one token "
        "changed where the model was least sure, instead of samples (at most K - 1). "
        "It helps where candidates are checked against the deterministic code, so the "
        "default is K/2 for hybrid and 0 for neural, whose majority choice it does not "
        "help: docs/neural.md",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="neural/hybrid: random seed of the sampler (default 0)",
    )
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "default"),
        default="auto",
        help="where the jax compiler and VM run: 'cpu' (the host's CPU, even where JAX "
        "has a GPU), 'default' (JAX's default device) or 'auto' (the default: the CPU "
        f"for at most {CPU_MAX_FILES} files with the jax or python compiler, which on a "
        "GPU machine start and finish sooner there; JAX's default device otherwise, "
        "and always when JAX_PLATFORMS is set)",
    )
    p.add_argument(
        "--vm",
        default=DEFAULT_VM,
        metavar="NAME",
        help="bytecode interpreter: 'python' (the reference interpreter) or 'jax' "
        f"(the batched JAX VM); default {DEFAULT_VM}",
    )


OPT_PASSES = ("thread", "unreachable", "fold", "peephole", "deadstore", "cmpjump",
              "loadvar2", "invert")  # jaxcc.optimize.PASSES  # fmt: skip
OPT_LEVELS = {1: (tuple(p for p in OPT_PASSES if p != "unreachable"), 1),
              2: (OPT_PASSES, 32)}  # jaxcc.optimize.LEVELS: (passes, rounds)  # fmt: skip


def _add_optimizer_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("optimizer (--compiler python and jax; docs/middle_end.md section 7)")
    g.add_argument(
        "-O",
        dest="opt",
        type=int,
        choices=(0, 1, 2),
        default=1,
        metavar="LEVEL",
        help="-O0: the compiler's bytecode as it is; -O1 (default): optimized by the cheap "
        f"preset ({','.join(OPT_LEVELS[1][0])}, {OPT_LEVELS[1][1]} round); -O2: every pass, "
        "rounds to a fixpoint (same output and errors, fewer instructions; --max-steps "
        "counts the optimized code)",
    )
    g.add_argument(
        "--passes",
        default=None,
        metavar="NAMES",
        help="with -O1/-O2, the passes to run, comma-separated (default: the level's; "
        f"all: {','.join(OPT_PASSES)})",
    )
    g.add_argument(
        "--no-pass",
        action="append",
        default=[],
        metavar="NAME",
        help="with -O1, turn one pass off (repeatable), e.g. --no-pass deadstore",
    )


def _passes(ns: argparse.Namespace) -> tuple[tuple[str, ...], int] | None:
    """The optimizer passes and rounds the options ask for, or None for -O0."""
    if ns.opt == 0:
        return None
    passes, rounds = OPT_LEVELS[ns.opt]
    names = passes if ns.passes is None else [n.strip() for n in ns.passes.split(",")]
    names = [n for n in names if n]
    unknown = sorted(set(names) - set(OPT_PASSES)) + sorted(set(ns.no_pass) - set(OPT_PASSES))
    if unknown:
        raise SystemExit(f"jaxcc: unknown optimizer pass {unknown[0]!r} "
                         f"(known: {', '.join(OPT_PASSES)})")  # fmt: skip
    return tuple(n for n in OPT_PASSES if n in names and n not in ns.no_pass), rounds


def _optimizing(compiler: str, compile_many: Callable, passes, max_rounds=None) -> Callable:
    """compile_many followed by the optimizer (``passes``; None: none; ``max_rounds``:
    None for the full fixpoint). The jax compiler optimizes on the device inside its
    jitted compile, the python compiler with the reference optimizer; the neural and
    hybrid compilers' code is left as it is."""
    if passes is None or compiler not in ("jax", "python"):
        return compile_many
    rounds = OPT_LEVELS[2][1] if max_rounds is None else max_rounds
    if compiler == "jax":
        return functools.partial(compile_many, optimize=True, passes=passes, max_rounds=rounds)

    def optimized(sources, limits):
        from jaxcc.reference import optimize as ref_opt

        program, error, debug = compile_many(sources, limits)
        return ref_opt.optimize(program, passes, rounds), error, debug

    return optimized


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxcc",
        description="Compile and run programs written in a statically typed subset of "
        "Python (int/bool values, functions, if/while/for-range, print) as bytecode.",
    )
    parser.add_argument("--version", action="version", version=f"jaxcc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="compile and run files, printing what each prints",
        description="Compile and run each FILE (all in one batch) and print what it prints. "
        "Each file's output is printed as soon as it has finished, in the order the files "
        "are given (a file that finishes early waits for the files before it). "
        "Errors are printed to stderr as CPython would print them. Exit status 1 if any "
        "file failed to compile or raised an error, else 0; Ctrl-C stops the run, prints "
        "what finished and exits with 130.",
    )
    run.add_argument("files", nargs="+", metavar="FILE", help="source files of the subset")
    run.add_argument(
        "--json",
        action="store_true",
        help='print one JSON object per file per line: {"file", "stdout", "error" (null or '
        '{"type", "message", "line"}), "exit"} (and "result" with --entry) instead of plain '
        "output",
    )
    run.add_argument(
        "--entry",
        metavar="NAME",
        help="after the module body, call function NAME with the --args values and print "
        "its result (True/False for bool functions, nothing for functions returning None)",
    )
    run.add_argument(
        "--args",
        nargs="*",
        type=int,
        default=[],
        metavar="INT",
        help="integer arguments for --entry; put them after FILE, e.g. "
        "'jaxcc run f.py --entry gcd --args 12 18'",
    )
    run.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wall-clock limit on running the programs (the whole batch; compiling is not "
        "counted): programs still running then stop with TimeoutError; 0 for no limit "
        f"(default: {DefaultTimeout().describe()}, so that a runaway program ends within "
        f"30 s; with --compiler neural or hybrid {DEFAULT_TIMEOUT:g} s of run time; "
        "--vm jax only)",
    )
    run.add_argument(
        "--trace",
        action="store_true",
        help="print every instruction as it starts to stderr: lane, function, pc, opcode, "
        "argument and the operand stack (--vm python) or the stack pointer and top of stack "
        "(--vm jax: the first 10,000 steps of each file); slow",
    )
    _add_backend_options(run)
    _add_optimizer_options(run)
    _add_limit_options(run)

    dis = sub.add_parser(
        "dis",
        help="compile a file and print its bytecode",
        description="Compile FILE and print its disassembly (jaxcc.dis).",
    )
    dis.add_argument("file", metavar="FILE", help="source file of the subset")
    _add_backend_options(dis)
    _add_optimizer_options(dis)
    _add_limit_options(dis)
    return parser


def _limits(ns: argparse.Namespace) -> Limits:
    return Limits(**{f: getattr(ns, f) for f in Limits._fields})


def _lane(tree, i: int):
    """Lane i of a batched NamedTuple of arrays, as numpy."""
    return type(tree)(*(np.asarray(f)[i] for f in tree))


def _to_numpy(tree):
    return type(tree)(*(np.asarray(f) for f in tree))


def _stdout(lane) -> str:
    """What one lane printed (slicing first: the buffer may hold a million items)."""
    n = int(lane.n_out)
    return isa.format_output(lane.out_kind[:n], lane.out_val[:n], n)


def _select(tree, idx: list[int]):
    return type(tree)(*(np.asarray(f)[np.asarray(idx, np.int64)] for f in tree))


class _FileResult:
    """What one file gave: its stdout and at most one error (as text fields)."""

    def __init__(self, path: str):
        self.path = path
        self.stdout = ""
        self.error: fmt.ErrorText | None = None
        self.error_text = ""  # CPython-like, for stderr
        self.result: str | None = None  # --entry's printed result
        self.done = False  # final (False: the run was interrupted before it finished)

    def fail(self, err: fmt.ErrorText, text: str) -> None:
        self.error, self.error_text = err, text

    def to_json(self) -> str:
        err = None
        if self.error is not None:
            err = {"type": self.error.type, "message": self.error.message, "line": self.error.line}
        obj = {"file": self.path, "stdout": self.stdout, "error": err, "exit": int(err is not None)}
        if self.result is not None:
            obj["result"] = self.result
        return json.dumps(obj)


def _read(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def _backend(kind: str, name: str, registry: Callable[[str], dict[str, Callable]]):
    reg = registry(name)
    if name not in reg:
        known = ", ".join(sorted(registry(None)))
        raise SystemExit(f"jaxcc: unknown or unavailable {kind} {name!r} (available: {known})")
    return reg[name]


def _tracing_run(file) -> Callable:
    """The reference interpreter, writing one line per instruction started to ``file``."""
    from jaxcc.reference import interp

    def run(program, limits, entry=None, args=None):
        def trace(lane, fn, pc, op, arg, operands):
            name = isa.Op(op).name
            shown = arg if isa.INFO[isa.Op(op)].arg != isa.ArgKind.NONE else ""
            file.write(f"{lane} fn {fn} {pc:5d} {name:<20} {shown!s:>6}  {operands}\n")

        return interp.run_batch(program, limits, entry, args, trace)

    return run


TRACE_STEPS = 10_000  # --trace on the JAX VM: the first steps of each module body


def _trace_jax(file, program, compiled, limits: Limits) -> None:
    """The JAX VM's trace (vm.trace) of each compiled module body, one line per step as
    ``_tracing_run`` writes them, with the stack pointer and top of stack for operands."""
    import jax

    from jaxcc import vm as jvm

    for lane in np.flatnonzero(compiled):
        rows, end = jax.device_get(jvm.trace(_lane(program, lane), limits, n_steps=TRACE_STEPS))
        for k in range(TRACE_STEPS):
            if int(rows.status[k]) != Code.RUNNING:
                break
            op, arg = int(rows.op[k]), int(rows.arg[k])
            name = isa.Op(op).name if op in isa.Op._value2member_map_ else f"<{op}>"
            shown = arg if op >= 0 and isa.INFO[isa.Op(op)].arg != isa.ArgKind.NONE else ""
            frame = int(rows.fp[k]) + int(program.fn_nlocals[lane, int(rows.fn[k])])
            top = f"top {int(rows.top[k])}" if int(rows.sp[k]) > frame else ""
            file.write(f"{lane} fn {int(rows.fn[k])} {int(rows.pc[k]):5d} {name:<20} "
                       f"{shown!s:>6}  sp {int(rows.sp[k])} {top}\n")  # fmt: skip
        else:
            if int(end.status) == Code.RUNNING:
                file.write(f"{lane} trace stops after {TRACE_STEPS} steps; the run goes on\n")


def _result_text(value: int, rettype: int) -> str | None:
    if rettype == isa.T_BOOL:
        return "True" if value else "False"
    if rettype == isa.T_NONE:
        return None
    return str(int(value))


def _lane_error(r: _FileResult, lane, src: str, dbg, prog, limits: Limits, expired: bool,
                timeout: float | None, default: DefaultTimeout | None = None) -> None:  # fmt: skip
    """Record a lane's run-time error on r; a TimeoutError names the limit that ended it
    (--max-steps, or --timeout when ``expired``: ``timeout`` seconds of run time, which
    ``default`` chose when given) and how to raise it."""
    err = fmt.describe(lane, src, dbg, prog)
    text = fmt.format_error(lane, src, r.path, dbg, prog)
    if int(lane.status) == Code.TIMEOUT:
        if expired and default is not None:
            msg = (f"still running after {timeout:.3g} s of run time ({default.describe()}; "
                   "raise it with --timeout SECONDS, or 0 for no limit)")  # fmt: skip
        elif expired:
            msg = (f"still running after {timeout:g} s of run time (limit --timeout {timeout:g}; "
                   "raise it with --timeout SECONDS, or 0 for no limit)")  # fmt: skip
        else:
            msg = (f"step budget exhausted (limit --max-steps {limits.max_steps} "
                   "instructions; raise it with --max-steps N)")  # fmt: skip
        err = err._replace(message=msg)
        lines = text.splitlines()
        lines[-1] = f"{err.type}: {msg}"
        text = "\n".join(lines) + "\n"
    r.fail(err, text)


def _run_lanes(vm: str, run: Callable, program, limits: Limits, entry, args, budget,
               timeout: float | None, stop, info: dict) -> Iterator[tuple[int, object, bool]]:  # fmt: skip
    """(lane, its RunResult as numpy, expired) for every lane of a batch, as each finishes.

    The jax VM runs through jaxcc.driver: in slices, lanes reported as they stop, the
    wall-clock ``timeout`` (compiles not counted), ``stop`` polled between slices (lanes
    not finished then are never reported); ``info["run_s"]`` gets the run time it used.
    Another VM (``run``) runs the batch in one call.
    """
    if vm not in SLICED_VMS:
        res = _to_numpy(run(program, limits, entry, args))
        for j in range(np.shape(res.status)[0]):
            yield j, _lane(res, j), False
        return
    from jaxcc import driver
    from jaxcc import vm as jvm

    state = jvm.start(program, limits, entry, args, budget)
    d = driver.Driver(state, limits, timeout=timeout, should_stop=stop, ratio=CLI_RATIO)
    with stop.armed() if isinstance(stop, driver.Interrupt) else contextlib.nullcontext():
        for done in d:
            for k, j in enumerate(done.lanes):
                yield int(j), _lane(done.result, k), bool(done.expired[k])
    info["run_s"] = d.stats().run_s


def _warm_vm(compiler: str, vm: str, n: int, limits: Limits) -> threading.Thread | None:
    """With the jax VM and the jax or python compiler (their programs have the shapes
    driver.warm_up gives): a started thread compiling the VM's jits for the batch of
    ``n`` lanes while the compiler compiles, so that a cold run's compiles share the
    CPU's cores (the caller joins it before running). A failure there is ignored: the
    run itself meets and reports it."""
    if compiler not in ("jax", "python") or vm not in SLICED_VMS:
        return None

    def warm() -> None:
        from jaxcc import driver

        with contextlib.suppress(Exception):
            driver.warm_up(n, limits, ratio=CLI_RATIO)

    thread = threading.Thread(target=warm, name="jaxcc-warm-vm")
    thread.start()
    return thread


# VMs run in slices by jaxcc.driver (results as they finish, --timeout, Ctrl-C between
# slices); any other VM runs its batch in one call.
SLICED_VMS = frozenset({"jax"})
# Compaction tiers for the CLI's small batches: halving (11 files: 11, 4, 2, 1 lanes).
# On the 2-core CPU a lane-step cost ~2x less at 1 lane than at 11 in lockstep, and the
# examples batch ran in 12 s instead of 15.5 s with tiers a factor 2 apart instead of 8.
# (On the CPU the CLI's VM is now "serial", which never compacts: 6.7 s warm in all.)
CLI_RATIO = 2


def run_files(
    paths: Sequence[str],
    limits: Limits = CLI,
    compiler: str = DEFAULT_COMPILER,
    vm: str = DEFAULT_VM,
    entry: str | None = None,
    args: Sequence[int] = (),
    trace=None,
    neural: dict | None = None,
    *,
    timeout: float | DefaultTimeout | None = None,
    on_result: Callable[[int, _FileResult], None] | None = None,
    stop: Callable[[], bool] | None = None,
    passes: tuple[str, ...] | None = None,
    max_rounds: int | None = None,
) -> list[_FileResult]:
    """Compile and run the files as one batch; the per-file results (no printing).

    ``trace``: a file to write an instruction trace to (``--vm jax``: the first
    TRACE_STEPS steps of each module body, from ``vm.trace``).
    ``neural``: options of the neural/hybrid compilers (k, temperature, seed).
    ``timeout``: wall-clock seconds of run time (compiles not counted) for the whole
    batch, module bodies and --entry calls together; programs still running then stop
    with TimeoutError (None: no limit; the jax VM only). A ``DefaultTimeout`` fixes the
    seconds when the programs start running (``DefaultTimeout.seconds``).
    ``on_result(i, result)``: called once per file, as soon as file i's result is final
    (its program stopped, or it failed to read or compile), in completion order.
    ``stop``: polled between slices (a ``driver.Interrupt`` makes Ctrl-C such a stop);
    when true the run ends there and the files not finished keep ``done`` False.
    ``passes``: the optimizer passes to run on the bytecode (None: -O0, none);
    ``max_rounds``: the optimizer's rounds (None: to a fixpoint, at most 32).
    """
    compile_many = _backend("compiler", compiler, functools.partial(compilers, **(neural or {})))
    compile_many = _optimizing(compiler, compile_many, passes, max_rounds)
    run = _backend("vm", vm, vms)
    if trace is not None and vm == "python":
        run = _tracing_run(trace)
    results = [_FileResult(p) for p in paths]

    def final(i: int) -> None:
        results[i].done = True
        if on_result is not None:
            on_result(i, results[i])

    sources: list[str] = []
    readable: list[int] = []
    for i, p in enumerate(paths):
        try:
            sources.append(_read(p))
            readable.append(i)
        except OSError as e:
            msg = f"[Errno {e.errno}] {e.strerror}" if e.errno else str(e)
            err = fmt.ErrorText(type(e).__name__, f"can't open file {p!r}: {msg}", 0, -1, "", False)
            results[i].fail(err, f"jaxcc: can't open file {p!r}: {msg}\n")
            final(i)
    if not readable:
        return results

    warm = _warm_vm(compiler, vm, len(readable), limits)
    program, error, debug = compile_many(sources, limits)
    program, error = _to_numpy(program), _to_numpy(error)
    compiled = np.asarray(error.code) == Code.OK
    for j, i in enumerate(readable):
        if not compiled[j]:
            dbg = debug[j] if debug is not None else None
            err = _lane(error, j)
            results[i].fail(fmt.describe(err, sources[j], dbg),
                            fmt.format_error(err, sources[j], results[i].path, dbg))  # fmt: skip
            final(i)
    if not compiled.any():
        return results

    if trace is not None and vm != "python":
        _trace_jax(trace, program, compiled, limits)
    # the module bodies (a lane that did not compile gets no steps)
    budget = np.where(compiled, limits.max_steps, 0).astype(np.int32)
    waiting: list[int] = []  # lanes whose module body returned, for --entry
    info = {"run_s": 0.0}
    if warm is not None:
        warm.join()
    default = timeout if isinstance(timeout, DefaultTimeout) else None
    if default is not None:
        timeout = default.seconds(time.monotonic())
    lanes = _run_lanes(vm, run, program, limits, None, None, budget, timeout, stop, info)
    for j, lane, expired in lanes:
        if not compiled[j]:
            continue
        i = readable[j]
        r, dbg = results[i], debug[j] if debug is not None else None
        r.stdout = _stdout(lane)
        if int(lane.status) != Code.OK:
            _lane_error(r, lane, sources[j], dbg, _lane(program, j), limits, expired, timeout,
                        default)  # fmt: skip
        elif entry is not None:
            waiting.append(j)
            continue
        final(i)
    if entry is None or not waiting or (stop is not None and stop()):
        return results

    # --entry: a second batch, each file's function `entry` called with `args`
    calls: list[tuple[int, int, int]] = []  # (result index, batch lane, function id)
    for j in sorted(waiting):
        i = readable[j]
        r = results[i]
        fid = fmt.function_id(debug[j] if debug is not None else None, entry)
        if fid is None or fid >= int(program.n_funcs[j]):
            e = fmt.ErrorText("NameError", f"name '{entry}' is not defined", 0, -1, "", False)
            r.fail(e, f"NameError: name '{entry}' is not defined\n")
            final(i)
            continue
        nparams = int(program.fn_nparams[j, fid])
        if nparams != len(args):
            msg = f"{entry}() takes {nparams} positional arguments but {len(args)} were given"
            r.fail(fmt.ErrorText("TypeError", msg, 0, -1, entry, True), f"TypeError: {msg}\n")
            final(i)
            continue
        calls.append((i, j, fid))
    if not calls:
        return results
    lanes = [j for _, j, _ in calls]
    sub = _select(program, lanes)
    entries = np.array([fid for _, _, fid in calls], np.int32)
    arg_arr = np.array([list(args)] * len(calls), np.int64).reshape(len(calls), len(args))
    arg_arr = arg_arr.astype(np.int32)  # argparse ints outside int32 wrap, as int32 does
    left = None if timeout is None else max(0.0, timeout - info["run_s"])
    budget2 = np.full(len(calls), limits.max_steps, np.int32)
    lanes2 = _run_lanes(vm, run, sub, limits, entries, arg_arr, budget2, left, stop, info)
    for k, lane, expired in lanes2:
        i, j, fid = calls[k]
        r, src = results[i], sources[j]
        dbg = debug[j] if debug is not None else None
        r.stdout += _stdout(lane)
        if int(lane.status) != Code.OK:
            _lane_error(r, lane, src, dbg, _lane(program, j), limits, expired, timeout, default)
        else:
            text = _result_text(int(lane.result), int(program.fn_rettype[j, fid]))
            if text is not None:
                r.result = text
                r.stdout += text + "\n"
        final(i)
    return results


class _Printer:
    """Prints each file's result in input order as soon as it and every file before it
    are final (a later file that finishes first is held back)."""

    def __init__(self, n: int, as_json: bool):
        self.ready: list[_FileResult | None] = [None] * n
        self.printed = [False] * n
        self.next = 0
        self.as_json = as_json

    def __call__(self, i: int, r: _FileResult) -> None:
        self.ready[i] = r
        while self.next < len(self.ready) and self.ready[self.next] is not None:
            self._print(self.next)
            self.next += 1

    def flush(self) -> list[int]:
        """Print every final result not printed yet (in input order); the files that are
        not final."""
        for i, r in enumerate(self.ready):
            if r is not None and not self.printed[i]:
                self._print(i)
        return [i for i, r in enumerate(self.ready) if r is None]

    def _print(self, i: int) -> None:
        r = self.ready[i]
        self.printed[i] = True
        if self.as_json:
            print(r.to_json(), flush=True)
            return
        sys.stdout.write(r.stdout)
        sys.stdout.flush()
        if r.error is not None:
            sys.stderr.write(r.error_text)
            sys.stderr.flush()


def _cmd_run(ns: argparse.Namespace) -> int:
    for a in ns.args:
        if not -(2**31) <= a < 2**31:
            raise SystemExit(f"jaxcc: --args value {a} does not fit in 32 bits")
    if ns.timeout is None:  # the default: see DefaultTimeout
        neural = ns.compiler in ("neural", "hybrid")  # sampling is slow on a CPU
        timeout = DEFAULT_TIMEOUT if neural else DefaultTimeout(start=_run_start())
    elif not ns.timeout >= 0:
        raise SystemExit(f"jaxcc: --timeout must be >= 0 (0: no limit): {ns.timeout}")
    else:
        timeout = ns.timeout or None
    from jaxcc.driver import Interrupt

    trace = sys.stderr if ns.trace else None
    neural = _neural_options(ns)
    printer = _Printer(len(ns.files), ns.json)
    stop = Interrupt()
    results = None
    opt = _passes(ns)
    try:
        with stop.installed():
            results = run_files(ns.files, _limits(ns), ns.compiler, ns.vm, ns.entry, ns.args,
                                trace, neural, timeout=timeout, on_result=printer,
                                stop=stop, passes=opt and opt[0],
                                max_rounds=opt and opt[1])  # fmt: skip
    except KeyboardInterrupt:
        pass
    if results is None or not all(r.done for r in results):
        # Ctrl-C: what finished is printed, then the exit status of Python's SIGINT
        pending = printer.flush()
        names = ", ".join(ns.files[i] for i in pending)
        sys.stderr.write(f"KeyboardInterrupt (not finished: {names})\n")
        sys.stderr.flush()
        return 130
    printer.flush()
    return int(any(r.error is not None for r in results))


def _neural_options(ns: argparse.Namespace) -> dict:
    """The neural/hybrid compilers' options (``neural.api.compile_many``'s), checked."""
    if ns.samples < 1:
        raise SystemExit(f"jaxcc: --samples must be >= 1: {ns.samples}")
    branches = ns.branches
    if branches is None:  # measured: docs/neural.md section 6, "Branch decoding"
        branches = ns.samples // 2 if ns.compiler == "hybrid" else 0
    if not 0 <= branches < ns.samples:
        raise SystemExit(f"jaxcc: --branches must be from 0 to --samples - 1 "
                         f"({ns.samples - 1}): {branches}")  # fmt: skip
    return {"k": ns.samples, "temperature": ns.temperature, "seed": ns.seed,
            "branches": branches}  # fmt: skip


def _cmd_dis(ns: argparse.Namespace) -> int:
    limits = _limits(ns)
    neural = _neural_options(ns)
    compile_many = _backend("compiler", ns.compiler, functools.partial(compilers, **neural))
    compile_many = _optimizing(ns.compiler, compile_many, *(_passes(ns) or (None,)))
    try:
        source = _read(ns.file)
    except OSError as e:
        sys.stderr.write(f"jaxcc: can't open file {ns.file!r}: [Errno {e.errno}] {e.strerror}\n")
        return 1
    program, error, debug = compile_many([source], limits)
    err = _lane(_to_numpy(error), 0)
    if int(err.code) != Code.OK:
        dbg = debug[0] if debug is not None else None
        sys.stderr.write(fmt.format_error(err, source, ns.file, dbg))
        return 1
    from jaxcc import dis as jdis  # imported only when asked for

    sys.stdout.write(jdis.format_dis(_lane(_to_numpy(program), 0), debug[0] if debug else None))
    return 0


def enable_compilation_cache() -> None:
    """Use JAX's persistent compilation cache, so a second run skips XLA's compile.

    The directory is $JAXCC_CACHE_DIR, else ~/.cache/jaxcc/xla (``enable_executable_cache``
    keeps its entries in a subdirectory).
    """
    import jax

    if jax.config.jax_compilation_cache_dir:  # the caller (or a test) chose one
        return
    path = os.environ.get("JAXCC_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "jaxcc", "xla"
    )
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


# XLA:CPU compiles a while loop whose buffers take at most this many bytes as one function
# (its "small while loop hoisting"; the default threshold is far smaller) instead of a
# graph of kernels that its thread pool runs iteration by iteration, handing work between
# threads several times per VM step. The VM's slices of a few lanes (one lane's memory is
# ~10 MB at the CLI's limits) fall under it: one lane ran 5.4e6 steps/s instead of 2.2e5
# on a 2-core Intel Xeon, and the first `jaxcc run examples/collatz.py` compiled no slower
# (docs/vm.md). Larger loops (big batches) keep XLA's threads. GPU compiles ignore it.
# With --compiler neural the model's decode loop stays above it (its key/value cache);
# in the sampler only the random-bit generator's small loops fall under it, and the
# chosen programs' run gets the serial backend (docs/neural.md, "CPU").
CPU_WHILE_LOOP_BYTES = 64 << 20
_HOIST_FLAG = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold="


# `--device auto`: a run of at most this many files with the jax or python compiler goes
# to the host CPU. On an NVIDIA H200 machine (16-core Xeon host, 2026-11-28) every CLI
# case measured was faster there than on the GPU: examples/collatz.py cold 9.7-11.8 s
# (GPU ~19 s), `--json examples/*.py` (11 files) cold 12.3 s / warm 4.4 s (GPU 18.9 /
# 6.9 s), the million-iteration loop of docs/vm.md cold 12.2 s / warm 7.2 s (GPU 25.4 /
# 15.2 s): CUDA's start-up and the GPU compiles cost more than a few lanes' run, and one
# lane steps faster on the CPU (docs/vm.md "Backends"). The GPU wins for batches: 256
# programs ran in 1.1 s in the kernel against 19 s serial on that CPU.
CPU_MAX_FILES = 16


def wanted_device(ns: argparse.Namespace, jax_platforms: str | None) -> str:
    """Where ``--device`` puts this run, "cpu" or "default" (``jax_platforms``: the
    JAX_PLATFORMS variable, which ``auto`` obeys)."""
    device = getattr(ns, "device", "default")
    if device != "auto":
        return device
    files = ns.files if ns.command == "run" else [ns.file]
    small = ns.compiler in ("jax", "python") and len(files) <= CPU_MAX_FILES
    return "cpu" if small and not jax_platforms else "default"


def choose_device(ns: argparse.Namespace) -> None:
    """Point JAX at the host CPU for this process when ``--device`` says so (``cpu``, or
    ``auto`` for a small run; see CPU_MAX_FILES), before its backend starts. ``auto``
    leaves JAX alone when JAX_PLATFORMS is set or the backend has started (a test
    process); ``cpu`` with a backend already started elsewhere is an error."""
    from jax._src import xla_bridge  # backends_are_initialized: no public equivalent

    device = wanted_device(ns, os.environ.get("JAX_PLATFORMS"))
    if device == "default" or (ns.device == "auto" and xla_bridge.backends_are_initialized()):
        return
    import jax

    if xla_bridge.backends_are_initialized():
        if jax.default_backend() != "cpu":
            raise SystemExit(f"jaxcc: --device cpu: JAX already runs on {jax.default_backend()}")
        return
    jax.config.update("jax_platforms", "cpu")


def hoist_cpu_while_loops() -> None:
    """Add the XLA_FLAGS option above for this process and its children, unless the
    variable already sets backend options (the user's choice) or JAX's backend has
    already started (the option is read when it starts: a test process, say)."""
    from jax._src import xla_bridge  # backends_are_initialized: no public equivalent

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_extra_options" in flags or xla_bridge.backends_are_initialized():
        return
    os.environ["XLA_FLAGS"] = f"{flags} {_HOIST_FLAG}{CPU_WHILE_LOOP_BYTES}".strip()


def enable_executable_cache() -> None:
    """Beside the persistent compilation cache, ``jaxcc.exec_cache`` (the compiler's jits
    loaded on a warm run without tracing them) in its ``executables`` subdirectory;
    JAXCC_EXEC_CACHE=0 turns it off."""
    import jax

    from jaxcc import exec_cache

    base = jax.config.jax_compilation_cache_dir
    if base and os.environ.get("JAXCC_EXEC_CACHE", "1") != "0":
        exec_cache.enable(os.path.join(base, "executables"))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``jaxcc`` console script; returns the exit status."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    from jaxcc import exec_cache

    before = exec_cache._DIR[0]
    try:
        if {"jax", "neural", "hybrid"} & {getattr(ns, "compiler", None), getattr(ns, "vm", None)}:
            choose_device(ns)
            hoist_cpu_while_loops()
            enable_compilation_cache()
            enable_executable_cache()
        if ns.command == "run":
            return _cmd_run(ns)
        if ns.command == "dis":
            return _cmd_dis(ns)
    finally:
        exec_cache.enable(before)  # the command's, not the calling process's (tests)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
