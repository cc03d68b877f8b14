"""jaxcc benchmarks: `python bench/run.py --out DIR` (see docs/benchmarks.md)."""
