"""One argument order for ``limits`` across the package (docs/api.md): the arrays a
function cannot do without, then ``limits`` (then ``nlimits`` where there is one), then
everything optional or keyword-only."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import jaxcc

# Functions that take limits but are not stages over arrays, and why.
EXEMPT = {
    "jaxcc.compiler.tier": "a function of the limits themselves (limits, nbytes) -> Limits",
    "jaxcc.parser.main": "the command line (argv first)",
    "jaxcc.neural.data.iter_batches": "a host-side data generator keyed by a seed",
}


def _functions_with_limits():
    for m in pkgutil.walk_packages(jaxcc.__path__, "jaxcc."):
        if m.name.endswith("__main__"):  # running it would run the CLI
            continue
        mod = importlib.import_module(m.name)
        for name, f in vars(mod).items():
            if name.startswith("_") or not callable(f) or getattr(f, "__module__", None) != m.name:
                continue
            try:
                sig = inspect.signature(f)
            except (TypeError, ValueError):
                continue
            if "limits" in sig.parameters:
                yield f"{m.name}.{name}", sig


def _follows_the_order(sig: inspect.Signature) -> bool:
    ps = list(sig.parameters.values())
    i = [p.name for p in ps].index("limits")
    required = all(
        p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        for p in ps[:i]
    )
    rest = ps[i + 1 :]
    if rest and rest[0].name == "nlimits":  # the neural bounds go right after limits
        rest = rest[1:]
    optional = all(  # keyword-only arguments have no position to get wrong
        p.default is not p.empty or p.kind in (p.KEYWORD_ONLY, p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in rest
    )
    return required and optional and ps[i].kind != ps[i].KEYWORD_ONLY


def test_limits_follow_the_required_arrays():
    found = dict(_functions_with_limits())
    assert len(found) > 40  # the walk reached the stages, not just a few helpers
    for name in ("jaxcc.lexer.lex", "jaxcc.vm.run", "jaxcc.vm.run_tests", "jaxcc.parser.parse",
                 "jaxcc.neural.sample.compile", "jaxcc.neural.hybrid.hybrid_compile"):  # fmt: skip
        assert name in found, name
    wrong = [f"{n}{s}" for n, s in found.items() if n not in EXEMPT and not _follows_the_order(s)]
    assert not wrong, "\n".join(wrong)
    assert set(EXEMPT) <= set(found)  # no stale exemption
