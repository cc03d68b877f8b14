"""Disassembler for jaxcc bytecode, modelled on CPython's ``dis``.

``get_instructions(program, debug)`` gives the records (one per instruction, like
``dis.get_instructions``); ``format_dis`` lays them out in CPython's fixed columns; ``dis``
prints that. ``python -m jaxcc.dis FILE`` compiles FILE with the reference compiler and
prints its disassembly (a compile error goes to stderr as CPython would show it, exit 1).

Columns, as CPython 3.11 prints them: the source line (only where a new line starts),
``>>`` on jump targets, the instruction's index in the program, the opname, the argument
and, in parentheses, what it means (a variable's name, ``to N`` for a jump, a function's
name). One section per function, the module body first.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np

from jaxcc import isa
from jaxcc.isa import INFO, ArgKind, Op

_OPNAME_WIDTH = 20  # CPython's dis._OPNAME_WIDTH
_OPARG_WIDTH = 5  # CPython's dis._OPARG_WIDTH
_RETTYPE = {isa.T_INT: "int", isa.T_BOOL: "bool", isa.T_NONE: "None"}


class Instruction(NamedTuple):
    """One instruction (cf. dis.Instruction)."""

    fn: int  # the function it belongs to
    offset: int  # its index in the program (jump targets are such indices)
    opcode: int
    opname: str  # 'UNKNOWN_<n>' for a number that is not an Op
    arg: int | None  # None for ArgKind.NONE opcodes
    argval: object  # the resolved argument: a name, a jump target, a function id, ...
    argrepr: str  # what dis shows in parentheses ('' for nothing)
    line: int  # its source line
    starts_line: int | None  # the line, where it differs from the previous instruction's
    is_jump_target: bool


class Function(NamedTuple):
    id: int
    name: str
    entry: int
    end: int  # one past its last instruction (the next function's entry, or n_code)
    nparams: int
    nlocals: int
    maxstack: int
    rettype: int


def _np(x) -> np.ndarray:
    return np.asarray(x).reshape(-1) if np.ndim(x) else np.asarray(x)


def _names(debug, attr: str, default):
    """A field of the DebugInfo (jaxcc.debuginfo), or ``default`` without one."""
    return default if debug is None else getattr(debug, attr)


def functions(program: isa.Program, debug=None) -> list[Function]:
    """The function table, with each function's instruction range (unbatched program)."""
    n_code = int(program.n_code)
    n_funcs = int(program.n_funcs)
    entry = _np(program.fn_entry)[:n_funcs].tolist()
    names = list(_names(debug, "fn_names", ()))
    starts = sorted(set(entry) | {n_code})
    out = []
    for f in range(n_funcs):
        e = int(entry[f])
        later = [s for s in starts if s > e]
        end = later[0] if later else n_code
        name = names[f] if f < len(names) else ("<module>" if f == 0 else f"<function {f}>")
        out.append(
            Function(
                f, name, e, end,
                int(_np(program.fn_nparams)[f]), int(_np(program.fn_nlocals)[f]),
                int(_np(program.fn_maxstack)[f]), int(_np(program.fn_rettype)[f]),
            )
        )  # fmt: skip
    return out


def _argrepr(kind: ArgKind, a: int, fn: int, debug, fn_names: list[str]) -> tuple[object, str]:
    if kind == ArgKind.SLOT:
        locs = _names(debug, "local_names", ())
        names = locs[fn] if 0 <= fn < len(locs) else ()
        if 0 <= a < len(names):
            return names[a], str(names[a])
        return a, ""
    if kind == ArgKind.SLOT2:  # LOAD_VAR2: two slots, a | (b << 16); both names
        pair = [_argrepr(ArgKind.SLOT, s, fn, debug, fn_names) for s in isa.unpack_slots(a)]
        return tuple(v for v, _ in pair), ", ".join(r or str(v) for v, r in pair)
    if kind == ArgKind.TARGET:
        return a, f"to {a}"
    if kind == ArgKind.FUNC:
        if 0 <= a < len(fn_names):
            return a, fn_names[a]
        return a, ""
    return a, ""


