"""The decoding state machine: which token may come next, so every sample is well formed.

``init(ctx)`` is the state before the first emitted token, ``allowed(state, ctx)`` the
mask over the vocabulary (``Bool[VOCAB]``), ``step(state, tok, ctx)`` the state after
``tok``. All three are pure functions of one sequence's arrays (vmap them for a batch);
the sampler masks logits with ``allowed`` and the assembler (``assemble.py``) runs
``step`` over a finished sequence to lay out the bytecode, so the two cannot disagree.

What the mask guarantees for every sequence it lets through (a test samples thousands
from an untrained model and runs them in the VM):

* the grammar of ``vocab.py``; every function body ends with an unconditional transfer
  (RETURN_VALUE or JUMP) and every label it references is defined in it;
* operands in range: constants are literals of this source or 0/1, slots are bounded by
  ``max_locals`` (one slot kept for the comparison temporary), calls name a declared
  function, PRINT depths and POP_N counts are within the operand stack, jump targets are
  labels of the same function;
* the operand stack, on every instruction reachable from the function's entry, never
  underflows, never exceeds ``vocab.MAX_DEPTH``, and has the same depth on every path
  into a label (``lab_depth``). Code after an unconditional transfer is *dead* until a
  label that a reachable jump references; dead code is unconstrained (it never runs)
  but a reachable jump may not target a label defined in dead code;
* where the front end's print items are given (``Context.print_items``, from
  ``debuginfo.Debug.print_items``): the j-th PRINT_* instruction of function f is what
  f's j-th item says: PRINT_BOOL for a value typed bool, PRINT_INT for any other value,
  PRINT_NEWLINE for the end of a print call, none after the last item (the typed mask;
  the sampler gives an allowed value print the probability of both, ``fold_prints``);
  a value print's depth is the number of its call's values from it on, and the
  PRINT_NEWLINE of a call with m values is followed at once by ``POP_N m``, as the
  code generator writes them (in reachable code); and a ``def``'s declared return type
  is the front end's (``Context.ret_types``, where given);
* loops nest: while a FOR_RANGE's exit label is pending, no label first named before
  it may be defined (except by the closing rule below);
* (typed mask: the code generator's templates, in reachable code; docs/neural.md
  section 3) a label that ends a statement (a loop's exit, an if's or while's jump past
  its body, an if's jump past its elif and else parts) keeps the line markers inside
  that statement's lines while it is pending (``Src.block_end``, ``Src.stmt_end``, from
  the source's layout); only lines with code are marked (``Src.code_lines``); between
  statements lines go forward or back to the header of a statement around the point;
  return, assert and an expression statement's pop take a value above the statement
  depth (three values per open for loop), the pop only on the lines of an expression
  statement (``Src.expr_lines``), and a store just above it names a variable
  (never the temporary); inside ``and`` / ``or`` the right operand never consumes the left's value
  and no statement-only op is written; conditional jumps go forward; a header's
  JUMP_IF_FALSE or FOR_RANGE names a new label or one whose statement ends with its own;
  a return or an assert takes one value above the depth where the last new line was
  marked; a body's implicit return comes once its last statement's line is marked
  (``Src.body_last``); the constant -2147483648 is not negated again unless the source
  does so (``Src.lit_min``);
* the sequence ends (EOS) within ``max_out`` tokens and ``max_code`` instructions: when
  the remaining budget only just covers the shortest way to finish (``_closing_cost``),
  the mask allows only the tokens of that way (return from the current function,
  define its pending labels, end the remaining functions with ``return 0``).

The plain-Python meaning of one step, for a body token::

    if tok is OP_o:  check o's pops against depth; depth = depth - pops + pushes
    if tok is LABEL LAB_j: if j was referenced, the depth must equal the recorded one
    if tok is JUMP-like arg LAB_j: record (or check) the depth at the target
    if tok ends the function: no pending labels, and the current point is dead
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxcc import isa
from jaxcc.debuginfo import ITEM_NEWLINE, MAX_PRINTS
from jaxcc.isa import ArgKind, Op
from jaxcc.neural import vocab as V

MAX_FUNCS = 16  # functions per program on the neural path (the module body included)
MAX_DECLS = MAX_FUNCS - 1

# phases
DECLS, DECL_NAME, DECL_PARAMS, BODY, ARG, LABEL_ARG, FINAL, DONE = range(8)
# label states
L_UNUSED, L_PENDING, L_DEFINED = 0, 1, 2
# margins of the closing rule (tokens, instructions): one instruction (op and argument,
# 2 tokens) raises the closing cost by at most 7 tokens (a jump to a new label: +5; the
# stack emptied, so returning needs a LOAD_CONST first: +2) and 3 instructions
_TOK_MARGIN, _INS_MARGIN = 12, 6

_TAB = isa.decode_tables()
_ARG_KIND = np.append(_TAB["arg_kind"], 0).astype(np.int32)  # index N_OPS: "no op"
_POPS = np.append(_TAB["pops"], 0).astype(np.int32)
_PUSHES = np.append(_TAB["pushes"], 0).astype(np.int32)
_IS_JUMP = np.append(_TAB["jumps"], False)
_OPS = np.arange(isa.N_OPS)
# depth at a jump's target relative to the depth before the instruction
_TARGET_DELTA = np.zeros(isa.N_OPS + 1, np.int32)
_TARGET_DELTA[[Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE]] = -1
_TARGET_DELTA[Op.FOR_RANGE] = -3
# fall-through depth change (JUMP and RETURN_VALUE make the point dead instead)
_FALL_DELTA = _PUSHES - _POPS
_FALL_DELTA[[Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP]] = -1
_FALL_DELTA[Op.FOR_RANGE] = 1
_FALL_DELTA[[Op.PRINT_INT, Op.PRINT_BOOL]] = 0
_ENDS = np.zeros(isa.N_OPS + 1, bool)
_ENDS[[Op.JUMP, Op.RETURN_VALUE]] = True
_NEEDS = _POPS.copy()  # operands an op needs before it runs (CALL, POP_N: see the arg)
_NEEDS[[Op.PRINT_INT, Op.PRINT_BOOL]] = 1
_NEEDS[[Op.CALL, Op.POP_N]] = 0
_PUSH_MAX = np.maximum(_FALL_DELTA, 0)  # how far above the current depth an op can go
_ALLOWED_OPS = np.ones(isa.N_OPS, bool)
_ALLOWED_OPS[Op.NOP] = False  # never emitted by the compiler; nothing to learn from it
_ALLOWED_OPS[V.N_MODEL_OPS :] = False  # compare-and-branch: the optimizer's, not the model's
# the structure rules of the typed mask (the code generator's templates, module docstring)
_OR_POP = np.zeros(isa.N_OPS + 1, bool)  # `and` / `or`: jumps inside an expression
_OR_POP[[Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP]] = True
_STMT_ONLY = np.zeros(isa.N_OPS + 1, bool)  # ops a statement's code has, never an expression's
_STMT_ONLY[[Op.POP_TOP, Op.RETURN_VALUE, Op.ASSERT, Op.PRINT_INT, Op.PRINT_BOOL,
            Op.PRINT_NEWLINE, Op.POP_N, Op.FOR_RANGE]] = True  # fmt: skip
_AT_STATEMENT = np.zeros(isa.N_OPS + 1, bool)  # ops that consume a statement's one value
_AT_STATEMENT[[Op.POP_TOP, Op.RETURN_VALUE, Op.ASSERT]] = True


class Context(NamedTuple):
    """What the mask needs to know of the source and the limits (one sequence)."""

    n_lits: object  # Int32[]  NUMBER tokens of the source (LIT_i valid for i < n_lits)
    n_lines: object  # Int32[]  last source line (LN_l valid for 1 <= l <= n_lines)
    max_out: object  # Int32[]  output tokens allowed (EOS included)
    max_code: object  # Int32[]  instructions allowed
    max_locals: object  # Int32[]  slots per function
    max_funcs: object  # Int32[]  functions (module body included), <= MAX_FUNCS
    print_items: object  # Int32[MAX_FUNCS, MAX_PRINTS]  Debug.print_items (-1: unknown)
    block_end: object  # Int32[N_LINES + 1]  Src.block_end (typed mask only; zeros: unknown)
    ret_types: object  # Int32[MAX_DECLS]  each def's return type, isa.T_* (-1: unknown)
    code_lines: object  # Int32[N_LINES + 1]  Src.code_lines (typed mask only; ones: unknown)
    stmt_end: object  # Int32[N_LINES + 1]  Src.stmt_end (typed mask only; zeros: unknown)
    multi_lines: object  # Int32[N_LINES + 1]  Src.multi_lines (typed mask only)
    cond_lines: object  # Int32[N_LINES + 1]  Src.cond_lines (typed mask only)
    expr_lines: object  # Int32[N_LINES + 1]  Src.expr_lines (typed mask only; ones: unknown)
    body_last: object  # Int32[N_LINES + 1]  Src.body_last (typed mask only; zeros: unknown)
    lit_min: object  # Int32[N_LITS]  Src.lit_min (typed mask only; zeros: unknown)


class State(NamedTuple):
    """One sequence's decoding state (scalars Int32[] unless shown)."""

    phase: object
    pos: object  # tokens emitted so far
    n_decl: object
    decl_name: object  # Int32[MAX_DECLS] name id of each declared function (-1 unused)
    decl_np: object  # Int32[MAX_DECLS]
    decl_ret: object  # Int32[MAX_DECLS] isa.T_*
    decl_params: object  # Int32[MAX_DECLS, MAX_PARAMS] parameter name ids (-1 unused)
    fn: object  # body being emitted (0 = module)
    entry: object  # first instruction of the current body
    n_instr: object  # instructions emitted so far (all functions)
    cur_op: object  # the op waiting for its argument (N_OPS when none)
    depth: object  # operand-stack depth at this point (nominal when dead)
    dead: object  # Bool[]: the point is unreachable
    max_depth: object  # max depth over reachable instructions of the current body
    lab_state: object  # Int32[N_LABELS] L_UNUSED / L_PENDING / L_DEFINED
    lab_depth: object  # Int32[N_LABELS] depth at the label (-1: only dead code knows it)
    n_lab: object  # labels used in this body (the next new one)
    slot_of: object  # Int32[N_VARS] slot of each name in this body (-1: none yet)
    n_slots: object  # parameters + named locals of this body
    uses_temp: object  # Bool[]
    line: object  # line of the next instruction (0 before the first LN)
    n_print: object  # PRINT_INT / PRINT_BOOL / PRINT_NEWLINE instructions of this body so far
    lab_for: object  # Bool[N_LABELS]  a FOR_RANGE names the label (a loop's exit)
    pop_due: object  # values of the print call whose PRINT_NEWLINE came last (-1: none)
    lab_lo: object  # Int32[N_LABELS]  the statement a label ends: its first line
    lab_hi: object  # Int32[N_LABELS]  ... and its last line with code (0: not known)
    lab_orpop: object  # Bool[N_LABELS]  a JUMP_IF_*_OR_POP names the label (`and`, `or`)
    max_line: object  # the largest line marked in this body so far
    fresh: object  # Bool[]  a line marker since the last instruction
    back: object  # Bool[]  that marker went back to a header between statements
    last_op: object  # the last instruction's op (N_OPS: none yet in this body)
    ln_depth: object  # the depth where the last line marker to a new line was written
    stmt_from: object  # the line after the last one marked before this statement's first
    last_lit: object  # the literal slot the last instruction loaded (-1: none)


