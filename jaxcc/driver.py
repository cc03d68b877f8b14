"""The VM in slices: a host loop over short jitted calls, for long and runaway programs.

``vm.run`` is one jitted call: it returns when the batch's slowest lane stops, so one
runaway program holds every other result until the step budget ends it, and no wall-clock
limit can stop it. This driver runs the same lanes as a sequence of slices (each a
jitted ``vm.advance`` of at most S steps per lane) and between slices, on the host:

* reports the lanes that stopped in the last slice (``Driver`` is an iterator of
  ``Finished`` batches), so a caller can print them at once;
* gathers the lanes still running into a smaller batch ("compaction") once they fit in
  the next of a few fixed tiers (powers of two, ``tiers()``), so a long tail stops paying
  for the whole batch and nothing recompiles per size; their final states are scattered
  back at the end;
* ends the run when a wall-clock ``timeout`` has passed (lanes still running stop with
  TimeoutError, as with the step budget, flagged ``expired``) or when ``should_stop()``
  says so (Ctrl-C in the CLI: finished lanes are reported, the others keep status
  RUNNING).

Stopped lanes never change, so the result is bit-identical to one uninterrupted
``vm.run`` whatever S, the compaction and the slice timing (tests/test_slices.py), unless
the timeout or ``should_stop`` ended the run. Everything stays on the device between
slices except each lane's status (one Int32[L] read per slice) and, when iterating, the
results of the lanes that just finished.

    res = driver.run(program, limits, entry, args, budget)   # == vm.run(...), bit for bit
    res = driver.run(program, limits, timeout=10.0)          # TimeoutError after 10 s
    for done in driver.Driver(vm.start(program, limits), limits, timeout=10.0):
        done.lanes, done.result, done.expired                # as lanes finish
    passed, per_case = driver.run_tests(program, entry, args, expected, limits)

The timeout counts wall-clock time from the first slice, not XLA compiles: each batch
shape's first call (one per tier) is made with zero steps and timed apart. With no
``slice_steps``, S adapts so that a slice takes about ``slice_s`` seconds (S is a traced
argument of ``vm.advance``: changing it does not recompile), which bounds how late a
timeout or a Ctrl-C is seen.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

import jax
import numpy as np

from jaxcc import isa, vm, vm_pallas
from jaxcc.arrays import next_pow2
from jaxcc.errors import Code
from jaxcc.limits import DEFAULT, Limits

# Slice length when it adapts: the first slice, the most it may grow from one slice to
# the next, and the longest (in units of inner_steps).
FIRST_CHUNKS = 16
GROWTH = 8
MAX_CHUNKS = 1 << 24


class Finished(NamedTuple):
    """Lanes that stopped in the last slice (or by the timeout), in lane order."""

    lanes: np.ndarray  # Int64[n]: their indices in the batch
    result: isa.RunResult  # numpy, leading axis n
    expired: np.ndarray  # Bool[n]: stopped by the wall-clock timeout (status TIMEOUT)


class Stats(NamedTuple):
    slices: int  # calls of vm.advance with steps > 0
    steps: int  # sum of S over those calls (the most steps any lane made)
    compactions: int
    sizes: tuple[int, ...]  # batch sizes run, in order (the tiers used)
    run_s: float  # wall-clock seconds counted against the timeout
    compile_s: float  # seconds of first calls per batch shape (not counted)


def tiers(n: int, ratio: int = 8, smallest: int = 1) -> tuple[int, ...]:
    """The batch sizes a run of n lanes may use: n, then powers of two, each at most
    1/ratio of the one before (n = 65536, ratio 8: 65536, 8192, 1024, 128, 16, 2)."""
    if ratio < 2:
        raise ValueError(f"ratio must be >= 2: {ratio}")
    out = [n]
    t = 1 << max(0, (n // ratio).bit_length() - 1) if n // ratio else 0
    while t >= max(1, smallest) and t < out[-1]:
        out.append(t)
        t = 1 << max(0, (t // ratio).bit_length() - 1) if t // ratio else 0
    return tuple(out)


@jax.jit
def _take(lanes: vm.Packed, pos) -> vm.Packed:
    return jax.tree.map(lambda x: x[pos], lanes)


@functools.partial(jax.jit, donate_argnames=("full",))
def _put(full: vm.Packed, idx, part: vm.Packed) -> vm.Packed:
    """full[idx] = part lane-wise; indices >= len(full) (padding) are dropped."""
    return jax.tree.map(lambda f, p: f.at[idx].set(p, mode="drop", unique_indices=True), full, part)


class Driver:
    """Runs a ``vm.State`` to the end in slices; iterate it to get lanes as they finish.

    state: from ``vm.start`` / ``vm.start_tests`` (its lanes are consumed).
    slice_steps: S, the most steps a lane makes per slice (None: adapts to ``slice_s``).
    timeout: wall-clock seconds (compiles excluded) after which lanes still running stop
        with TimeoutError (None: no limit).
    compact, ratio, smallest: compaction on/off and the tiers (``tiers()``).
    should_stop: polled between slices; when it returns true the run ends there, lanes
        still running keep status RUNNING and ``interrupted`` is set.
    inner_steps, unroll: as in ``vm.run`` (inner_steps becomes gcd(S, inner_steps) when
        S is not a multiple of it). None of S, compaction, inner_steps, unroll changes a
        result.
    backend: the VM's for each slice, "xla" (``vm.advance``: lockstep), "serial"
        (``vm.advance``, one lane after another; never compacts), "pallas"
        (``vm_pallas.advance``: one kernel launch per slice) or "auto" (the kernel on a
        GPU, serial on the CPU when ``vm.cpu_loops_hoisted()``, else XLA:
        ``vm_pallas.resolve``); the same results.
    """

    def __init__(
        self,
        state: vm.State,
        limits: Limits = DEFAULT,
        *,
        slice_steps: int | None = None,
        timeout: float | None = None,
        compact: bool = True,
        ratio: int = 8,
        smallest: int = 1,
        slice_s: float = 0.25,
        inner_steps: int = 16,
        unroll: int = 1,
        should_stop: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        backend: str = "auto",
    ):
        if slice_steps is not None and slice_steps < 1:
            raise ValueError(f"slice_steps must be >= 1: {slice_steps}")
        self.limits = limits
        self.tables = state.tables
        self._cur = state.lanes
        self.n = int(np.shape(state.lanes.pid)[0])
        self._orig: np.ndarray | None = None  # batch index of each lane of _cur (-1: pad)
        self._full: vm.Packed | None = None  # every lane, once _cur is a compacted subset
        self.backend = vm_pallas.resolve(backend)
        if self.backend not in vm.BACKENDS:  # checked here, not at the first slice
            raise ValueError(f"backend must be auto or one of {vm.BACKENDS}: {backend!r}")
        # "serial" steps each lane on its own: a stopped lane costs one test, so there is
        # nothing for compaction to save, and each tier would be one more compile
        compact = compact and self.backend != "serial"
        self.tiers = tiers(self.n, ratio, smallest) if compact else (self.n,)
        self.fixed = slice_steps
        self.inner = int(np.gcd(slice_steps, inner_steps)) if slice_steps else inner_steps
        self.unroll = unroll
        self.timeout = timeout
        self.slice_s = slice_s
        self.should_stop = should_stop
        self.clock = clock
        self.done = np.zeros(self.n, bool)  # reported (or stopped before the loop ended)
        self.expired = np.zeros(self.n, bool)
        self.interrupted = False
        self.finished = False  # the loop has ended (every lane stopped, or interrupted)
        self._warm: set[int] = set()
        self._slices = self._steps = self._compactions = 0
        self._sizes: list[int] = []
        self._run_s = self._compile_s = 0.0
        self._rate = 0.0  # chunks per second in the last slice
        self._fetched: set[tuple[int, int]] = set()
        self._moved: set[tuple[int, int]] = set()

    # --- public

    def __iter__(self) -> Iterator[Finished]:
        return self._loop(fetch=True)

    def run(self) -> isa.RunResult:
        """Run to the end without reporting lanes on the way; every lane's RunResult."""
        for _ in self._loop(fetch=False):
            pass
        return self.result()

    def result(self) -> isa.RunResult:
        """Every lane's RunResult (device arrays) in batch order; lanes not finished
        (interrupted, or the loop not run to its end) have status RUNNING."""
        return vm.finish(vm.State(self.tables, self._gathered()), self.limits)

    def stats(self) -> Stats:
        return Stats(self._slices, self._steps, self._compactions, tuple(self._sizes),
                     self._run_s, self._compile_s)  # fmt: skip

    # --- the loop

    def _gathered(self) -> vm.Packed:
        """Every lane in batch order (the compacted lanes scattered back)."""
        if self._orig is not None:
            self._full = _put(self._full, self._scatter_idx(self._orig), self._cur)
            self._cur, self._orig = self._full, None
            self._full = None
        return self._cur

    def _scatter_idx(self, orig: np.ndarray) -> np.ndarray:
        pad = orig < 0
        return np.where(pad, self.n + np.cumsum(pad), orig).astype(np.int32)

    def _origs(self, size: int) -> np.ndarray:
        return np.arange(size) if self._orig is None else self._orig

    def _status(self) -> np.ndarray:
        return np.asarray(vm.status(vm.State(self.tables, self._cur)))

    def _advance(self, steps: int) -> None:
        state = vm.State(self.tables, self._cur)
        self._cur = vm.advance(state, self.limits, steps, inner_steps=self.inner,
                               unroll=self.unroll, backend=self.backend).lanes  # fmt: skip

    def _warm_up(self) -> None:
        """Compile this batch shape (a call with zero steps), timed apart."""
        size = int(np.shape(self._cur.pid)[0])
        self._sizes.append(size)
        if size in self._warm:
            return
        t0 = self.clock()
        self._advance(0)
        self._status()
        self._compile_s += self.clock() - t0
        self._warm.add(size)

    def _fetch(self, pos: np.ndarray) -> isa.RunResult:
        """RunResults (numpy) of the lanes of _cur at pos (padded to a power of two, so
        there are few shapes to compile)."""
        k = len(pos)
        padded = np.concatenate([pos, np.full(next_pow2(k) - k, pos[0])]).astype(np.int32)
        shape = (len(padded), int(np.shape(self._cur.pid)[0]))
        t0 = self.clock()
        res = vm.finish(vm.State(self.tables, _take(self._cur, padded)), self.limits)
        res = isa.RunResult(*(np.asarray(f)[:k] for f in res))
        if shape not in self._fetched:  # a first call: mostly compile, not counted
            self._fetched.add(shape)
            self._compile_s += self.clock() - t0
        return res

    def _compact(self, st: np.ndarray) -> None:
        live = np.flatnonzero(st == Code.RUNNING)
        size = len(st)
        fits = [t for t in self.tiers if t >= len(live)]
        target = min(fits) if fits else size
        if target >= size or len(live) == 0:
            return
        pad = int(np.flatnonzero(st != Code.RUNNING)[0])  # a stopped lane: inert
        pos = np.concatenate([live, np.full(target - len(live), pad)]).astype(np.int32)
        first = (size, target) not in self._moved
        t0 = self.clock()
        new = _take(self._cur, pos)
        origs = self._origs(size)
        if self._orig is None:
            self._full = self._cur
        else:
            self._full = _put(self._full, self._scatter_idx(self._orig), self._cur)
        if first:  # the gather and scatter at new shapes compile: not counted
            jax.block_until_ready((new, self._full))
            self._compile_s += self.clock() - t0
            self._moved.add((size, target))
        self._orig = np.concatenate([origs[live], np.full(target - len(live), -1)])
        self._cur = new
        self._compactions += 1
        self._warm_up()

    def _loop(self, fetch: bool) -> Iterator[Finished]:
        if self.finished:
            return
        inner = self.inner
        chunks = (self.fixed // inner) if self.fixed else FIRST_CHUNKS
        self._warm_up()
        t_start = self.clock()
        compile_before = self._compile_s
        st = self._status()
        while True:
            # report the lanes that stopped
            origs = self._origs(len(st))
            new = np.flatnonzero((st != Code.RUNNING) & (origs >= 0))
            new = new[~self.done[origs[new]]]
            if len(new):
                self.done[origs[new]] = True
                if fetch:
                    yield Finished(origs[new], self._fetch(new), self.expired[origs[new]])
            live = np.flatnonzero(st == Code.RUNNING)
            if len(live) == 0:
                break
            if self.should_stop is not None and self.should_stop():
                self.interrupted = True
                break
            self._run_s = self.clock() - t_start - (self._compile_s - compile_before)
            left = None if self.timeout is None else self.timeout - self._run_s
            if left is not None and left <= 0:
                self.expired[origs[live]] = True
                self._cur = vm.expire(vm.State(self.tables, self._cur)).lanes
                st = self._status()
                continue
            if len(self.tiers) > 1:
                self._compact(st)
            if left is not None and self._rate > 0 and not self.fixed:
                # do not run far past the deadline: at most the steps that fit in it
                chunks = max(1, min(chunks, int(self._rate * left)))
            t0 = self.clock()
            self._advance(chunks * inner)
            st = self._status()
            dt = self.clock() - t0
            self._slices += 1
            self._steps += chunks * inner
            if dt > 0:
                self._rate = chunks / dt
            if not self.fixed and dt > 0:  # aim for slice_s per slice, growing gradually
                chunks = max(1, min(int(self._rate * self.slice_s), chunks * GROWTH, MAX_CHUNKS))
        self._run_s = self.clock() - t_start - (self._compile_s - compile_before)
        self.finished = True


def run(
    program: isa.Program,
    limits: Limits = DEFAULT,
    entry=None,
    args=None,
    budget=None,
    **options,
) -> isa.RunResult:
    """``vm.run``'s arguments and result, run in slices (``Driver``'s keyword options:
    slice_steps, timeout, compact, ...). Bit-identical to ``vm.run`` unless the timeout
    or should_stop ended the run."""
    unbatched = np.ndim(program.op) == 1
    res = Driver(vm.start(program, limits, entry, args, budget), limits, **options).run()
    if unbatched:
        res = jax.tree.map(lambda x: x[0], res)
    return res


def warm_up(n: int, limits: Limits = DEFAULT, **options) -> None:
    """Compile what a Driver over ``n`` lanes of ``limits`` compiles first (``vm.start``,
    a slice, ``vm.finish`` of every lane) by running ``n`` empty programs with no step
    budget (each stops at once): a caller that has other compiles to do runs this from a
    thread meanwhile (the CLI, while its compiler compiles; XLA's compile releases the
    GIL), and its own run then finds these in jit's cache. ``options``: the Driver's
    keyword options that change what compiles (inner_steps, unroll, backend, ratio)."""
    program = isa.empty_program(limits.max_code, limits.max_funcs, (n,))
    state = vm.start(program, limits, None, None, np.zeros(n, np.int32))
    for _ in Driver(state, limits, **options):
        pass


def run_tests(program: isa.Program, entry, args, expected, limits: Limits = DEFAULT,
              budget=None, **options):  # fmt: skip
    """``vm.run_tests`` in slices: (passed Bool[B], per_case Int32[B, K]), identical to it
    unless the timeout (cases still running: Code.TIMEOUT) or should_stop (Code.RUNNING)
    ended the run."""
    b, k = np.shape(args)[:2]
    state = vm.start_tests(program, entry, args, limits, budget)
    res = Driver(state, limits, **options).run()
    return vm.case_verdicts(res, expected, b, k)


class Interrupt:
    """Ctrl-C as a request to stop between slices (the CLI's SIGINT handler).

    Pass it as a Driver's ``should_stop``. While ``armed`` (a context manager: the slice
    loop), the first SIGINT only sets ``requested``, which the Driver sees after the
    slice in progress; a second SIGINT, or one while not armed (compiling, say), raises
    KeyboardInterrupt as Python does. ``installed()`` puts the handler on SIGINT for the
    duration (main thread only; elsewhere it does nothing).
    """

    def __init__(self):
        self.requested = False
        self._armed = 0

    def __call__(self) -> bool:
        return self.requested

    def handler(self, signum, frame) -> None:
        first = not self.requested
        self.requested = True
        if not (self._armed and first):
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def armed(self):
        self._armed += 1
        try:
            yield self
        finally:
            self._armed -= 1

    @contextlib.contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old = signal.signal(signal.SIGINT, self.handler)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, old)
