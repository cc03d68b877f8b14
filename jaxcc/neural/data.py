"""Training data for the neural compiler, on the host (numpy and the standard library only).

* ``generate(seed, n, level)``: program sources from ``jaxcc.testing``'s seeded generator,
  with a curriculum of four levels (``LEVELS``); about half of them get random formatting
  (comments, blank lines, spacing, hex/octal/binary/underscore literals, ``;``...).
* ``label(source)``: the reference compiler's bytecode written in the token language of
  ``vocab.py``, in its canonical form (or the reason the program is outside the neural
  path).
* ``assemble_host(tokens, source)``: the inverse, a plain-Python reference assembler that
  follows ``vocab.py`` (independent of ``grammar.py`` / ``assemble.py``, for tests).
* ``make_batch`` / ``iter_batches``: padded numpy training batches, optionally built by a
  ``multiprocessing`` pool; ``statistics(sources)``: reason counts and length percentiles.

Curriculum (``LEVELS[level] = (max_functions, fuel, depth, max_statements)``, the
arguments of ``testing._Gen``; ``fuel`` bounds expression nesting, ``depth`` statement
nesting, ``max_statements`` the statements per block)::

    level 0: (1, 1, 1, 2)   at most one def, flat expressions, one level of if/for/while
    level 1: (2, 2, 1, 3)
    level 2: (2, 2, 2, 3)   nested blocks
    level 3: (3, 3, 2, 4)

always with ``unbound_reads=True`` (a few programs read a variable before assigning it);
``FORMAT_PCT`` = 50% of the programs are rendered by ``testing._Render`` at a messy level
drawn from 1..3, the others by ``ast.unparse``.

Seeds: TRAINING uses seeds in ``TRAIN_SEEDS`` = [0, 2**30) and HELD-OUT evaluation seeds
in ``HELDOUT_SEEDS`` = [2**30, 2**31); ``generate(..., split="train"|"heldout")`` and
``iter_batches`` / ``make_batch`` (training only) check it. Each program's own generator
seed is a hash of (seed, index, level) (``program_seed``), so the two splits draw
different generator streams (tiny programs can still coincide as text: level 0 has few
distinct programs).

Measured on this repository (``python -m jaxcc.neural.data 300 0``: 300 programs per
level from generate seed 0, DEFAULT limits, NeuralLimits(max_src=384, max_out=640))::

    level  ok     reasons (of 300)                 src tokens (a)    out tokens (b)    n_code (a)
                                                   p50 p90 p99  max  p50 p90 p99 max  p50 p90 p99 max
    0      100%   ok 300                            52 108 159  212   78 163 235 308   33  68 105 139
    1      98.7%  ok 296, too_long_source 4        117 226 396  446  161 315 510 618   73 144 251 271
    2      97.0%  ok 291, too_long_source 9        136 282 407  523  194 404 574 647   88 181 256 336
    3      64.7%  ok 194, too_long_source 104,     297 641 967 1017  314 584 775 917  186 411 615 651
                  too_many_literals 2

    (a) over all programs (every generated program compiles); source bytes p50 / p99:
        153 / 547, 334 / 1212, 384 / 1559, 895 / 3134 for levels 0..3.
    (b) over all programs with a sequence, the length bound ignored; over the ok ones
        p50 / p99 / max: 78 / 235 / 308, 161 / 461 / 531, 192 / 526 / 541, 280 / 584 / 619.

``label`` runs at about 290, 160, 120 and 56 programs/s on one core for levels 0..3 (the
reference compiler is ~85% of it; the rest is mostly tokenize). Level 3 loses a third of
its programs to max_src = 384 source tokens.
"""

from __future__ import annotations

import ast
import hashlib
import io
import multiprocessing
import time
import tokenize
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from jaxcc import isa
from jaxcc.isa import ArgKind, Op
from jaxcc.limits import DEFAULT, Limits
from jaxcc.neural import vocab as V
from jaxcc.tokens import KEYWORDS, RESERVED_NAMES, Tok

TRAIN_SEEDS = range(0, 2**30)
HELDOUT_SEEDS = range(2**30, 2**31)
SPLITS = {"train": TRAIN_SEEDS, "heldout": HELDOUT_SEEDS}

# level -> (max_functions, fuel, depth, max_statements) of testing._Gen
LEVELS: dict[int, tuple[int, int, int, int]] = {
    0: (1, 1, 1, 2),
    1: (2, 2, 1, 3),
    2: (2, 2, 2, 3),
    3: (3, 3, 2, 4),
}
FORMAT_PCT = 50  # share of programs given random formatting (messy level 1..3)

# functions per program on the neural path (module body included); must equal
# grammar.MAX_FUNCS (not imported: grammar imports JAX, this module stays host-only)
MAX_FUNCS = 16