def context(n_lits, n_lines, max_out, max_code, max_locals, max_funcs, print_items=None,
            block_end=None, ret_types=None, code_lines=None, stmt_end=None, multi_lines=None,
            cond_lines=None, expr_lines=None, body_last=None, lit_min=None) -> Context:  # fmt: skip
    """The Context of one sequence, or of a batch when the scalars have a leading axis
    (``print_items``: Int32[..., PF, PP] from ``Debug.print_items``, cut or padded with -1 to
    [MAX_FUNCS, MAX_PRINTS]; None: no typed mask. ``block_end``, ``stmt_end``, ``code_lines``,
    ``multi_lines``, ``cond_lines``, ``expr_lines``, ``body_last``: Int32[..., N_LINES + 1],
    and ``lit_min``: Int32[..., N_LITS], from ``Src``, used only with
    print items. ``ret_types``:
    Int32[..., D], the front end's return type of each ``def`` in source order, isa.T_*,
    cut or padded with -1 to MAX_DECLS; None: not known)."""
    i = lambda x: jnp.asarray(x, jnp.int32)  # noqa: E731
    lead = jnp.shape(n_lits)

    def lines(x, fill):
        if print_items is None or x is None:
            return jnp.full((*lead, V.N_LINES + 1), fill, jnp.int32)
        return i(x)

    be, se, cl = lines(block_end, 0), lines(stmt_end, 0), lines(code_lines, 1)
    ml, cd, ex = lines(multi_lines, 0), lines(cond_lines, 0), lines(expr_lines, 1)
    bl = lines(body_last, 0)
    if print_items is None or lit_min is None:
        lm = jnp.zeros((*lead, V.N_LITS), jnp.int32)
    else:
        lm = i(lit_min)
    if ret_types is None:
        rt = jnp.full((*lead, MAX_DECLS), -1, jnp.int32)
    else:
        rt = i(ret_types)[..., :MAX_DECLS]
        pad = [(0, 0)] * (rt.ndim - 1) + [(0, MAX_DECLS - rt.shape[-1])]
        rt = jnp.pad(rt, pad, constant_values=-1)
    if print_items is None:
        pt = jnp.full((*lead, MAX_FUNCS, MAX_PRINTS), -1, jnp.int32)
    else:
        pt = i(print_items)[..., :MAX_FUNCS, :MAX_PRINTS]
        pad = [(0, 0)] * (pt.ndim - 2) + [
            (0, MAX_FUNCS - pt.shape[-2]),
            (0, MAX_PRINTS - pt.shape[-1]),
        ]
        pt = jnp.pad(pt, pad, constant_values=-1)
    return Context(i(n_lits), i(n_lines), i(max_out), i(max_code), i(max_locals),
                   jnp.minimum(i(max_funcs), MAX_FUNCS), pt, be, rt, cl, se, ml, cd, ex, bl, lm)  # fmt: skip


