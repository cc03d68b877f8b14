"""The operator and builtin table (jaxcc/ops.py) against CPython and against every place
that derives from it or still keeps a copy of it (docs/extending.md lists them)."""

from __future__ import annotations

import ast
import random
import re

import jax.numpy as jnp
import numpy as np
import pytest

from jaxcc import grammar, isa, ops, resolve, syntax, tokens, vm
from jaxcc.errors import Code, Value
from jaxcc.isa import Op
from jaxcc.reference import interp
from jaxcc.syntax import Node
from property_tests import oracle

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
EDGES = (INT_MIN, INT_MIN + 1, -65536, -46341, -46340, -33, -32, -31, -3, -2, -1, 0, 1, 2, 3,
         30, 31, 32, 33, 46340, 46341, 65535, 65536, INT_MAX - 1, INT_MAX)  # fmt: skip


def _values(n: int, seed: int) -> list[int]:
    """Random int32 values, mostly near the interesting scales (small, 2**15, 2**31)."""
    r = random.Random(seed)
    scale = (4, 40, 2**16, 2**31)
    return [max(INT_MIN, min(INT_MAX, r.randint(-s, s))) for s in r.choices(scale, k=n)]


def _pairs(n_random: int = 1500) -> list[tuple[int, int]]:
    pairs = [(a, b) for a in EDGES for b in EDGES]
    return pairs + list(zip(_values(n_random, 1), _values(n_random, 2), strict=True))


# CPython's exact int arithmetic plus the int32 rules (the oracle's checked helpers)
CPYTHON = {
    Op.ADD: oracle._add, Op.SUB: oracle._sub, Op.MUL: oracle._mul,
    Op.FLOORDIV: oracle._floordiv, Op.MOD: oracle._mod, Op.POW: oracle._pow,
    Op.LSHIFT: oracle._lshift, Op.RSHIFT: oracle._rshift, Op.AND: oracle._bitand,
    Op.OR: oracle._bitor, Op.XOR: oracle._bitxor,
    Op.MIN: min, Op.MAX: max,
    Op.LT: lambda a, b: int(a < b), Op.LE: lambda a, b: int(a <= b),
    Op.GT: lambda a, b: int(a > b), Op.GE: lambda a, b: int(a >= b),
    Op.EQ: lambda a, b: int(a == b), Op.NE: lambda a, b: int(a != b),
    Op.NEG: oracle._neg, Op.INVERT: oracle._invert, Op.NOT: lambda a: int(not a),
    Op.ABS: oracle._abs,
}  # fmt: skip
_VALUE_DETAIL = {
    "negative shift count": Value.NEGATIVE_SHIFT,
    "negative exponent": Value.NEGATIVE_POWER,
}


def _cpython(op: Op, *args) -> tuple[int, int, int]:
    """(value, code, detail) as CPython computes it, with jaxcc's int32 errors."""
    try:
        return int(CPYTHON[op](*args)), Code.OK, 0
    except ZeroDivisionError:
        return 0, Code.ZERO_DIVISION, 0
    except OverflowError:
        return 0, Code.OVERFLOW, 0
    except ValueError as e:
        return 0, Code.VALUE, _VALUE_DETAIL[str(e)]


def _args(op: Op, pairs):
    return [p[: ops.SEMANTICS[op].arity] for p in pairs]


def _same(got, want) -> bool:
    """Equal outcomes: the value only matters when no check fired."""
    return got[1] == want[1] and got[2] == want[2] and (want[1] != Code.OK or got[0] == want[0])


def test_every_arithmetic_opcode_has_semantics_and_cpython():
    arith = {*isa.BINARY_OPS, *isa.UNARY_OPS}
    assert set(ops.SEMANTICS) == arith == set(CPYTHON)


@pytest.mark.parametrize("op", sorted(ops.SEMANTICS), ids=lambda o: Op(o).name)
def test_semantics_on_python_ints_equal_cpython(op):
    for args in _args(op, _pairs()):
        got, want = ops.evaluate(op, *args), _cpython(op, *args)
        assert _same(got, want), (Op(op).name, args, got, want)


