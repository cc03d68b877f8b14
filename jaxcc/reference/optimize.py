"""The reference optimizer: plain Python over one program's bytecode, the oracle of
jaxcc.optimize (the device optimizer must give the identical Program, program by program).

It is written for clarity, not speed, and independently of the device version: lists and
dicts, a worklist for liveness, a depth-first search for reachability, the reference
interpreter itself to evaluate a constant operation. What the two share is the
specification below (docs/middle_end.md, section 7).

Input: bytecode as the compilers emit it (jaxcc.compiler or jaxcc.reference.compiler).
On other bytecode the result is some Program of the same shapes, without any promise.

The optimizer runs rounds until a round changes nothing (at most ``max_rounds``, by
default ``MAX_ROUNDS``; the -O1 preset of jaxcc.optimize.LEVELS runs one round, -O2 every
pass with MAX_ROUNDS). One round, each step reading the code that the step before left:

1. ``thread`` (jump threading): every jump instruction's target is replaced, reading the
   code as it was at the start of this step:

   * JUMP, JUMP_IF_FALSE, JUMP_IF_TRUE, FOR_RANGE, and the *_OR_POP jumps, whose target
     is a JUMP: the end of that chain of JUMPs (the first instruction on it that is not a
     JUMP); a chain that runs into a cycle is left alone;
   * JUMP_IF_FALSE_OR_POP to a JUMP_IF_FALSE / JUMP_IF_FALSE_OR_POP with target u (the
     value is known false there): that instruction's opcode and target u; to a
     JUMP_IF_TRUE / JUMP_IF_TRUE_OR_POP at t: JUMP_IF_FALSE t + 1 (the value is popped
     and falls through). JUMP_IF_TRUE_OR_POP the other way round.
2. ``unreachable``: instructions that no path from a function entry reaches are deleted.
3. the rewrites of ``fold``, ``peephole``, ``deadstore``, ``cmpjump`` and ``loadvar2``, each at an anchor
   instruction k, all decided on the same code (the one after step 2, compacted).
   "k is a target" means some jump's argument or some function entry is k. The patterns
   never overlap (their non-anchor instructions are LOAD_CONST, NOT, a comparison or a
   STORE_VAR, none of which anchors a rule that could fire with them; the comparison
   that cmpjump and peephole's ``COMPARE; NOT`` consume could anchor fold, hence their
   exception; loadvar2's first LOAD_VAR could anchor deadstore or another loadvar2,
   hence its conditions):

   * fold: ``LOAD_CONST a; LOAD_CONST b; BINARY`` (the last two not targets) and
     ``LOAD_CONST a; UNARY`` (the last not a target) -> ``LOAD_CONST r`` at k, when the
     operation raises nothing (no OverflowError, ZeroDivisionError, ValueError: those are
     left to run); ``LOAD_CONST c; JUMP_IF_x`` (k not a target): the jump folded (taken:
     JUMP at k, the constant deleted; not taken: both deleted); for the *_OR_POP jumps a
     taken jump keeps its constant (``LOAD_CONST c; JUMP``).
   * peephole: ``LOAD_CONST e; OP`` where e is OP's right identity (ADD/SUB/OR/XOR/
     LSHIFT/RSHIFT 0, MUL/FLOORDIV/POW 1, AND -1; k not a target) -> deleted;
     ``LOAD_CONST c; POP_TOP`` -> deleted; ``POP_N 0`` -> deleted; ``JUMP k + 1`` ->
     deleted; ``COMPARE; NOT`` -> the negated comparison at k, not when fold folds that
     comparison in this round (as for cmpjump below); ``NOT; JUMP_IF_FALSE t`` ->
     ``JUMP_IF_TRUE t`` (and the other way round) unless the NOT is itself rewritten.
   * deadstore: ``STORE_VAR s; LOAD_VAR s`` (k not a target) where slot s is not live
     after k (no path from k + 1 reads s before writing it) -> both deleted: the value
     stays on the stack.
   * cmpjump: ``COMPARE; JUMP_IF_FALSE t`` (k not a target) -> the compare-and-branch of
     the negated comparison (``LT; JUMP_IF_FALSE t`` -> ``JUMP_IF_GE t``) at k,
     ``COMPARE; JUMP_IF_TRUE t`` -> that of the same one; not when the comparison is
     folded itself in this round (``LOAD_CONST; LOAD_CONST; COMPARE`` with fold on). The
     comparison may be a target: a jump to it reaches the fused instruction with the same
     two operands. And in fold: ``LOAD_CONST a; LOAD_CONST b; JUMP_IF_<cmp> t`` (the
     last two not targets) -> ``JUMP t`` at k (a cmp b) or nothing.
   * loadvar2, decided after the rules above: ``LOAD_VAR a; LOAD_VAR b`` (k not a target,
     both of the same line, both slots below SLOT2_MAX = 2**15, the first not deleted by
     deadstore) -> ``LOAD_VAR2 a | (b << 16)`` at k; pairs are taken left to right, so in
     a run of such loads the first two pair, the next two, and so on (a lone last one is
     left for the next round). A jump to the first LOAD_VAR reaches the LOAD_VAR2; none
     may reach the second, which would bring one value, not two. The same line keeps an
     UnboundLocalError's line, and LOAD_VAR2 checks a before b as the two loads did.

   Deleted instructions are then removed (compaction): every jump target and function
   entry moves to where its instruction went (a deleted one's to the next kept one).
4. ``invert`` (loop inversion, ``invert_loops``): a back edge ``JUMP h`` to a loop test of
   at most TEST_MAX loads (LOAD_VAR2 included) / constants / arithmetic before its conditional jump is
   replaced by a copy of the test whose inverted jump goes to the loop body, so each
   iteration saves the JUMP; the code grows, and only while it fits the Program's code
   length. The copies keep their lines (a copied LOAD_VAR or MUL raises at its line).

Kept invariants: instructions are only deleted, rewritten in place or (invert) copied
with their line, so every instruction that can raise keeps its line; fn_maxstack, fn_nparams, fn_nlocals and
fn_rettype are kept (no rewrite makes the operand stack deeper, and a smaller maxstack
would change when a deep recursion raises RecursionError); padding stays NOP / 0.
"""

