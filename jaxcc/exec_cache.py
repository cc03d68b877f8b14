"""A cache of compiled executables keyed by what produced them, for the CLI's warm runs.

JAX's persistent compilation cache skips XLA's compile on a second run, but not the
tracing and lowering that compute its key: for the CLI's compiler jits that is ~3 s of
a warm `jaxcc run` on the 2-core CPU and ~4 s on a GPU host, more than the rest of the
run's start-up. This cache stores the compiled executables themselves
(``jax.experimental.serialize_executable``) under a key made of everything that decides
them: the jaxcc sources (a hash of every ``.py`` file of the package), the jax and
jaxlib versions, the backend and its devices, and the caller's parts (the jits' role,
the input shapes, the limits, the compile options). A warm run then loads them without
tracing anything.

Off unless ``enable(directory)`` was called (the CLI does, beside its persistent
compilation cache, for the duration of a command); a missing, unreadable or stale entry
is a miss and is rewritten, never an error. ``call`` is the way in: what it stores is
compiled bypassing JAX's persistent cache (XLA:CPU cannot run an executable that came
from that cache and was serialized again: "Function iota.309_kernel not found") and
stored before it first runs (XLA:CPU executables do not serialize once run); an entry
that fails to load or to run is dropped and the run compiles instead. Nothing is
evicted: an entry is ~16 MB (the CLI's one-file shape on the CPU, most of it the
lexer), one per shape tier, jaxcc version and device kind; delete the directory to
reclaim the space. Entries are written atomically (a temporary file, then a rename), so
two processes sharing a cache never read a partial entry.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import tempfile

import jax

_DIR: list[str | None] = [None]
# entries loaded and stored in this process (for tests and --verbose timing)
STATS = {"hits": 0, "misses": 0, "stores": 0, "dropped": 0}


def enable(directory: str | None) -> None:
    """Cache executables under ``directory`` (None: off)."""
    _DIR[0] = directory


def enabled() -> bool:
    return _DIR[0] is not None


@functools.cache
def code_hash() -> str:
    """SHA-256 of every .py file of the jaxcc package (path and content, sorted)."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def key(*parts) -> str:
    """The entry name for ``parts`` (reprs of plain values: shapes, limits, options)."""
    import jaxlib

    backend = jax.default_backend()
    devices = tuple(d.device_kind for d in jax.devices())
    flags = os.environ.get("XLA_FLAGS", "")  # e.g. the CLI's hoist_cpu_while_loops
    whole = (code_hash(), jax.__version__, jaxlib.__version__, backend, devices, flags, parts)
    return hashlib.sha256(repr(whole).encode()).hexdigest()


def _path(k: str) -> str:
    return os.path.join(_DIR[0], k[:2], k + ".pkl")


def call(k: str, compile_all, run):
    """``run(executables)``, the executables (a list of ``jax.stages.Compiled``) loaded
    from the entry ``k``, or else made by ``compile_all(fresh)`` and stored under ``k``
    before they run (``fresh``: whether to lower and compile them inside ``fresh()``,
    with ``compile_fresh``). With the cache off: ``run(compile_all(False))``. An entry
    that does not load or whose executables fail to run is dropped, and ``run`` is
    given fresh ones."""
    if _DIR[0] is None:
        return run(compile_all(False))
    execs = load(k)
    if execs is not None:
        try:
            out = jax.block_until_ready(run(execs))
            STATS["hits"] += 1
            return out
        except Exception:  # noqa: BLE001 (a bad entry: compile instead)
            drop(k)
    STATS["misses"] += 1
    execs = compile_all(True)
    # (not loaded back to check it here: that costs 1.6 s of a cold CLI run on the
    # 2-core CPU; a later run that cannot run the entry drops it, as above)
    store(k, execs)
    return run(execs)


def fresh():
    """A context (this thread only) in which lowering and compiling bypass JAX's
    persistent compilation cache, for executables that ``store`` will keep: XLA:CPU
    cannot run an executable that came from that cache and was serialized again. Use it
    around ``lower`` and around ``compile`` (on the thread that compiles). JAX reads
    that cache whenever it was used once in the process, so the bypass is indirect: the
    cache switched off while lowering changes the compile options (JAX adds its own
    cache flags only when the cache is on), hence the key, to one that is never written
    (no entry is written while the least compile time worth caching is infinite). A
    no-op where jax lacks these switches (``call`` then drops what does not run)."""
    stack = contextlib.ExitStack()
    try:
        from jax._src import config as jax_config

        stack.enter_context(jax_config.enable_compilation_cache(False))
        stack.enter_context(jax_config.persistent_cache_min_compile_time_secs(float("inf")))
    except Exception:  # noqa: BLE001
        pass
    return stack


def compile_fresh(lowered):
    """``lowered.compile()`` inside ``fresh()``."""
    with fresh():
        return lowered.compile()


def load(k: str) -> list | None:
    """The executables stored under ``k`` (``jax.stages.Compiled``, in the order given
    to ``store``), or None: cache off, no entry, or an entry that does not load."""
    if _DIR[0] is None:
        return None
    from jax.experimental import serialize_executable as se

    try:
        with open(_path(k), "rb") as f:
            entries = pickle.load(f)
        return [se.deserialize_and_load(s, i, o) for s, i, o in entries]
    except Exception:  # noqa: BLE001 (any failure is a miss: the caller compiles)
        return None


def drop(k: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(_path(k))
        STATS["dropped"] += 1


def store(k: str, compiled: list) -> bool:
    """Store ``compiled`` (``jax.stages.Compiled`` not yet run: XLA:CPU's do not
    serialize once run) under ``k``; False when they could not be serialized or
    written (the next run compiles again)."""
    if _DIR[0] is None:
        return False
    from jax.experimental import serialize_executable as se

    try:
        blob = pickle.dumps([se.serialize(c) for c in compiled])
        path = _path(k)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 (a cache that cannot be written is no cache)
        return False
    STATS["stores"] += 1
    return True
