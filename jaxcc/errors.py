"""Error codes shared by every stage: errors are arrays (code, line, col, detail) per
program; text is made from them only at the edges (CLI, repr, formatting).

``Code`` values are stable (they travel in arrays). ``detail`` refines the message:
an index into the per-code message table below, or a number the message shows.
"""

from __future__ import annotations

import enum
import re
from typing import NamedTuple


class Code(enum.IntEnum):
    OK = 0
    RUNNING = 1  # VM only: the lane has not finished
    # run-time errors
    ZERO_DIVISION = 2
    OVERFLOW = 3
    VALUE = 4
    RECURSION = 5
    UNBOUND_LOCAL = 6
    ASSERTION = 7
    TIMEOUT = 8
    OUTPUT_LIMIT = 9
    INVALID_BYTECODE = 10
    # compile-time errors
    SYNTAX = 11
    INDENTATION = 12
    TYPE = 13
    NAME = 14
    UNSUPPORTED = 15
    LIMIT = 16


EXCEPTION_NAME = {
    Code.ZERO_DIVISION: "ZeroDivisionError",
    Code.OVERFLOW: "OverflowError",
    Code.VALUE: "ValueError",
    Code.RECURSION: "RecursionError",
    Code.UNBOUND_LOCAL: "UnboundLocalError",
    Code.ASSERTION: "AssertionError",
    Code.TIMEOUT: "TimeoutError",
    Code.OUTPUT_LIMIT: "OutputLimitError",
    Code.INVALID_BYTECODE: "InvalidBytecode",
    Code.SYNTAX: "SyntaxError",
    Code.INDENTATION: "IndentationError",
    Code.TYPE: "TypeError",
    Code.NAME: "NameError",
    Code.UNSUPPORTED: "UnsupportedError",
    Code.LIMIT: "LimitError",
}

RUNTIME_CODES = frozenset(range(Code.ZERO_DIVISION, Code.INVALID_BYTECODE + 1))
COMPILE_CODES = frozenset(range(Code.SYNTAX, Code.LIMIT + 1))


class Value(enum.IntEnum):
    """detail values of Code.VALUE."""

    NEGATIVE_SHIFT = 0
    NEGATIVE_POWER = 1
    RANGE_STEP_ZERO = 2


VALUE_MESSAGES = {
    Value.NEGATIVE_SHIFT: "negative shift count",
    Value.NEGATIVE_POWER: "negative exponent: the result would be a float, which jaxcc does not support",
    Value.RANGE_STEP_ZERO: "range() arg 3 must not be zero",
}

RUNTIME_MESSAGES = {
    Code.ZERO_DIVISION: "integer division or modulo by zero",
    Code.OVERFLOW: "integer result does not fit in 32 bits",
    Code.RECURSION: "maximum recursion depth exceeded",
    Code.UNBOUND_LOCAL: "cannot access local variable where it is not associated with a value",
    Code.ASSERTION: "",
    Code.TIMEOUT: "step budget exhausted (limit max_steps)",
    Code.OUTPUT_LIMIT: "output buffer full (limit max_output)",
    Code.INVALID_BYTECODE: "invalid bytecode",
}


class Syntax(enum.IntEnum):
    """detail values of Code.SYNTAX and Code.INDENTATION (CPython's wording)."""

    INVALID = 0  # invalid syntax
    INVALID_CHARACTER = 1  # invalid character '$' (U+0024)
    INVALID_DECIMAL = 2  # leading zeros in decimal integer literals are not permitted; ...
    INVALID_NUMBER = 3  # invalid decimal / hexadecimal / ... literal
    UNEXPECTED_EOF = 4  # unexpected EOF while parsing / '(' was never closed
    UNMATCHED_PAREN = 5  # unmatched ')'
    RETURN_OUTSIDE_FUNCTION = 6
    BREAK_OUTSIDE_LOOP = 7
    CONTINUE_OUTSIDE_LOOP = 8
    EXPECTED_COLON = 9
    UNEXPECTED_INDENT = 10  # IndentationError
    EXPECTED_INDENT = 11  # IndentationError: expected an indented block
    UNINDENT_MISMATCH = 12  # IndentationError: unindent does not match any outer indentation level
    INCONSISTENT_TABS = 13  # TabError-like: inconsistent use of tabs and spaces
    BAD_CONTINUATION = 14  # unexpected character after line continuation character
    DUPLICATE_ARGUMENT = 15  # duplicate argument 'x' in function definition
    CANNOT_ASSIGN = 16  # cannot assign to expression here
    EOF_IN_MULTILINE = 17  # unexpected EOF in multi-line statement
    NULL_BYTES = 18  # source code cannot contain null bytes
    TOO_MANY_PARENS = 19  # too many nested parentheses (more than MAX_PAREN_LEVEL open)
    TOO_DEEP = 20  # IndentationError: too many levels of indentation (MAX_INDENT_LEVEL)
    INT_MAX_STR_DIGITS = 21  # Exceeds the limit (4300 digits) for integer string conversion