from __future__ import annotations

import numpy as np

from jaxcc import isa
from jaxcc.errors import Code
from jaxcc.isa import Op
from jaxcc.limits import Limits

PASSES = ("thread", "unreachable", "fold", "peephole", "deadstore", "cmpjump", "loadvar2",
          "invert")  # fmt: skip
MAX_ROUNDS = 32
SLOT2_MAX = 2**15  # LOAD_VAR2 packs two slots below this into one arg

_COND = {Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE, Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP}
_CMPJUMP = set(isa.COMPARE_JUMP_OPS)  # the compare-and-branch opcodes
_JUMPS = {Op.JUMP, Op.FOR_RANGE} | _COND | _CMPJUMP
_COMPARE = {Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE}
_NO_FALL = {Op.JUMP, Op.RETURN_VALUE}
_BINARY = set(isa.BINARY_OPS)
_UNARY = set(isa.UNARY_OPS)
_IDENTITY = {
    Op.ADD: 0, Op.SUB: 0, Op.OR: 0, Op.XOR: 0, Op.LSHIFT: 0, Op.RSHIFT: 0,
    Op.MUL: 1, Op.FLOORDIV: 1, Op.POW: 1, Op.AND: -1,
}  # fmt: skip
_NEGATED = {Op.LT: Op.GE, Op.GE: Op.LT, Op.LE: Op.GT, Op.GT: Op.LE, Op.EQ: Op.NE, Op.NE: Op.EQ}
_FLIP = {Op.JUMP_IF_FALSE: Op.JUMP_IF_TRUE, Op.JUMP_IF_TRUE: Op.JUMP_IF_FALSE}