# Context fields that are not scalars
_TRAILING = {"print_items": 2, "ret_types": 1}
_TRAILING.update(
    dict.fromkeys(
        (
            "block_end",
            "code_lines",
            "stmt_end",
            "multi_lines",
            "cond_lines",
            "expr_lines",
            "body_last",
            "lit_min",
        ),
        1,
    )
)


def broadcast(c: Context, b: int) -> Context:
    """A Context for b sequences: each field given a leading axis b (broadcast)."""
    return Context(*(jnp.broadcast_to(x, (b,) + x.shape[x.ndim - _TRAILING.get(f, 0):])
                     for f, x in zip(Context._fields, c, strict=True)))  # fmt: skip


def init() -> State:
    z = jnp.int32(0)
    return State(
        phase=jnp.int32(DECLS), pos=z, n_decl=z,
        decl_name=jnp.full(MAX_DECLS, -1, jnp.int32), decl_np=jnp.zeros(MAX_DECLS, jnp.int32),
        decl_ret=jnp.zeros(MAX_DECLS, jnp.int32),
        decl_params=jnp.full((MAX_DECLS, V.MAX_PARAMS), -1, jnp.int32),
        fn=z, entry=z, n_instr=z, cur_op=jnp.int32(isa.N_OPS), depth=z, dead=jnp.bool_(False),
        max_depth=z, lab_state=jnp.zeros(V.N_LABELS, jnp.int32),
        lab_depth=jnp.full(V.N_LABELS, -1, jnp.int32), n_lab=z,
        slot_of=jnp.full(V.N_VARS, -1, jnp.int32), n_slots=z, uses_temp=jnp.bool_(False),
        line=z, n_print=z, lab_for=jnp.zeros(V.N_LABELS, bool), pop_due=jnp.int32(-1),
        lab_lo=jnp.zeros(V.N_LABELS, jnp.int32), lab_hi=jnp.zeros(V.N_LABELS, jnp.int32),
        lab_orpop=jnp.zeros(V.N_LABELS, bool), max_line=jnp.int32(0),
        fresh=jnp.bool_(False), back=jnp.bool_(False),
        last_op=jnp.int32(isa.N_OPS), ln_depth=z, stmt_from=z, last_lit=jnp.int32(-1),
    )  # fmt: skip


def _closing_cost(s: State):
    """(tokens, instructions) of the shortest way to finish from a BODY-phase point."""
    pending = jnp.sum(s.lab_state == L_PENDING)
    here_t = jnp.where(s.dead, 0, jnp.where(s.depth >= 1, 1, 3))
    here_i = jnp.where(s.dead, 0, jnp.where(s.depth >= 1, 1, 2))
    rest = s.n_decl - s.fn  # bodies after this one
    toks = here_t + 5 * pending + 1 + 4 * rest + 1
    ins = here_i + 2 * pending + 2 * rest
    return toks, ins


def _decl_cost(s: State):
    finish = jnp.where(s.phase == DECL_NAME, 2, jnp.where(s.phase == DECL_PARAMS, 1, 0))
    return finish + 1 + 4 * (s.n_decl + 1) + 1, 2 * (s.n_decl + 1)


def _must_close(s: State, c: Context):
    in_decls = s.phase <= DECL_PARAMS
    bt, bi = _closing_cost(s)
    dt, di = _decl_cost(s)
    toks = jnp.where(in_decls, dt, bt)
    ins = jnp.where(in_decls, di, bi)
    return (c.max_out - s.pos < toks + _TOK_MARGIN) | (c.max_code - s.n_instr < ins + _INS_MARGIN)


def _label_ok(s: State, target_depth):
    """Bool[N_LABELS]: labels a jump with this target depth may name."""
    td = jnp.asarray(target_depth)[..., None]
    shape = (*td.shape[:-1], V.N_LABELS)
    b = lambda x: jnp.broadcast_to(x, shape)  # noqa: E731
    td = b(td)
    j = b(jnp.arange(V.N_LABELS))
    new = (j == s.n_lab) & (s.n_lab < V.N_LABELS)
    used = b(s.lab_state != L_UNUSED)
    lab_depth = b(s.lab_depth)
    match = (lab_depth == td) | ((lab_depth < 0) & b(s.lab_state == L_PENDING))
    reach_ok = new | (used & match)
    dead_ok = new | used
    return jnp.where(s.dead, dead_ok, reach_ok)


def _inner_loop(s: State):
    """The innermost open loop's exit: the largest pending label a FOR_RANGE names (labels
    are numbered in order of first appearance); -1 outside every loop."""
    j = jnp.arange(V.N_LABELS)
    return jnp.max(jnp.where((s.lab_state == L_PENDING) & s.lab_for, j, -1))


def _definable(s: State, close):
    """Bool[N_LABELS]: labels a LABEL here may define (a pending one whose depth fits,
    or the next new one; only pending ones while closing). Loops nest: while a loop's
    exit (a FOR_RANGE's label) is pending, no label first named before it is defined
    (labels are numbered in order of first appearance), except while closing."""
    j = jnp.arange(V.N_LABELS)
    pend = s.lab_state == L_PENDING
    fits = jnp.where(s.dead, True, (s.lab_depth < 0) | (s.lab_depth == s.depth))
    ok = pend & fits & ((j >= _inner_loop(s)) | close)
    new = (j == s.n_lab) & (s.n_lab < V.N_LABELS) & ~(close & jnp.any(ok))
    return ok | new


