"""The subset's grammar and its LALR(1) tables (host side; generated once, stored).

The grammar is written over the lexer's token kinds (``jaxcc.tokens.Tok`` names;
``$END`` is ENDMARKER, and also PAD). COMMENT and NL never reach it: the parser drops
them before the automaton runs. Every rule carries a semantic action (``ACTIONS``, by
the rule's alias) saying which ``syntax.Node`` its reduction creates, if any, and which
checks it makes (Unsupported constructs, assignment targets, annotations).

``build_tables()`` runs Lark's LALR(1) generator (Lark is a build/test dependency only,
never needed at run time), checks there is no conflict (strict mode), renumbers states
canonically (breadth-first from the start state, symbols in a fixed order) so the result
is identical on every run, collapses chains of pure unit reductions into the GOTO table,
and returns plain numpy arrays. ``python -m jaxcc.grammar`` writes them to
``jaxcc/data/parse_tables.npz``; ``load_tables()`` reads them (what the parser uses).
See docs/parser.md for the table format.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

import numpy as np

from jaxcc import ops
from jaxcc.errors import Code, Syntax, Unsupported
from jaxcc.syntax import BinOp, ConstKind, Node
from jaxcc.tokens import N_TOK, Tok

TABLES_PATH = os.path.join(os.path.dirname(__file__), "data", "parse_tables.npz")

# Terminals are Tok names; ENDMARKER is Lark's "$END".
GRAMMAR = r"""
start: module

module: -> module
      | mstmts -> module
mstmts: mstmt | mstmts mstmt
mstmt: stmt | funcdef
bstmts: bstmt | bstmts bstmt
bstmt: stmt | funcdef -> nested_def

stmt: simple_line | if_stmt | while_stmt | for_stmt
simple_line: small_list NEWLINE | small_list SEMI NEWLINE
small_list: small_stmt | small_list SEMI small_stmt
small_stmt: expr_stmt
          | KW_PASS -> pass_stmt
          | KW_BREAK -> break_stmt
          | KW_CONTINUE -> continue_stmt
          | KW_RETURN -> return_stmt
          | KW_RETURN testlist -> return_stmt
          | KW_ASSERT test -> assert_stmt
          | KW_ASSERT test COMMA test -> assert_msg

expr_stmt: testlist -> expr_stmt
         | testlist EQUAL testlist -> assign
         | assign_chain
         | testlist COLON test -> ann_assign
         | testlist COLON test EQUAL testlist -> ann_assign
         %AUGMENTED%
assign_chain: testlist EQUAL testlist EQUAL testlist -> chained_assign
            | assign_chain EQUAL testlist

if_stmt: KW_IF test COLON suite -> if_stmt
       | KW_IF test COLON suite else_part -> if_stmt
else_part: KW_ELSE COLON suite
         | KW_ELIF test COLON suite -> if_stmt
         | KW_ELIF test COLON suite else_part -> if_stmt
while_stmt: KW_WHILE test COLON suite -> while_stmt
          | KW_WHILE test COLON suite KW_ELSE COLON suite -> while_else
for_stmt: KW_FOR for_target KW_IN testlist COLON suite -> for_stmt
        | KW_FOR for_target KW_IN testlist COLON suite KW_ELSE COLON suite -> for_else
for_target: expr | target_tuple
target_tuple: target_tuple_head -> for_tuple
            | target_tuple_head expr -> for_tuple
target_tuple_head: expr COMMA | target_tuple_head expr COMMA

suite: simple_line -> block
     | NEWLINE INDENT block DEDENT
block: bstmts -> block

funcdef: KW_DEF NAME parameters COLON suite -> funcdef
       | KW_DEF NAME parameters returns COLON suite -> funcdef_returns
returns: RARROW test -> returns
parameters: LPAR RPAR -> params
          | LPAR paramlist RPAR -> params
          | LPAR paramlist COMMA RPAR -> params
paramlist: param | paramlist COMMA param
param: NAME -> param
     | NAME COLON test -> param_ann
     | NAME EQUAL test -> param_default
     | NAME COLON test EQUAL test -> param_default_ann
     | STAR NAME -> param_star
     | STAR NAME COLON test -> param_star
     | STAR -> param_star
     | DOUBLESTAR NAME -> param_star
     | DOUBLESTAR NAME COLON test -> param_star

testlist: test | tuple | STAR expr -> star_arg
tuple: tuple_head -> tuple
     | tuple_head test -> tuple
tuple_head: test COMMA | tuple_head test COMMA