def _evaluate(op: int, consts: list[int]):
    """The value the machine pushes for ``LOAD_CONST c...; op``, or None when it raises:
    asked of the reference interpreter itself."""
    from jaxcc.reference import interp  # noqa: PLC0415

    code = [int(Op.LOAD_CONST)] * len(consts) + [op, int(Op.RETURN_VALUE)]
    n = len(code)
    prog = isa.Program(
        op=np.array(code, np.int32),
        arg=np.array([*consts, 0, 0], np.int32),
        line=np.ones(n, np.int32),
        n_code=np.int32(n),
        fn_entry=np.zeros(1, np.int32),
        fn_nparams=np.zeros(1, np.int32),
        fn_nlocals=np.zeros(1, np.int32),
        fn_maxstack=np.array([2], np.int32),
        fn_rettype=np.zeros(1, np.int32),
        n_funcs=np.int32(1),
    )
    res = interp.run_program(prog, Limits(max_stack=8, max_steps=10))
    return int(res.result) if int(res.status) == Code.OK else None


class _Code:
    """One program's code as lists (ops, args, lines) plus its function entries."""

    def __init__(self, ops, args, lines, entries):
        self.ops, self.args, self.lines, self.entries = ops, args, lines, entries

    def key(self):
        return (tuple(self.ops), tuple(self.args), tuple(self.lines), tuple(self.entries))

    def targets(self) -> set[int]:
        t = set(self.entries)
        for o, a in zip(self.ops, self.args, strict=True):
            if o in _JUMPS:
                t.add(a)
        return t

    def successors(self, i: int) -> list[int]:
        o, n = self.ops[i], len(self.ops)
        out = []
        if o in _JUMPS:
            out.append(self.args[i])
        if o not in _NO_FALL and o in Op._value2member_map_ and i + 1 < n:
            out.append(i + 1)
        return [s for s in out if 0 <= s < n]

    def compact(self, deleted: set[int]) -> None:
        """Remove the deleted instructions; targets and entries follow their instruction
        (a deleted one's to the next kept one)."""
        if not deleted:
            return
        n = len(self.ops)
        new_index, kept = [], 0
        for i in range(n + 1):
            new_index.append(kept)
            if i < n and i not in deleted:
                kept += 1

        def move(t):
            return new_index[t] if 0 <= t <= n else t

        keep = [i for i in range(n) if i not in deleted]
        self.args = [move(self.args[i]) if self.ops[i] in _JUMPS else self.args[i] for i in keep]
        self.ops = [self.ops[i] for i in keep]
        self.lines = [self.lines[i] for i in keep]
        self.entries = [move(e) for e in self.entries]


def _jump_chain_end(ops: list[int], args: list[int], t: int) -> int | None:
    """The first instruction that is not a JUMP on the chain of JUMPs from t (None: a
    cycle, or a target outside the code)."""
    seen = set()
    while 0 <= t < len(ops) and ops[t] == Op.JUMP:
        if t in seen:
            return None
        seen.add(t)
        t = args[t]
    return t if 0 <= t < len(ops) else None


def thread(code: _Code) -> None:
    ops, args = list(code.ops), list(code.args)  # the code at the start of the step
    n = len(ops)
    for i, o in enumerate(ops):
        if o not in _JUMPS or not 0 <= args[i] < n:
            continue
        t = args[i]
        if ops[t] == Op.JUMP:
            end = _jump_chain_end(ops, args, t)
            if end is not None:
                code.args[i] = end
            continue
        if o == Op.JUMP_IF_FALSE_OR_POP:
            same, other = (
                (Op.JUMP_IF_FALSE, Op.JUMP_IF_FALSE_OR_POP),
                (
                    Op.JUMP_IF_TRUE,
                    Op.JUMP_IF_TRUE_OR_POP,
                ),
            )
            popped = Op.JUMP_IF_FALSE
        elif o == Op.JUMP_IF_TRUE_OR_POP:
            same, other = (
                (Op.JUMP_IF_TRUE, Op.JUMP_IF_TRUE_OR_POP),
                (
                    Op.JUMP_IF_FALSE,
                    Op.JUMP_IF_FALSE_OR_POP,
                ),
            )
            popped = Op.JUMP_IF_TRUE
        else:
            continue
        if ops[t] in same:  # the value decides the same way there: go where it goes
            code.ops[i], code.args[i] = ops[t], args[t]
        elif ops[t] in other:  # it is popped there and falls through
            code.ops[i], code.args[i] = popped, t + 1


