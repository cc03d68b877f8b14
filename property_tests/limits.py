"""The Limits that several test files share, defined once.

A Limits is a static argument of every jitted stage, so files that test the same stage
with the same Limits (tests/ and its property_tests/ counterpart) compile one function,
or find it in the persistent cache, instead of one each.
"""

from __future__ import annotations

from jaxcc.limits import Limits

# the JAX lexer alone (tests/test_lexer.py, test_lexer_vs_tokenize.py)
LEXER = Limits(max_source_bytes=512, max_tokens=256, max_indent=12)

# the middle end on the host flattener's ASTs, run by the reference interpreter
# (tests/test_middle_end.py, test_middle_vs_reference.py)
MIDDLE = Limits(
    max_source_bytes=4096,
    max_tokens=256,
    max_nodes=256,
    max_code=512,
    max_funcs=4,
    max_locals=8,
    max_stack=40,
    max_output=64,
    max_steps=20_000,
)

# the whole JAX pipeline, source to verdict (tests/test_pipeline.py,
# test_pipeline_vs_reference.py)
PIPELINE = Limits(
    max_source_bytes=2048,
    max_tokens=1024,
    max_parse_depth=512,
    max_nodes=768,
    max_code=1536,
    max_funcs=8,
    max_locals=32,
    max_stack=256,
    max_depth=32,
    max_output=64,
    max_steps=20000,
)

# the host reference pipeline: compile limits big enough for any generated program, run
# limits as DEFAULT except a larger output buffer (tests/test_isa.py,
# tests/test_reference_compiler.py, test_reference_vs_cpython.py)
HOST = Limits(
    max_source_bytes=65536,
    max_tokens=16384,
    max_parse_depth=1024,
    max_nodes=16384,
    max_code=32768,
    max_locals=256,
    max_output=4096,
)

# the optimizer (tests/test_optimize.py, test_optimize_vs_reference.py): compiled by the
# reference compiler, optimized on the device in batches of one shape, run on both VMs
OPTIMIZE = Limits(
    max_source_bytes=4096,
    max_tokens=1024,
    max_nodes=1024,
    max_code=512,
    max_funcs=8,
    max_locals=16,
    max_stack=256,
    max_depth=32,
    max_output=64,
    max_steps=100_000,
)

# the neural verifier and the hybrid on a tiny model (tests/test_neural_verify.py,
# tests/test_neural_hybrid.py)
NEURAL_SMALL = Limits(max_source_bytes=256, max_tokens=96, max_indent=8, max_parse_depth=64,
                      max_nodes=96, max_code=64, max_funcs=3, max_locals=16, max_stack=64,
                      max_depth=16, max_output=16, max_steps=2000)  # fmt: skip

# the VMs on hand-made bytecode (tests/test_vm.py, tests/test_reference_interp.py)
VM_SMALL = Limits(max_stack=64, max_depth=8, max_output=16, max_steps=1000)
