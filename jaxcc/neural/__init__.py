"""The neural compiler: a Flax NNX decoder that writes jaxcc bytecode (docs/neural.md).

``jaxcc.neural.compile`` (k candidate programs per source, from ``sample.py``),
``jaxcc.neural.hybrid_compile`` (paper Algorithm 3, jit-composable) and the names below
are re-exported lazily, so importing a submodule such as ``jaxcc.neural.vocab`` does not
import the model.
"""

_HYBRID = ("hybrid_compile", "hybrid_select", "Hybrid", "Selection", "Path")
_SAMPLE = ("compile", "Candidates", "tier")


def __getattr__(name):
    if name in _HYBRID:
        from jaxcc.neural import hybrid

        return getattr(hybrid, name)
    if name in _SAMPLE:
        from jaxcc.neural import sample

        return getattr(sample, name)
    raise AttributeError(f"module 'jaxcc.neural' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_HYBRID) + list(_SAMPLE))
