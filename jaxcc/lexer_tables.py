"""Constant tables of the lexer (built with numpy at import): byte classes, the restart
DFA, operator kinds, the keyword perfect hash and digit powers.

The DFA follows CPython 3.11's ``tokenize`` regular expressions (``PseudoToken``) for the
subset's tokens. Its states are the token being read; a byte that cannot extend the token
*restarts* from ``S0`` (maximal munch without backtracking). Numbers follow the regex's
alternation order (Imagnumber | Floatnumber | Intnumber): the DFA runs the union of the
three and marks, per state, whether the Int part accepts (the NUMBER token ``tokenize``
yields ends at the last Int-accepting byte) and whether a float or imaginary literal was
matched (an error of the subset).
"""

from __future__ import annotations

import enum
import functools

import numpy as np

from jaxcc.errors import Code, Syntax
from jaxcc.tokens import (
    KEYWORDS,
    OPERATORS,
    RESERVED_NAMES,
    UNSUPPORTED_KEYWORDS,
    UNSUPPORTED_OPERATORS,
    Tok,
)


class C(enum.IntEnum):
    """Byte classes (the DFA's alphabet)."""

    PAD = 0  # beyond the program's length
    NL = 1  # \n
    CR = 2  # \r
    SKIP = 3  # space \t \f (CPython's whitespace; \v and \x1c-\x1f are BAD, as there)
    HASH = 4
    BSL = 5  # backslash
    D0 = 6
    D1 = 7
    D27 = 8
    D89 = 9
    HEXL = 10  # a c d f A C D F
    LB = 11  # b B
    LE = 12  # e E
    LX = 13  # x X
    LO = 14  # o O
    LJ = 15  # j J
    US = 16  # _
    LET = 17  # other letters
    STAR = 18
    SLASH = 19
    LT = 20
    GT = 21
    EQ = 22  # =
    MINUS = 23
    PLUS = 24
    OPEQ = 25  # ! % & | ^ @ :  (each may be followed by '=')
    DOT = 26
    OP1 = 27  # ( ) , ; ~ [ ] { }
    QUOTE = 28  # ' "
    BAD = 29  # invalid characters: $ ? ` and control bytes; non-ASCII


N_CLASSES = len(C)
PAD_BYTE = 256  # class index of padding (bytes are 0..255)


def _byte_classes() -> np.ndarray:
    t = np.full(257, C.BAD, np.int32)
    t[PAD_BYTE] = C.PAD
    t[ord("\n")] = C.NL
    t[ord("\r")] = C.CR
    for ch in " \t\f":
        t[ord(ch)] = C.SKIP
    t[ord("#")] = C.HASH
    t[ord("\\")] = C.BSL
    t[ord("0")] = C.D0
    t[ord("1")] = C.D1
    for ch in "234567":
        t[ord(ch)] = C.D27
    for ch in "89":
        t[ord(ch)] = C.D89
    for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
        t[ord(ch)] = C.LET
    for ch in "acdfACDF":
        t[ord(ch)] = C.HEXL
    for ch, c in (("bB", C.LB), ("eE", C.LE), ("xX", C.LX), ("oO", C.LO), ("jJ", C.LJ)):
        for x in ch:
            t[ord(x)] = c
    t[ord("_")] = C.US
    t[ord("*")] = C.STAR
    t[ord("/")] = C.SLASH
    t[ord("<")] = C.LT
    t[ord(">")] = C.GT
    t[ord("=")] = C.EQ
    t[ord("-")] = C.MINUS
    t[ord("+")] = C.PLUS
    for ch in "!%&|^@:":
        t[ord(ch)] = C.OPEQ
    t[ord(".")] = C.DOT
    for ch in "(),;~[]{}":
        t[ord(ch)] = C.OP1
    for ch in "'\"":
        t[ord(ch)] = C.QUOTE
    return t


BYTE_CLASS = _byte_classes()  # Int32[257]


