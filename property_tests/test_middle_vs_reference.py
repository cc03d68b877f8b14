"""Property tests: the middle end (jaxcc.middle, on the host flattener's ASTs) against the
reference compiler, on generated programs (jaxcc.testing.programs) and near misses
(jaxcc.testing.near_misses).

Each Hypothesis example is a whole batch of programs, compiled in one jitted call (the
same Limits and batch size as tests/test_middle_end.py, so the compilation is shared
through the persistent cache). For every program the front end accepts:

* the Error (code, line, col, detail) equals the reference compiler's;
* where it compiles, running both programs with the reference interpreter gives the same
  status, result and output (the bytecode is compared too: it is built to be identical).

``--slow`` (JAXCC_SLOW=1) runs 10x more examples.
"""

from __future__ import annotations

import functools
import os

import jax
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxcc import isa
from jaxcc.errors import Code
from jaxcc.middle import middle_end
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.flatten import flatten_many
from jaxcc.reference.interp import run_program
from jaxcc.testing import near_misses, programs
from property_tests.limits import MIDDLE as LIMITS

SCALE = 10 if os.environ.get("JAXCC_SLOW") == "1" else 1
BATCH = 32
SETTINGS = settings(
    max_examples=4 * SCALE,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)


@functools.cache
def _jitted(tiers: bool = False):
    return jax.jit(lambda ast, err: middle_end(ast, None, LIMITS, err, tiers=tiers))


def _row(tree, b):
    return type(tree)(*(np.asarray(x)[b] for x in tree))


def _err(e):
    return tuple(int(x) for x in (e.code, e.line, e.col, e.detail))


def check_batch(sources, tiers: bool = False):
    """Compile ``sources`` (<= BATCH) with the middle end (``tiers``: as ``middle_end``'s);
    compare each with the reference. Returns how many were compared."""
    chunk = list(sources) + [""] * (BATCH - len(sources))
    ast, _, ferr = flatten_many(chunk, LIMITS)
    progs, errs = jax.tree.map(np.asarray, _jitted(tiers)(ast, ferr))
    compared = 0
    for b, src in enumerate(sources):
        if int(ferr.code[b]) != Code.OK:  # over the small test limits, or a parser error
            continue
        ref = compile_source(src, LIMITS)
        assert _err(_row(errs, b)) == _err(ref.error), src
        compared += 1
        if int(ref.error.code) != Code.OK:
            continue
        mine = _row(progs, b)
        for f in isa.Program._fields:
            np.testing.assert_array_equal(
                getattr(mine, f), np.asarray(getattr(ref.program, f)), err_msg=f
            )
        r1, r2 = run_program(mine, LIMITS), run_program(ref.program, LIMITS)
        assert (int(r1.status), int(r1.result), int(r1.line)) == (
            int(r2.status),
            int(r2.result),
            int(r2.line),
        )
        assert isa.format_output(r1.out_kind, r1.out_val, r1.n_out) == isa.format_output(
            r2.out_kind, r2.out_val, r2.n_out
        )
    return compared


@SETTINGS
@given(st.lists(programs(max_functions=3, fuel=2, max_statements=3), min_size=1, max_size=BATCH))
def test_programs(sources):
    check_batch(sources)


@SETTINGS
@given(st.lists(near_misses().map(lambda x: x[0]), min_size=1, max_size=BATCH))
def test_near_misses(sources):
    check_batch(sources)


@SETTINGS
@given(
    st.lists(
        st.one_of(
            programs(max_functions=3, fuel=2, max_statements=3),
            near_misses().map(lambda x: x[0]),
        ),
        min_size=1,
        max_size=BATCH,
    )
)
def test_two_widths(sources):
    """The middle end with tiers (``tiers=True``: on a GPU the default for a large batch;
    the batch sorted by size, through the passes at the cheapest of 3 N / 8, N / 2 and N
    nodes, the larger programs again at N, and put back) against the reference, as above.
    The generated programs are mostly small, so a narrow width runs;
    tests/test_middle_end.py's two-width test covers each plan and the chunks at N."""
    check_batch(sources, tiers=True)


def test_generated_programs_mostly_fit_the_test_limits():
    # guards against the comparisons above silently skipping everything
    srcs = []

    @settings(
        max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(programs(max_functions=3, fuel=2, max_statements=3))
    def collect(s):
        srcs.append(s)

    collect()
    assert check_batch(srcs[:BATCH]) >= BATCH // 2