def _call_ok(s: State):
    """Bool[MAX_DECLS]: declared functions a CALL here may name."""
    f = jnp.arange(MAX_DECLS)
    declared = f < s.n_decl
    fits = (s.decl_np <= s.depth) & (s.depth - s.decl_np + 1 <= V.MAX_DEPTH)
    return declared & (fits | s.dead)


def _user_var(s: State):
    return jnp.arange(V.N_VARS) >= 7  # reserved names (print, abs, ...) are never variables


def _standard(f):
    """Standard dtype promotion inside (bool counts add to int32 here on purpose)."""
    import functools

    import jax

    @functools.wraps(f)
    def g(*a, **kw):
        with jax.numpy_dtype_promotion("standard"):
            return f(*a, **kw)

    return g


@_standard
def allowed(s: State, c: Context):
    """Bool[VOCAB]: the tokens that may follow state ``s``."""
    close = _must_close(s, c)
    k = jnp.arange(V.N_VARS)
    user = _user_var(s)

    def put(mask, base, row):
        return mask.at[base : base + row.shape[0]].set(row)

    # --- declarations
    declared = jnp.any(
        (s.decl_name[None, :] == k[:, None]) & (jnp.arange(MAX_DECLS) < s.n_decl)[None, :], axis=1
    )
    can_def = (s.n_decl < c.max_funcs - 1) & ~close
    decls = jnp.zeros(V.VOCAB, bool).at[V.DEF].set(can_def).at[V.BODY].set(True)
    name = put(jnp.zeros(V.VOCAB, bool), V.VAR_BASE, user & ~declared)
    cur = jnp.maximum(s.n_decl - 1, 0)
    params = s.decl_params[cur]
    is_param = jnp.any(params[None, :] == k[:, None], axis=1)
    more = (s.decl_np[cur] < V.MAX_PARAMS) & ~close
    pmask = put(jnp.zeros(V.VOCAB, bool), V.VAR_BASE, user & ~is_param & more)
    # the return type: the front end's where it is known (while closing, RET_NONE only)
    rt = c.ret_types[cur]
    pmask = pmask.at[V.RET_NONE].set(close | (rt < 0) | (rt == isa.T_NONE))
    pmask = pmask.at[V.RET_INT].set(~close & ((rt < 0) | (rt == isa.T_INT)))
    pmask = pmask.at[V.RET_BOOL].set(~close & ((rt < 0) | (rt == isa.T_BOOL)))

    # --- body: ops
    d = s.depth
    ops = jnp.arange(isa.N_OPS)
    needs = jnp.asarray(_NEEDS[:-1])
    up = jnp.asarray(_PUSH_MAX[:-1])
    kind = jnp.asarray(_ARG_KIND[:-1])
    reach_ok = (d >= needs) & (d + up <= V.MAX_DEPTH)
    # an op whose argument would have no allowed token is not allowed either
    tdelta = jnp.asarray(_TARGET_DELTA[:-1])
    live = _structured(s, c) & ~close
    fwd = live & (kind == ArgKind.TARGET) & (ops != Op.JUMP)  # forward jumps only
    defined = s.lab_state == L_DEFINED
    lab_ok = _label_ok(s, d + tdelta)
    arg_ok = jnp.where(kind == ArgKind.FUNC, jnp.any(_call_ok(s)), True)
    arg_ok &= jnp.where(kind == ArgKind.DEPTH, s.dead | (d >= 1), True)
    op_ok = jnp.asarray(_ALLOWED_OPS) & arg_ok & (s.dead | reach_ok)
    it = _print_item(s, c)  # -1: not known, anything goes
    left, _ = _print_counts(s, c)
    op_ok &= jnp.where(ops == Op.PRINT_INT, (it == -1) | (it == isa.T_INT), True)
    op_ok &= jnp.where(ops == Op.PRINT_BOOL, (it == -1) | (it == isa.T_BOOL), True)
    op_ok &= jnp.where(ops == Op.PRINT_NEWLINE, (it == -1) | (it == ITEM_NEWLINE), True)
    # a value print reads its call's values where they are: all of them on the stack
    is_vprint = (ops == Op.PRINT_INT) | (ops == Op.PRINT_BOOL)
    op_ok &= jnp.where(is_vprint, s.dead | (left < 0) | (d >= left), True)
    # after a print call's PRINT_NEWLINE its values are popped at once (POP_N, next;
    # POP_N 0 after ``print()``)
    pop = jnp.where(s.dead | close | (d < s.pop_due), -1, s.pop_due)
    op_ok &= jnp.where(pop >= 0, ops == Op.POP_N, True)
    op_ok &= s.n_instr < c.max_code
    forced_op = jnp.where(d >= 1, Op.RETURN_VALUE, Op.LOAD_CONST)
    pending = jnp.any(s.lab_state == L_PENDING)
    ln_no = jnp.arange(V.N_LINES) + 1
    lines = (ln_no <= c.n_lines) & ~close & (pop < 0)
    can_label = jnp.any(_definable(s, close)) & (pop < 0)

    # (typed) the structure rules (module docstring), as a stricter copy of the body's
    # mask: where they would leave nothing (tokens they never see the labeller write,
    # such as a print inside ``and``), the mask is the one without them
    ops_s = op_ok & jnp.where(
        kind == ArgKind.TARGET, jnp.any(lab_ok & ~(fwd[:, None] & defined[None, :]), axis=1), True
    )
    ops_s &= ~live | _structure_ok(s, d)
    # an expression statement's POP_TOP only on the lines of one (not an if's header)
    ops_s &= ~live | (ops != Op.POP_TOP) | (c.expr_lines[jnp.clip(s.line, 0, V.N_LINES)] > 0)
    lines_s = lines & (c.code_lines[ln_no] > 0)
    # inside a statement that a pending label ends, only that statement's lines
    known = (s.lab_state == L_PENDING) & (s.lab_hi > 0)
    lo = jnp.max(jnp.where(known, s.lab_lo, 0))
    hi = jnp.min(jnp.where(known, s.lab_hi, V.N_LINES))
    lines_s &= (ln_no >= lo) & (ln_no <= hi)
    # between statements (at the statement depth, no label of an expression pending),
    # lines go forward (to the last line again only where a ``;`` or a body after ``:``
    # starts a statement inside it), or back to the header of a statement whose body is
    # around them (a loop's jump back, an if's jump past its else parts), and then only
    # that JUMP follows; the implicit return at a body's end (it may come where no label
    # is pending) carries the line of the body's last statement, the header of an if
    # with else parts
    last = ~pending
    between = _between(s, c) & ~close
    reach = jnp.where(last, c.stmt_end[ln_no], c.block_end[ln_no])
    around = (c.block_end[ln_no] > 0) & (ln_no <= s.max_line) & (s.max_line <= reach)
    mx = jnp.clip(s.max_line, 0, V.N_LINES)
    again = (ln_no == s.max_line) & (c.multi_lines[mx] > 0) & (s.line != s.max_line)
    # (after a print call used as a value, ``return print(...)``: back to its statement's
    # line for the None it gives)
    printed = (s.last_op == Op.POP_N) & (ln_no >= s.stmt_from) & (ln_no <= s.max_line)
    lines_s &= ~between | (ln_no > s.max_line) | again | around | printed
    # a statement's first instruction follows its line marker, unless it starts on the
    # current line after another statement (or it is a JUMP: a loop's jump back, an if's
    # past its else parts, on the line they already mark; or a LOAD_CONST: the None of a
    # print call used as a value, after its pop, or the implicit return's 0, once the
    # body's last statement's line is marked)
    fresh = s.fresh | (c.multi_lines[jnp.clip(s.line, 0, V.N_LINES)] > 0)
    ends = last & (s.max_line >= c.body_last[mx])
    goes_on = (ops == Op.JUMP) | ((ops == Op.LOAD_CONST) & ((s.last_op == Op.POP_N) | ends))
    ops_s &= ~(between & ~fresh & jnp.any(lines_s)) | goes_on
    # the constant -2147483648 is not negated again (it would overflow) unless the source
    # does so
    neg_min = (s.last_lit >= 0) & (c.lit_min[jnp.clip(s.last_lit, 0, V.N_LITS - 1)] > 0)
    ops_s &= ~(live & neg_min) | (ops != Op.NEG)
    back = live & s.back
    ops_s &= ~back | (ops == Op.JUMP)
    lines_s &= ~back

    def body_mask(o, ln, lab):
        o = jnp.where(close, (ops == forced_op) & ~s.dead, o)
        m = put(jnp.zeros(V.VOCAB, bool), V.OP_BASE, o[: V.N_TOKEN_OPS])
        m = m.at[V.LABEL].set(jnp.where(close, s.dead & pending, lab))
        m = m.at[V.END].set(s.dead & ~pending)
        return put(m, V.LN_BASE, ln)

    strict = body_mask(ops_s, lines_s, can_label & ~back)
    body = jnp.where(jnp.any(strict), strict, body_mask(op_ok & jnp.where(
        kind == ArgKind.TARGET, jnp.any(lab_ok, axis=1), True), lines, can_label))  # fmt: skip

    # --- body: the argument of cur_op
    ak = jnp.asarray(_ARG_KIND)[s.cur_op]
    arg = jnp.zeros(V.VOCAB, bool)
    # CONST
    lits = (jnp.arange(V.N_LITS) < c.n_lits) & ~close
    carg = put(arg, V.LIT_BASE, lits).at[V.SMALL_0].set(True).at[V.SMALL_1].set(~close)
    # SLOT: a name already given a slot here, or a new one while slots remain (one is
    # kept for the temporary), or the temporary
    new_ok = s.n_slots < c.max_locals - 1
    # (typed) one value above the loops' ranges a store names a variable (the comparison
    # temporary is stored with two values of its chain on the stack at least)
    names = user & ((s.slot_of >= 0) | new_ok)
    store = live & (s.cur_op == Op.STORE_VAR)
    stmt = (d == _statement_depth(s) + 1) & jnp.any(names)  # (never no choice at all)
    sarg = put(arg, V.VAR_BASE, names)
    sarg = sarg.at[V.TEMP].set(~store | ~stmt)
    # TARGET
    # (typed) conditional jumps go forward (where that leaves a choice); the label past
    # an if's or while's body or a loop's exit (as ``step`` names them: on the header's
    # line) is a new one, or a pending one whose statement ends where this one does (the
    # labeller gives two labels at one place one name): a label of a statement that goes
    # on after this one would skip that code
    lab1 = _label_ok(s, d + jnp.asarray(_TARGET_DELTA)[s.cur_op])
    fwd1 = lab1 & ~(live & (s.cur_op != Op.JUMP) & defined)
    bend = c.block_end[jnp.clip(s.line, 0, V.N_LINES)]
    own = live & (bend > 0) & ((s.cur_op == Op.FOR_RANGE) | (_header_jif(s, c, s.cur_op, d)))
    same = (s.lab_state == L_PENDING) & ((s.lab_hi == bend) | (s.lab_hi == 0))
    fwd1 &= ~own | same | (jnp.arange(V.N_LABELS) == s.n_lab)
    targ = put(arg, V.LAB_BASE, jnp.where(jnp.any(fwd1), fwd1, lab1))
    # FUNC: the callee by name
    callee = jnp.any((s.decl_name[None, :] == k[:, None]) & _call_ok(s)[None, :], axis=1)
    farg = put(arg, V.VAR_BASE, callee)
    # DEPTH (PRINT): 1..depth; COUNT (POP_N): 0..depth; anything small in dead code
    n = jnp.arange(V.N_NUMS)
    top = jnp.where(s.dead, V.N_NUMS - 1, d)
    # (typed) a value print's depth is the number of its call's values from it on, and
    # the POP_N after the call's PRINT_NEWLINE pops all of them
    exact = ~s.dead & (left >= 1) & (left <= top)
    darg = put(arg, V.NUM_BASE, jnp.where(exact, n == left, (n >= 1) & (n <= top)))
    narg = put(arg, V.NUM_BASE, jnp.where(pop >= 0, n == pop, n <= top))
    argm = jnp.select(
        [ak == ArgKind.CONST, ak == ArgKind.SLOT, ak == ArgKind.TARGET, ak == ArgKind.FUNC,
         ak == ArgKind.DEPTH],
        [carg, sarg, targ, farg, darg], narg,
    )  # fmt: skip

    # --- after LABEL: a pending label, or the next new one
    # (while closing, a fitting pending label if there is one; the closing margin covers
    # the one token the argument takes)
    larg = put(arg, V.LAB_BASE, _definable(s, close))

    final = arg.at[V.EOS].set(True)
    done = arg.at[V.PAD].set(True)
    return jnp.select(
        [s.phase == DECLS, s.phase == DECL_NAME, s.phase == DECL_PARAMS, s.phase == BODY,
         s.phase == ARG, s.phase == LABEL_ARG, s.phase == FINAL],
        [jnp.where(close, jnp.zeros(V.VOCAB, bool).at[V.BODY].set(True), decls), name, pmask,
         body, argm, larg, final], done,
    )  # fmt: skip


