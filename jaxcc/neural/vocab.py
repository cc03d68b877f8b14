"""The neural compiler's output language: bytecode as a token sequence.

This module is the contract between the labeller (``corpus.py``: deterministic bytecode to
tokens), the decoding mask (``grammar.py``: which token may come next), the assembler
(``assemble.py``: tokens to ``isa.Program`` arrays) and the model (``model.py``). It
defines no behaviour of its own beyond the numbering.

The model never spells a name or a number. It refers to

* variables and functions by their **interned name id** (the lexer's ``Tokens.value`` of a
  NAME token; ``print abs min max range int bool`` are 0..6, user names 7, 8, ... in order
  of first occurrence): ``VAR_k``. The assembler gives each function's locals slots
  (parameters first, then the other names in order of first appearance in that function's
  code, then the hidden comparison temporary ``TEMP``); a CALL names its callee ``VAR_f``,
  resolved through the declarations;
* integer constants by **literal slot**: ``LIT_i`` is the value of the i-th NUMBER token of
  the source (COMMENT and NL tokens skipped), or ``SMALL_0`` / ``SMALL_1`` for the
  constants the compiler makes itself (``True``, ``False``, ``None``, ``range``'s default
  start and step, the implicit ``return``);
* jump targets by **label**: ``LABEL LAB_j`` marks the next instruction; labels are
  numbered per function from 0 in order of first appearance (a reference or the
  definition), so a forward jump needs no instruction count;
* source lines by ``LN_l`` (the line of the instructions that follow), so run-time errors
  keep their line.

Grammar of one sequence (the decoder's first input is BOS; the model emits the rest)::

    seq    := decl* BODY fbody{1 + number of decls} EOS
    decl   := DEF VAR_f VAR_p* RET          # one per def, in source order: function ids 1, 2, ..
    RET    := RET_INT | RET_BOOL | RET_NONE
    fbody  := item* END                     # function 0 (the module body) first, then 1, 2, ..
    item   := LN_l                          # line of the following instructions
            | LABEL LAB_j                   # label j of this function = the next instruction
            | OP_o arg?                     # arg present iff isa.INFO[o].arg != NONE:
                                            #   CONST  -> LIT_i | SMALL_0 | SMALL_1
                                            #   SLOT   -> VAR_k | TEMP
                                            #   TARGET -> LAB_j
                                            #   FUNC   -> VAR_f (a declared function's name)
                                            #   DEPTH, COUNT -> N_d

The labeller's canonical form (what training data looks like; the mask accepts more):
labels and lines are written before the op they precede, labels first; a line is written
at the start of each function body and whenever an instruction's line differs from the
previous instruction's; a constant 0 or 1 is always ``SMALL_0``/``SMALL_1``; any other
constant is the first literal of the source with that value.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxcc import isa

PAD, BOS, EOS, DEF, BODY, END, LABEL, RET_INT, RET_BOOL, RET_NONE, TEMP, SMALL_0, SMALL_1 = range(
    13
)
RET_OF_TYPE = {isa.T_INT: RET_INT, isa.T_BOOL: RET_BOOL, isa.T_NONE: RET_NONE}

# Bounds of the neural path (a program over any of them is not compiled by the model;
# the hybrid sends it to the deterministic compiler).
N_VARS = 64  # interned name ids 0..63 (reserved names included)
N_LITS = 128  # NUMBER tokens per source (64 up to stage 5)
N_LABELS = 64  # labels per function
N_NUMS = 32  # DEPTH / COUNT arguments 0..31
N_LINES = 128  # source lines 1..128
MAX_PARAMS = 8  # parameters per function
MAX_DEPTH = 31  # operand-stack depth the mask allows

OP_BASE = 16
# The opcodes the model was trained on (frozen with the shipped weights): the six
# compare-and-branch opcodes appended after them (42-47, only the optimizer emits them)
# take token ids OP_BASE + 42 .. 63, which were unused, and the grammar never allows them.
N_MODEL_OPS = 42
VAR_BASE = OP_BASE + N_MODEL_OPS + 6  # 64
# The opcodes that have a token id (the model's and the six compare-and-branch ones);
# LOAD_VAR2 (48, the optimizer's superinstruction) and any later one have none.
N_TOKEN_OPS = VAR_BASE - OP_BASE  # 48
assert N_TOKEN_OPS <= isa.N_OPS
LIT_BASE = VAR_BASE + N_VARS
LAB_BASE = LIT_BASE + N_LITS
NUM_BASE = LAB_BASE + N_LABELS
LN_BASE = NUM_BASE + N_NUMS
VOCAB = LN_BASE + N_LINES
assert VAR_BASE == 64 and VOCAB == 480


def op_tok(op: int) -> int:
    return OP_BASE + int(op)


def var_tok(name_id: int) -> int:
    return VAR_BASE + int(name_id)


def lit_tok(i: int) -> int:
    return LIT_BASE + int(i)


def lab_tok(j: int) -> int:
    return LAB_BASE + int(j)


def num_tok(d: int) -> int:
    return NUM_BASE + int(d)


def ln_tok(line: int) -> int:
    return LN_BASE + int(line) - 1


_SPECIAL = ("PAD", "BOS", "EOS", "DEF", "BODY", "END", "LABEL", "RET_INT", "RET_BOOL",
            "RET_NONE", "TEMP", "SMALL_0", "SMALL_1")  # fmt: skip


def name(tok: int) -> str:
    """A token's name, for debugging and docs (``OP_ADD``, ``VAR_9``, ``LIT_0``, ...)."""
    t = int(tok)
    if t < len(_SPECIAL):
        return _SPECIAL[t]
    if OP_BASE <= t < OP_BASE + N_TOKEN_OPS:
        return "OP_" + isa.Op(t - OP_BASE).name
    for base, n, pre in ((VAR_BASE, N_VARS, "VAR_"), (LIT_BASE, N_LITS, "LIT_"),
                         (LAB_BASE, N_LABELS, "LAB_"), (NUM_BASE, N_NUMS, "N_")):  # fmt: skip
        if base <= t < base + n:
            return f"{pre}{t - base}"
    if LN_BASE <= t < LN_BASE + N_LINES:
        return f"LN_{t - LN_BASE + 1}"
    return f"<unused {t}>"


class NeuralLimits(NamedTuple):
    """Static sizes of the neural path's arrays (hashable: a static jit argument)."""

    max_src: int = 384  # source tokens after dropping COMMENT / NL / PAD
    max_out: int = 640  # output tokens (BOS not counted)


NEURAL_DEFAULT = NeuralLimits()