test: or_test | or_test KW_IF or_test KW_ELSE test -> ifexp
or_chain: and_test KW_OR and_test | or_chain KW_OR and_test
and_chain: not_test KW_AND not_test | and_chain KW_AND not_test
comparison: expr | cmp_chain -> compare
cmp_chain: expr cmp_op expr | cmp_chain cmp_op expr
%OPERATORS%
atom_expr: NAME -> name
         | call
         | atom
         | call call_args -> bad_call
         | atom call_args -> bad_call
call: NAME call_args -> call
call_args: LPAR RPAR | LPAR arglist RPAR
// positional arguments before keyword ones: `f(a=1, 2)` is a SyntaxError, as in CPython
arglist: pos_args | pos_args COMMA | kw_args | kw_args COMMA
       | pos_args COMMA kw_args | pos_args COMMA kw_args COMMA
pos_args: pos_arg | pos_args COMMA pos_arg
pos_arg: test | STAR test -> star_arg
kw_args: kw_arg | kw_args COMMA kw_arg | kw_args COMMA STAR test -> star_arg
kw_arg: NAME EQUAL test -> kwarg
      | DOUBLESTAR test -> star_arg
atom: NUMBER -> int_const
    | KW_TRUE -> true_const
    | KW_FALSE -> false_const
    | KW_NONE -> none_const
    | LPAR test RPAR
    | LPAR tuple RPAR
    | LPAR RPAR -> empty_tuple
// no bare starred expression in parentheses: `(*a)` is CPython's SyntaxError
// ("cannot use starred expression here"), not an unsupported feature
"""

# The operators' alternatives come from ops.py (each row's (nonterminal, production),
# aliased by its name); each precedence level keeps its other alternatives here, from the
# loosest level to the tightest.
_LEVELS = (
    ("or_test", "and_test"),
    ("and_test", "not_test"),
    ("not_test", "comparison"),
    ("cmp_op", "KW_IN -> cmp_in | KW_NOT KW_IN -> cmp_in"),  # `in`: unsupported
    ("expr", "xor_expr"),
    ("xor_expr", "and_expr"),
    ("and_expr", "shift_expr"),
    ("shift_expr", "arith"),
    ("arith", "term"),
    ("term", "factor"),
    ("factor", "power"),
    ("power", "atom_expr"),
)


def _operator_rules() -> str:
    """One rule per precedence level: its own alternatives, then its operators'."""
    lines = []
    for nt, base in _LEVELS:
        alts = [f"{r.grammar[1]} -> {r.name}" for r in ops.OPERATORS if r.grammar[0] == nt]
        lines.append(f"{nt}: " + " | ".join([base, *alts]))
    assert {r.grammar[0] for r in ops.OPERATORS} <= {nt for nt, _ in _LEVELS}
    return "\n".join(lines)


def _augmented_rules() -> str:
    """`x op= e` for every binary operator with an augmented form."""
    return " | ".join(
        f"testlist {r.aug_tok_name} testlist -> aug_{BinOp(r.sub).name.lower()}"
        for r in ops.BINARY
        if r.aug_tok_name is not None
    )


GRAMMAR = GRAMMAR.replace("%OPERATORS%", _operator_rules()).replace(
    "%AUGMENTED%", "| " + _augmented_rules()
)

# --- semantic actions -----------------------------------------------------------------
# opmode: how the node's op is found
OP_CONST, OP_ANN = 0, 1
# vmode: how the node's value is found
VAL_CONST, VAL_TOKEN = 0, 1
# check: what the reduction verifies (failure -> an error at token first(aux) + aoff)
CHECK_NONE, CHECK_ALWAYS, CHECK_ANN, CHECK_TARGET = 0, 1, 2, 3
# `a = b = c` (first three parts of a chain): a SyntaxError CANNOT_ASSIGN at the first of
# rhs[0], rhs[2] and (when `=` follows) rhs[4] that is not a name, as CPython says; else
# the rule's own error at first(aux)
CHECK_CHAIN = 4

# Fields of a rule row (RULES[r, field]).
RULE_FIELDS = (
    "len",  # number of rhs symbols
    "lhs",  # nonterminal id
    "kind",  # syntax.Node created (0: none)
    "op",  # constant op
    "opmode",  # OP_CONST / OP_ANN (annotation code of the token first(aux) + aoff)
    "vmode",  # VAL_CONST / VAL_TOKEN (tokens.value of the phrase's first token + voff)
    "val",  # constant value
    "voff",
    "aux",  # an rhs position the action looks at (annotation, target, error position, drop);
    # -1: the stack entry just below the rule's right-hand side
    "aoff",  # token offset from the first token of rhs[aux]
    "check",  # CHECK_*
    "ecode",  # errors.Code on a failed check
    "edetail",  # its detail
    "drop",  # 1: discard the nodes made by rhs[aux] (an annotation): the node goes there
)
F = {name: i for i, name in enumerate(RULE_FIELDS)}