# label()'s reasons, in the order its checks run (per-function and per-instruction checks
# run function by function, in code order)
REASONS = (
    "ok",
    "compile_error",  # the reference compiler reports an error
    "too_long_source",  # more than nlimits.max_src tokens (COMMENT / NL not counted)
    "too_many_names",  # a NAME's interned id >= vocab.N_VARS
    "too_many_literals",  # more than vocab.N_LITS NUMBER tokens
    "too_many_lines",  # a token (ENDMARKER included) or an instruction on a line > N_LINES
    "too_many_functions",  # more than MAX_FUNCS functions (module body included)
    "depth",  # fn_maxstack > vocab.MAX_DEPTH, or a PRINT/POP_N argument >= vocab.N_NUMS
    "function_order",  # functions not laid out in id order (never, from the compiler)
    "too_many_params",  # a def with more than vocab.MAX_PARAMS parameters
    "too_many_locals",  # more than limits.max_locals - 1 named slots (grammar keeps 1)
    "cross_function_jump",  # a jump target outside its own function's code (never)
    "too_many_labels",  # more than vocab.N_LABELS jump targets in one function
    "unlabelable_constant",  # a constant other than 0/1 that no NUMBER literal spells
    "too_long_output",  # more than nlimits.max_out output tokens (EOS included)
)


class LabelResult(NamedTuple):
    tokens: np.ndarray | None  # Int32[n]: the sequence WITHOUT BOS, ending in EOS
    reason: str  # "ok" or why the program is outside the neural path (REASONS)


# --------------------------------------------------------------------------- generation