def remove_unreachable(code: _Code) -> None:
    reached = set()
    todo = [e for e in code.entries if 0 <= e < len(code.ops)]
    while todo:
        i = todo.pop()
        if i in reached:
            continue
        reached.add(i)
        todo.extend(code.successors(i))
    code.compact({i for i in range(len(code.ops)) if i not in reached})


def live_after(code: _Code) -> list[set[int]]:
    """live_out[i]: the slots that some path from instruction i's successors reads before
    writing (a backward worklist to the least fixpoint)."""
    n = len(code.ops)
    preds: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for s in code.successors(i):
            preds[s].append(i)
    live_in: list[set[int]] = [set() for _ in range(n)]
    live_out: list[set[int]] = [set() for _ in range(n)]
    todo = list(range(n))
    while todo:
        i = todo.pop()
        out = set()
        for s in code.successors(i):
            out |= live_in[s]
        live_out[i] = out
        o, a = code.ops[i], code.args[i]
        new_in = set(out)
        if o == Op.STORE_VAR:
            new_in.discard(a)
        if o == Op.LOAD_VAR:
            new_in.add(a)
        if o == Op.LOAD_VAR2:  # reads both of its slots
            new_in |= set(isa.unpack_slots(a))
        if new_in != live_in[i]:
            live_in[i] = new_in
            todo.extend(preds[i])
    return live_out


def rewrite(code: _Code, passes) -> None:
    """The fold / peephole / deadstore rewrites of one round (all decided on the same
    code), then the compaction."""
    ops, args = list(code.ops), list(code.args)
    n = len(ops)
    targets = code.targets()
    live = live_after(code) if "deadstore" in passes else None
    deleted: set[int] = set()
    new = {}  # position -> (op, arg)

    def free(*pos):  # none of these is a target
        return all(p not in targets for p in pos)

    def cmp_folded(j):
        """Whether fold turns the comparison at j (``LOAD_CONST; LOAD_CONST; COMPARE``)
        into a LOAD_CONST this round (a comparison of two ints raises nothing): then no
        other rule may consume it."""
        return ("fold" in passes and j >= 2 and ops[j - 1] == ops[j - 2] == Op.LOAD_CONST
                and free(j - 1, j))  # fmt: skip

    def not_rewritten(k):
        """Whether the NOT at k is left as it is (neither folded nor merged into the
        comparison before it)."""
        if k < 1 or not free(k):
            return True
        if "fold" in passes and ops[k - 1] == Op.LOAD_CONST:
            return _evaluate(Op.NOT, [args[k - 1]]) is None
        return not ("peephole" in passes and ops[k - 1] in _NEGATED and not cmp_folded(k - 1))

    for k in range(n):
        o = ops[k]
        p1 = ops[k - 1] if k >= 1 else None
        p2 = ops[k - 2] if k >= 2 else None
        if "fold" in passes:
            if o in _BINARY and p1 == p2 == Op.LOAD_CONST and free(k - 1, k):
                r = _evaluate(o, [args[k - 2], args[k - 1]])
                if r is not None:
                    new[k] = (Op.LOAD_CONST, r)
                    deleted |= {k - 2, k - 1}
                    continue
            if o in _UNARY and p1 == Op.LOAD_CONST and free(k):
                r = _evaluate(o, [args[k - 1]])
                if r is not None:
                    new[k] = (Op.LOAD_CONST, r)
                    deleted.add(k - 1)
                    continue
            if o in _CMPJUMP and p1 == p2 == Op.LOAD_CONST and free(k - 1, k):
                cmp = next(c for c, j in isa.COMPARE_JUMP.items() if j == o)
                if _evaluate(cmp, [args[k - 2], args[k - 1]]):  # taken: a JUMP
                    new[k] = (Op.JUMP, args[k])
                    deleted |= {k - 2, k - 1}
                else:
                    deleted |= {k - 2, k - 1, k}
                continue
            if o in _COND and p1 == Op.LOAD_CONST and free(k):
                truthy = args[k - 1] != 0
                jumps = truthy == (o in (Op.JUMP_IF_TRUE, Op.JUMP_IF_TRUE_OR_POP))
                if not jumps:
                    deleted |= {k - 1, k}
                else:
                    new[k] = (Op.JUMP, args[k])
                    if o in (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE):
                        deleted.add(k - 1)
                continue
        if "peephole" in passes:
            if o in _BINARY and p1 == Op.LOAD_CONST and free(k):
                if _IDENTITY.get(o) == args[k - 1]:
                    deleted |= {k - 1, k}
                    continue
            if o == Op.POP_TOP and p1 == Op.LOAD_CONST and free(k):
                deleted |= {k - 1, k}
                continue
            if (o == Op.POP_N and args[k] == 0) or (o == Op.JUMP and args[k] == k + 1):
                deleted.add(k)
                continue
            # COMPARE; NOT -> the negated comparison, unless fold folds that comparison
            if o == Op.NOT and p1 in _NEGATED and free(k) and not cmp_folded(k - 1):
                new[k] = (_NEGATED[p1], 0)
                deleted.add(k - 1)
                continue
            if o in _FLIP and p1 == Op.NOT and free(k) and not_rewritten(k - 1):
                new[k] = (_FLIP[o], args[k])
                deleted.add(k - 1)
                continue
        if "cmpjump" in passes:
            # COMPARE; JUMP_IF_FALSE t -> JUMP_IF_<negated> t, COMPARE; JUMP_IF_TRUE t ->
            # JUMP_IF_<same> t, unless the comparison is folded itself in this round
            if o in _FLIP and p1 in _COMPARE and free(k) and not cmp_folded(k - 1):
                cmp = p1 if o == Op.JUMP_IF_TRUE else _NEGATED[p1]
                new[k] = (isa.COMPARE_JUMP[cmp], args[k])
                deleted.add(k - 1)
                continue
        if "deadstore" in passes:
            if (o == Op.LOAD_VAR and p1 == Op.STORE_VAR and args[k - 1] == args[k]
                    and free(k) and args[k] not in live[k]):  # fmt: skip
                deleted |= {k - 1, k}
                continue
    if "loadvar2" in passes:
        # LOAD_VAR a; LOAD_VAR b -> LOAD_VAR2 a, b, after the rules above, left to right
        taken = set()  # positions already in a LOAD_VAR2
        for k in range(1, n):
            if (ops[k] == ops[k - 1] == Op.LOAD_VAR and free(k)
                    and code.lines[k] == code.lines[k - 1]
                    and 0 <= args[k - 1] < SLOT2_MAX and 0 <= args[k] < SLOT2_MAX
                    and k - 1 not in deleted and k - 1 not in taken):  # fmt: skip
                new[k] = (Op.LOAD_VAR2, isa.pack_slots(args[k - 1], args[k]))
                deleted.add(k - 1)
                taken |= {k - 1, k}
    for k, (o, a) in new.items():
        code.ops[k], code.args[k] = int(o), int(a)
    code.compact(deleted)