def _unsupported(detail: Unsupported, aux: int = 0, aoff: int = 0) -> dict:
    return dict(check=CHECK_ALWAYS, ecode=Code.UNSUPPORTED, edetail=detail, aux=aux, aoff=aoff)


def _node(kind: Node, **kw) -> dict:
    return dict(kind=kind, **kw)


_TARGET = dict(check=CHECK_TARGET, ecode=Code.SYNTAX, edetail=Syntax.CANNOT_ASSIGN)

ACTIONS: dict[str, dict] = {
    "module": _node(Node.MODULE),
    "nested_def": _unsupported(Unsupported.NESTED_FUNCTION),
    "pass_stmt": _node(Node.PASS),
    "break_stmt": _node(Node.BREAK),
    "continue_stmt": _node(Node.CONTINUE),
    "return_stmt": _node(Node.RETURN),
    "assert_stmt": _node(Node.ASSERT),
    "assert_msg": _unsupported(Unsupported.TUPLE, aux=2),  # as reference.flatten
    "expr_stmt": _node(Node.EXPR_STMT),
    "assign": _node(Node.ASSIGN, aux=0, **_TARGET),
    "chained_assign": dict(
        check=CHECK_CHAIN, ecode=Code.UNSUPPORTED, edetail=Unsupported.CHAINED_ASSIGNMENT, aux=0
    ),
    "ann_assign": _unsupported(Unsupported.ANNOTATED_ASSIGNMENT, aux=1),
    # `x op= e` for every binary operator with an augmented form (ops.py's aug_tok)
    **{
        "aug_" + BinOp(r.sub).name.lower(): _node(Node.AUG_ASSIGN, op=r.sub, aux=0, **_TARGET)
        for r in ops.BINARY
        if r.aug_tok is not None
    },
    "if_stmt": _node(Node.IF),
    "while_stmt": _node(Node.WHILE),
    "while_else": _unsupported(Unsupported.LOOP_ELSE, aux=4),
    "for_stmt": _node(Node.FOR, aux=1, **_TARGET),
    "for_else": _unsupported(Unsupported.LOOP_ELSE, aux=6),
    "tuple": _unsupported(Unsupported.TUPLE),
    "for_tuple": _unsupported(Unsupported.FOR_TARGET),
    "empty_tuple": _unsupported(Unsupported.TUPLE),
    "block": _node(Node.BLOCK),
    "funcdef": _node(Node.FUNCTION_DEF, vmode=VAL_TOKEN, voff=1),
    # the annotation token follows '->'
    "funcdef_returns": _node(
        Node.FUNCTION_DEF, vmode=VAL_TOKEN, voff=1, opmode=OP_ANN, aux=3, aoff=1
    ),
    "returns": dict(
        check=CHECK_ANN, ecode=Code.UNSUPPORTED, edetail=Unsupported.ANNOTATION, aux=1, drop=1
    ),
    "params": _node(Node.PARAMS),
    "param": _node(Node.PARAM, vmode=VAL_TOKEN),
    "param_ann": _node(
        Node.PARAM,
        vmode=VAL_TOKEN,
        opmode=OP_ANN,
        aux=2,
        drop=1,
        check=CHECK_ANN,
        ecode=Code.UNSUPPORTED,
        edetail=Unsupported.ANNOTATION,
    ),
    # at the default value, as CPython's ast places it (reference.flatten)
    "param_default": _unsupported(Unsupported.DEFAULT_ARGUMENT, aux=2),
    "param_default_ann": _unsupported(Unsupported.DEFAULT_ARGUMENT, aux=4),
    "param_star": _unsupported(Unsupported.STAR_ARGUMENT),
    "ifexp": _node(Node.IFEXP),
    # operators: the rule alias is the row's name (ops.py)
    **{r.name: _node(r.node, op=r.sub) for r in ops.OPERATORS},
    "compare": _node(Node.COMPARE),
    # at the comparison's start (CPython's Compare node): aux -1 is the stack entry just
    # below the operator, the left operand (or the chain so far)
    "cmp_in": _unsupported(Unsupported.COMPARISON, aux=-1),
    "name": _node(Node.NAME, vmode=VAL_TOKEN),  # op = Ctx.Load; Store is set after parsing
    "bad_call": _unsupported(Unsupported.CALL_TARGET),
    "call": _node(Node.CALL, vmode=VAL_TOKEN),
    "kwarg": _unsupported(Unsupported.KEYWORD_ARGUMENT),
    "star_arg": _unsupported(Unsupported.STAR_ARGUMENT),
    "int_const": _node(Node.CONSTANT, op=ConstKind.INT, vmode=VAL_TOKEN),
    "true_const": _node(Node.CONSTANT, op=ConstKind.BOOL, val=1),
    "false_const": _node(Node.CONSTANT, op=ConstKind.BOOL, val=0),
    "none_const": _node(Node.CONSTANT, op=ConstKind.NONE),
}