def _hash(*parts) -> int:
    h = hashlib.blake2b("/".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & (2**62 - 1)


def program_seed(seed: int, index: int, level: int) -> int:
    """The generator seed of program ``index`` of ``generate(seed, ..., level)``."""
    return _hash("gen", int(seed), int(index), int(level))


def _check_split(seed: int, split: str | None) -> None:
    if split is None:
        return
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    if int(seed) not in SPLITS[split]:
        rng = SPLITS[split]
        raise ValueError(f"seed {seed} is not a {split} seed (those are [{rng.start}, {rng.stop}))")


def generate_one(pseed: int, level: int) -> str:
    """One program source from a generator seed (``program_seed``) at a curriculum level."""
    from jaxcc import testing

    mf, fuel, depth, stmts = LEVELS[int(level)]
    r = testing._Seeded(pseed)
    mod = testing._Gen(r, mf, fuel, depth, stmts, True).module()
    if r.chance(FORMAT_PCT):
        messy = r.int(1, 3)
        return testing._Render(testing._Seeded(r.int(0, 2**32 - 1)), messy).module(mod)
    return ast.unparse(mod) + "\n"


def generate(seed: int, n: int, level: int, split: str | None = None) -> list[str]:
    """``n`` program sources of curriculum ``level`` (0..3), a pure function of the
    arguments. With ``split`` ("train" / "heldout") the seed must lie in that split's
    range (ValueError otherwise)."""
    _check_split(seed, split)
    if int(level) not in LEVELS:
        raise ValueError(f"level must be one of {sorted(LEVELS)}, not {level}")
    return [generate_one(program_seed(seed, i, level), level) for i in range(int(n))]


# ------------------------------------------------------------------------------ labelling

_ARG_KIND = [int(isa.INFO[Op(o)].arg) for o in range(isa.N_OPS)]
_K_NONE, _K_CONST, _K_SLOT, _K_TARGET, _K_FUNC, _K_DEPTH, _K_COUNT = (
    int(k)
    for k in ArgKind
    if k != ArgKind.SLOT2  # SLOT2: LOAD_VAR2's, never the model's
)
_OP_TOK = [V.op_tok(o) for o in range(V.N_TOKEN_OPS)]


_RESERVED_IDS = {n: i for i, n in enumerate(RESERVED_NAMES)}


class _Lexed(NamedTuple):
    ids: dict  # name text -> interned id
    lits: list  # NUMBER values in token order
    n_src: int  # tokens the model reads (COMMENT / NL not counted, ENDMARKER counted)
    max_id: int  # largest NAME id (-1 if none)
    max_line: int  # largest line of a kept token


def _lex_host(source: str | bytes, limits: Limits) -> _Lexed:
    """_Lexed from ``host_lex`` (the model's view of the source; the reference)."""
    from jaxcc.reference.host_lex import host_lex

    data = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else bytes(source)
    toks, _ = host_lex(data, limits)
    n = int(toks.n_tokens)
    kind = toks.kind[:n].tolist()
    value = toks.value[:n].tolist()
    start = toks.start[:n].tolist()
    end = toks.end[:n].tolist()
    line = toks.line[:n].tolist()
    ids: dict[str, int] = {}
    lits: list[int] = []
    n_src = max_line = 0
    max_id = -1
    for k, v, s, e, ln in zip(kind, value, start, end, line, strict=True):
        if k == Tok.COMMENT or k == Tok.NL:
            continue
        n_src += 1
        max_line = max(max_line, ln)
        if k == Tok.NAME:
            ids[data[s:e].decode("ascii", "replace")] = v
            max_id = max(max_id, v)
        elif k == Tok.NUMBER:
            lits.append(v)
    return _Lexed(ids, lits, n_src, max_id, max_line)


_SKIP = frozenset((tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ERRORTOKEN))


def _lex_fast(source: str | bytes) -> _Lexed:
    """``_lex_host`` for a source the reference compiler accepted (so host_lex found no
    error), from CPython's tokenize directly: a third of host_lex's time. Same tokens:
    host_lex keeps every tokenize token but ENCODING and whitespace ERRORTOKENs (the only
    ERRORTOKENs of a valid program); tests check the two agree."""
    text = source if isinstance(source, str) else bytes(source).decode("ascii", "replace")
    intern: dict[str, int] = dict(_RESERVED_IDS)
    ids: dict[str, int] = {}
    lits: list[int] = []
    n_src = max_line = 0
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        tt = t.type
        if tt in _SKIP:
            continue
        n_src += 1
        ln = t.start[0]
        if ln > max_line:
            max_line = ln
        if tt == tokenize.NAME:
            if t.string not in KEYWORDS:
                ids[t.string] = intern.setdefault(t.string, len(intern))
        elif tt == tokenize.NUMBER:
            v = int(t.string, 0) & 0xFFFFFFFF
            lits.append(v - (1 << 32) if v >= 1 << 31 else v)
    return _Lexed(ids, lits, n_src, max(ids.values(), default=-1), max_line)


class _Info(NamedTuple):
    reason: str
    n_src: int = 0  # source tokens the model reads
    n_code: int = 0  # instructions
    n_out: int = 0  # output tokens (EOS included; also set for too_long_output)


def _label(source, limits: Limits, nlimits: V.NeuralLimits) -> tuple[list | None, _Info]:
    from jaxcc.reference.compiler import TEMP_NAME, compile_source

    c = compile_source(source, limits)
    if int(c.error.code) != 0:
        return None, _Info("compile_error")
    lx = _lex_fast(source)
    p, dbg = c.program, c.debug
    n_code, nf = int(p.n_code), int(p.n_funcs)
    info = _Info("", lx.n_src, n_code)
    if lx.n_src > nlimits.max_src:
        return None, info._replace(reason="too_long_source")
    if lx.max_id >= V.N_VARS:
        return None, info._replace(reason="too_many_names")
    if len(lx.lits) > V.N_LITS:
        return None, info._replace(reason="too_many_literals")
    if lx.max_line > V.N_LINES:
        return None, info._replace(reason="too_many_lines")
    if nf > MAX_FUNCS:
        return None, info._replace(reason="too_many_functions")
    op = p.op[:n_code].tolist()
    arg = p.arg[:n_code].tolist()
    line = p.line[:n_code].tolist()
    entry = p.fn_entry[:nf].tolist() + [n_code]
    nparams = p.fn_nparams[:nf].tolist()
    rettype = p.fn_rettype[:nf].tolist()
    if max(p.fn_maxstack[:nf].tolist()) > V.MAX_DEPTH:
        return None, info._replace(reason="depth")
    if any(entry[f] > entry[f + 1] for f in range(nf)):  # never: code is laid out in order
        return None, info._replace(reason="function_order")
    ids = lx.ids
    fn_tok = [0] + [V.var_tok(ids[nm]) for nm in dbg.fn_names[1:]]
    seq: list[int] = []
    for f in range(1, nf):
        if nparams[f] > V.MAX_PARAMS:
            return None, info._replace(reason="too_many_params")
        seq += [V.DEF, fn_tok[f]]
        seq += [V.var_tok(ids[nm]) for nm in dbg.local_names[f][: nparams[f]]]
        seq.append(V.RET_OF_TYPE[rettype[f]])
    seq.append(V.BODY)
    # constant -> token: 0/1 are SMALL_*, else the first literal with that value
    const_tok = {}
    for i, v in enumerate(lx.lits):
        const_tok.setdefault(v, V.lit_tok(i))
    const_tok[0], const_tok[1] = V.SMALL_0, V.SMALL_1
    for f in range(nf):
        lo, hi = entry[f], entry[f + 1]
        names = dbg.local_names[f]
        if sum(nm != TEMP_NAME for nm in names) > limits.max_locals - 1:
            return None, info._replace(reason="too_many_locals")
        slot_tok = [V.TEMP if nm == TEMP_NAME else V.var_tok(ids[nm]) for nm in names]
        targets = set()
        for i in range(lo, hi):
            if _ARG_KIND[op[i]] == _K_TARGET:
                t = arg[i]
                if not lo <= t < hi:
                    return None, info._replace(reason="cross_function_jump")
                targets.add(t)
        if len(targets) > V.N_LABELS:
            return None, info._replace(reason="too_many_labels")
        labels: dict[int, int] = {}  # instruction index -> label number
        prev_line = None
        for i in range(lo, hi):
            if i in targets:
                j = labels.setdefault(i, len(labels))
                seq += [V.LABEL, V.lab_tok(j)]
            ln = line[i]
            if ln != prev_line:
                if not 1 <= ln <= V.N_LINES:
                    return None, info._replace(reason="too_many_lines")
                seq.append(V.ln_tok(ln))
                prev_line = ln
            o, a = op[i], arg[i]
            seq.append(_OP_TOK[o])
            k = _ARG_KIND[o]
            if k == _K_NONE:
                continue
            if k == _K_CONST:
                t = const_tok.get(a)
                if t is None:
                    return None, info._replace(reason="unlabelable_constant")
                seq.append(t)
            elif k == _K_SLOT:
                seq.append(slot_tok[a])
            elif k == _K_TARGET:
                seq.append(V.lab_tok(labels.setdefault(a, len(labels))))
            elif k == _K_FUNC:
                seq.append(fn_tok[a])
            else:  # DEPTH, COUNT
                if not 0 <= a < V.N_NUMS:
                    return None, info._replace(reason="depth")
                seq.append(V.num_tok(a))
        seq.append(V.END)
    seq.append(V.EOS)
    info = info._replace(n_out=len(seq))
    if len(seq) > nlimits.max_out:
        return None, info._replace(reason="too_long_output")
    return seq, info._replace(reason="ok")


def label(
    source: str | bytes, limits: Limits = DEFAULT, nlimits: V.NeuralLimits = V.NEURAL_DEFAULT
) -> LabelResult:
    """The canonical token sequence (vocab.py) of the reference compiler's bytecode for
    ``source``: ``LabelResult(Int32[n] without BOS ending in EOS, "ok")``, or
    ``LabelResult(None, reason)`` when the program does not compile or is outside the
    neural path's bounds (``REASONS``: the first check that fails).

    The bounds are those of ``inputs.source_features`` (tokens, name ids, literals, lines
    of the tokens it keeps), of ``vocab`` and of ``grammar`` (functions, parameters,
    operand depth, named slots, labels), so a program labelled "ok" is one the neural path
    accepts and one the decoding mask can emit."""
    seq, info = _label(source, limits, nlimits)
    return LabelResult(None if seq is None else np.asarray(seq, np.int32), info.reason)


# ---------------------------------------------------------------------- reference assembler


def _classify(t: int) -> tuple[str, int]:
    """A token's class and index: ("SPECIAL", t), ("OP", o), ("VAR", k), ("LIT", i),
    ("LAB", j), ("N", d), ("LN", line) or ("UNUSED", t)."""
    if t < 0 or t >= V.VOCAB:
        return "UNUSED", t
    if t < V.OP_BASE:
        return ("SPECIAL", t) if t < len(V._SPECIAL) else ("UNUSED", t)
    if t < V.OP_BASE + V.N_MODEL_OPS:  # the model's opcodes (not the optimizer's 42-47)
        return "OP", t - V.OP_BASE
    for base, n, cls in ((V.VAR_BASE, V.N_VARS, "VAR"), (V.LIT_BASE, V.N_LITS, "LIT"),
                         (V.LAB_BASE, V.N_LABELS, "LAB"), (V.NUM_BASE, V.N_NUMS, "N")):  # fmt: skip
        if base <= t < base + n:
            return cls, t - base
    if V.LN_BASE <= t < V.LN_BASE + V.N_LINES:
        return "LN", t - V.LN_BASE + 1
    return "UNUSED", t


def _fn_depths(op, arg, lo: int, hi: int, nparams: list, f: int) -> int:
    """fn_maxstack of the function with code [lo, hi): the exact maximum operand depth over
    the instructions reachable from ``lo`` (before or after each one), as the reference
    compiler's ``max_stack``. ValueError on underflow, an inconsistent depth where paths
    merge, a bad PRINT depth, or control leaving [lo, hi)."""
    depth = {lo: 0}
    work = [lo]
    best = 0
    while work:
        pc = work.pop()
        d = depth[pc]
        o = op[pc]
        a = arg[pc]
        info = isa.INFO[Op(o)]
        if o == Op.CALL:
            pops, after = nparams[a], d - nparams[a] + 1
        elif o == Op.POP_N:
            pops, after = a, d - a
        elif o == Op.FOR_RANGE:
            pops, after = 3, d + 1
        else:
            pops, after = info.pops, d - info.pops + info.pushes
        if d < pops:
            raise ValueError(f"function {f}: operand stack underflow at instruction {pc}")
        if o in (Op.PRINT_INT, Op.PRINT_BOOL) and not 1 <= a <= d:
            raise ValueError(f"function {f}: PRINT depth {a} outside [1, {d}] at {pc}")
        if o == Op.RETURN_VALUE:
            succ = []
        elif o == Op.JUMP:
            succ = [(a, d)]
        elif o in (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE):
            succ = [(pc + 1, d - 1), (a, d - 1)]
        elif o in (Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP):
            succ = [(pc + 1, d - 1), (a, d)]
        elif o == Op.FOR_RANGE:
            succ = [(pc + 1, d + 1), (a, d - 3)]
        else:
            succ = [(pc + 1, after)]
        if o not in (Op.JUMP, Op.RETURN_VALUE):
            best = max(best, after)
        best = max(best, d)
        for nxt, nd in succ:
            if not lo <= nxt < hi:
                raise ValueError(
                    f"function {f}: control leaves the function's code at instruction {pc}"
                )
            if nxt in depth:
                if depth[nxt] != nd:
                    raise ValueError(f"function {f}: inconsistent stack depth at {nxt}")
            else:
                depth[nxt] = nd
                work.append(nxt)
    return best


def assemble_host(tokens, source: str | bytes, limits: Limits = DEFAULT) -> isa.Program:
    """The bytecode a token sequence (vocab.py) stands for: an unbatched numpy int32
    ``isa.Program`` padded to ``limits.max_code`` / ``limits.max_funcs``.

    ``tokens``: the sequence without BOS, ending in EOS (a leading BOS and trailing PAD are
    accepted). Layout: function 0 (the module body) then the decls' functions, in body
    order; ``fn_entry`` is each body's first instruction. Slots of a function: its
    parameters 0..np-1 in decl order, then the other VAR names in order of first
    appearance in its code, then TEMP (if used); ``nlocals`` counts them. ``CALL VAR_f``
    is 1 + the index of the decl named f; ``LIT_i`` the value of the i-th NUMBER token of
    ``source``; a label the next instruction after ``LABEL`` in its function (one defined
    at the end of a body: that body's end index, clipped to n_code - 1); an instruction's
    line the last ``LN`` before it in its function (0 if none); ``fn_maxstack`` the exact
    maximum operand depth over the instructions reachable from the entry.

    Raises ValueError for a sequence that breaks vocab.py's grammar, names an undefined or
    twice-defined label, an undeclared callee, a duplicate decl or parameter name, a
    literal slot the source lacks, exceeds ``limits`` (max_code, max_funcs, max_locals),
    or whose reachable code underflows the operand stack, merges paths at different
    depths, uses a PRINT depth outside the stack, or runs off its function's end.
    """
    toks = [int(t) for t in np.asarray(tokens).reshape(-1).tolist()]
    if toks and toks[0] == V.BOS:
        toks = toks[1:]
    n_tok = len(toks)
    pos = 0

    def peek() -> int:
        return toks[pos] if pos < n_tok else -1

    def take(expect: str) -> tuple[str, int]:
        nonlocal pos
        if pos >= n_tok:
            raise ValueError(f"sequence ends at token {pos} where {expect} was expected")
        t = toks[pos]
        pos += 1
        return _classify(t)

    def bad(expect: str):
        t = toks[pos - 1]
        return ValueError(f"token {pos - 1} ({V.name(t)}): expected {expect}")

    # declarations
    decl_name: list[int] = []
    decl_params: list[list[int]] = []
    decl_ret: list[int] = []
    ret_type = {tok: ty for ty, tok in V.RET_OF_TYPE.items()}
    while peek() == V.DEF:
        pos += 1
        cls, fname = take("a function name VAR_f")
        if cls != "VAR":
            raise bad("a function name VAR_f after DEF")
        if fname in decl_name:
            raise bad(f"a new function name (VAR_{fname} is declared twice)")
        params: list[int] = []
        while True:
            cls, v = take("a parameter VAR_p or RET_*")
            if cls == "VAR":
                if v in params:
                    raise bad(f"a new parameter name (VAR_{v} is repeated)")
                params.append(v)
                if len(params) > V.MAX_PARAMS:
                    raise bad(f"at most {V.MAX_PARAMS} parameters")
            elif cls == "SPECIAL" and v in ret_type:
                break
            else:
                raise bad("a parameter VAR_p or RET_INT / RET_BOOL / RET_NONE")
        decl_name.append(fname)
        decl_params.append(params)
        decl_ret.append(ret_type[v])
    cls, v = take("BODY")
    if (cls, v) != ("SPECIAL", V.BODY):
        raise bad("DEF or BODY")
    n_funcs = 1 + len(decl_name)
    if n_funcs > limits.max_funcs:
        raise ValueError(f"{n_funcs} functions: more than limits.max_funcs={limits.max_funcs}")
    nparams = [0] + [len(p) for p in decl_params]
    fn_of_name = {nm: i + 1 for i, nm in enumerate(decl_name)}
    lits = _lex_host(source, limits).lits

    op: list[int] = []
    arg: list[int] = []
    line: list[int] = []
    entries: list[int] = []
    nlocals: list[int] = []
    fixups: list[tuple[int, int, int]] = []  # (instruction, function, label)
    label_at: list[dict[int, int]] = []
    for f in range(n_funcs):
        lo = len(op)
        entries.append(lo)
        slots = {p: i for i, p in enumerate(decl_params[f - 1])} if f else {}
        temp_used: list[int] = []  # instructions whose argument is TEMP
        labels: dict[int, int] = {}
        cur_line = 0
        while True:
            cls, v = take("a body item or END")
            if cls == "SPECIAL" and v == V.END:
                break
            if cls == "LN":
                cur_line = v
                continue
            if cls == "SPECIAL" and v == V.LABEL:
                cls, j = take("LAB_j after LABEL")
                if cls != "LAB":
                    raise bad("LAB_j after LABEL")
                if j in labels:
                    raise bad(f"a new label (LAB_{j} is defined twice in function {f})")
                labels[j] = len(op)
                continue
            if cls != "OP":
                raise bad("LN_l, LABEL, an OP_* or END")
            o = v
            k = _ARG_KIND[o]
            a = 0
            if k == _K_CONST:
                cls, v = take("a constant")
                if cls == "LIT":
                    if v >= len(lits):
                        raise bad(f"a literal slot < {len(lits)} (the source's NUMBER tokens)")
                    a = lits[v]
                elif cls == "SPECIAL" and v in (V.SMALL_0, V.SMALL_1):
                    a = 0 if v == V.SMALL_0 else 1
                else:
                    raise bad("LIT_i, SMALL_0 or SMALL_1")
            elif k == _K_SLOT:
                cls, v = take("a slot")
                if cls == "VAR":
                    a = slots.setdefault(v, len(slots))
                elif cls == "SPECIAL" and v == V.TEMP:
                    temp_used.append(len(op))
                else:
                    raise bad("VAR_k or TEMP")
            elif k == _K_TARGET:
                cls, v = take("a label")
                if cls != "LAB":
                    raise bad("LAB_j")
                fixups.append((len(op), f, v))
            elif k == _K_FUNC:
                cls, v = take("a function")
                if cls != "VAR" or v not in fn_of_name:
                    raise bad("VAR_f of a declared function")
                a = fn_of_name[v]
            elif k in (_K_DEPTH, _K_COUNT):
                cls, v = take("N_d")
                if cls != "N":
                    raise bad("N_d")
                a = v
            op.append(o)
            arg.append(a)
            line.append(cur_line)
        n_slots = len(slots)
        for i in temp_used:
            arg[i] = n_slots
        nlocals.append(n_slots + bool(temp_used))
        if nlocals[-1] > limits.max_locals:
            raise ValueError(f"function {f}: {nlocals[-1]} slots, over limits.max_locals")
        label_at.append(labels)
    cls, v = take("EOS")
    if (cls, v) != ("SPECIAL", V.EOS):
        raise bad("EOS after the last function body")
    if any(t != V.PAD for t in toks[pos:]):
        raise ValueError(f"tokens after EOS (at {pos}) that are not PAD")
    n_code = len(op)
    if n_code > limits.max_code:
        raise ValueError(f"{n_code} instructions: more than limits.max_code={limits.max_code}")
    ends = entries[1:] + [n_code]
    for i, f, j in fixups:
        if j not in label_at[f]:
            raise ValueError(f"function {f}: LAB_{j} is referenced but never defined")
        arg[i] = min(label_at[f][j], n_code - 1)
    maxstack = []
    for f in range(n_funcs):
        if entries[f] == ends[f]:
            raise ValueError(f"function {f} has no instructions")
        maxstack.append(_fn_depths(op, arg, entries[f], ends[f], nparams, f))

    ni, nfm = limits.max_code, limits.max_funcs
    z = np.zeros
    prog = isa.Program(
        op=z(ni, np.int32), arg=z(ni, np.int32), line=z(ni, np.int32), n_code=np.int32(n_code),
        fn_entry=z(nfm, np.int32), fn_nparams=z(nfm, np.int32), fn_nlocals=z(nfm, np.int32),
        fn_maxstack=z(nfm, np.int32), fn_rettype=z(nfm, np.int32), n_funcs=np.int32(n_funcs),
    )  # fmt: skip
    prog.op[:n_code] = op
    prog.arg[:n_code] = np.array(arg, np.int64).astype(np.int32)
    prog.line[:n_code] = line
    prog.fn_entry[:n_funcs] = entries
    prog.fn_nparams[:n_funcs] = nparams
    prog.fn_nlocals[:n_funcs] = nlocals
    prog.fn_maxstack[:n_funcs] = maxstack
    prog.fn_rettype[:n_funcs] = [isa.T_NONE] + decl_ret
    return prog


# ------------------------------------------------------------------------------ batches


class _Row(NamedTuple):
    data: bytes
    tokens: list
    level: int
    attempts: int


MAX_ATTEMPTS = 1000  # candidates per batch row before giving up (RuntimeError)


def _make_row(seed: int, index: int, row: int, level: int, limits: Limits,
              nlimits: V.NeuralLimits, max_bytes: int) -> _Row:  # fmt: skip
    """Row ``row`` of batch ``index``: the first of its candidate programs (a stream that
    depends only on these arguments) that fits ``max_bytes`` and labels."""
    for k in range(MAX_ATTEMPTS):
        src = generate_one(_hash("row", seed, index, row, k, level), level)
        data = src.encode("utf-8", "surrogateescape")
        if len(data) > max_bytes:
            continue
        seq, _ = _label(data, limits, nlimits)
        if seq is not None:
            return _Row(data, seq, level, k + 1)
    raise RuntimeError(f"no labelable program in {MAX_ATTEMPTS} candidates (level {level})")


def _rows_task(args) -> list[_Row]:
    seed, index, rows, limits, nlimits, max_bytes = args
    return [_make_row(seed, index, r, lv, limits, nlimits, max_bytes) for r, lv in rows]


def _levels(level, batch_size: int) -> list[int]:
    lv = np.broadcast_to(np.asarray(level, np.int64), (batch_size,)).tolist()
    for x in lv:
        if x not in LEVELS:
            raise ValueError(f"level must be one of {sorted(LEVELS)}, not {x}")
    return lv


def _pack(rows: list[_Row], max_bytes: int, nlimits: V.NeuralLimits) -> dict:
    b = len(rows)
    source = np.zeros((b, max_bytes), np.uint8)
    length = np.zeros(b, np.int32)
    target = np.full((b, nlimits.max_out), V.PAD, np.int32)
    tlen = np.zeros(b, np.int32)
    level = np.zeros(b, np.int32)
    for i, r in enumerate(rows):
        source[i, : len(r.data)] = np.frombuffer(r.data, np.uint8)
        length[i] = len(r.data)
        target[i, : len(r.tokens)] = r.tokens
        tlen[i] = len(r.tokens)
        level[i] = r.level
    return {"source": source, "length": length, "target": target, "target_len": tlen,
            "level": level}  # fmt: skip


def _tasks(seed, index, levels, limits, nlimits, max_bytes, n_chunks):
    rows = list(enumerate(levels))
    size = max(1, -(-len(rows) // max(1, n_chunks)))
    return [(seed, index, rows[i : i + size], limits, nlimits, max_bytes)
            for i in range(0, len(rows), size)]  # fmt: skip


def make_batch(
    seed: int,
    index: int,
    batch_size: int,
    level,
    limits: Limits = DEFAULT,
    nlimits: V.NeuralLimits = V.NEURAL_DEFAULT,
    max_source_bytes: int | None = None,
) -> dict:
    """Training batch ``index`` of ``seed`` (a pure function of the arguments; equal to
    ``iter_batches``' batch of that index with the same level). ``level``: an int or one
    level per row. Returns numpy arrays::

        source      UInt8[B, N]   the program's bytes, 0-padded (N = max_source_bytes,
                                  default limits.max_source_bytes)
        length      Int32[B]      bytes
        target      Int32[B, max_out]  the labelled sequence (no BOS, EOS, then PAD = 0)
        target_len  Int32[B]      tokens up to and including EOS
        level       Int32[B]      curriculum level of each row

    A candidate that is longer than N bytes or does not label is replaced by the row's
    next candidate."""
    _check_split(seed, "train")
    mb = limits.max_source_bytes if max_source_bytes is None else int(max_source_bytes)
    task = _tasks(seed, index, _levels(level, batch_size), limits, nlimits, mb, 1)
    rows = [r for t in task for r in _rows_task(t)]
    return _pack(rows, mb, nlimits)


def iter_batches(
    seed: int,
    batch_size: int,
    level_fn: Callable[[int], int | Sequence[int]] | int = 3,
    workers: int = 1,
    limits: Limits = DEFAULT,
    nlimits: V.NeuralLimits = V.NEURAL_DEFAULT,
    max_source_bytes: int | None = None,
    start: int = 0,
    prefetch: int = 2,
    mp_context: str = "spawn",
) -> Iterator[dict]:
    """Training batches ``start, start + 1, ...`` (endless): ``make_batch(seed, i,
    batch_size, level_fn(i), ...)`` for each i. ``level_fn(i)`` gives batch i's level (an
    int, or one per row); an int is a constant level.

    With ``workers > 1`` the rows of each batch are built by a ``multiprocessing`` pool
    (``mp_context``, spawn by default: safe in a process that already runs JAX), in
    ``workers`` chunks per batch with up to ``prefetch`` batches in flight. Results are
    gathered in submission order, and every row depends only on (seed, batch index, row,
    level), so the batches are identical for any ``workers`` and any timing. Close the
    generator (``.close()`` or let it be collected) to stop the pool.
    """
    _check_split(seed, "train")
    mb = limits.max_source_bytes if max_source_bytes is None else int(max_source_bytes)
    lf = (lambda i: level_fn) if isinstance(level_fn, int) else level_fn
    return _batches(seed, batch_size, lf, int(workers), limits, nlimits, mb, int(start),
                    int(prefetch), mp_context)  # fmt: skip


def _batches(seed, batch_size, lf, workers, limits, nlimits, mb, start, prefetch, mp_context):
    def tasks(i: int, n_chunks: int):
        return _tasks(seed, i, _levels(lf(i), batch_size), limits, nlimits, mb, n_chunks)

    i = start
    if workers <= 1:
        while True:
            rows = [r for t in tasks(i, 1) for r in _rows_task(t)]
            yield _pack(rows, mb, nlimits)
            i += 1
    pool = multiprocessing.get_context(mp_context).Pool(workers)
    try:
        pending: deque = deque()
        while True:
            while len(pending) < max(1, prefetch):
                j = i + len(pending)
                pending.append(pool.map_async(_rows_task, tasks(j, workers), chunksize=1))
            chunks = pending.popleft().get()
            yield _pack([r for c in chunks for r in c], mb, nlimits)
            i += 1
    finally:
        pool.terminate()
        pool.join()


# ----------------------------------------------------------------------------- statistics


def _percentiles(xs: list[int]) -> dict:
    if not xs:
        return {}
    a = np.asarray(xs)
    return {f"p{q}": int(np.percentile(a, q, method="nearest")) for q in (50, 90, 99)} | {
        "max": int(a.max())
    }


_UNBOUNDED = V.NeuralLimits(max_src=2**31 - 1, max_out=2**31 - 1)


def statistics(
    sources: Sequence[str | bytes],
    limits: Limits = DEFAULT,
    nlimits: V.NeuralLimits = V.NEURAL_DEFAULT,
) -> dict:
    """Labels each source and summarises::

        n, ok_rate, reasons {reason: count}  (exactly label()'s reasons under nlimits)
        src_tokens, n_code, source_bytes     percentiles over the programs that compile
        out_tokens                           over those whose sequence could be written
                                             (ok or over a length bound), unbounded
        ok_out_tokens                        over the ok ones
        label_per_s                          label() calls per second (this core)

    Percentiles are dicts {p50, p90, p99, max}. Each program is labelled once, without
    the length bounds, and the reason is derived (label's order: source length first,
    output length last)."""
    reasons: Counter = Counter()
    src_t, out_t, ok_out, code, nbytes = [], [], [], [], []
    t0 = time.perf_counter()
    for s in sources:
        seq, info = _label(s, limits, _UNBOUNDED)
        reason = info.reason
        if reason != "compile_error":
            src_t.append(info.n_src)
            code.append(info.n_code)
            nbytes.append(len(s.encode() if isinstance(s, str) else s))
            if info.n_src > nlimits.max_src:
                reason = "too_long_source"
        if seq is not None:
            out_t.append(info.n_out)
            if reason == "ok" and info.n_out > nlimits.max_out:
                reason = "too_long_output"
            if reason == "ok":
                ok_out.append(info.n_out)
        reasons[reason] += 1
    dt = time.perf_counter() - t0
    n = len(sources)
    return {
        "n": n,
        "ok_rate": reasons["ok"] / n if n else 0.0,
        "reasons": dict(reasons.most_common()),
        "src_tokens": _percentiles(src_t),
        "n_code": _percentiles(code),
        "source_bytes": _percentiles(nbytes),
        "out_tokens": _percentiles(out_t),
        "ok_out_tokens": _percentiles(ok_out),
        "label_per_s": n / dt if dt > 0 else 0.0,
    }


def main(argv=None) -> int:
    """``python -m jaxcc.neural.data [N_PER_LEVEL] [SEED]``: statistics per level."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    n = int(argv[0]) if argv else 300
    seed = int(argv[1]) if len(argv) > 1 else 0
    for level in LEVELS:
        st = statistics(generate(seed, n, level))
        print(f"level {level}: ok {st['ok_rate']:.1%} reasons {st['reasons']}")
        for key in ("src_tokens", "out_tokens", "ok_out_tokens", "n_code", "source_bytes"):
            print(f"  {key:12s} {st[key]}")
        print(f"  label/s      {st['label_per_s']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