SYNTAX_MESSAGES = {
    Syntax.INVALID: "invalid syntax",
    Syntax.INVALID_CHARACTER: "invalid character",
    Syntax.INVALID_DECIMAL: "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers",
    Syntax.INVALID_NUMBER: "invalid number literal",
    Syntax.UNEXPECTED_EOF: "unexpected EOF while parsing",
    Syntax.UNMATCHED_PAREN: "unmatched ')'",
    Syntax.RETURN_OUTSIDE_FUNCTION: "'return' outside function",
    Syntax.BREAK_OUTSIDE_LOOP: "'break' outside loop",
    Syntax.CONTINUE_OUTSIDE_LOOP: "'continue' not properly in loop",
    Syntax.EXPECTED_COLON: "expected ':'",
    Syntax.UNEXPECTED_INDENT: "unexpected indent",
    Syntax.EXPECTED_INDENT: "expected an indented block",
    Syntax.UNINDENT_MISMATCH: "unindent does not match any outer indentation level",
    Syntax.INCONSISTENT_TABS: "inconsistent use of tabs and spaces in indentation",
    Syntax.BAD_CONTINUATION: "unexpected character after line continuation character",
    Syntax.DUPLICATE_ARGUMENT: "duplicate argument in function definition",
    Syntax.CANNOT_ASSIGN: "cannot assign to expression here",
    Syntax.EOF_IN_MULTILINE: "unexpected EOF in multi-line statement",
    Syntax.NULL_BYTES: "source code cannot contain null bytes",
    Syntax.TOO_MANY_PARENS: "too many nested parentheses",
    Syntax.TOO_DEEP: "too many levels of indentation",
    Syntax.INT_MAX_STR_DIGITS: "Exceeds the limit (4300 digits) for integer string conversion",
}

# CPython's own limits (its tokenizer's MAXLEVEL and MAXINDENT, and the default of
# sys.get_int_max_str_digits()): a program over one is the SyntaxError CPython raises.
MAX_PAREN_LEVEL = 200  # brackets open at once; one more is TOO_MANY_PARENS
MAX_INDENT_LEVEL = 99  # indented blocks open at once; one more is TOO_DEEP
INT_MAX_STR_DIGITS = 4300  # significant digits of a decimal literal; more: INT_MAX_STR_DIGITS


def int_max_str_digits_message(n_digits: int) -> str:
    """CPython's message for a decimal literal of ``n_digits`` significant digits."""
    return (
        f"Exceeds the limit ({INT_MAX_STR_DIGITS} digits) for integer string conversion: "
        f"value has {n_digits} digits; use sys.set_int_max_str_digits() to increase the "
        "limit - Consider hexadecimal for huge integer literals to avoid decimal "
        "conversion limits."
    )