# loop inversion: the instructions a copied loop test may hold (no control flow, no call,
# no store or output), at most TEST_MAX of them before its conditional jump
_TEST_OPS = {Op.LOAD_VAR, Op.LOAD_VAR2, Op.LOAD_CONST} | _BINARY | _UNARY
TEST_MAX = 4
_INVERTED = {Op.JUMP_IF_FALSE: Op.JUMP_IF_TRUE, Op.JUMP_IF_TRUE: Op.JUMP_IF_FALSE,
             **{isa.COMPARE_JUMP[c]: isa.COMPARE_JUMP[n] for c, n in _NEGATED.items()}}  # fmt: skip


def invert_loops(code: _Code, size: int) -> None:
    """Loop inversion: ``JUMP h`` at j, where h < j starts a test ``T; JUMP_IF_x e`` (T: at
    most TEST_MAX instructions of _TEST_OPS, the conditional jump at c = h + len(T) < j),
    becomes a copy of the test ending in the inverted jump to the loop body:
    ``T; JUMP_IF_not-x c + 1`` (the copies keep their lines), followed by ``JUMP e`` (line
    of c) unless falling through already goes to e (e is j + 1, or j + 1 is ``JUMP e``).
    Candidates are taken in code order while the code still fits ``size`` instructions;
    every jump target and function entry moves with its instruction (one to j goes to the
    copy's first instruction)."""
    ops, args, lines = code.ops, code.args, code.lines
    n = len(ops)
    plan = {}  # j -> (h, number of test instructions, whether a JUMP e follows)
    grown = 0
    for j in range(n):
        h = args[j]
        if ops[j] != Op.JUMP or not 0 <= h < j:
            continue
        m = 0
        while h + m < j and ops[h + m] in _TEST_OPS:
            m += 1
        c = h + m
        if m > TEST_MAX or c >= j or ops[c] not in _INVERTED:
            continue
        e = args[c]
        falls_to_e = e == j + 1 or (j + 1 < n and ops[j + 1] == Op.JUMP and args[j + 1] == e)
        if n + grown + m + (not falls_to_e) > size:
            break
        plan[j] = (h, m, not falls_to_e)
        grown += m + (not falls_to_e)
    if not plan:
        return
    new_index, shift = [], 0
    for i in range(n + 1):
        new_index.append(i + shift)
        if i in plan:
            shift += plan[i][1] + plan[i][2]

    def move(t):
        return new_index[t] if 0 <= t <= n else t

    out_ops, out_args, out_lines = [], [], []
    for i in range(n):
        if i in plan:
            h, m, jump = plan[i]
            for k in range(h, h + m):
                out_ops.append(ops[k])
                out_args.append(args[k])
                out_lines.append(lines[k])
            out_ops.append(_INVERTED[ops[h + m]])
            out_args.append(move(h + m + 1))
            out_lines.append(lines[h + m])
            if jump:
                out_ops.append(Op.JUMP)
                out_args.append(move(args[h + m]))
                out_lines.append(lines[h + m])
        else:
            out_ops.append(ops[i])
            out_args.append(move(args[i]) if ops[i] in _JUMPS else args[i])
            out_lines.append(lines[i])
    code.ops, code.args, code.lines = out_ops, out_args, out_lines
    code.entries = [move(e) for e in code.entries]