def _structured(s: State, c: Context):
    """Bool[]: the structure rules apply here: the typed mask (the front end's items are
    known), in reachable code."""
    return (c.print_items[0, 0] != -1) & ~s.dead


def _between(s: State, c: Context):
    """Bool[]: between two statements (typed mask, reachable): at the statement depth,
    no label of an expression (one with no statement's lines) pending."""
    expr = jnp.any((s.lab_state == L_PENDING) & (s.lab_hi == 0))
    return _structured(s, c) & ~expr & (s.depth == _statement_depth(s))


def _header_jif(s: State, c: Context, op, d):
    """Bool[]: op at depth d is an if's or while's JUMP_IF_FALSE past its body (at the
    statement depth plus one; a header with a conditional expression in it excepted: its
    JUMP_IF_FALSE may be the expression's)."""
    li = jnp.clip(s.line, 0, V.N_LINES)
    return (op == Op.JUMP_IF_FALSE) & (d == _statement_depth(s) + 1) & (c.cond_lines[li] == 0)


def _statement_depth(s: State):
    """The depth between two statements: three values (start, stop, step) per open
    ``for`` loop (a FOR_RANGE's exit is pending)."""
    return 3 * jnp.sum((s.lab_state == L_PENDING) & s.lab_for)


def _structure_ok(s: State, d):
    """Bool[N_OPS]: ops that keep the code generator's structure at depth d.

    * ``return``, ``assert`` and an expression statement consume a value above the open
      loops' ranges: at the statement depth plus one or deeper (deeper where earlier code
      left values on the stack: harmless, and the model's right code does it), and a
      return or an assert at most one value above the depth where the last line marker
      to a new line was written (``State.ln_depth``) or the statement depth, whichever is
      more (its statement takes one value);
    * inside ``a and b`` (a JUMP_IF_*_OR_POP's label pending, at depth D) the right
      operand's code never consumes a below it: no op takes the stack below D - 1, no op
      that pushes nothing (a store, a print) below D, and no statement-only op at all."""
    ops = jnp.arange(isa.N_OPS)
    at_stmt = jnp.asarray(_AT_STATEMENT[:-1])
    ok = ~at_stmt | (d >= _statement_depth(s) + 1)
    # a return or an assert takes one value of its own statement: at most one more than
    # the stack held where the last new line was marked (its line, or a line its
    # expression goes on to) or, in a loop's body on its header's line, the loops' ranges
    base = jnp.maximum(s.ln_depth, _statement_depth(s))
    ok &= ((ops != Op.RETURN_VALUE) & (ops != Op.ASSERT)) | (d <= base + 1)
    orp = (s.lab_state == L_PENDING) & s.lab_orpop & (s.lab_depth >= 0)
    dor = jnp.max(jnp.where(orp, s.lab_depth, -1))
    level = d - jnp.asarray(_POPS[:-1])
    gives = (jnp.asarray(_PUSHES[:-1]) > 0) | (jnp.asarray(_ARG_KIND[:-1]) == ArgKind.TARGET)
    need = jnp.where(gives, dor - 1, dor)
    in_expr = ~jnp.asarray(_STMT_ONLY[:-1]) & (level >= need) & (ops != Op.NOP)
    return ok & ((dor < 0) | in_expr)