class S(enum.IntEnum):
    """DFA states: the token being read (S0: none, or one that cannot be extended)."""

    S0 = 0
    NAME = 1
    COMMENT = 2
    CR = 3  # \r: a newline if \n follows, else skipped
    BSL = 4  # \ : a continuation if \n (or \r\n) follows, else an invalid character
    BSLCR = 5
    STAR1 = 6
    STAR2 = 7
    SLASH1 = 8
    SLASH2 = 9
    LT1 = 10
    LT2 = 11
    GT1 = 12
    GT2 = 13
    EQ1 = 14  # after one of = ! + % & | ^ @ : (may take '=')
    MINUS = 15  # may take '=' or '>'
    # numbers
    Z = 16  # 0(_?0)*          Int-accepting
    ZU = 17
    DZ = 18  # 0...[1-9]...     decimal digits with a leading zero: only a float prefix
    DZU = 19
    D = 20  # [1-9](_?[0-9])*  Int-accepting
    DU = 21
    FP = 22  # D.              float-accepting
    FPD = 23  # D.D            float-accepting
    FPDU = 24
    EX0 = 25  # ...e
    EXS = 26  # ...e+
    EXD = 27  # ...e+D         float-accepting
    EXDU = 28
    IMAG = 29  # ...j
    HX0 = 30
    HXU = 31
    HX = 32  # Int-accepting
    OC0 = 33
    OCU = 34
    OC = 35  # Int-accepting
    BN0 = 36
    BNU = 37
    BN = 38  # Int-accepting
    Z1 = 39  # a single 0: Int-accepting; may take the x/o/b prefix
    DOT1 = 40  # '.': a float if a digit follows


N_STATES = len(S)

_DIG = (C.D0, C.D1, C.D27, C.D89)
_OCT = (C.D0, C.D1, C.D27)
_BIN = (C.D0, C.D1)
_HEXD = _DIG + (C.HEXL, C.LB, C.LE)
_WORD = _DIG + (C.HEXL, C.LB, C.LE, C.LX, C.LO, C.LJ, C.US, C.LET)

START = {c: S.S0 for c in C}
START.update(
    {
        C.CR: S.CR,
        C.HASH: S.COMMENT,
        C.BSL: S.BSL,
        C.D0: S.Z1,
        C.D1: S.D,
        C.D27: S.D,
        C.D89: S.D,
        C.STAR: S.STAR1,
        C.SLASH: S.SLASH1,
        C.LT: S.LT1,
        C.GT: S.GT1,
        C.EQ: S.EQ1,
        C.OPEQ: S.EQ1,
        C.PLUS: S.EQ1,
        C.MINUS: S.MINUS,
        C.DOT: S.DOT1,
    }
)
for _c in (C.HEXL, C.LB, C.LE, C.LX, C.LO, C.LJ, C.US, C.LET):
    START[_c] = S.NAME


