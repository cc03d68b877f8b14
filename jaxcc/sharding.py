"""Run any batch-first stage over every device: the batch axis split over a 1-D mesh.

Every jaxcc stage is a pure per-lane function of arrays with a leading batch axis B, and
one program never changes another's result. So the batch can be cut into equal blocks,
one per device, each block run by the unchanged stage on its own device (``shard_map``),
and the blocks put back together: the result is the same as on one device.

    mesh = make_mesh()                                  # every device, axis "batch"
    run = sharded(functools.partial(vm.run, limits=limits))
    result = run(program)                               # RunResult of B lanes

Why shard_map rather than letting jit partition (GSPMD): the VM and the parser run a
``while_loop(any lane active)``; under GSPMD that ``any`` becomes an all-reduce over the
devices on every outer iteration and every device runs as long as the slowest lane of
the whole batch. Under shard_map each device loops over its own block only and stops
when its own lanes are done; nothing crosses devices. (On a GPU their loops are Pallas
kernels by default, custom calls that GSPMD could not split at all; each device runs the
kernel on its own block here.)

Padding: a batch B that is not a multiple of the device count gets ``pad`` extra lanes
of zeros. Zeros are inert in every layout: a zero-length source, a token array with
``n_tokens = 0``, an empty AST, a Program with ``n_code = n_funcs = 0`` (the VM stops it
at step 0 with InvalidBytecode). The pad lanes are stripped from the result.

Multi-host (``jax.distributed.initialize`` first; see docs/scaling.md): the mesh spans
``jax.devices()`` of every process, each process passes its own programs (its slice of
the global batch, the same B in every process), and the global arrays are assembled with
``jax.make_array_from_process_local_data``. The result's leaves are then global arrays;
read a process's part with ``addressable_shards``. Not tested here (one host only).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

BATCH = "batch"  # the mesh axis the batch is split over


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh over ``devices`` (default: every device of every process), axis "batch"."""
    devs = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devs, dtype=object), (BATCH,))


def _is_batched(x) -> bool:
    return isinstance(x, (np.ndarray, jax.Array)) and x.ndim >= 1


def _batch_size(leaves) -> int:
    sizes = {int(x.shape[0]) for x in leaves if _is_batched(x)}
    if len(sizes) != 1:
        raise ValueError(f"batch-first arrays must share one leading size, got {sorted(sizes)}")
    return sizes.pop()


def _pad_leaf(x, pad: int):
    """x with ``pad`` rows of zeros appended along axis 0 (stays numpy if it was numpy)."""
    if pad == 0:
        return x
    if isinstance(x, np.ndarray):
        return np.concatenate([x, np.zeros((pad, *x.shape[1:]), x.dtype)])
    return jnp.concatenate([x, jnp.zeros((pad, *x.shape[1:]), x.dtype)])


def pad_batch(tree, multiple: int):
    """Pad every batch-first array leaf of ``tree`` with zero rows up to a multiple of
    ``multiple``. Returns ``(padded tree, pad)``; leaves that are not arrays of rank >= 1
    (Python ints, None, 0-d arrays) pass through."""
    leaves, treedef = jax.tree.flatten(tree)
    b = _batch_size(leaves)
    pad = (-b) % multiple
    return jax.tree.unflatten(
        treedef, [_pad_leaf(x, pad) if _is_batched(x) else x for x in leaves]
    ), pad


def shard_batch(tree, mesh: Mesh | None = None):
    """Pad ``tree``'s batch-first arrays to a multiple of the device count and place them
    split along axis 0 over ``mesh``. Returns ``(sharded tree, pad)``; strip the last
    ``pad`` rows of any batch-first result (``x[: x.shape[0] - pad]``)."""
    mesh = make_mesh() if mesh is None else mesh
    if jax.process_count() > 1:
        # each process holds only its own block; the mesh's devices of this process
        # must divide it evenly
        n_local = len([d for d in mesh.devices.flat if d.process_index == jax.process_index()])
        padded, pad = pad_batch(tree, n_local)
        sharding = NamedSharding(mesh, P(BATCH))
        return jax.tree.map(
            lambda x: (
                jax.make_array_from_process_local_data(sharding, np.asarray(x))
                if _is_batched(x)
                else x
            ),
            padded,
        ), pad
    padded, pad = pad_batch(tree, mesh.size)
    sharding = NamedSharding(mesh, P(BATCH))
    return jax.tree.map(lambda x: jax.device_put(x, sharding) if _is_batched(x) else x, padded), pad


def sharded(fn: Callable, mesh: Mesh | None = None) -> Callable:
    """Wrap a batch-first function so that it runs split over the devices of ``mesh``.

    ``fn(*args, **kwargs)``: every array leaf of rank >= 1 in the arguments is batch-first
    (one leading size B) and is split over the mesh; 0-d arrays are replicated; every
    other leaf (Python ints, a Limits, None) is static and baked in. Every leaf of the
    result must be batch-first. The wrapper pads B to a multiple of the device count,
    runs ``fn`` once per device on its block (shard_map under jit) and returns the
    result with the pad lanes stripped: identical to ``fn`` on one device.
    """
    cache: dict = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        m = make_mesh() if mesh is None else mesh
        leaves, treedef = jax.tree.flatten((args, kwargs))
        b = _batch_size(leaves)
        kinds = tuple(
            "b" if _is_batched(x) else "r" if isinstance(x, (np.ndarray, jax.Array)) else "s"
            for x in leaves
        )
        static = tuple(x if k == "s" else None for x, k in zip(leaves, kinds, strict=True))
        (dyn, pad) = pad_batch([x for x, k in zip(leaves, kinds, strict=True) if k != "s"],
                               m.size)  # fmt: skip
        key = (treedef, kinds, static, m)
        f = cache.get(key)
        if f is None:
            f = cache[key] = _build(fn, m, treedef, kinds, static)
        out = f(*dyn)
        if pad:
            out = jax.tree.map(lambda x: x[:b], out)
        return out

    wrapper.cache = cache  # for tests: one compiled function per argument structure
    return wrapper


def _build(fn, mesh, treedef, kinds, static):
    def body(*dyn):
        it = iter(dyn)
        leaves = [next(it) if k != "s" else s for k, s in zip(kinds, static, strict=True)]
        args, kwargs = jax.tree.unflatten(treedef, leaves)
        return fn(*args, **kwargs)

    in_specs = tuple(P(BATCH) if k == "b" else P() for k in kinds if k != "s")
    # check_vma=False: the stages are plain per-lane code with no collectives; the
    # varying-manual-axes check would only reject replicated constants they create.
    return jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=P(BATCH), check_vma=False)
    )