def _optimize_one(program: isa.Program, passes, max_rounds: int) -> isa.Program:
    n = int(program.n_code)
    nf = int(program.n_funcs)
    op = np.asarray(program.op)
    code = _Code(
        [int(x) for x in op[:n]],
        [int(x) for x in np.asarray(program.arg)[:n]],
        [int(x) for x in np.asarray(program.line)[:n]],
        [int(x) for x in np.asarray(program.fn_entry)[:nf]],
    )
    size = op.shape[0]
    for _ in range(max_rounds):
        before = code.key()
        if "thread" in passes:
            thread(code)
        if "unreachable" in passes:
            remove_unreachable(code)
        if {"fold", "peephole", "deadstore", "cmpjump", "loadvar2"} & set(passes):
            rewrite(code, passes)
        if "invert" in passes:
            invert_loops(code, size)
        if code.key() == before:
            break
    size = op.shape[0]
    m = len(code.ops)
    out_op, out_arg, out_line = (np.zeros(size, np.int32) for _ in range(3))
    out_op[:m], out_arg[:m], out_line[:m] = code.ops, code.args, code.lines
    entry = np.array(program.fn_entry, np.int32, copy=True)
    entry[:nf] = code.entries
    return program._replace(op=out_op, arg=out_arg, line=out_line, n_code=np.int32(m),
                            fn_entry=entry)  # fmt: skip


def optimize(program: isa.Program, passes=PASSES, max_rounds: int = MAX_ROUNDS) -> isa.Program:
    """The optimized program (numpy arrays); batched (leading axis B) or one program.
    ``passes``: the names of PASSES to run (the others are off)."""
    unknown = set(passes) - set(PASSES)
    if unknown:
        raise ValueError(f"unknown optimizer passes: {sorted(unknown)} (known: {PASSES})")
    if np.ndim(program.op) == 1:
        return _optimize_one(program, tuple(passes), max_rounds)
    rows = [
        _optimize_one(isa.Program(*(np.asarray(f)[b] for f in program)), tuple(passes), max_rounds)
        for b in range(np.shape(program.op)[0])
    ]
    if not rows:
        return isa.Program(*(np.asarray(f) for f in program))
    return isa.Program(*(np.stack([np.asarray(r[i]) for r in rows]) for i in range(len(rows[0]))))
