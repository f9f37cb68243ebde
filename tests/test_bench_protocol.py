"""benchmarks/protocol.py: which test processes a cell's protocol holds, and the FLOPs torch's
counter leaves out (the CPU's fused attention)."""
from pathlib import Path

import torch
import torch.nn.functional as F

from tests.helpers import load_script

protocol = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "protocol.py")


def test_a_cell_has_the_test_processes_reproduce_runs_for_it():
    from abc_lightning.reproduce import all_cells

    cells = {c.key: c for c in all_cells()}
    assert [name for name, _ in protocol.stages(cells["abs_addition"])] == ["test", "long"]
    assert [name for name, _ in protocol.stages(cells["addition_T3_encoder_w1"])] == ["test", "long", "huge"]
    assert [name for name, _ in protocol.stages(cells["addition_vanilla"])] == ["test", "curve"]  # no long lengths
    stages = dict(protocol.stages(cells["abs_multiplication"]))
    assert stages["long"] == ["--data.test_lengths=[60]", "--data.test_samples=200"]
    assert any(name.startswith("second") for name in stages)  # N×M's other shapes


def test_fused_attention_is_counted():
    from torch.utils.flop_counter import FlopCounterMode

    fused = [torch.ops.aten._scaled_dot_product_flash_attention_for_cpu]
    q, k = torch.randn(2, 4, 10, 16), torch.randn(2, 4, 30, 16)
    counter = FlopCounterMode(display=False, custom_mapping={op: protocol._attention_flops for op in fused})
    with counter, torch.inference_mode():
        F.scaled_dot_product_attention(q, k, k, attn_mask=torch.zeros(1, 1, 10, 30))
    assert counter.get_total_flops() == 2 * 2 * 2 * 4 * 10 * 30 * 16