@pytest.mark.parametrize("op", sorted(ops.SEMANTICS), ids=lambda o: Op(o).name)
def test_semantics_on_arrays_equal_python_ints(op):
    args = _args(op, _pairs())
    cols = [jnp.asarray(np.array(c, np.int64).astype(np.int32)) for c in zip(*args, strict=True)]
    val, code, detail = (np.asarray(x) for x in ops.evaluate(op, *cols))
    for i, a in enumerate(args):
        want = ops.evaluate(op, *a)
        assert (int(val[i]), int(code[i]), int(detail[i])) == want or _same(
            (int(val[i]), int(code[i]), int(detail[i])), want
        ), (Op(op).name, a)


@pytest.mark.parametrize("op", sorted(ops.SEMANTICS), ids=lambda o: Op(o).name)
def test_vm_arithmetic_equals_table(op):
    """The VM's tuned kernels (vm._binary, vm._unary) compute the table's semantics."""
    args = _args(op, _pairs())
    cols = [jnp.asarray(np.array(c, np.int64).astype(np.int32)) for c in zip(*args, strict=True)]
    o = jnp.full(cols[0].shape, int(op), jnp.int32)
    if len(cols) == 2:
        val, code, detail = (np.asarray(x) for x in vm._binary(o, *cols))
    else:
        val, ovf = (np.asarray(x) for x in vm._unary(o, cols[0]))
        code = np.where(ovf, int(Code.OVERFLOW), int(Code.RUNNING))
        detail = np.zeros_like(code)
    for i, a in enumerate(args):
        c = int(code[i])
        got = (
            int(val[i]),
            Code.OK if c == Code.RUNNING else c,
            int(detail[i]) if c == Code.VALUE else 0,
        )
        assert _same(got, ops.evaluate(op, *a)), (Op(op).name, a, got)


def _one_op_program(op: Op, args) -> isa.Program:
    code = [(Op.LOAD_CONST, v) for v in args] + [(op, 0), (Op.RETURN_VALUE, 0)]
    z = np.zeros(1, np.int32)
    return isa.Program(
        op=np.array([c[0] for c in code], np.int32),
        arg=np.array([c[1] for c in code], np.int32),
        line=np.ones(len(code), np.int32),
        n_code=np.int32(len(code)),
        fn_entry=z,
        fn_nparams=z,
        fn_nlocals=z,
        fn_maxstack=np.array([2], np.int32),
        fn_rettype=z,
        n_funcs=np.int32(1),
    )


@pytest.mark.parametrize("op", sorted(ops.SEMANTICS), ids=lambda o: Op(o).name)
def test_reference_interpreter_arithmetic_equals_table(op):
    for args in _args(op, _pairs(100)):
        r = interp.run_program(_one_op_program(op, args))
        got = (int(r.result), int(r.status), int(r.detail))
        assert _same(got, ops.evaluate(op, *args)), (Op(op).name, args, got)


# ----------------------------------------------------------------------------------------
# the table's own consistency


def test_op_enums_are_the_rows():
    """The op-field enums (built from the rows) keep the values the stored parse tables
    and the flat AST use: append rows, never reorder."""
    assert [m.name for m in syntax.BinOp] == ["Add", "Sub", "Mult", "FloorDiv", "Mod", "Pow",
        "LShift", "RShift", "BitAnd", "BitOr", "BitXor"]  # fmt: skip
    assert [m.name for m in syntax.UnaryOp] == ["USub", "UAdd", "Invert", "Not"]
    assert [m.name for m in syntax.CmpOp] == ["Lt", "LtE", "Gt", "GtE", "Eq", "NotEq"]
    assert [m.name for m in syntax.BoolOp] == ["And", "Or"]
    for node, enum_ in ((Node.BINOP, syntax.BinOp), (Node.UNARYOP, syntax.UnaryOp),
                        (Node.CMPOP, syntax.CmpOp), (Node.BOOLOP, syntax.BoolOp)):  # fmt: skip
        assert [r.sub for r in ops.rows(node)] == list(enum_), node
        assert all(r.node == node for r in ops.rows(node))
    assert len({r.name for r in ops.OPERATORS}) == len(ops.OPERATORS)


