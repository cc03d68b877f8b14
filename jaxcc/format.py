"""Error text at the edges (CLI, tests): CPython-like messages from error arrays.

Compile-time errors are shown as CPython shows a SyntaxError (no traceback)::

      File "f.py", line 3
        x = (1 +
            ^
    SyntaxError: invalid syntax

(jaxcc's TypeError, NameError, UnsupportedError and LimitError are found at compile time
too and are shown the same way.) Run-time errors are shown as a one-frame traceback::

    Traceback (most recent call last):
      File "f.py", line 5, in <module>
        print(1 // 0)
    ZeroDivisionError: integer division or modulo by zero

The last line always begins with the exception name (errors.EXCEPTION_NAME). Where the
source shows a name (NameError, duplicate argument, an unsupported keyword, an invalid
character, a reserved builtin called, a function defined twice) it is read back from the
source at the error's column. UnboundLocalError in
function 0 (the module body) is reported as NameError, as CPython does for module names.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from jaxcc import errors, isa, ops
from jaxcc.errors import TYPE_SITE, Code
from jaxcc.isa import T_BOOL, T_INT, T_NONE, Op

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a name, a prefixed (0x 0o 0b) literal or a run of decimal digits and underscores
_NUMBER_OR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|0[xXoObB][0-9A-Fa-f_]*|[0-9][0-9_]*")
_CALL_PAREN = re.compile(r"[ \t\f]*\(")
_DEF_NAME = re.compile(r"def[ \t\f]+([A-Za-z_][A-Za-z0-9_]*)")


class ErrorText(NamedTuple):
    """One error as text fields (what --json prints)."""

    type: str  # the exception name, e.g. "ZeroDivisionError"
    message: str  # without the name; "" for a bare AssertionError
    line: int  # 1-based source line; 0 when unknown
    col: int  # 0-based column; -1 for run-time errors (no caret)
    function: str  # "<module>" or the function name (run-time errors); "" otherwise
    runtime: bool


# --- debug-info access (jaxcc.debuginfo.DebugInfo, from either compiler; None: none) -------


def function_names(debug) -> list[str]:
    """The function names by id (index 0 is '<module>'), or [] if there is no debug info."""
    return [] if debug is None else list(debug.fn_names)


def function_id(debug, name: str) -> int | None:
    """The id of the function called ``name`` (never 0, the module body), or None."""
    names = function_names(debug)
    for i, n in enumerate(names):
        if i > 0 and n == name:
            return i
    return None


def slot_name(debug, fn: int, slot: int) -> str | None:
    """The variable name of local ``slot`` of function ``fn`` (None if unknown, or the
    hidden temporary)."""
    if debug is None or not 0 <= fn < len(debug.local_names):
        return None
    names = debug.local_names[fn]
    n = names[slot] if 0 <= slot < len(names) else None
    return n if isinstance(n, str) and _IDENT.fullmatch(n) else None


# --- the fields of an error -----------------------------------------------------------------


def _text(source) -> str:
    """The source as text, without a byte-order mark (columns do not count it)."""
    source = errors.without_bom(source) if source else source
    if isinstance(source, bytes | bytearray):
        source = bytes(source).decode("utf-8", "replace")
    return source or ""


def _source_line(source, line: int) -> str | None:
    source = _text(source)
    if not source or line < 1:
        return None
    lines = errors.source_lines(source)
    return lines[line - 1] if line <= len(lines) else None


def _word_at(text: str | None, col: int) -> str | None:
    if text is None or not 0 <= col < len(text):
        return None
    m = _IDENT.match(text, col)
    return m.group(0) if m else None


def _message(code: int, detail: int) -> str:
    try:
        return errors.message(code, detail)
    except ValueError:  # not a Code at all
        return f"error code {code}"


# --- message parameters read from the source (the subset has no strings: a `#` starts a
# comment wherever it is) -------------------------------------------------------------------

_COMMENT = re.compile(r"#[^\r\n]*")
_HEADER = {"if": "'if' statement", "elif": "'elif' statement", "else": "'else' statement",
           "while": "'while' statement", "for": "'for' statement", "def": "function definition"}  # fmt: skip
_DEF_CONT = errors.DEF_PREFIX
_DEF_NAME_CONT = re.compile(_DEF_CONT + r"([A-Za-z_][A-Za-z0-9_]*)")


def _code(source: str) -> str:
    """The source with its comments blanked out (offsets kept)."""
    return _COMMENT.sub(lambda m: " " * len(m.group(0)), source)


def _items(code: str, at: int) -> int | None:
    """How many comma-separated items the brackets opening at ``code[at]`` hold."""
    if not 0 <= at < len(code) or code[at] not in "([{":
        return None
    depth, items, seen = 0, 0, False
    for ch in code[at:]:
        if ch in "([{":
            depth += 1
            if depth == 1:
                continue
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return items + seen
        if depth == 1 and ch == ",":
            items, seen = items + 1, False
        elif not ch.isspace() and ch != "\\":
            seen = True
    return None


def _offset(source: str, line: int, col: int) -> int | None:
    starts = errors.line_starts(source)
    return starts[line - 1] + col if 1 <= line <= len(starts) and col >= 0 else None


def _def_at(code: str, name: str) -> re.Match | None:
    """The top-level ``def name(`` of the program (functions are top-level in the subset)."""
    return re.search(rf"^{_DEF_CONT}{re.escape(name)}[ \t\f]*(?=\()", code, re.M)


def _given(code: str, source: str, line: int, col: int, name: str) -> int | None:
    """How many arguments the call of ``name`` at (line, col) passes."""
    at = _offset(source, line, col)
    call = _CALL_PAREN.match(code, at + len(name)) if at is not None else None
    return _items(code, call.end() - 1) if call else None


def _arity(source: str, line: int, col: int, name: str) -> str | None:
    """'h() takes 2 arguments but 1 were given' for the call of ``name`` at (line, col)."""
    code = _code(source)
    d = _def_at(code, name)
    given = _given(code, source, line, col, name)
    takes = _items(code, d.end()) if d else None
    if given is None or takes is None:
        return None
    return f"{name}() takes {takes} arguments but {given} were given"


def _header(source: str, line: int) -> str | None:
    """ "after 'if' statement on line 3": the compound statement whose block is missing."""
    lines = errors.source_lines(_code(source))
    i = min(line, len(lines) + 1) - 2  # the lines before the error's, from the last
    while i >= 0 and not lines[i].strip():
        i -= 1
    if i < 0 or not lines[i].rstrip().endswith(":"):
        return None
    j, depth = i, sum(lines[i].count(c) for c in ")]}") - sum(lines[i].count(c) for c in "([{")
    while j > 0 and (depth > 0 or lines[j - 1].rstrip().endswith("\\")):
        j -= 1
        depth += sum(lines[j].count(c) for c in ")]}") - sum(lines[j].count(c) for c in "([{")
    m = _IDENT.match(lines[j].lstrip())
    kind = _HEADER.get(m.group(0)) if m else None
    return f"after {kind} on line {j + 1}" if kind else None


_TYPE_NAME = {T_INT: "int", T_BOOL: "bool", T_NONE: "None"}


def _callee_and_index(code: str, at: int) -> tuple[str, int] | None:
    """The function called and the argument's index, for the argument starting at ``at``."""
    depth, commas, k = 0, 0, at - 1
    while k >= 0:
        ch = code[k]
        if ch in ")]}":
            depth += 1
        elif ch in "([{" and depth:
            depth -= 1
        elif ch == "(":  # the call's own parenthesis, or one that groups the argument
            j = k - 1
            while j >= 0 and code[j] in " \t\f\\\r\n":
                j -= 1
            m = re.search(r"[A-Za-z_][A-Za-z0-9_]*$", code[: j + 1])
            if m:
                return m.group(0), commas
            commas = 0
        elif ch == "," and not depth:
            commas += 1
        k -= 1
    return None


def _param_name(code: str, fn: str, i: int) -> str | None:
    d = _def_at(code, fn)
    if d is None:
        return None
    depth, start = 0, d.end() + 1
    names = []
    for k in range(d.end(), len(code)):
        ch = code[k]
        depth += ch in "([{"
        depth -= ch in ")]}"
        if (ch == "," and depth == 1) or depth == 0:
            m = _IDENT.search(code, start, k)
            names.append(m.group(0) if m else None)
            start = k + 1
            if depth == 0:
                break
    return names[i] if 0 <= i < len(names) else None


def _enclosing_def(code: str, at: int) -> str | None:
    """The function whose body holds offset ``at`` (defs are top-level in the subset)."""
    name = None
    for m in re.compile("^" + _DEF_NAME_CONT.pattern, re.M).finditer(code):
        if m.start() > at:
            break
        name = m.group(1)
    return name


def _type_conflict(source: str, line: int, col: int, args: tuple) -> str | None:
    """The reference's wording of a type conflict from the device's (site, first, this)."""
    site, first, this = args
    code, at = _code(source), _offset(source, line, col)
    if at is None or first not in _TYPE_NAME or this not in _TYPE_NAME:
        return None
    word = _word_at(_source_line(source, line), col)
    if site == TYPE_SITE["operands"]:
        return "operands would be sometimes int and sometimes bool"
    if site == TYPE_SITE["falls_off"]:
        m = _DEF_NAME_CONT.match(code, at)
        return m and f"function '{m.group(1)}' returns {_TYPE_NAME[this]} but can reach its end"
    if site == TYPE_SITE["variable"] and word:
        what = f"variable '{word}'"
    elif site == TYPE_SITE["parameter"]:
        call = _callee_and_index(code, at)
        p = call and _param_name(code, *call)
        if not p:
            return None
        what = f"parameter '{p}' of '{call[0]}'"
    elif site == TYPE_SITE["return"]:
        fn = _enclosing_def(code, at)
        if not fn:
            return None
        what = f"the return type of '{fn}'"
    else:
        return None
    return f"{what} is {_TYPE_NAME[first]} but this is {_TYPE_NAME[this]}"


def _compile_message(code: int, detail: int, source: str, line: int, col: int, args=()) -> str:
    msg = _message(code, detail)
    text = _source_line(source, line)
    source = _text(source)
    word = _word_at(text, col)
    if code == Code.TYPE and len(args) == 3:
        worded = _type_conflict(source, line, col, args)
        if worded:
            return worded
    if code == Code.NAME and word and _CALL_PAREN.match(text, col + len(word)):
        if _def_at(_code(source), word):  # a call in the module body before the def
            return f"name '{word}' is not defined (called before its def)"
    if code == Code.TYPE and detail == errors.Type.ARITY and word:
        return _arity(source, line, col, word) or msg
    if code == Code.TYPE and detail == errors.Type.BUILTIN_ARITY and word in ops.RESERVED_NAMES:
        n = _given(_code(source), source, line, col, word)
        return (n is not None and ops.arity_error(ops.builtin(word), n)) or msg
    if code == Code.INDENTATION and detail == errors.Syntax.EXPECTED_INDENT:
        after = _header(source, line)
        return f"{msg} {after}" if after else msg
    if code == Code.NAME and word:
        return f"name '{word}' is not defined"
    if code == Code.SYNTAX and detail == errors.Syntax.DUPLICATE_ARGUMENT and word:
        return f"duplicate argument '{word}' in function definition"
    if code == Code.SYNTAX and detail == errors.Syntax.INVALID_CHARACTER:
        if text is not None and 0 <= col < len(text):
            ch = text[col]
            if not ch.isprintable():
                return f"invalid non-printable character U+{ord(ch):04X}"
            return f"invalid character '{ch}' (U+{ord(ch):04X})"
    if code == Code.SYNTAX and detail == errors.Syntax.UNEXPECTED_EOF:
        # the error sits at the innermost unclosed bracket: CPython names it
        if text is not None and 0 <= col < len(text) and text[col] in "([{":
            return f"'{text[col]}' was never closed"
    if code == Code.SYNTAX and detail == errors.Syntax.INT_MAX_STR_DIGITS and text:
        # at column 0, as CPython: the first decimal literal of the line over the limit
        for m in _NUMBER_OR_NAME.finditer(text):
            n = len(m.group(0).replace("_", "").lstrip("0"))
            if m.group(0)[0].isdigit() and not m.group(0)[1:2].isalpha():
                if n > errors.INT_MAX_STR_DIGITS:
                    return errors.int_max_str_digits_message(n)
    if code == Code.UNSUPPORTED and detail == errors.Unsupported.KEYWORD and word:
        return f"unsupported: the keyword '{word}'"
    # the reference compiler's wording where the source shows the name: a call of a
    # reserved builtin (`bool(1)`, at the name) and a second def (at `def`)
    if code == Code.UNSUPPORTED and detail == errors.Unsupported.BUILTIN and word:
        if _CALL_PAREN.match(text, col + len(word)):
            return f"unsupported builtin '{word}'"
    if code == Code.UNSUPPORTED and detail == errors.Unsupported.REDEFINITION and text:
        m = _DEF_NAME.match(text, col) if 0 <= col < len(text) else None
        if m:
            return f"function '{m.group(1)}' defined twice"
    return msg


def describe(err, source="", debug=None, program=None) -> ErrorText | None:
    """The text fields of one error: an errors.Error or an isa.RunResult (unbatched).

    ``program`` (the unbatched isa.Program that ran) lets UnboundLocalError name its
    variable (the failing instruction's argument is the slot) and ZeroDivisionError say
    "integer modulo by zero" for ``%`` (the failing instruction is MOD), as CPython does.
    Returns None for OK.
    """
    if hasattr(err, "status"):  # a RunResult
        code, detail = int(err.status), int(err.detail)
        line, fn, pc = int(err.line), int(err.fn), int(err.pc)
        if code in (Code.OK, Code.RUNNING):
            return None
        names = function_names(debug)
        fname = (
            names[fn] if 0 <= fn < len(names) else ("<module>" if fn == 0 else f"<function {fn}>")
        )
        name = exc = msg = None
        if code == Code.UNBOUND_LOCAL:
            if program is not None:
                try:
                    # LOAD_VAR's arg, or LOAD_VAR2's slot that the detail says
                    slot = isa.failing_slot(program.op[pc], program.arg[pc], detail)
                    name = slot_name(debug, fn, slot)
                except (IndexError, TypeError, ValueError):
                    name = None
            if fn == 0:  # CPython: module-level names are globals
                exc = "NameError"
                msg = f"name '{name}' is not defined" if name else "name is not defined"
            elif name:
                msg = (
                    f"cannot access local variable '{name}' where it is not associated with a value"
                )
        if code == Code.ZERO_DIVISION and program is not None:
            try:  # CPython words `%` by zero apart from `//` by zero
                if int(program.op[pc]) == Op.MOD:
                    msg = "integer modulo by zero"
            except (IndexError, TypeError, ValueError):
                pass
        exc = exc or errors.EXCEPTION_NAME.get(code, "Error")
        msg = _message(code, detail) if msg is None else msg
        return ErrorText(exc, msg, line, -1, fname, True)
    code, detail = int(err.code), int(err.detail)
    if code == Code.OK:
        return None
    line, col = int(err.line), int(err.col)
    exc = errors.EXCEPTION_NAME.get(code, "Error")
    given = None if debug is None else debug.message  # a compiler's own wording, if any
    args = () if debug is None else debug.error_args
    msg = given if given else _compile_message(code, detail, source, line, col, args)
    return ErrorText(exc, msg, line, col, "", False)


def format_error(err, source="", filename="<string>", debug=None, program=None) -> str:
    """CPython-like text for one error (see the module docstring); "" when OK.

    Ends with a newline.
    """
    d = describe(err, source, debug, program)
    if d is None:
        return ""
    last = f"{d.type}: {d.message}" if d.message else d.type
    text = _source_line(source, d.line)
    if d.runtime:
        out = ["Traceback (most recent call last):"]
        where = f'  File "{filename}", line {d.line}, in {d.function}'
        out.append(where)
        if text is not None and text.strip():
            out.append("    " + text.strip())
        out.append(last)
        return "\n".join(out) + "\n"
    out = [f'  File "{filename}", line {d.line}']
    if text is not None:
        stripped = text.lstrip()
        out.append("    " + stripped.rstrip())
        caret = d.col - (len(text) - len(stripped))
        if caret >= 0:
            out.append("    " + " " * min(caret, len(stripped)) + "^")
    out.append(last)
    return "\n".join(out) + "\n"