def _print_item(s: State, c: Context):
    """The next print item of this body (``Debug.print_items``; -1: not known)."""
    f = jnp.clip(s.fn, 0, MAX_FUNCS - 1)
    j = jnp.clip(s.n_print, 0, MAX_PRINTS - 1)
    return jnp.where(s.n_print < MAX_PRINTS, c.print_items[f, j], -1)


def _print_counts(s: State, c: Context):
    """(left, before) for the next print item j of this body: the values of j's print call
    from j to its ITEM_NEWLINE (when j is a value and that end is recorded), and the
    values before j in its call (when j is an ITEM_NEWLINE); -1 when not known. The code
    generator pushes a call's values, prints the one ``left`` deep for each, then
    PRINT_NEWLINE and ``POP_N before``."""
    f = jnp.clip(s.fn, 0, MAX_FUNCS - 1)
    row = c.print_items[f]
    p = jnp.arange(MAX_PRINTS)
    j = s.n_print
    it = _print_item(s, c)
    val = (row == isa.T_INT) | (row == isa.T_BOOL)
    stop = jnp.min(jnp.where((p >= j) & ~val, p, MAX_PRINTS))
    ended = (stop < MAX_PRINTS) & (row[jnp.clip(stop, 0, MAX_PRINTS - 1)] == ITEM_NEWLINE)
    is_val = (it == isa.T_INT) | (it == isa.T_BOOL)
    left = jnp.where(is_val & ended, jnp.sum(val & (p >= j) & (p < stop)), -1)
    start = jnp.max(jnp.where((p < j) & ~val, p, -1))
    before = jnp.where(it == ITEM_NEWLINE, jnp.sum(val & (p > start) & (p < j)), -1)
    return left, before


_PI, _PB = V.op_tok(Op.PRINT_INT), V.op_tok(Op.PRINT_BOOL)
_IS_PRINT = np.zeros(isa.N_OPS + 1, np.int32)  # the ops that take a print item
_IS_PRINT[[Op.PRINT_INT, Op.PRINT_BOOL, Op.PRINT_NEWLINE]] = 1


def fold_prints(logits, mask):
    """Logits where the typed mask allows one print opcode of the two: that one gets the
    probability the model gave both (log-sum-exp), so the model decides *whether* to
    print and the front end's type decides *how*. Without a typed mask both or neither
    is allowed (they need the same operands) and nothing changes. Any leading axes."""
    one = mask[..., _PI] != mask[..., _PB]
    both = jnp.logaddexp(logits[..., _PI], logits[..., _PB])
    li = jnp.where(one & mask[..., _PI], both, logits[..., _PI])
    lb = jnp.where(one & mask[..., _PB], both, logits[..., _PB])
    return logits.at[..., _PI].set(li).at[..., _PB].set(lb)