def _extensions() -> dict[tuple[S, C], S]:
    e: dict[tuple[S, C], S] = {}

    def add(s, classes, t):
        for c in classes:
            e[(s, c)] = t

    add(S.NAME, _WORD, S.NAME)
    add(S.COMMENT, [c for c in C if c not in (C.PAD, C.NL, C.CR)], S.COMMENT)
    add(S.CR, [C.NL], S.S0)
    add(S.BSL, [C.NL], S.S0)
    add(S.BSL, [C.CR], S.BSLCR)
    add(S.BSLCR, [C.NL], S.S0)
    add(S.STAR1, [C.STAR], S.STAR2)
    add(S.SLASH1, [C.SLASH], S.SLASH2)
    add(S.LT1, [C.LT], S.LT2)
    add(S.GT1, [C.GT], S.GT2)
    for s in (S.STAR1, S.STAR2, S.SLASH1, S.SLASH2, S.LT1, S.LT2, S.GT1, S.GT2, S.EQ1, S.MINUS):
        add(s, [C.EQ], S.S0)
    add(S.MINUS, [C.GT], S.S0)
    # numbers (see the state comments)
    add(S.Z, [C.D0], S.Z)
    add(S.Z, [C.US], S.ZU)
    add(S.Z, [C.D1, C.D27, C.D89], S.DZ)
    add(S.Z1, [C.LX], S.HX0)
    add(S.Z1, [C.LO], S.OC0)
    add(S.Z1, [C.LB], S.BN0)
    for t in (S.Z1,):  # a single 0 continues like 0(_?0)*
        add(t, [C.D0], S.Z)
        add(t, [C.US], S.ZU)
        add(t, [C.D1, C.D27, C.D89], S.DZ)
    add(S.ZU, [C.D0], S.Z)
    add(S.ZU, [C.D1, C.D27, C.D89], S.DZ)
    add(S.DZ, _DIG, S.DZ)
    add(S.DZ, [C.US], S.DZU)
    add(S.DZU, _DIG, S.DZ)
    add(S.D, _DIG, S.D)
    add(S.D, [C.US], S.DU)
    add(S.DU, _DIG, S.D)
    for s in (S.Z1, S.Z, S.DZ, S.D):
        add(s, [C.DOT], S.FP)
        add(s, [C.LE], S.EX0)
        add(s, [C.LJ], S.IMAG)
    add(S.FP, _DIG, S.FPD)
    add(S.DOT1, _DIG, S.FPD)
    add(S.FPD, _DIG, S.FPD)
    add(S.FPD, [C.US], S.FPDU)
    add(S.FPDU, _DIG, S.FPD)
    for s in (S.FP, S.FPD):
        add(s, [C.LE], S.EX0)
        add(s, [C.LJ], S.IMAG)
    add(S.EX0, [C.PLUS, C.MINUS], S.EXS)
    add(S.EX0, _DIG, S.EXD)
    add(S.EXS, _DIG, S.EXD)
    add(S.EXD, _DIG, S.EXD)
    add(S.EXD, [C.US], S.EXDU)
    add(S.EXDU, _DIG, S.EXD)
    add(S.EXD, [C.LJ], S.IMAG)
    for s0, su, s1, digits in (
        (S.HX0, S.HXU, S.HX, _HEXD),
        (S.OC0, S.OCU, S.OC, _OCT),
        (S.BN0, S.BNU, S.BN, _BIN),
    ):
        add(s0, digits, s1)
        add(s0, [C.US], su)
        add(su, digits, s1)
        add(s1, digits, s1)
        add(s1, [C.US], su)
    return e


EXTEND = _extensions()


def _dfa() -> tuple[np.ndarray, np.ndarray]:
    trans = np.zeros((N_CLASSES, N_STATES), np.int8)  # trans[c, s] = next state
    restart = np.ones((N_STATES, N_CLASSES), bool)  # the byte starts a new token
    for s in S:
        for c in C:
            if (s, c) in EXTEND:
                trans[c, s] = EXTEND[(s, c)]
                restart[s, c] = False
            else:
                trans[c, s] = START[c]
    return trans, restart


TRANS, RESTART = _dfa()

INT_ACCEPT = np.zeros(N_STATES, bool)
INT_ACCEPT[[S.Z1, S.Z, S.D, S.HX, S.OC, S.BN]] = True
FLOAT_ACCEPT = np.zeros(N_STATES, bool)
FLOAT_ACCEPT[[S.FP, S.FPD, S.EXD]] = True


