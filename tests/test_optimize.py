"""The optimizer (jaxcc.optimize on the device, jaxcc.reference.optimize its oracle):
hand-written cases per pass where it must fire (the code it gives, so the instruction
count drops as expected) and where it must not (a fold that would overflow, divide by
zero or shift out of range; a read of a variable that may be unbound; a slot still
live), each also run at -O0 and -O1 on both VMs; the examples; batched vs unbatched;
the compiler, the loop and the command line with -O0/-O1/--passes/--no-pass.
The generated-program tests are property_tests/test_optimize_vs_reference.py."""

from __future__ import annotations

import concurrent.futures
import functools
import glob
import os

import jax
import numpy as np
import pytest

from jaxcc import cli, isa
from jaxcc import optimize as dopt
from jaxcc.errors import Code
from jaxcc.isa import Op
from jaxcc.reference import optimize as ropt
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.interp import run_program
from property_tests.limits import OPTIMIZE as LIMITS
from property_tests.test_optimize_vs_reference import (
    assert_programs_equal,
    check_behaviour,
    compile_ref,
    device_optimize_many,
    lane,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L, C, V, S = Op.LOAD_CONST, Op.LOAD_VAR, Op.STORE_VAR, Op.RETURN_VALUE
C2, pk = Op.LOAD_VAR2, isa.pack_slots


def code_of(source: str, passes=ropt.PASSES, fn: int = 0) -> list[tuple]:
    """Function fn's code after the reference optimizer: [(Op, arg)], args of jumps
    relative to the function's entry."""
    c = compile_source(source, LIMITS)
    assert int(c.error.code) == Code.OK, c.debug.message
    p = ropt.optimize(c.program, passes)
    start = int(p.fn_entry[fn])
    end = int(p.fn_entry[fn + 1]) if fn + 1 < int(p.n_funcs) else int(p.n_code)
    out = []
    for i in range(start, end):
        o, a = Op(int(p.op[i])), int(p.arg[i])
        out.append((o, a - start) if isa.INFO[o].jumps else (o, a))
    return out


# (name, source, function, passes, the optimized code of that function)
FIRES = [
    ("fold binary", "print(2 * 3 + 4)\n", 0, ("fold",),
     [(L, 10), (Op.PRINT_INT, 1), (Op.PRINT_NEWLINE, 0), (Op.POP_N, 1), (L, 0), (S, 0)]),
    ("fold unary and nested", "print(-(1 << 4) - ~2)\n", 0, ("fold",),
     [(L, -13), (Op.PRINT_INT, 1), (Op.PRINT_NEWLINE, 0), (Op.POP_N, 1), (L, 0), (S, 0)]),
    ("fold the int32 edges", "print(2147483646 + 1, -2147483647 - 1, 46340 * 46340)\n", 0,
     ("fold",), [(L, 2**31 - 1), (L, -(2**31)), (L, 46340 * 46340), (Op.PRINT_INT, 3),
                 (Op.PRINT_INT, 2), (Op.PRINT_INT, 1), (Op.PRINT_NEWLINE, 0), (Op.POP_N, 3),
                 (L, 0), (S, 0)]),
    ("branch folding: while True", "def f(n):\n    while True:\n        n = n - 1\n"
     "        if n < 0:\n            return n\n", 1, ("fold", "unreachable"),
     [(C, 0), (L, 1), (Op.SUB, 0), (V, 0), (C, 0), (L, 0), (Op.LT, 0),
      (Op.JUMP_IF_FALSE, 10), (C, 0), (S, 0), (Op.JUMP, 0)]),
    ("branch folding: if False", "def f(n):\n    if False:\n        n = 1\n    return n\n", 1,
     ("fold", "unreachable", "thread", "peephole"), [(C, 0), (S, 0)]),
    ("identities", "def f(x):\n    return (x + 0) * 1 - 0 | 0\n", 1, ("peephole",),
     [(C, 0), (S, 0), (L, 0), (S, 0)]),
    ("not of a comparison", "def f(a, b):\n    return not a < b\n", 1, ("peephole",),
     [(C, 0), (C, 1), (Op.GE, 0), (S, 0), (L, 0), (S, 0)]),
    ("not before a branch", "def f(a):\n    if not a:\n        return 1\n    return 2\n", 1,
     ("peephole",), [(C, 0), (Op.JUMP_IF_TRUE, 4), (L, 1), (S, 0), (L, 2), (S, 0), (L, 0),
                     (S, 0)]),
    ("dead store before return", "def f(a):\n    x = a + 1\n    return x\n", 1,
     ("deadstore",), [(C, 0), (L, 1), (Op.ADD, 0), (S, 0), (L, 0), (S, 0)]),
    ("dead store: s = s", "def f(a):\n    s = 0\n    for i in range(a):\n"
     "        s = s + i\n        s = s\n    return s\n", 1, ("deadstore",),
     [(L, 0), (V, 1), (L, 0), (C, 0), (L, 1), (Op.FOR_RANGE, 12), (V, 2), (C, 1), (C, 2),
      (Op.ADD, 0), (V, 1), (Op.JUMP, 5), (C, 1), (S, 0), (L, 0), (S, 0)]),
    ("dead store overwritten", "def f(a):\n    a += 5\n    a = a % 7\n    return a\n", 1,
     ("deadstore",), [(C, 0), (L, 5), (Op.ADD, 0), (L, 7), (Op.MOD, 0), (S, 0),
                      (L, 0), (S, 0)]),
    ("unreachable: code after return", "def f(a):\n    return a\n    a = 2\n", 1,
     ("unreachable",), [(C, 0), (S, 0)]),
    ("and: the false jump goes straight to else", "def f(a, b):\n    if a and b:\n"
     "        return 1\n    return 2\n", 1, ("thread",),
     [(C, 0), (Op.JUMP_IF_FALSE, 6), (C, 1), (Op.JUMP_IF_FALSE, 6), (L, 1), (S, 0), (L, 2),
      (S, 0), (L, 0), (S, 0)]),
    ("jump to a jump: the if's end to the loop's top", "def f(a):\n    while a > 0:\n        if a > 5:\n            a -= 2\n"
     "        else:\n            a -= 1\n    return a\n", 1, ("thread",),
     [(C, 0), (L, 0), (Op.GT, 0), (Op.JUMP_IF_FALSE, 18), (C, 0), (L, 5), (Op.GT, 0),
      (Op.JUMP_IF_FALSE, 13), (C, 0), (L, 2), (Op.SUB, 0), (V, 0), (Op.JUMP, 0),
      (C, 0), (L, 1), (Op.SUB, 0), (V, 0), (Op.JUMP, 0), (C, 0), (S, 0), (L, 0), (S, 0)]),
    ("print() leaves no POP_N 0", "print()\n", 0, ("peephole",),
     [(Op.PRINT_NEWLINE, 0), (L, 0), (S, 0)]),
    ("cmpjump: if a < b", "def f(a, b):\n    if a < b:\n        return 1\n    return 2\n", 1,
     ("cmpjump",), [(C, 0), (C, 1), (Op.JUMP_IF_GE, 5), (L, 1), (S, 0), (L, 2), (S, 0), (L, 0),
                    (S, 0)]),
    ("cmpjump: while n != 0", "def f(n):\n    while n != 0:\n        n = n - 1\n    return n\n",
     1, ("cmpjump",), [(C, 0), (L, 0), (Op.JUMP_IF_EQ, 8), (C, 0), (L, 1), (Op.SUB, 0), (V, 0),
                       (Op.JUMP, 0), (C, 0), (S, 0), (L, 0), (S, 0)]),
    ("cmpjump: every comparison, negated", "def f(a, b):\n    if a <= b:\n        a = 1\n"
     "    if a > b:\n        a = 2\n    if a >= b:\n        a = 3\n    if a == b:\n"
     "        a = 4\n    return a\n", 1, ("cmpjump",),
     [(C, 0), (C, 1), (Op.JUMP_IF_GT, 5), (L, 1), (V, 0), (C, 0), (C, 1), (Op.JUMP_IF_LE, 10),
      (L, 2), (V, 0), (C, 0), (C, 1), (Op.JUMP_IF_LT, 15), (L, 3), (V, 0), (C, 0), (C, 1),
      (Op.JUMP_IF_NE, 20), (L, 4), (V, 0), (C, 0), (S, 0), (L, 0), (S, 0)]),
    ("cmpjump: or, a JUMP_IF_TRUE once threaded", "def f(a, b, c, d):\n    if a < b or c < d:\n"
     "        return 1\n    return 2\n", 1, ("thread", "cmpjump"),
     [(C, 0), (C, 1), (Op.JUMP_IF_LT, 6), (C, 2), (C, 3), (Op.JUMP_IF_GE, 8), (L, 1), (S, 0),
      (L, 2), (S, 0), (L, 0), (S, 0)]),
    ("cmpjump: while not a == b (peephole first)", "def f(a, b):\n    while not a == b:\n"
     "        a = a + 1\n    return a\n", 1, ("peephole", "cmpjump"),
     [(C, 0), (C, 1), (Op.JUMP_IF_EQ, 8), (C, 0), (L, 1), (Op.ADD, 0), (V, 0), (Op.JUMP, 0),
      (C, 0), (S, 0), (L, 0), (S, 0)]),
    ("cmpjump: not where the comparison is folded", "def f(a):\n    if 2 < 1:\n        a = 5\n"
     "    return a\n", 1, ("fold", "cmpjump", "unreachable", "peephole"), [(C, 0), (S, 0)]),
    # COMPARE; NOT is not merged where fold folds the comparison in the same round (both
    # once consumed the comparison: its operands deleted, a comparison of nothing left)
    ("peephole: not where the comparison is folded", "print(not 2 >= 520)\n", 0,
     ("fold", "peephole"), [(L, 1), (Op.PRINT_BOOL, 1), (Op.PRINT_NEWLINE, 0), (Op.POP_N, 1),
                            (L, 0), (S, 0)]),
    ("peephole: not before a branch on a folded comparison", "def f(a):\n"
     "    if not 2 >= 520:\n        a = 5\n    return a\n", 1, ("fold", "peephole"),
     [(L, 5), (V, 0), (C, 0), (S, 0), (L, 0), (S, 0)]),
    ("invert: while i < n", "def f(n):\n    i = 0\n    while i < n:\n        i += 1\n"
     "    return i\n", 1, ("cmpjump", "invert"),
     [(L, 0), (V, 1), (C, 1), (C, 0), (Op.JUMP_IF_GE, 12), (C, 1), (L, 1), (Op.ADD, 0), (V, 1),
      (C, 1), (C, 0), (Op.JUMP_IF_LT, 5), (C, 1), (S, 0), (L, 0), (S, 0)]),
    ("invert: while a (a JUMP_IF_FALSE test)", "def f(a):\n    while a:\n        a = a // 2\n"
     "    return a\n", 1, ("invert",),
     [(C, 0), (Op.JUMP_IF_FALSE, 8), (C, 0), (L, 2), (Op.FLOORDIV, 0), (V, 0), (C, 0),
      (Op.JUMP_IF_TRUE, 2), (C, 0), (S, 0), (L, 0), (S, 0)]),
    ("invert: a test of 4 instructions", "def f(n):\n    i = 0\n    while i + 1 < n:\n"
     "        i += 1\n    return i\n", 1, ("cmpjump", "invert"),
     [(L, 0), (V, 1), (C, 1), (L, 1), (Op.ADD, 0), (C, 0), (Op.JUMP_IF_GE, 16), (C, 1), (L, 1),
      (Op.ADD, 0), (V, 1), (C, 1), (L, 1), (Op.ADD, 0), (C, 0), (Op.JUMP_IF_LT, 7), (C, 1),
      (S, 0), (L, 0), (S, 0)]),
    ("invert: the copy's MUL can overflow (its line is kept)", "def f(n):\n    i = 1\n"
     "    while i * i < n:\n        i = i * 2\n    return i\n", 1, ropt.PASSES,
     [(L, 1), (V, 1), (C2, pk(1, 1)), (Op.MUL, 0), (C, 0), (Op.JUMP_IF_GE, 14), (C, 1), (L, 2),
      (Op.MUL, 0), (V, 1), (C2, pk(1, 1)), (Op.MUL, 0), (C, 0), (Op.JUMP_IF_LT, 6), (C, 1),
      (S, 0)]),
    ("invert: a while in a for (the copy jumps back to the for)", "def f(n):\n    s = 0\n"
     "    for j in range(n):\n        i = 0\n        while i < j:\n            i += 1\n"
     "            s += i\n    return s\n", 1, ropt.PASSES,
     [(L, 0), (V, 1), (L, 0), (C, 0), (L, 1), (Op.FOR_RANGE, 21), (V, 2), (L, 0), (V, 3),
      (C2, pk(3, 2)), (Op.JUMP_IF_GE, 5), (C, 3), (L, 1), (Op.ADD, 0), (V, 3), (C2, pk(1, 3)),
      (Op.ADD, 0), (V, 1), (C2, pk(3, 2)), (Op.JUMP_IF_LT, 11), (Op.JUMP, 5), (C, 1), (S, 0)]),
    ("fold: a compare-and-branch on constants, not taken", "x = 3\nif x < 5:\n    print(1)\n",
     0, ("deadstore", "cmpjump", "fold"),
     [(L, 1), (Op.PRINT_INT, 1), (Op.PRINT_NEWLINE, 0), (Op.POP_N, 1), (L, 0), (S, 0)]),
    ("fold: a compare-and-branch on constants, taken", "x = 7\nif x < 5:\n    print(1)\n"
     "print(2)\n", 0, ("deadstore", "cmpjump", "fold", "unreachable", "peephole"),
     [(L, 2), (Op.PRINT_INT, 1), (Op.PRINT_NEWLINE, 0), (Op.POP_N, 1), (L, 0), (S, 0)]),
    ("loadvar2: a + b", "def f(a, b):\n    return a + b\n", 1, ("loadvar2",),
     [(C2, pk(0, 1)), (Op.ADD, 0), (S, 0), (L, 0), (S, 0)]),
    # a run of three loads: the first two pair (the third is left); of four: two pairs
    ("loadvar2: runs of 3 and 4 loads", "def f(a, b, c, d):\n    print(a, b, c)\n"
     "    print(d, c, b, a)\n    return 0\n", 1, ("loadvar2",),
     [(C2, pk(0, 1)), (C, 2), (Op.PRINT_INT, 3), (Op.PRINT_INT, 2), (Op.PRINT_INT, 1),
      (Op.PRINT_NEWLINE, 0), (Op.POP_N, 3), (C2, pk(3, 2)), (C2, pk(1, 0)), (Op.PRINT_INT, 4),
      (Op.PRINT_INT, 3), (Op.PRINT_INT, 2), (Op.PRINT_INT, 1), (Op.PRINT_NEWLINE, 0),
      (Op.POP_N, 4), (L, 0), (S, 0), (L, 0), (S, 0)]),
    # deadstore takes STORE_VAR x; LOAD_VAR x first: x's load is not fused with a's
    ("loadvar2: not a load deadstore deletes", "def f(a):\n    x = a + 1\n    return x + a\n",
     1, ("deadstore", "loadvar2"),
     [(C, 0), (L, 1), (Op.ADD, 0), (C, 0), (Op.ADD, 0), (S, 0), (L, 0), (S, 0)]),
    # invert copies a test that holds a LOAD_VAR2
    ("loadvar2: while i < n, inverted", "def f(n):\n    i = 0\n    while i < n:\n"
     "        i += 1\n    return i\n", 1, ("cmpjump", "loadvar2", "invert"),
     [(L, 0), (V, 1), (C2, pk(1, 0)), (Op.JUMP_IF_GE, 10), (C, 1), (L, 1), (Op.ADD, 0), (V, 1),
      (C2, pk(1, 0)), (Op.JUMP_IF_LT, 4), (C, 1), (S, 0), (L, 0), (S, 0)]),
]  # fmt: skip


@pytest.mark.parametrize("name, source, fn, passes, want", FIRES, ids=[f[0] for f in FIRES])
def test_pass_fires(name, source, fn, passes, want):
    before = code_of(source, (), fn)
    assert code_of(source, passes, fn) == want
    # threading alone keeps the count (a jump skips a jump: fewer steps, see
    # test_hand_cases_device_equals_reference_and_behave_the_same); the others shrink it
    # loop inversion makes it longer (it saves steps: test_invert_saves_a_jump_per_iteration)
    assert (
        len(want) < len(before)
        or (passes == ("thread",) and want != before)
        or ("invert" in passes and want != before)
    )


# folds that would raise: (expression, the opcode that must stay, the error it raises)
NO_FOLD = [
    ("2147483647 + 1", Op.ADD, Code.OVERFLOW),
    ("-2147483648 - 1", Op.SUB, Code.OVERFLOW),
    ("65536 * 65536", Op.MUL, Code.OVERFLOW),
    ("2 ** 31", Op.POW, Code.OVERFLOW),
    ("2 ** -1", Op.POW, Code.VALUE),
    ("-(-2147483648)", Op.NEG, Code.OVERFLOW),
    ("abs(-2147483648)", Op.ABS, Code.OVERFLOW),
    ("-2147483648 // -1", Op.FLOORDIV, Code.OVERFLOW),
    ("7 // 0", Op.FLOORDIV, Code.ZERO_DIVISION),
    ("7 % 0", Op.MOD, Code.ZERO_DIVISION),
    ("1 << 31", Op.LSHIFT, Code.OVERFLOW),
    ("1 << 40", Op.LSHIFT, Code.OVERFLOW),
    ("1 << -1", Op.LSHIFT, Code.VALUE),
    ("1 >> -1", Op.RSHIFT, Code.VALUE),
]


@pytest.mark.parametrize("expr, op, code", NO_FOLD, ids=[n[0] for n in NO_FOLD])
def test_fold_does_not_fire_where_the_operation_raises(expr, op, code):
    src = f"x = 1\nprint(x)\ny = {expr}\nprint(y)\n"
    c = compile_source(src, LIMITS)
    p = ropt.optimize(c.program)
    assert list(p.op[: int(p.n_code)]).count(op) == list(c.program.op).count(op) == 1
    for prog in (c.program, p):
        res = run_program(prog, LIMITS)
        assert (int(res.status), int(res.line), int(res.n_out)) == (code, 3, 2)


# (name, source, passes): the pass must leave function 1's code as the compiler made it
NOT_FIRES = [
    ("a store still live", "def f(a):\n    x = a\n    y = x\n    return x + y\n", ("deadstore",)),
    ("a store read after the loop", "def f(a):\n    s = 0\n    for i in range(a):\n"
     "        s = i\n        print(s, i)\n    return s\n", ("deadstore",)),
    ("a chained comparison's temporary", "def f(a, b, c):\n    return a < b < c\n",
     ("deadstore",)),
    ("x + 1 - 1 is not an identity", "def f(x):\n    return x + 1 - 1\n", ("peephole",)),
    ("a jump into the pattern", "def f(a):\n    return 3 if a else 4\n", ("fold",)),
    ("cmpjump: a jump to the conditional jump", "def f(a, b, c):\n    if a > 0 and b < c:\n"
     "        return 1\n    return 2\n", ("cmpjump",)),
    ("cmpjump: a comparison before JUMP_IF_FALSE_OR_POP", "def f(a, b, c):\n"
     "    return a < b and c > 0\n", ("cmpjump",)),
    ("cmpjump: a comparison that is not before a jump", "def f(a, b):\n    x = a < b\n"
     "    print(x)\n    return 0\n", ("cmpjump",)),
    # the two loads are on different lines (an UnboundLocalError's line must stay b's)
    ("loadvar2: loads on two lines", "def f(a, b):\n    return (a +\n            b)\n",
     ("loadvar2",)),
]  # fmt: skip


def test_loadvar2_not_into_a_jump_target():
    """LOAD_VAR a; LOAD_VAR b where a jump goes to b: not fused (the jump brings one
    value, not a's); where the jump goes to a, fused (the jump reaches LOAD_VAR2)."""
    code = [(C, 0), (C, 1), (Op.ADD, 0), (Op.DUP_TOP, 0), (Op.JUMP_IF_TRUE, 1), (S, 0)]
    p = _hand_program(code, 8)
    q = ropt.optimize(p, ("loadvar2",))
    assert [int(o) for o in q.op[: int(q.n_code)]] == [o for o, _ in code]
    code2 = [(C, 0), (C, 1), (Op.ADD, 0), (Op.DUP_TOP, 0), (Op.JUMP_IF_TRUE, 0), (S, 0)]
    q2 = ropt.optimize(_hand_program(code2, 8), ("loadvar2",))
    assert [(int(o), int(a)) for o, a in zip(q2.op[:5], q2.arg[:5], strict=True)] == [
        (C2, pk(0, 1)),
        (Op.ADD, 0),
        (Op.DUP_TOP, 0),
        (Op.JUMP_IF_TRUE, 0),
        (S, 0),
    ]
    batch = isa.Program(*(np.stack([np.asarray(x), np.asarray(y)]) for x, y in
                          zip(p, _hand_program(code2, 8), strict=True)))  # fmt: skip
    want = isa.Program(*(np.stack([np.asarray(x), np.asarray(y)]) for x, y in
                         zip(q, q2, strict=True)))  # fmt: skip
    assert_programs_equal(jax.device_get(dopt.optimize(batch, LIMITS, ("loadvar2",))), want,
                          "jump targets")  # fmt: skip


@pytest.mark.parametrize("src, name", [
    ("def f(c):\n    y = 2\n    if c:\n        x = 1\n    return y - x\n", "x"),
    ("def f(c):\n    y = 2\n    if c:\n        x = 1\n    return x - y\n", "x"),
    ("def f(c):\n    if c:\n        x = 1\n    return x - x\n", "x"),
])  # fmt: skip
def test_loadvar2_unbound_error_names_the_same_variable(src, name):
    """An UnboundLocalError in a LOAD_VAR2 (either slot) gives the -O0 status, line, detail
    (the slot) and message on both VMs."""
    from jaxcc import format as fmt
    from jaxcc import vm

    c = compile_source(src, LIMITS)
    p1 = ropt.optimize(c.program)
    assert Op.LOAD_VAR2 in [int(o) for o in p1.op]
    texts = set()
    for prog in (c.program, p1):
        for res in (
            run_program(prog, LIMITS, 1, [0]),
            jax.device_get(vm.run(prog, LIMITS, entry=1, args=np.zeros(1, np.int32))),
        ):
            assert (int(res.status), int(res.line)) == (Code.UNBOUND_LOCAL, 5 - ("y" not in src))
            pc = int(res.pc)  # the unbound slot is x's (after c, y)
            assert isa.failing_slot(prog.op[pc], prog.arg[pc], res.detail) == 2 - ("y" not in src)
            texts.add(fmt.format_error(res, src, "a.py", c.debug, prog))
    assert len(texts) == 1 and f"local variable '{name}'" in texts.pop()


@pytest.mark.parametrize("name, source, passes", NOT_FIRES, ids=[n[0] for n in NOT_FIRES])
def test_pass_does_not_fire(name, source, passes):
    assert code_of(source, passes, 1) == code_of(source, (), 1)


# loop tests that are not copied: (source, function); invert alone must leave it as it is
NOT_INVERTED = [
    ("def f(n):\n    i = 0\n    while f(i) < n:\n        i += 1\n    return i\n", 1),  # a CALL
    ("def f(n):\n    i = 0\n    while i * 2 < -n:\n        i += 1\n    return i\n", 1),  # 5
    ("def f(n):\n    for i in range(n):\n        n = n - 1\n    return n\n", 1),  # FOR_RANGE
    (
        "def f(n):\n    i = 1\n    while i < n and i > 0:\n        i += 1\n    return i\n",
        1,
    ),  # the test is not one conditional jump
]


@pytest.mark.parametrize("source, fn", NOT_INVERTED)
def test_invert_does_not_fire(source, fn):
    assert code_of(source, ("cmpjump", "invert"), fn) == code_of(source, ("cmpjump",), fn)


def test_invert_saves_a_jump_per_iteration():
    src = "def f(n):\n    i = 0\n    while i < n:\n        i += 1\n    return i\n"
    c = compile_source(src, LIMITS)
    steps = {}
    for passes in ((), ("cmpjump",), ("cmpjump", "invert")):
        for n in (0, 1, 10):
            res = run_program(ropt.optimize(c.program, passes), LIMITS, 1, [n])
            assert int(res.status) == Code.OK and int(res.result) == n
            steps[passes, n] = int(res.steps)
    for n in (0, 1, 10):  # one step per test (the comparison), then one per back edge
        assert steps[(), n] - steps[("cmpjump",), n] == n + 1
        assert steps[("cmpjump",), n] - steps[("cmpjump", "invert"), n] == n


def _hand_program(code, size: int, nlocals: int = 2, maxstack: int = 3) -> isa.Program:
    """Function 0 of ``code`` [(op, arg)] with 2 params, on one line, in arrays of size."""
    op, arg, line = (np.zeros(size, np.int32) for _ in range(3))
    op[: len(code)] = [o for o, _ in code]
    arg[: len(code)] = [a for _, a in code]
    line[: len(code)] = 1
    f = np.zeros(2, np.int32)
    return isa.Program(op, arg, line, np.int32(len(code)), f, np.array([2, 0], np.int32),
                       np.array([nlocals, 0], np.int32), np.array([maxstack, 0], np.int32), f,
                       np.int32(1))  # fmt: skip


def _loops_program(size: int) -> isa.Program:
    """Two counting loops in a row (i to 10, then to 20), hand-assembled into code arrays
    of ``size`` instructions: each inverted loop needs 2 more."""
    J = Op.JUMP
    code = [(L, 0), (V, 0), (C, 0), (L, 10), (Op.JUMP_IF_GE, 10), (C, 0), (L, 1), (Op.ADD, 0),
            (V, 0), (J, 2), (C, 0), (L, 20), (Op.JUMP_IF_GE, 18), (C, 0), (L, 1), (Op.ADD, 0),
            (V, 0), (J, 10), (C, 0), (S, 0)]  # fmt: skip
    op, arg, line = (np.zeros(size, np.int32) for _ in range(3))
    op[: len(code)] = [o for o, _ in code]
    arg[: len(code)] = [a for _, a in code]
    line[: len(code)] = np.arange(len(code)) + 1
    f = np.zeros(2, np.int32)
    return isa.Program(op, arg, line, np.int32(len(code)), f, f, np.array([1, 0], np.int32),
                       np.array([2, 0], np.int32), f, np.int32(1))  # fmt: skip


FITS = [(20, 0), (21, 0), (22, 1), (23, 1), (24, 2)]


@functools.cache
def _invert_on_device() -> dict:
    """The device optimizer (invert alone) on _loops_program(size), batched, for every
    size of FITS: one XLA compile per size, made concurrently from threads."""

    def one(size):
        batch = isa.Program(*(np.stack([np.asarray(x)] * 2) for x in _loops_program(size)))
        return jax.device_get(dopt.optimize(batch, LIMITS, ("invert",)))

    sizes = [size for size, _ in FITS]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as ex:
        return dict(zip(sizes, ex.map(one, sizes), strict=True))


@pytest.mark.parametrize("size, inverted", FITS)
def test_invert_only_while_the_code_fits(size, inverted):
    p0 = _loops_program(size)
    p1 = ropt.optimize(p0, ("invert",))
    assert int(p1.n_code) == 20 + 2 * inverted
    ops = [Op(int(o)) for o in p1.op[: int(p1.n_code)]]
    assert ops.count(Op.JUMP) == 2 - inverted and ops.count(Op.JUMP_IF_LT) == inverted
    got = _invert_on_device()[size]
    assert_programs_equal(got, isa.Program(*(np.stack([np.asarray(x)] * 2) for x in p1)),
                          f"size {size}")  # fmt: skip
    r0, r1 = run_program(p0, LIMITS), run_program(p1, LIMITS)
    assert int(r0.status) == int(r1.status) == Code.OK and int(r1.result) == 20
    assert int(r0.steps) - int(r1.steps) == [0, 10, 20][inverted]


# reads of a variable that may be unbound: no rule may drop them (x * 0 is not 0 here)
MAYBE_UNBOUND = [
    "def f(c):\n    if c:\n        x = 1\n    return x * 0\n",
    "def f(c):\n    if c:\n        x = 1\n    return x - x\n",
    "def f(c):\n    if c:\n        x = 1\n    return x + 0\n",
    "def f(c):\n    if c:\n        x = 1\n    x = x\n    return 0\n",
]


@pytest.mark.parametrize("source", MAYBE_UNBOUND)
def test_reads_of_a_maybe_unbound_variable_stay(source):
    c = compile_source(source, LIMITS)
    p = ropt.optimize(c.program)
    loads = [int(o) for o in c.program.op].count(Op.LOAD_VAR)
    ops = [int(o) for o in p.op[: int(p.n_code)]]
    assert ops.count(Op.LOAD_VAR) + 2 * ops.count(Op.LOAD_VAR2) == loads
    for prog in (c.program, p):
        res = run_program(prog, LIMITS, 1, [0])
        assert int(res.status) == Code.UNBOUND_LOCAL and int(res.line) == 4


ALL_SOURCES = (
    [f[1] for f in FIRES]
    + [n[1] for n in NOT_FIRES]
    + [n[0] for n in NOT_INVERTED]
    + MAYBE_UNBOUND
    + [f"x = 1\nprint(x)\ny = {e}\nprint(y)\n" for e, _, _ in NO_FOLD]
)


def test_hand_cases_device_equals_reference_and_behave_the_same():
    """-O2 (every pass to a fixpoint), -O1 (the loop's preset) and some passes alone: the
    device optimizer equals the reference (the variants compiled concurrently), and the
    -O2 and -O1 code behaves as the compiler's (-O1's on the reference interpreter)."""
    p0, codes = compile_ref(ALL_SOURCES)
    assert (codes == Code.OK).all()
    alone = [((only,), dopt.MAX_ROUNDS) for only in (dopt.PASSES[0], "cmpjump", "loadvar2",
                                                     "invert")]  # fmt: skip
    variants = [(dopt.PASSES, dopt.MAX_ROUNDS), dopt.LEVELS[1], *alone]
    got = device_optimize_many(p0, variants)
    want = [ropt.optimize(p0, *v) for v in variants]
    for v, g, w in zip(variants, got, want, strict=True):
        assert_programs_equal(g, w, f"hand cases {v}", ALL_SOURCES)
    assert check_behaviour(p0, want[0], codes == Code.OK, 5) > 50
    # -O1 on the reference interpreter (its opcodes run on both VMs in the -O2 runs)
    assert check_behaviour(p0, want[1], codes == Code.OK, 6, jax_vm=False) > 50


def example_sources() -> list[str]:
    return [open(p).read() for p in sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")))]


def test_examples_device_equals_reference_and_run_the_same():
    sources = example_sources()
    p0, codes = compile_ref(sources)
    variants = [(dopt.PASSES, dopt.MAX_ROUNDS), dopt.LEVELS[1]]  # -O2, -O1
    optimized = [ropt.optimize(p0, *v) for v in variants]
    for v, got, p1 in zip(variants, device_optimize_many(p0, variants), optimized, strict=True):
        assert_programs_equal(got, p1, f"examples {v}", sources)
        assert int(p1.n_code.sum()) < int(p0.n_code.sum())
    lim = LIMITS._replace(max_steps=3_000_000, max_output=512)
    for i in np.flatnonzero(codes == Code.OK):
        if "bits" in sources[i] or "primes" in sources[i]:
            continue  # the longest runs (seconds on the reference interpreter)
        a = run_program(lane(p0, i), lim)
        for p1 in optimized:
            b = run_program(lane(p1, i), lim)
            for f in ("status", "line", "n_out", "out_val", "out_kind"):
                assert np.array_equal(getattr(a, f), getattr(b, f)), (i, f)
            assert int(b.steps) <= int(a.steps)


def test_unbatched_and_jitted_vmap_equal_batched():
    """At -O2 (the while_loop of rounds) and -O1 (one unrolled round). The batch is 32
    programs, device_optimize's shape, so its compiles are the other tests' (the
    unbatched and vmap-under-jit ones, compiled here, run from threads)."""
    p0, _ = compile_ref(ALL_SOURCES[:32])
    levels = ((dopt.PASSES, dopt.MAX_ROUNDS), dopt.LEVELS[1])
    calls = []
    for v in levels:
        calls += [
            lambda v=v: dopt.optimize(p0, LIMITS, *v),
            lambda v=v: dopt.optimize(lane(p0, 2), LIMITS, *v),
            lambda v=v: jax.jit(jax.vmap(lambda p: dopt.optimize(p, LIMITS, *v)))(p0),
        ]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as ex:
        out = list(ex.map(lambda f: jax.device_get(f()), calls))
    for k, v in enumerate(levels):
        batched, one, under = out[3 * k : 3 * k + 3]
        for name in isa.Program._fields:
            assert np.array_equal(
                np.asarray(getattr(one, name)), np.asarray(getattr(batched, name))[2]
            )
        assert_programs_equal(under, batched, f"vmap under jit {v}")


def test_no_passes_is_the_identity_and_unknown_passes_are_refused():
    p0, _ = compile_ref(ALL_SOURCES[:3])
    assert_programs_equal(ropt.optimize(p0, ()), p0, "reference, no passes")
    with pytest.raises(ValueError, match="unknown optimizer passes"):
        dopt.optimize(p0, LIMITS, ("fold", "magic"))
    with pytest.raises(ValueError, match="unknown optimizer passes"):
        ropt.optimize(p0, ("magic",))
    assert dopt.PASSES == ropt.PASSES == cli.OPT_PASSES and dopt.MAX_ROUNDS == ropt.MAX_ROUNDS
    assert dopt.LEVELS == cli.OPT_LEVELS == {1: (dopt.O1_PASSES, dopt.O1_ROUNDS),
                                             2: (dopt.PASSES, dopt.MAX_ROUNDS)}  # fmt: skip
    assert dopt.level(True) == dopt.LEVELS[1] and dopt.level(2, ("fold",)) == (("fold",), 32)
    with pytest.raises(ValueError, match="unknown optimization level"):
        dopt.level(3)


def test_cli_levels_and_passes(tmp_path, capsys):
    path = tmp_path / "p.py"
    path.write_text("def f(a):\n    x = a * 1\n    return x\nprint(f(2 + 3))\nprint(1 // 0)\n")
    out = {}
    for flags in ([], ["-O0"], ["-O2"], ["-O1", "--no-pass", "fold"],
                  ["--passes", "thread,deadstore"]):  # fmt: skip
        assert cli.main(["dis", "--compiler", "python", *flags, str(path)]) == 0
        out[tuple(flags)] = capsys.readouterr().out
        assert cli.main(["run", "--compiler", "python", "--vm", "python", *flags, str(path)]) == 1
        res = capsys.readouterr()
        assert res.out == "5\n" and res.err.strip().endswith(
            "ZeroDivisionError: integer division or modulo by zero"
        )
        assert "line 5" in res.err
    none = out[("-O0",)]
    for full in (out[()], out[("-O2",)]):  # -O1 (the default) and -O2
        assert "STORE_VAR" in none and "STORE_VAR" not in full and "MUL" not in full
        assert "LOAD_CONST               5" in full and "LOAD_CONST               5" not in none
    # -O2 also deletes the unreachable LOAD_CONST 0; RETURN_VALUE after f's return
    assert out[()].count("RETURN_VALUE") == out[("-O2",)].count("RETURN_VALUE") + 1
    assert "LOAD_CONST               5" not in out[("-O1", "--no-pass", "fold")]
    assert "MUL" in out[("--passes", "thread,deadstore")]
    with pytest.raises(SystemExit, match="unknown optimizer pass 'magic'"):
        cli.main(["dis", "--no-pass", "magic", str(path)])


def test_compile_many_and_the_loop_optimize_on_the_device():
    """compiler.compile_many(optimize=True) gives the reference optimizer's code of the
    reference compiler's code; the loop (evaluate_sources) gives the same verdicts with
    and without it. The shapes are tests/test_pipeline.py's and test_slices.py's
    (PIPELINE limits, 64 programs, 4 cases of 3 arguments), so the compiler's XLA
    compiles are shared through the persistent cache; only the optimizer's is new."""
    from jaxcc import compiler, pipeline
    from jaxcc.reference import compiler as ref_compiler
    from property_tests.limits import PIPELINE

    sq = "def f(n: int) -> int:\n    x = n * 1\n    return x * x\n"
    slow = "def f(n: int) -> int:\n    while True:\n        n = n + 0\n"
    wrong = "def f(n: int) -> int:\n    if not n < 0:\n        return n + 2 * 3\n    return n\n"
    raises = "def f(n: int) -> int:\n    return n // (1 - 1)\n"
    sources = [sq, slow, wrong, raises, *ALL_SOURCES[:10]]
    sources += ["pass\n"] * (64 - len(sources))
    got, _, _ = compiler.compile_many(sources, PIPELINE, optimize=True)  # -O1
    want, _, _ = ref_compiler.compile_many(sources, PIPELINE)
    assert_programs_equal(jax.tree.map(np.asarray, got), ropt.optimize(want, *dopt.LEVELS[1]),
                          "compile_many")  # fmt: skip
    cases = [((3, 0, 0), 9), ((-4, 0, 0), 16), ((2, 0, 0), 4), ((0, 0, 0), 0)]
    tests = [(1, cases)] * 4 + [(0, [])] * 60
    e0 = pipeline.evaluate_sources(sources, tests, PIPELINE, timeout=20.0)
    e1 = pipeline.evaluate_sources(sources, tests, PIPELINE, timeout=20.0, optimize=True)
    assert np.array_equal(e0.verdict, e1.verdict) and np.array_equal(e0.per_case, e1.per_case)
    V = pipeline.Verdict
    assert list(e1.verdict[:4]) == [V.PASS, V.RUNTIME_ERROR, V.WRONG_ANSWER, V.RUNTIME_ERROR]
    assert int(np.sum(e1.program.n_code)) < int(np.sum(e0.program.n_code))


def test_only_the_unoptimized_code_runs_out_of_steps():
    """-O0 takes 9 steps an iteration here and -O1 7: with 12,000 iterations only -O0
    passes the 100,000-step budget. The behaviour check accepts that (it reruns -O0 with
    a larger budget, which must end as -O1 does) and still catches a wrong -O1 result."""
    assert LIMITS.max_steps == 100_000
    src = "i = 0\nwhile i < 12000:\n    i = i + 1\nprint(i)\n"
    p0, codes = compile_ref([src])
    p1 = ropt.optimize(p0)
    r0 = run_program(lane(p0, 0), LIMITS, 0, [])
    r1 = run_program(lane(p1, 0), LIMITS, 0, [])
    assert int(r0.status) == Code.TIMEOUT and int(r1.status) == Code.OK
    assert check_behaviour(p0, p1, codes == Code.OK, 0) == 1
    # the same loop one iteration short at -O1: a different output, which must fail
    wrong, _ = compile_ref([src.replace("12000", "11999")])
    with pytest.raises(AssertionError):
        check_behaviour(p0, ropt.optimize(wrong), codes == Code.OK, 0, jax_vm=False)