def _start_body(s: State, fn) -> State:
    """Reset the per-body state for body ``fn`` (its parameters take slots 0..np-1)."""
    f = jnp.clip(fn - 1, 0, MAX_DECLS - 1)
    params = jnp.where(fn > 0, s.decl_params[f], -1)
    k = jnp.arange(V.N_VARS)
    hit = params[None, :] == k[:, None]  # [N_VARS, MAX_PARAMS]
    slot_of = jnp.where(jnp.any(hit, axis=1), jnp.argmax(hit, axis=1), -1).astype(jnp.int32)
    return s._replace(
        fn=fn, entry=s.n_instr, depth=jnp.int32(0), dead=jnp.bool_(False),
        max_depth=jnp.int32(0), lab_state=jnp.zeros(V.N_LABELS, jnp.int32),
        lab_depth=jnp.full(V.N_LABELS, -1, jnp.int32), n_lab=jnp.int32(0), slot_of=slot_of,
        n_slots=jnp.where(fn > 0, s.decl_np[f], 0).astype(jnp.int32),
        uses_temp=jnp.bool_(False), line=jnp.int32(0), n_print=jnp.int32(0),
        lab_for=jnp.zeros(V.N_LABELS, bool), pop_due=jnp.int32(-1),
        lab_lo=jnp.zeros(V.N_LABELS, jnp.int32), lab_hi=jnp.zeros(V.N_LABELS, jnp.int32),
        lab_orpop=jnp.zeros(V.N_LABELS, bool), max_line=jnp.int32(0),
        fresh=jnp.bool_(False), back=jnp.bool_(False),
        last_op=jnp.int32(isa.N_OPS), ln_depth=jnp.int32(0), stmt_from=jnp.int32(0),
        last_lit=jnp.int32(-1),
    )  # fmt: skip


class Emitted(NamedTuple):
    """What one token contributes to the bytecode (read by the assembler)."""

    ins: object  # Int32[]  index of the instruction this token completes (-1: none)
    op: object  # Int32[]
    arg: object  # Int32[]  resolved argument (labels and TEMP resolved by the assembler)
    arg_label: object  # Int32[]  label j of a TARGET argument (-1 otherwise)
    arg_temp: object  # Bool[]  the argument is the temporary's slot
    line: object  # Int32[]
    fn: object  # Int32[]  body the token belongs to
    label_def: object  # Int32[]  j when this token defines label j (-1 otherwise)
    label_at: object  # Int32[]  the instruction index label_def names
    fn_end: object  # Bool[]  this token is the END of body fn