# ---- operators: kind, or an error (code, detail), by the token's text (1..3 bytes)
def _op_tables():
    # key: b0 for length 1, 128 + ... no: three tables keyed by bytes
    kind1 = np.zeros(128, np.int32)
    kind2 = np.zeros(128 * 128, np.int32)
    kind3 = np.zeros(128, np.int32)
    err1 = np.zeros(128, np.int32)  # code * 64 + detail, 0 = none
    err2 = np.zeros(128 * 128, np.int32)
    err3 = np.zeros(128, np.int32)

    def put(s, kind, err):
        if len(s) == 1:
            kind1[ord(s)], err1[ord(s)] = kind, err
        elif len(s) == 2:
            kind2[ord(s[0]) * 128 + ord(s[1])], err2[ord(s[0]) * 128 + ord(s[1])] = kind, err
        else:
            kind3[ord(s[0])], err3[ord(s[0])] = kind, err

    for s, k in OPERATORS.items():
        put(s, int(k), 0)
    for s, d in UNSUPPORTED_OPERATORS.items():
        put(s, 0, Code.UNSUPPORTED * 64 + d)
    put("!", 0, Code.SYNTAX * 64 + Syntax.INVALID)  # CPython: "invalid syntax"
    return kind1, kind2, kind3, err1, err2, err3


OP_KIND1, OP_KIND2, OP_KIND3, OP_ERR1, OP_ERR2, OP_ERR3 = _op_tables()


# ---- words with a meaning: keywords, unsupported keywords, reserved names
# A name of at most 8 bytes packs exactly into two uint32 words; a perfect hash of
# (w0, w1, len) finds its entry, which is then compared exactly.
WORD_KIND_KEYWORD = 1
WORD_KIND_UNSUPPORTED = 2
WORD_KIND_RESERVED = 3


def pack(word: bytes) -> tuple[int, int]:
    w = word.ljust(8, b"\0")
    return int.from_bytes(w[:4], "little"), int.from_bytes(w[4:8], "little")


_WORDS = (
    [(k, WORD_KIND_KEYWORD, int(v)) for k, v in KEYWORDS.items()]
    + [(k, WORD_KIND_UNSUPPORTED, 0) for k in UNSUPPORTED_KEYWORDS]
    + [(k, WORD_KIND_RESERVED, i) for i, k in enumerate(RESERVED_NAMES)]
)
WORD_TABLE_BITS = 8


def word_slot(w0, w1, n, mul0, mul1, xp=np):
    """Perfect-hash slot of a packed word (numpy or jax.numpy, uint32 arithmetic)."""
    h = w0 * xp.uint32(mul0) + w1 * xp.uint32(mul1) + n.astype(xp.uint32) * xp.uint32(0x9E3779B1)
    h = h ^ (h >> xp.uint32(15))
    return (h >> xp.uint32(32 - WORD_TABLE_BITS)).astype(xp.int32)


def _word_table():
    rng = np.random.default_rng(12345)
    words = [(pack(k.encode()), len(k), kind, v) for k, kind, v in _WORDS]
    w0 = np.array([w[0][0] for w in words], np.uint32)
    w1 = np.array([w[0][1] for w in words], np.uint32)
    n = np.array([w[1] for w in words], np.int32)
    with np.errstate(over="ignore"):
        for _ in range(100000):
            m0, m1 = (int(x) | 1 for x in rng.integers(1, 2**32, 2))
            slot = word_slot(w0, w1, n, m0, m1)
            if len(set(slot.tolist())) == len(words):
                break
        else:  # pragma: no cover
            raise RuntimeError("no perfect hash found")
    size = 1 << WORD_TABLE_BITS
    tw0 = np.zeros(size, np.uint32)
    tw1 = np.zeros(size, np.uint32)
    tn = np.full(size, -1, np.int32)
    tkind = np.zeros(size, np.int32)
    tval = np.zeros(size, np.int32)
    for i, (_, _, kind, v) in enumerate(words):
        s = slot[i]
        tw0[s], tw1[s], tn[s], tkind[s], tval[s] = w0[i], w1[i], n[i], kind, v
    return m0, m1, tw0, tw1, tn, tkind, tval


WORD_MUL0, WORD_MUL1, WORD_W0, WORD_W1, WORD_LEN, WORD_KIND, WORD_VALUE = _word_table()


# ---- number values: base**e mod 2**32 for e < 32 (0 beyond: every base is even)
BASES = np.array([10, 16, 8, 2], np.int64)


