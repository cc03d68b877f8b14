"""bench/opcode_mix.py: the dynamic opcode mix that vm_pallas.HOT_OPS was chosen by."""

from __future__ import annotations

from bench import opcode_mix
from jaxcc import vm_pallas
from jaxcc.isa import Op


def test_mix_counts_every_step():
    """The trace hook's count is the interpreter's own step count, over a few programs of
    each corpus size; the most executed opcodes are among HOT_OPS."""
    for size in ("small", "medium"):
        count, steps = opcode_mix.mix(size, 6)
        assert steps > 0 and sum(count.values()) == steps, size
        assert all(0 <= op < len(Op) for op in count)
        top = [op for op, _ in count.most_common(3)]
        assert set(top) <= set(vm_pallas.HOT_OPS), (size, [Op(op).name for op in top])
