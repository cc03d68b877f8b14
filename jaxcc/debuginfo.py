"""Debug information: what ``dis``, ``--trace`` and error messages need beyond the bytecode.

Two halves, as for errors (arrays on the device, text at the edges):

* ``Debug``: arrays that the device compiler computes beside the Program (one row per
  program, leading batch axis B). Names are not spelled out on the device: each function
  and each local slot points at a place in the source (line, column) where its name is
  written, and the host reads the identifier there.
* ``DebugInfo``: the host-side record that both compilers give (``compile_many`` of
  ``jaxcc.compiler`` builds it from ``Debug`` rows with ``from_arrays``;
  ``jaxcc.reference.compiler`` fills it directly), and that ``jaxcc.dis`` and
  ``jaxcc.format`` read.

Layout of ``Debug`` (F = limits.max_funcs, L = limits.max_locals; padding -1 / 0)::

    fn_line   Int32[B, F]     line of each function's ``def`` (1 for the module body)
    fn_col    Int32[B, F]     column of its ``def`` keyword (-1 for the module body)
    slot_line Int32[B, F, L]  line of the first place (source order) that writes slot s's
                              name; -1 for the hidden temporary and for unused slots
    slot_col  Int32[B, F, L]  its column
    slot_type Int32[B, F, L]  isa.T_* of each variable slot (the parameters' types are
                              DebugInfo.param_types)
    error_args Int32[B, 3]    a type conflict's message parameters: (site, the first type,
                              this type), typecheck.TYPE_SITE and isa.T_*; zeros otherwise
    print_items Int32[B, PF, PP] the print items of each of the first PF = min(F,
                              PRINT_FUNCS) functions in code order, one per PRINT_*
                              instruction: isa.T_BOOL / T_INT for a printed value (an
                              argument of ``print``; bool-typed / any other type),
                              ITEM_NEWLINE for the end of a print call, then ITEM_END;
                              -1 beyond PP = MAX_PRINTS (not recorded). What the neural
                              compiler's typed decoding mask reads (docs/neural.md)

A program with a compile error has padding everywhere but ``error_args``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxcc import isa
from jaxcc.arrays import BIG, I32
from jaxcc.errors import DEF_PREFIX, line_starts, source_lines, without_bom
from jaxcc.syntax import Node
from jaxcc.typecheck import mask_to_type

TEMP_NAME = "$cmp"  # the hidden temporary's name (chained comparisons keep a value there)
PRINT_FUNCS = 16  # functions whose print items Debug.print_items records
MAX_PRINTS = 64  # print items per function that it records
ITEM_NEWLINE = 3  # a print item: the end of a print call (isa.T_INT / T_BOOL: a value)
ITEM_END = -2  # after a function's last print item (-1: not recorded)


class Debug(NamedTuple):
    """Device-side debug arrays (see the module docstring for the layout)."""

    fn_line: object  # Int32[Array, "B F"]
    fn_col: object  # Int32[Array, "B F"]
    slot_line: object  # Int32[Array, "B F L"]
    slot_col: object  # Int32[Array, "B F L"]
    slot_type: object  # Int32[Array, "B F L"]
    error_args: object  # Int32[Array, "B 3"]
    print_items: object  # Int32[Array, "B PF PP"]


class DebugInfo(NamedTuple):
    """What dis and error messages need, by function id (0 = '<module>').

    A program that did not compile has the module alone (no locals).
    """

    fn_names: tuple  # tuple[str]  '<module>' first, then the defs in source order
    fn_lines: tuple  # tuple[int]  the def's line (1 for the module)
    local_names: tuple  # tuple[tuple[str]]  slot names per function (TEMP_NAME for the temp)
    param_types: tuple  # tuple[tuple[int]]  isa.T_* of each parameter
    source_lines: tuple  # tuple[str]  the source split into lines
    message: str  # the full error message when the compiler words it itself, else ''
    error_args: tuple = ()  # (site, first type, this type) of a type conflict, if known
    # per function, its print items (Debug.print_items without ITEM_END and padding)
    print_items: tuple = ()  # tuple[tuple[int]]


def source_text(source: str | bytes) -> str:
    """The source as the compilers read it: without a byte-order mark, bytes decoded."""
    source = without_bom(source)
    return source.decode("utf-8", "replace") if isinstance(source, bytes) else source


def module_only(source: str | bytes, message: str = "", error_args: tuple = ()) -> DebugInfo:
    """The DebugInfo of a program that did not compile."""
    lines = tuple(source_lines(source_text(source)))
    return DebugInfo(("<module>",), (1,), ((),), ((),), lines, message, error_args)


# -- on the device ----------------------------------------------------------------------


def empty(limits) -> Debug:
    """The Debug row of a program with no functions (all padding), unbatched."""
    F, L = limits.max_funcs, limits.max_locals
    m = jnp.full((F, L), -1, jnp.int32)
    p = jnp.full((min(F, PRINT_FUNCS), MAX_PRINTS), -1, jnp.int32)
    return Debug(jnp.zeros((F,), jnp.int32), jnp.full((F,), -1, jnp.int32), m, m,
                 jnp.zeros((F, L), jnp.int32), jnp.zeros((3,), jnp.int32), p)  # fmt: skip


def print_items(ast, sc, ty, n_funcs: int):
    """Int32[min(n_funcs, PRINT_FUNCS), MAX_PRINTS]: the print items of each function of ONE
    program in code order (``Debug.print_items``): isa.T_BOOL / T_INT for a printed value
    (bool-typed / any other), ITEM_NEWLINE for the end of a print call, ITEM_END after the
    function's last item, -1 beyond MAX_PRINTS. The code generator evaluates a call's
    arguments, prints each (PRINT_BOOL for a bool, PRINT_INT otherwise) in argument order,
    then PRINT_NEWLINE, and lays statements out in source order, so item j of function f
    says what f's j-th PRINT_* instruction is. Sequential equivalent::

        for node in post-order (children before parents, siblings in source order):
            if node is a call of the builtin print, in function f: out[f].append(ITEM_NEWLINE)
            if node is an argument of such a call: out[f].append(T_BOOL if bool else T_INT)
        then ITEM_END after each function's last item (where it fits)
    """
    from jaxcc.resolve import B_PRINT
    from jaxcc.typecheck import M_BOOL

    F, P = min(n_funcs, PRINT_FUNCS), MAX_PRINTS
    n = ast.kind.shape[0]
    idx = jnp.arange(n, dtype=I32)
    live = (idx < ast.n_nodes) & (sc.fn >= 0)
    par = jnp.clip(ast.parent, 0, n - 1)
    arg = live & (ast.parent >= 0) & (ast.kind[par] == Node.CALL) & (sc.builtin[par] == B_PRINT)
    call = live & (ast.kind == Node.CALL) & (sc.builtin == B_PRINT)
    cnt = call.astype(I32) + arg.astype(I32)  # a node's items: its newline, then its value
    fn = jnp.where(cnt > 0, sc.fn, F)
    # each node's first item: an exclusive running count of items per function
    per_fn = (fn[:, None] == jnp.arange(F, dtype=I32)[None, :]).astype(I32) * cnt[:, None]
    incl = jnp.cumsum(per_fn, axis=0)
    first = jnp.take_along_axis(incl, jnp.clip(fn, 0, F - 1)[:, None], axis=1)[:, 0] - cnt
    at = lambda ok, r: jnp.where(ok & (fn < F) & (r < P), fn * P + r, F * P)  # noqa: E731
    total = incl[-1]  # Int32[F]
    ends = jnp.where(total < P, jnp.arange(F, dtype=I32) * P + total, F * P)
    t = jnp.where(ty.t == M_BOOL, isa.T_BOOL, isa.T_INT).astype(I32)
    out = jnp.full((F * P + 1,), -1, I32).at[ends].set(ITEM_END)
    out = out.at[at(call, first)].set(ITEM_NEWLINE)
    out = out.at[at(arg, first + call.astype(I32))].set(t)
    return out[: F * P].reshape(F, P)


def debug_arrays(ast, sc, ty, limits) -> Debug:
    """The Debug row of ONE program (unbatched), from the middle end's passes.

    Sequential equivalent::

        for node in source order:
            if node is a NAME or PARAM with a slot, and its slot has no place yet:
                slot_line[fn, slot], slot_col[fn, slot] = node.line, node.col
            if node is the first definer of a variable: slot_type[fn, slot] = its type
        for each function f with def node d: fn_line[f], fn_col[f] = d.line, d.col

    ``sc``: resolve.Scopes; ``ty``: typecheck.Types (both of this program).
    """
    F, L = limits.max_funcs, limits.max_locals
    n = ast.kind.shape[0]
    idx = jnp.arange(n, dtype=I32)
    live = idx < ast.n_nodes
    root = jnp.maximum(ast.n_nodes - 1, 0)

    # functions: the def node of each (the module body is the root)
    fnode = live & sc.is_fn
    fid = jnp.where(idx == root, 0, sc.fid)
    fslot = jnp.where(fnode & (fid >= 0) & (fid < F), fid, F)
    fn_line = jnp.zeros((F + 1,), I32).at[fslot].set(jnp.where(idx == root, 1, ast.line))[:F]
    fn_col = jnp.full((F + 1,), -1, I32).at[fslot].set(jnp.where(idx == root, -1, ast.col))[:F]

    # slots: the first node in source order that names each (function, slot)
    named = live & ((ast.kind == Node.NAME) | (ast.kind == Node.PARAM)) & (sc.slot >= 0)
    named &= (sc.fn >= 0) & (sc.fn < F) & (sc.slot < L)
    key = jnp.where(named, sc.fn * L + sc.slot, F * L)
    first = jnp.full((F * L + 1,), BIG, I32).at[key].min(sc.preorder)[: F * L]
    node_of_rank = jnp.zeros((n,), I32).at[sc.preorder].set(idx)
    node = node_of_rank[jnp.clip(first, 0, n - 1)]
    found = first != BIG
    slot_line = jnp.where(found, ast.line[node], -1).reshape(F, L)
    slot_col = jnp.where(found, ast.col[node], -1).reshape(F, L)

    # types: at each variable's first definer
    rep = named & (sc.rep == idx)
    tkey = jnp.where(rep, key, F * L)
    slot_type = jnp.zeros((F * L + 1,), I32).at[tkey].set(mask_to_type(ty.var))[: F * L]
    args = ty.err_args if ty.err_args is not None else jnp.zeros((3,), I32)
    return Debug(fn_line, fn_col, slot_line, slot_col, slot_type.reshape(F, L), args,
                 print_items(ast, sc, ty, F))  # fmt: skip


# -- on the host ------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `def` and the name, with any blanks and backslash continuations between them
_DEF = re.compile(DEF_PREFIX + r"([A-Za-z_][A-Za-z0-9_]*)")


def _read(text: str, starts: list[int], line: int, col: int, pattern, group=0) -> str | None:
    """The match of ``pattern`` at (line, col) of ``text`` (may run over lines), or None."""
    if not 1 <= line <= len(starts) or col < 0:
        return None
    m = pattern.match(text, starts[line - 1] + col)
    return m.group(group) if m else None


def from_arrays(debug: Debug, program: isa.Program, source: str | bytes, message: str = "",
                compiled: bool = True) -> DebugInfo:  # fmt: skip
    """The DebugInfo of ONE program from its Debug and Program rows (numpy or jax arrays,
    unbatched) and its source. ``compiled=False``: the module alone (as for an error)."""
    if not compiled:
        args = tuple(int(x) for x in np.asarray(debug.error_args))
        return module_only(source, message, args if any(args) else ())
    text = source_text(source)
    lines = tuple(source_lines(text))
    starts = line_starts(text)
    n_funcs = int(program.n_funcs)
    fl, fc = np.asarray(debug.fn_line), np.asarray(debug.fn_col)
    sl, sc, st = (np.asarray(x) for x in (debug.slot_line, debug.slot_col, debug.slot_type))
    nparams, nlocals = np.asarray(program.fn_nparams), np.asarray(program.fn_nlocals)
    names, fn_lines, local_names, param_types = [], [], [], []
    for f in range(n_funcs):
        name = "<module>" if f == 0 else _read(text, starts, int(fl[f]), int(fc[f]), _DEF, 1)
        names.append(name if name is not None else f"<function {f}>")
        fn_lines.append(int(fl[f]))
        slots = []
        for s in range(min(int(nlocals[f]), sl.shape[1])):
            word = _read(text, starts, int(sl[f, s]), int(sc[f, s]), _IDENT)
            slots.append(TEMP_NAME if int(sl[f, s]) < 0 else (word or f"<slot {s}>"))
        local_names.append(tuple(slots))
        param_types.append(tuple(int(t) for t in st[f, : int(nparams[f])]))
    pt = np.asarray(debug.print_items)
    prints = tuple(tuple(int(t) for t in pt[f] if t >= 0) for f in range(min(n_funcs, len(pt))))
    return DebugInfo(tuple(names), tuple(fn_lines), tuple(local_names), tuple(param_types),
                     lines, message, print_items=prints)  # fmt: skip