# --- action-table encoding --------------------------------------------------------------
ACT_ERROR, ACT_SHIFT, ACT_REDUCE, ACT_ACCEPT = 0, 1, 2, 3  # ACTION[s, a] = arg << 2 | type

# Per-state flags (STATE_FLAGS[s]) used to classify a syntax error in state s.
FLAG_COLON = 1  # ':' is acceptable
FLAG_COLON_ONLY = 2  # ':' is the only acceptable token
FLAG_INDENT = 4  # INDENT is acceptable (a block must start here)
FLAG_DISJUNCTION = 8  # the state is reached by a symbol that can be part of a disjunction
FLAG_IFEXP = 16  # the state is reached by the 'if' of a conditional expression

# Symbols that make up CPython's `disjunction` (an expression without `if`/`lambda`):
# used to find where "invalid syntax. Perhaps you forgot a comma?" points.
DISJUNCTION_SYMBOLS = frozenset(
    "or_test or_chain and_test and_chain not_test comparison cmp_chain cmp_op expr xor_expr "
    "and_expr shift_expr arith term factor power atom_expr call atom call_args "
    "NAME NUMBER KW_TRUE KW_FALSE KW_NONE KW_AND KW_OR KW_NOT RPAR PLUS MINUS STAR "
    "DOUBLESTAR DOUBLESLASH PERCENT LEFTSHIFT RIGHTSHIFT AMPER VBAR CIRCUMFLEX TILDE KW_IN".split()
)


class Tables(NamedTuple):
    """The parser's tables (numpy, int32).

    action: [S, N_TOK]  arg << 2 | ACT_*; columns are Tok kinds (PAD and ENDMARKER: $END)
    goto: [S, NNT, N_TOK]  state after reducing to nonterminal X from state s with
          lookahead a, pure unit reductions (A -> B, no action) already applied
    rules: [R, len(RULE_FIELDS)]
    state_flags: [S]  FLAG_*
    """

    action: np.ndarray
    goto: np.ndarray
    rules: np.ndarray
    state_flags: np.ndarray
    rule_text: np.ndarray  # [R] str: "origin -> expansion  (alias)"
    nonterminals: np.ndarray  # [NNT] str


def _lark_table():
    from lark import Lark
    from lark.lexer import Lexer

    class _NoLexer(Lexer):  # tables only: tokens come from jaxcc's own lexer
        def __init__(self, conf):
            pass

        def lex(self, data):
            return iter(())

    terminals = " ".join(t.name for t in Tok if t not in (Tok.PAD, Tok.ENDMARKER))
    lark = Lark(GRAMMAR + f"\n%declare {terminals}\n", parser="lalr", lexer=_NoLexer, strict=True)
    return lark.parser.parser._parse_table, lark.rules


def _term_index(name: str) -> int:
    return int(Tok.ENDMARKER) if name == "$END" else int(Tok[name])