class Unsupported(enum.IntEnum):
    """detail values of Code.UNSUPPORTED: what the subset leaves out."""

    STRING = 0
    FLOAT = 1
    IMAGINARY = 2
    TRUE_DIVISION = 3
    SUBSCRIPT = 4  # [ ] lists, indexing
    ATTRIBUTE = 5  # .
    DICT_SET = 6  # { }
    MATMUL = 7  # @
    WALRUS = 8  # :=
    ELLIPSIS = 9
    NON_ASCII = 10
    KEYWORD = 11  # class, import, lambda, try, ... (the keyword is named from the source)
    TUPLE = 12  # a, b
    CHAINED_ASSIGNMENT = 13
    KEYWORD_ARGUMENT = 14
    STAR_ARGUMENT = 15
    DEFAULT_ARGUMENT = 16
    DECORATOR = 17
    NESTED_FUNCTION = 18
    LOOP_ELSE = 19
    GLOBAL_VARIABLE = 20  # a function reads or assigns a module-level variable
    ANNOTATION = 21  # an annotation other than int, bool, None
    FOR_TARGET = 22  # for over anything but range(), or a non-name target
    CALL_TARGET = 23  # calling something that is not a plain function name
    PRINT_ARGUMENT = 24  # print of a none value
    ASSIGN_TARGET = 25  # assignment to something other than a name
    ANNOTATED_ASSIGNMENT = 26
    COMPARISON = 27  # is, is not, in, not in
    BUILTIN = 28  # a builtin other than print/abs/min/max/range used as a value or called
    FUNCTION_VALUE = 29  # a function used as a value
    SEMICOLON_ONLY = 30
    OTHER = 31
    REDEFINITION = 32  # a second def of a function name


UNSUPPORTED_MESSAGES = {
    Unsupported.STRING: "string literals",
    Unsupported.FLOAT: "float literals",
    Unsupported.IMAGINARY: "imaginary literals",
    Unsupported.TRUE_DIVISION: "'/' (true division gives a float)",
    Unsupported.SUBSCRIPT: "lists and subscripts",
    Unsupported.ATTRIBUTE: "attribute access",
    Unsupported.DICT_SET: "dicts and sets",
    Unsupported.MATMUL: "'@'",
    Unsupported.WALRUS: "':='",
    Unsupported.ELLIPSIS: "'...'",
    Unsupported.NON_ASCII: "non-ASCII characters",
    Unsupported.KEYWORD: "this keyword",
    Unsupported.TUPLE: "tuples",
    Unsupported.CHAINED_ASSIGNMENT: "chained assignment",
    Unsupported.KEYWORD_ARGUMENT: "keyword arguments",
    Unsupported.STAR_ARGUMENT: "*args and **kwargs",
    Unsupported.DEFAULT_ARGUMENT: "default arguments",
    Unsupported.DECORATOR: "decorators",
    Unsupported.NESTED_FUNCTION: "nested functions",
    Unsupported.LOOP_ELSE: "else on loops",
    Unsupported.GLOBAL_VARIABLE: "module-level variables used inside functions",
    Unsupported.ANNOTATION: "annotations other than int, bool and None",
    Unsupported.FOR_TARGET: "for loops other than 'for NAME in range(...)'",
    Unsupported.CALL_TARGET: "calls of anything but a function name",
    Unsupported.PRINT_ARGUMENT: "printing a value of type None",
    Unsupported.ASSIGN_TARGET: "assignment to anything but a name",
    Unsupported.ANNOTATED_ASSIGNMENT: "annotated assignment",
    Unsupported.COMPARISON: "'is' and 'in' comparisons",
    Unsupported.BUILTIN: "this builtin",
    Unsupported.FUNCTION_VALUE: "functions as values",
    Unsupported.SEMICOLON_ONLY: "this statement",
    Unsupported.OTHER: "this construct",
    Unsupported.REDEFINITION: "a function defined twice",
}


class Type(enum.IntEnum):
    """detail values of Code.TYPE."""

    MIXED = 0  # a value that would be sometimes int and sometimes bool
    NONE_VALUE = 1  # a value of type None used
    ARITY = 2  # wrong number of arguments
    ANNOTATION_MISMATCH = 3  # value does not match its annotation
    RETURN_MISMATCH = 4  # return types disagree / missing return value
    BUILTIN_ARITY = 5


# What a type conflict is about, for its message (jaxcc.format words each as the reference
# compiler does): the device's Debug.error_args = (site, the first type, this type), the
# types as isa.T_*; zeros for other errors.
TYPE_SITE = {"variable": 1, "parameter": 2, "return": 3, "falls_off": 4, "operands": 5}

TYPE_MESSAGES = {
    Type.MIXED: "value would be sometimes int and sometimes bool",
    Type.NONE_VALUE: "a value of type None is used",
    Type.ARITY: "wrong number of arguments",
    Type.ANNOTATION_MISMATCH: "value does not match its annotation",
    Type.RETURN_MISMATCH: "function returns values of different types",
    Type.BUILTIN_ARITY: "wrong number of arguments to builtin",
}