def _powers() -> np.ndarray:
    p = np.zeros((4, 33), np.uint32)
    for i, b in enumerate(BASES):
        for e in range(32):
            p[i, e] = pow(int(b), e, 2**32)
    return p


POW = _powers()  # UInt32[4, 33]
# significant digits of 2**31 in each base: a literal with more is too large
SIG_LIMIT = np.array([10, 8, 11, 32], np.int32)
# with exactly SIG_LIMIT digits, bases 10 and 8 can exceed 2**32: a leading digit >= 3 is
# already > 2**31, a smaller one keeps the value below 2**32 (exact in uint32)
LEAD_CHECK = np.array([True, False, True, False])

DIGIT_VALUE = np.zeros(257, np.int32)
for _i, _ch in enumerate("0123456789abcdef"):
    DIGIT_VALUE[ord(_ch)] = _i
    DIGIT_VALUE[ord(_ch.upper())] = _i

# the polynomial name hash's multiplier: odd (invertible mod 2**32). One hash: names that
# share it are told apart byte by byte (lexer._intern), so a second only saved rounds that
# almost never run, at the price of a wider sort
HASH_MULS = (0x01000193,)


def hash_powers(n: int, mul: int) -> tuple[np.ndarray, np.ndarray]:
    """mul**i and mul**-i mod 2**32 for i < n."""
    inv = pow(mul, -1, 2**32)
    p = np.empty(n, np.uint64)
    q = np.empty(n, np.uint64)
    a = b = 1
    for i in range(n):
        p[i], q[i] = a, b
        a, b = (a * mul) % 2**32, (b * inv) % 2**32
    return p.astype(np.uint32), q.astype(np.uint32)


TOK_NAME = int(Tok.NAME)


# ---- the merge table (Pareas): every composition of class functions gets an id, and
# composing two ids is one lookup. The closure of the 30 class functions is ~1.7k
# functions, so MERGE is ~1.7k x 1.7k int16 (a few MB), built once on first use.


@functools.cache
def merge_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(GEN_ID[class], MERGE[a * F + b] = id of (a then b), STATE_OF[id] = f[S0])."""
    gens = np.asarray(TRANS[:N_CLASSES], np.int64)  # [C, S]
    ids: dict[bytes, int] = {}
    funcs: list[np.ndarray] = []  # [S] each, in id order
    parent: list[tuple[int, int]] = []  # (p, c): f is (p then class c); p = -1: f is c

    def intern(f: np.ndarray, p: int, c: int) -> int:
        k = f.tobytes()
        if k not in ids:
            ids[k] = len(funcs)
            funcs.append(f)
            parent.append((p, c))
        return ids[k]

    for c in range(N_CLASSES):
        intern(gens[c], -1, c)
    # the closure, breadth first, ids in order of discovery (f of the frontier, then
    # class c); step[f][c] = id of (f then c)
    step: dict[int, list[int]] = {}
    frontier = list(range(len(funcs)))
    while frontier:
        first_new = len(funcs)
        then = gens[:, np.array([funcs[f] for f in frontier])]  # then[c, i] = c[f_i[s]]
        for i, f in enumerate(frontier):
            step[f] = [intern(then[c, i], f, c) for c in range(N_CLASSES)]
        frontier = list(range(first_new, len(funcs)))
    F = len(funcs)
    steps = np.array([step[f] for f in range(F)], np.int64)  # [F, C]
    # merge[a, b] = id of (a then b): b is class c, or (p then c) with p < b, and
    # a then (p then c) = (a then p) then c
    merge = np.empty((F, F), np.int64)
    for b, (p, c) in enumerate(parent):
        merge[:, b] = steps[:, c] if p < 0 else steps[merge[:, p], c]
    gen_id = np.array([ids[g.tobytes()] for g in gens], np.int32)
    state_of = np.array(funcs, np.int64)[:, S.S0].astype(np.int32)
    return gen_id, merge.astype(np.int16).reshape(-1), state_of