def test_spellings_and_tokens():
    for r in ops.OPERATORS:
        spelled = tokens.OPERATORS.get(r.spelling, tokens.KEYWORDS.get(r.spelling))
        assert spelled == r.tok, r.name
        if r.aug_tok is not None:
            assert tokens.OPERATORS[r.spelling + "="] == r.aug_tok, r.name
    # an operator of the subset is not also rejected by the lexers
    assert not set(tokens.OPERATORS) & set(tokens.UNSUPPORTED_OPERATORS)


def _example(r: ops.Operator) -> str:
    return {Node.BINOP: f"a {r.spelling} b", Node.UNARYOP: f"{r.spelling} a",
            Node.CMPOP: f"a {r.spelling} b", Node.BOOLOP: f"a {r.spelling} b"}[r.node]  # fmt: skip


def test_python_ast_classes_match_spellings():
    for r in ops.OPERATORS:
        e = ast.parse(_example(r), mode="eval").body
        got = e.ops[0] if r.node == Node.CMPOP else e.op
        assert type(got) is r.py_ast, r.name


def test_opcodes_and_checks_agree_with_isa():
    for r in ops.BINARY + ops.COMPARE:
        assert r.opcode in isa.BINARY_OPS, r.name
    for r in ops.UNARY:
        assert r.opcode is None or r.opcode in isa.UNARY_OPS, r.name
    for b in ops.BUILTINS:
        if b.sem is not None:
            assert b.opcode in isa.BINARY_OPS + isa.UNARY_OPS, b.name
    # every check the machine makes is in some row, and check codes are run-time codes
    for s in ops.SEMANTICS.values():
        for c in s.checks:
            assert c.code in (Code.ZERO_DIVISION, Code.OVERFLOW, Code.VALUE)


def test_builtins_are_the_reserved_names():
    assert tokens.RESERVED_NAMES == ops.RESERVED_NAMES
    assert tokens.N_RESERVED_NAMES == len(ops.BUILTINS)
    # resolve's builtin codes are 1 + the id
    for name in ("print", "abs", "min", "max", "range"):
        assert getattr(resolve, "B_" + name.upper()) == 1 + ops.BUILTIN_ID[name]
    # the reserved names are plain names to Python and to the lexer (not keywords)
    for b in ops.BUILTINS:
        assert b.name not in tokens.KEYWORDS and b.name.isidentifier()


# ----------------------------------------------------------------------------------------
# places that derive from the table, or keep a checked copy of it


def test_grammar_actions_and_rules():
    """grammar.py builds each operator's alternative and action from its row (and
    test_parser checks that the tables built from that grammar are the stored ones)."""
    for r in ops.OPERATORS:
        act = grammar.ACTIONS[r.name]
        assert (act["kind"], act["op"]) == (r.node, r.sub), r.name
        nt, production = r.grammar
        assert r.tok_name in production.split() or r.group == ops.Group.BOOLEAN, r.name
        assert re.search(rf"^{nt}: .*\b{production} -> {r.name}\b", grammar.GRAMMAR, re.M)
        if r.aug_tok is not None:
            aug = grammar.ACTIONS["aug_" + syntax.BinOp(r.sub).name.lower()]
            assert (aug["kind"], aug["op"]) == (Node.AUG_ASSIGN, r.sub), r.name
            assert f"testlist {r.aug_tok.name} testlist -> aug_" in grammar.GRAMMAR


# ----------------------------------------------------------------------------------------
# the path a new arithmetic opcode takes: no kernel or arm of its own, the table's function


def test_vm_table_path_equals_table(monkeypatch):
    """With every arithmetic opcode sent through ops.evaluate (the path of an opcode
    appended to isa.py without a tuned kernel), the VM's arithmetic is still the table's."""
    sem = ops.SEMANTICS
    monkeypatch.setattr(vm, "_TABLE_BINARY", tuple(op for op in sorted(sem) if sem[op].arity == 2))
    monkeypatch.setattr(vm, "_TABLE_UNARY", tuple(op for op in sorted(sem) if sem[op].arity == 1))
    for op in sorted(sem):
        test_vm_arithmetic_equals_table(op)