def get_instructions(program: isa.Program, debug=None) -> list[Instruction]:
    """Every instruction of one (unbatched) program, function by function."""
    op = _np(program.op).tolist()
    arg = _np(program.arg).tolist()
    line = _np(program.line).tolist()
    n_code = min(int(program.n_code), len(op))
    fns = functions(program, debug)
    fn_names = [f.name for f in fns]
    targets = set()
    for pc in range(n_code):
        if op[pc] in Op._value2member_map_ and INFO[Op(op[pc])].jumps:
            targets.add(arg[pc])
    owner = [0] * n_code
    for f in fns:
        for pc in range(max(f.entry, 0), min(f.end, n_code)):
            owner[pc] = f.id
    out = []
    prev_line = None
    prev_fn = None
    for pc in range(n_code):
        o = op[pc]
        f = owner[pc]
        if prev_fn != f:
            prev_line = None
            prev_fn = f
        if o in Op._value2member_map_:
            name = Op(o).name
            kind = INFO[Op(o)].arg
        else:
            name, kind = f"UNKNOWN_{o}", ArgKind.CONST
        a = None if kind == ArgKind.NONE else arg[pc]
        argval, argrepr = (None, "") if a is None else _argrepr(kind, a, f, debug, fn_names)
        starts = line[pc] if line[pc] != prev_line else None
        prev_line = line[pc]
        out.append(Instruction(f, pc, o, name, a, argval, argrepr, line[pc], starts, pc in targets))
    return out


def format_instruction(ins: Instruction, lineno_width: int = 3, offset_width: int = 4) -> str:
    """One line in CPython's columns (dis.Instruction._disassemble)."""
    fields = []
    if lineno_width:
        if ins.starts_line is not None:
            fields.append(f"{ins.starts_line:>{lineno_width}d}")
        else:
            fields.append(" " * lineno_width)
    fields.append("   ")
    fields.append(">>" if ins.is_jump_target else "  ")
    fields.append(repr(ins.offset).rjust(offset_width))
    fields.append(ins.opname.ljust(_OPNAME_WIDTH))
    if ins.arg is not None:
        fields.append(repr(ins.arg).rjust(_OPARG_WIDTH))
        if ins.argrepr:
            fields.append("(" + ins.argrepr + ")")
    return " ".join(fields).rstrip()


def format_dis(program: isa.Program, debug=None) -> str:
    """The disassembly of one (unbatched) program as text."""
    ins = get_instructions(program, debug)
    fns = functions(program, debug)
    lines_max = max([i.line for i in ins] + [1])
    lw = max(3, len(str(lines_max)))
    ow = max(4, len(str(int(program.n_code))))
    by_fn: dict[int, list[Instruction]] = {}
    for i in ins:
        by_fn.setdefault(i.fn, []).append(i)
    out: list[str] = []
    for f in fns:
        if out:
            out.append("")
        out.append(
            f"Disassembly of {f.name} (function {f.id}: {f.nparams} params, {f.nlocals} locals, "
            f"maxstack {f.maxstack}, returns {_RETTYPE.get(f.rettype, f.rettype)}):"
        )
        for k, i in enumerate(by_fn.get(f.id, [])):
            if i.starts_line is not None and k > 0:
                out.append("")
            out.append(format_instruction(i, lw, ow))
    return "\n".join(out) + "\n"


def dis(x, debug=None, file=None) -> None:
    """Print the disassembly of a Program (unbatched) or of source text (compiled with the
    reference compiler; a compile error raises SyntaxError-like ValueError with its text).
    Prints to ``file`` (default sys.stdout) and returns None, as dis.dis does."""
    if isinstance(x, str | bytes):
        from jaxcc.reference.compiler import compile_source

        c = compile_source(x)
        if int(c.error.code) != 0:
            raise ValueError(_error_text(c, x, "<string>").rstrip())
        x, debug = c.program, c.debug
    (file or sys.stdout).write(format_dis(x, debug))


def _error_text(c, source, filename: str) -> str:
    from jaxcc import format as fmt

    return fmt.format_error(c.error, source, filename, c.debug)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.stderr.write("usage: python -m jaxcc.dis FILE\n")
        return 2
    from jaxcc.limits import CLI
    from jaxcc.reference.compiler import compile_source

    path = argv[0]
    try:
        with open(path, "rb") as fh:
            source = fh.read()
    except OSError as e:
        sys.stderr.write(f"jaxcc.dis: can't open file {path!r}: [Errno {e.errno}] {e.strerror}\n")
        return 1
    c = compile_source(source, CLI)
    if int(c.error.code) != 0:
        sys.stderr.write(_error_text(c, source, path))
        return 1
    sys.stdout.write(format_dis(c.program, c.debug))
    return 0


if __name__ == "__main__":
    sys.exit(main())