@_standard
def step(s: State, tok, c: Context, lits=None):
    """The state after ``tok`` and what it emits. ``lits``: Int32[N_LITS] literal values
    (only the assembler needs them; None gives 0 for every LIT_i)."""
    tok = jnp.asarray(tok, jnp.int32)
    ph = s.phase
    is_op = (tok >= V.OP_BASE) & (tok < V.OP_BASE + V.N_TOKEN_OPS)
    op = jnp.where(is_op, tok - V.OP_BASE, isa.N_OPS)
    var = tok - V.VAR_BASE
    is_var = (var >= 0) & (var < V.N_VARS)
    varc = jnp.clip(var, 0, V.N_VARS - 1)
    labj = jnp.clip(tok - V.LAB_BASE, 0, V.N_LABELS - 1)
    num = tok - V.NUM_BASE
    d = s.depth
    no = jnp.int32(-1)
    em = Emitted(no, jnp.int32(0), jnp.int32(0), no, jnp.bool_(False), s.line, s.fn, no,
                 jnp.int32(0), jnp.bool_(False))  # fmt: skip

    # declarations
    f = jnp.clip(s.n_decl, 0, MAX_DECLS - 1)
    cur = jnp.clip(s.n_decl - 1, 0, MAX_DECLS - 1)
    s_decl = s._replace(phase=jnp.where(tok == V.DEF, DECL_NAME, jnp.where(tok == V.BODY, BODY, ph)),
                        n_decl=s.n_decl + (tok == V.DEF))  # fmt: skip
    s_decl = jnp_tree_where(tok == V.BODY, _start_body(s_decl, jnp.int32(0)), s_decl)
    s_name = s._replace(phase=jnp.int32(DECL_PARAMS), decl_name=s.decl_name.at[cur].set(varc))
    del f
    ret_t = jnp.select([tok == V.RET_INT, tok == V.RET_BOOL], [isa.T_INT, isa.T_BOOL], isa.T_NONE)
    npar = s.decl_np[cur]
    s_par = s._replace(
        decl_params=s.decl_params.at[cur, jnp.clip(npar, 0, V.MAX_PARAMS - 1)].set(
            jnp.where(is_var, varc, s.decl_params[cur, jnp.clip(npar, 0, V.MAX_PARAMS - 1)])),
        decl_np=s.decl_np.at[cur].add(is_var.astype(jnp.int32)),
        decl_ret=s.decl_ret.at[cur].set(jnp.where(is_var, s.decl_ret[cur], ret_t)),
        phase=jnp.where(is_var, DECL_PARAMS, DECLS).astype(jnp.int32),
    )  # fmt: skip

    # body tokens
    has_arg = jnp.asarray(_ARG_KIND)[op] != ArgKind.NONE
    is_ln = (tok >= V.LN_BASE) & (tok < V.LN_BASE + V.N_LINES)
    # an op without an argument is complete now; one with an argument waits for it
    s_body = s._replace(
        phase=jnp.where(is_op & has_arg, ARG, jnp.where(tok == V.LABEL, LABEL_ARG, BODY)).astype(jnp.int32),
        cur_op=op, line=jnp.where(is_ln, tok - V.LN_BASE + 1, s.line),
        max_line=jnp.where(is_ln, jnp.maximum(s.max_line, tok - V.LN_BASE + 1), s.max_line),
        fresh=s.fresh | is_ln,
        ln_depth=jnp.where(is_ln & (tok - V.LN_BASE + 1 > s.max_line), d, s.ln_depth),
        back=is_ln & _between(s, c) & (tok - V.LN_BASE + 1 < s.max_line)
        & jnp.any(s.lab_state == L_PENDING) & (s.last_op != Op.POP_N),
        stmt_from=jnp.where(is_ln & _between(s, c) & (tok - V.LN_BASE + 1 > s.max_line),
                            s.max_line + 1, s.stmt_from),
    )  # fmt: skip
    done_fn = tok == V.END
    nxt = s.fn + 1
    s_end = jnp_tree_where(nxt > s.n_decl, s._replace(phase=jnp.int32(FINAL)), _start_body(s, nxt))
    em_end = em._replace(fn_end=jnp.bool_(True))

    # completing an instruction: op (no arg) or arg token
    in_arg = ph == ARG
    cop = jnp.where(in_arg, s.cur_op, op)
    complete = (ph == BODY) & is_op & ~has_arg | in_arg
    ak = jnp.asarray(_ARG_KIND)[cop]
    # argument value
    lit_i = jnp.clip(tok - V.LIT_BASE, 0, V.N_LITS - 1)
    lit_val = jnp.int32(0) if lits is None else jnp.asarray(lits, jnp.int32)[lit_i]
    const = jnp.where(tok == V.SMALL_1, 1, jnp.where(tok == V.SMALL_0, 0, lit_val))
    new_slot = is_var & (s.slot_of[varc] < 0) & (ak == ArgKind.SLOT)
    slot = jnp.where(new_slot, s.n_slots, s.slot_of[varc])
    slot_of = jnp.where(new_slot, s.slot_of.at[varc].set(s.n_slots), s.slot_of)
    callee = jnp.argmax(s.decl_name == varc) + 1
    np_callee = s.decl_np[jnp.clip(callee - 1, 0, MAX_DECLS - 1)]
    argval = jnp.select(
        [ak == ArgKind.CONST, ak == ArgKind.SLOT, ak == ArgKind.FUNC,
         (ak == ArgKind.DEPTH) | (ak == ArgKind.COUNT)],
        [const, slot, callee, num], 0,
    ).astype(jnp.int32)  # fmt: skip
    pops = jnp.where(cop == Op.CALL, np_callee, jnp.where(cop == Op.POP_N, num, 0))
    delta = jnp.asarray(_FALL_DELTA)[cop] - pops
    new_d = jnp.where(s.dead, jnp.maximum(d - jnp.asarray(_POPS)[cop] - pops, 0)
                      + jnp.asarray(_PUSHES)[cop], d + delta)  # fmt: skip
    new_d = jnp.clip(new_d, 0, V.MAX_DEPTH).astype(jnp.int32)
    # jumps: the label's depth
    is_t = ak == ArgKind.TARGET
    tdepth = d + jnp.asarray(_TARGET_DELTA)[cop]
    was = s.lab_state[labj]
    lab_state = jnp.where(
        is_t & (was == L_UNUSED), s.lab_state.at[labj].set(L_PENDING), s.lab_state
    )
    rec = is_t & ~s.dead & (s.lab_depth[labj] < 0)
    lab_depth = jnp.where(rec, s.lab_depth.at[labj].set(tdepth), s.lab_depth)
    n_lab = jnp.where(is_t & (labj == s.n_lab), s.n_lab + 1, s.n_lab)
    ends = jnp.asarray(_ENDS)[cop]
    _, before = _print_counts(s, c)
    is_for = is_t & (cop == Op.FOR_RANGE)
    # (typed) the statement a new label ends: a for loop's exit, or (at the statement
    # depth) an if's or while's JUMP_IF_FALSE past its body, or an if's JUMP past its
    # elif and else parts, each on its header's line
    sd = _statement_depth(s)
    li = jnp.clip(s.line, 0, V.N_LINES)
    # (a header with a conditional expression in it: its JUMP_IF_FALSE may be the
    # expression's, so no label of it ends the statement)
    jif = _header_jif(s, c, cop, d)
    body_hi = jnp.where(is_for | jif, c.block_end[li], 0)
    stmt_hi = jnp.where((cop == Op.JUMP) & (d == sd), c.stmt_end[li], 0)
    ends_stmt = is_t & (was == L_UNUSED) & ~s.dead & (s.line >= 1)
    new_hi = jnp.where(ends_stmt, jnp.maximum(body_hi, stmt_hi), 0)
    s_ins = s._replace(
        phase=jnp.int32(BODY), cur_op=jnp.int32(isa.N_OPS), n_instr=s.n_instr + 1,
        depth=new_d, dead=s.dead | ends,
        max_depth=jnp.where(s.dead, s.max_depth, jnp.maximum(s.max_depth, jnp.maximum(new_d, d))),
        lab_state=lab_state, lab_depth=lab_depth, n_lab=n_lab, slot_of=slot_of,
        n_slots=s.n_slots + new_slot.astype(jnp.int32),
        uses_temp=s.uses_temp | ((ak == ArgKind.SLOT) & (tok == V.TEMP)),
        n_print=s.n_print + jnp.asarray(_IS_PRINT)[cop],
        lab_for=jnp.where(is_for, s.lab_for.at[labj].set(True), s.lab_for),
        lab_lo=jnp.where(new_hi > 0, s.lab_lo.at[labj].set(s.line), s.lab_lo),
        lab_hi=jnp.where(new_hi > 0, s.lab_hi.at[labj].set(new_hi), s.lab_hi),
        lab_orpop=jnp.where(is_t & jnp.asarray(_OR_POP)[cop], s.lab_orpop.at[labj].set(True),
                            s.lab_orpop),  # fmt: skip
        pop_due=jnp.where(cop == Op.PRINT_NEWLINE, before, -1).astype(jnp.int32),
        fresh=jnp.bool_(False), back=jnp.bool_(False), last_op=cop.astype(jnp.int32),
        last_lit=jnp.where((cop == Op.LOAD_CONST) & (tok >= V.LIT_BASE)
                           & (tok < V.LIT_BASE + V.N_LITS), lit_i, -1).astype(jnp.int32),
    )  # fmt: skip
    em_ins = em._replace(ins=s.n_instr, op=cop, arg=argval,
                         arg_label=jnp.where(is_t, labj, -1).astype(jnp.int32),
                         arg_temp=(ak == ArgKind.SLOT) & (tok == V.TEMP))  # fmt: skip

    # a label definition
    known = s.lab_depth[labj] >= 0
    s_lab = s._replace(
        phase=jnp.int32(BODY), lab_state=s.lab_state.at[labj].set(L_DEFINED),
        lab_depth=s.lab_depth.at[labj].set(jnp.where(s.dead, s.lab_depth[labj], d)),
        n_lab=jnp.where(labj == s.n_lab, s.n_lab + 1, s.n_lab),
        dead=s.dead & ~known, depth=jnp.where(s.dead & known, s.lab_depth[labj], d),
    )  # fmt: skip
    em_lab = em._replace(label_def=labj, label_at=s.n_instr)

    body_ins = (ph == BODY) & is_op & ~has_arg
    new = jnp_tree_where(ph == DECLS, s_decl, s)
    new = jnp_tree_where(ph == DECL_NAME, s_name, new)
    new = jnp_tree_where(ph == DECL_PARAMS, s_par, new)
    new = jnp_tree_where((ph == BODY) & ~body_ins, s_body, new)
    new = jnp_tree_where((ph == BODY) & done_fn, s_end, new)
    new = jnp_tree_where(complete, s_ins, new)
    new = jnp_tree_where(ph == LABEL_ARG, s_lab, new)
    new = jnp_tree_where(ph == FINAL, s._replace(phase=jnp.int32(DONE)), new)
    new = new._replace(pos=s.pos + (ph != DONE))
    out = jnp_tree_where(complete, em_ins, em)
    out = jnp_tree_where((ph == BODY) & done_fn, em_end, out)
    out = jnp_tree_where(ph == LABEL_ARG, em_lab, out)
    return new, out


def jnp_tree_where(c, a, b):
    """Select between two pytrees of the same structure, leaf by leaf."""
    return type(a)(*(jnp.where(c, x, y) for x, y in zip(a, b, strict=True)))
