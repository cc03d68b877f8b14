"""jaxcc: a compiler and VM for a statically typed subset of Python, as pure JAX functions."""

__version__ = "0.1.0"