class Limit(enum.IntEnum):
    """detail values of Code.LIMIT: which limit of jaxcc.limits.Limits was exceeded."""

    SOURCE_BYTES = 0
    TOKENS = 1
    INDENT_DEPTH = 2
    PARSE_DEPTH = 3
    NODES = 4
    CODE = 5
    FUNCTIONS = 6
    LOCALS = 7
    STACK = 8
    INT_LITERAL = 9  # an int literal outside int32 (OverflowError-like, but at compile time)
    NEURAL = 10  # --compiler neural: no candidate the verifier could accept (docs/neural.md)
    NEURAL_BOUNDS = 11  # --compiler neural: the program is outside what the model reads


LIMIT_FIELD = {
    Limit.SOURCE_BYTES: "max_source_bytes",
    Limit.TOKENS: "max_tokens",
    Limit.INDENT_DEPTH: "max_indent",
    Limit.PARSE_DEPTH: "max_parse_depth",
    Limit.NODES: "max_nodes",
    Limit.CODE: "max_code",
    Limit.FUNCTIONS: "max_funcs",
    Limit.LOCALS: "max_locals",
    Limit.STACK: "max_stack",
    Limit.INT_LITERAL: "int32",
    Limit.NEURAL: "neural",
    Limit.NEURAL_BOUNDS: "neural_bounds",
}


class Error(NamedTuple):
    """A per-program error as arrays; code == Code.OK means none."""

    code: object  # Int32[Array, "B"]
    line: object  # Int32[Array, "B"]  1-based; 0 when unknown
    col: object  # Int32[Array, "B"]  0-based byte column
    detail: object  # Int32[Array, "B"]  per-code refinement (see the tables above)


BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark: CPython skips it at the start of a file


def without_bom(source: str | bytes) -> str | bytes:
    """``source`` without a UTF-8 byte-order mark at its start (CPython reads the file as
    if it were not there: lines and columns do not count it)."""
    if isinstance(source, str):
        return source[1:] if source.startswith("\ufeff") else source
    source = bytes(source)
    return source[len(BOM) :] if source.startswith(BOM) else source


# `def` and the blanks or backslash continuations between it and the function's name
DEF_PREFIX = r"def(?:[ \t\f]|\\(?:\r\n|\r|\n))+"


def line_starts(text: str) -> list[int]:
    """The offset in ``text`` where each line (as ``source_lines`` counts them) starts."""
    return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]


def source_lines(text: str) -> list[str]:
    """The lines of a program as Python counts them: split at ``\\n``, ``\\r\\n`` and ``\\r``
    only (``str.splitlines`` also splits at ``\\v``, ``\\f``, ``\\x1c``-``\\x1e`` and more)."""
    lines = re.split(r"\r\n|\r|\n", text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def message(code: int, detail: int = 0) -> str:
    """The message text for an error code and detail (host side only)."""
    code = Code(code)
    if code == Code.VALUE:
        return VALUE_MESSAGES.get(detail, "invalid value")
    if code in RUNTIME_MESSAGES:
        return RUNTIME_MESSAGES[code]
    if code in (Code.SYNTAX, Code.INDENTATION):
        return SYNTAX_MESSAGES.get(detail, "invalid syntax")
    if code == Code.UNSUPPORTED:
        return "unsupported: " + UNSUPPORTED_MESSAGES.get(detail, "this construct")
    if code == Code.TYPE:
        return TYPE_MESSAGES.get(detail, "type error")
    if code == Code.LIMIT and detail == Limit.NEURAL:
        return (
            "the neural compiler produced no candidate it could accept (no sample was "
            "complete, or no two samples agreed); use --compiler hybrid or jax"
        )
    if code == Code.LIMIT and detail == Limit.NEURAL_BOUNDS:
        return (
            "the program is outside what the neural compiler reads (its source tokens, "
            "number literals, names, lines, bytes or code are over the model's bounds: "
            "docs/neural.md); use --compiler hybrid or jax"
        )
    if code == Code.LIMIT:
        return f"program exceeds the limit {LIMIT_FIELD.get(detail, '?')}"
    if code == Code.NAME:
        return "name is not defined"
    return ""