def build_tables() -> Tables:
    """Generate the tables from GRAMMAR (needs lark). Deterministic."""
    table, lark_rules = _lark_table()
    states = table.states

    def rule_key(rule):
        return (rule.origin.name, tuple(s.name for s in rule.expansion))

    rules = sorted(
        {rule_key(r): r for r in lark_rules if not r.origin.name.startswith("$")}.values(),
        key=rule_key,
    )
    rule_id = {rule_key(r): i for i, r in enumerate(rules)}
    nts = sorted({r.origin.name for r in rules})
    nt_id = {n: i for i, n in enumerate(nts)}

    # canonical state numbering: BFS from the start state, symbols in a fixed order
    def sym_order(name: str):
        return (0, _term_index(name), "") if name.isupper() or name == "$END" else (1, 0, name)

    start = table.start_states["start"]
    order = {start: 0}
    queue = [start]
    while queue:
        s = queue.pop(0)
        for sym in sorted(states[s], key=sym_order):
            kind, arg = states[s][sym]
            if kind.name == "Shift" and arg not in order:
                order[arg] = len(order)
                queue.append(arg)
    assert len(order) == len(states), "unreachable states"
    S, R, NNT = len(states), len(rules), len(nts)
    end_state = order[table.end_states["start"]]

    action = np.zeros((S, N_TOK), np.int32)
    goto0 = np.full((S, NNT), -1, np.int32)
    for s, row in states.items():
        i = order[s]
        for sym, (kind, arg) in row.items():
            if not (sym.isupper() or sym == "$END"):
                assert kind.name == "Shift"
                goto0[i, nt_id[sym]] = order[arg]
            elif kind.name == "Shift":
                action[i, _term_index(sym)] = order[arg] << 2 | ACT_SHIFT
            else:
                if arg.origin.name.startswith("$"):
                    continue
                action[i, _term_index(sym)] = rule_id[rule_key(arg)] << 2 | ACT_REDUCE
    assert action[end_state, Tok.ENDMARKER] == 0
    action[end_state, Tok.ENDMARKER] = ACT_ACCEPT
    action[:, Tok.PAD] = action[:, Tok.ENDMARKER]

    rows = np.zeros((R, len(RULE_FIELDS)), np.int32)
    text = []
    for i, r in enumerate(rules):
        spec = dict(ACTIONS.get(r.alias, {})) if r.alias else {}
        if r.alias and r.alias not in ACTIONS:
            raise ValueError(f"no action for alias {r.alias}")
        spec.update(len=len(r.expansion), lhs=nt_id[r.origin.name])
        for k, v in spec.items():
            rows[i, F[k]] = int(v)
        exp = " ".join(s.name for s in r.expansion)
        text.append(f"{r.origin.name} -> {exp}" + (f"  ({r.alias})" if r.alias else ""))
        if rows[i, F["check"]] or rows[i, F["drop"]] or rows[i, F["opmode"]]:
            assert rows[i, F["aux"]] < len(r.expansion), text[-1]

    def pure_unit(r: int) -> bool:
        row = rows[r]
        return row[F["len"]] == 1 and not (row[F["kind"]] or row[F["check"]] or row[F["drop"]])

    # goto[s, X, a]: follow pure unit reductions that the lookahead a would trigger
    goto = np.full((S, NNT, N_TOK), -1, np.int32)
    for s in range(S):
        for x in range(NNT):
            g0 = goto0[s, x]
            if g0 < 0:
                continue
            for a in range(N_TOK):
                g = g0
                for _ in range(64):
                    act = action[g, a]
                    if act & 3 != ACT_REDUCE or not pure_unit(act >> 2):
                        break
                    g = goto0[s, rows[act >> 2, F["lhs"]]]
                else:
                    raise AssertionError("cycle of unit rules")
                goto[s, x, a] = g
    goto = np.where(goto < 0, 0, goto).astype(np.int32)  # never read: no such (s, X)

    flags = np.zeros(S, np.int32)
    for row in states.values():
        for sym, (kind, arg) in row.items():
            if kind.name == "Shift" and sym in DISJUNCTION_SYMBOLS:
                flags[order[arg]] |= FLAG_DISJUNCTION  # an LR state has one accessing symbol
            if kind.name == "Shift" and sym == "KW_IF" and "test" not in states[arg]:
                flags[order[arg]] |= FLAG_IFEXP  # a statement's 'if' is followed by a test
    ok = action != 0
    ok[:, Tok.PAD] = False
    flags |= np.where(ok[:, Tok.COLON], FLAG_COLON, 0).astype(np.int32)
    flags |= np.where(ok[:, Tok.COLON] & (ok.sum(1) == 1), FLAG_COLON_ONLY, 0).astype(np.int32)
    flags |= np.where(ok[:, Tok.INDENT], FLAG_INDENT, 0).astype(np.int32)
    return Tables(action, goto, rows, flags, np.array(text), np.array(nts))


def save_tables(path: str = TABLES_PATH) -> Tables:
    t = build_tables()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez_compressed(path, **t._asdict())
    return t


@functools.lru_cache(maxsize=1)
def load_tables(path: str = TABLES_PATH) -> Tables:
    with np.load(path) as z:
        return Tables(**{k: z[k] for k in Tables._fields})


def expected_tokens(state: int) -> list[Tok]:
    """The token kinds acceptable in automaton state ``state`` (e.g. the failing state
    of a syntax error, ``ParseInfo.state``). ENDMARKER stands for end of input."""
    t = load_tables()
    row = t.action[int(state)]
    return [Tok(k) for k in range(1, N_TOK) if row[k] != 0]


if __name__ == "__main__":
    tabs = save_tables()
    print(
        f"{tabs.action.shape[0]} states, {len(tabs.rules)} rules, "
        f"{len(tabs.nonterminals)} nonterminals -> {TABLES_PATH}"
    )