def test_interpreter_table_path_equals_table(monkeypatch):
    """The reference interpreter's fallback arm (ops.evaluate), with its own arithmetic
    arms switched off."""
    for name in ("NEG", "ABS", "INVERT", "NOT"):
        monkeypatch.setattr(interp, name, -1)
    monkeypatch.setattr(interp, "NE", interp.ADD - 1)
    monkeypatch.setattr(interp, "_TABLE_ONLY", frozenset(ops.SEMANTICS))
    for op in sorted(ops.SEMANTICS):
        for args in _args(op, _pairs(20)):
            r = interp.run_program(_one_op_program(op, args))
            got = (int(r.result), int(r.status), int(r.detail))
            assert _same(got, ops.evaluate(op, *args)), (Op(op).name, args, got)


def test_program_generator_uses_every_operator_and_callable_builtin():
    """jaxcc.testing's generated programs (the property tests' input) exercise every row:
    a new operator or builtin the generator does not make would go untested."""
    from jaxcc import testing

    seen: set = set()
    for seed in range(100):
        mod = testing._Gen(testing._Seeded(seed), 3, 3, 2, 4, True).module()
        for n in ast.walk(mod):
            if isinstance(getattr(n, "op", None), ast.AST):
                seen.add(type(n.op))
            if isinstance(n, ast.Compare):
                seen.update(type(o) for o in n.ops)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                seen.add(n.func.id)
    assert {r.py_ast for r in ops.OPERATORS} <= seen
    assert set(ops.CALLABLE) | {"range"} <= seen
    assert testing._CMP_OPS == tuple(r.py_ast for r in ops.COMPARE)


def test_cpython_oracle_checks_every_arithmetic_operator():
    """property_tests/oracle.py keeps its own (CPython) arithmetic on purpose: it is what
    the table is checked against. It must rewrite every operator that can overflow or fail."""
    for r in ops.BINARY:
        assert r.py_ast in oracle._BINOPS, r.name
    for r in ops.UNARY:
        assert r.py_ast in oracle._UNOPS or not r.checks and r.opcode in (None, Op.NOT), r.name


def test_language_reference_lists_every_row():
    """docs/language.md's typing table (3.1) is prose: it must at least name every
    operator and every callable builtin."""
    import pathlib

    doc = (pathlib.Path(__file__).parents[1] / "docs" / "language.md").read_text()
    table = doc[doc.index("### 3.1") : doc.index("### 3.2")]
    for r in ops.OPERATORS:
        assert f"{r.spelling.replace('|', chr(92) + '|')}" in table, r.name
    for name in ops.CALLABLE:
        assert f"`{name}(" in table, name


def test_vm_decode_follows_the_kernel_tuples():
    """The VM's arithmetic decode is derived from its kernels' opcode tuples: a subtraction
    where they are contiguous, else a lookup table, so appending or reordering opcodes in
    isa.py cannot misdecode (issue 15)."""
    o = jnp.arange(-3, len(Op) + 5)
    for kernel in (vm._KERNEL_BINARY, vm._KERNEL_UNARY, (Op.SUB, Op.ADD, Op.NE), (Op.NOT,)):
        d = vm._decode(kernel)
        member, index = np.asarray(d.member(o)), np.asarray(d.index(o))
        for code, m, i in zip(np.asarray(o), member, index, strict=True):
            assert bool(m) == (int(code) in kernel), (kernel, code)
            if m:
                assert kernel[int(i)] == int(code)
    # the opcodes with a row in ops.py are each decoded by a kernel or run from the table
    for op, sem in ops.SEMANTICS.items():
        kernel = vm._KERNEL_BINARY if sem.arity == 2 else vm._KERNEL_UNARY
        table = vm._TABLE_BINARY if sem.arity == 2 else vm._TABLE_UNARY
        assert (op in kernel) != (op in table), op
