"""ABC calibration on synthetic attention with known patterns; the extended bias is checked exactly."""

import pytest
import torch

from abc_lightning.calibration.bias import CalibratedBias
from abc_lightning.calibration.lines import CalibratedLines, calibrate, extend, extend_loop

INF = float("-inf")


def opened(bias: torch.Tensor) -> list[list[int]]:
    return (~torch.isinf(bias)).int().tolist()


def test_pure_diagonal_extends_along_the_diagonal():
    a = torch.eye(4)[None]  # 1 head, m = n = 4
    bias = extend(calibrate(a, directions=(1,), kappa=0.87), 6, 6)
    assert torch.equal(bias[0], torch.zeros(6, 6).masked_fill(~torch.eye(6, dtype=torch.bool), INF))


def test_sub_diagonal_keeps_its_value_relative_to_the_strongest_line():
    a = torch.zeros(1, 6, 6)
    idx = torch.arange(6)
    a[0, idx, idx] = 1.0
    a[0, idx[1:], idx[:-1]] = 0.8  # previous token, weaker
    bias = extend(calibrate(a, directions=(1,), kappa=0.87), 8, 8)[0]
    assert bias[5, 5] == 0 and bias[5, 4] == pytest.approx(-0.2) and torch.isinf(bias[5, 3])
    assert opened(bias)[7] == [0, 0, 0, 0, 0, 0, 1, 1]


def test_anti_diagonal_aligns_top_right_corners():
    # m × n = 8 × 20, a clean anti-diagonal from the top-right corner; 27 lines, so even
    # the strict cross-attention κ = 4.5 keeps it.
    m, n, M, N = 8, 20, 12, 30
    a = torch.zeros(1, m, n)
    a[0, torch.arange(m), n - 1 - torch.arange(m)] = 1.0
    bias = extend(calibrate(a, directions=(-1,), kappa=4.5), M, N)[0]
    expected = torch.full((M, N), INF)
    expected[torch.arange(M), N - 1 - torch.arange(M)] = 0.0
    assert torch.equal(bias, expected)


def test_vertical_stripe_extends_down_its_column():
    m, n = 8, 30
    a = torch.zeros(1, m, n)
    a[0, :, 2] = 1.0
    bias = extend(calibrate(a, directions=(0,), kappa=4.5), 20, 40)[0]
    expected = torch.full((20, 40), INF)
    expected[:, 2] = 0.0
    assert torch.equal(bias, expected)


def _two_patterns_and_noise() -> torch.Tensor:
    """(3, 8, 30): head 0 an anti-diagonal, head 1 a vertical stripe, head 2 noise."""
    m, n = 8, 30
    a = torch.zeros(3, m, n)
    a[0, torch.arange(m), n - 1 - torch.arange(m)] = 1.0  # head 0: anti-diagonal
    a[1, :, 5] = 1.0  # head 1: vertical
    a[2] = 0.5 + 0.01 * torch.randn(m, n, generator=torch.Generator().manual_seed(0))  # head 2: noise
    return a


def test_two_heads_keep_their_own_patterns_and_a_noise_head_turns_transparent():
    a = _two_patterns_and_noise()
    bias = extend(calibrate(a, directions=(-1, 0), kappa=4.5), 10, 40)
    assert opened(bias[0]) == [[int(j == 39 - i) for j in range(40)] for i in range(10)]
    assert opened(bias[1]) == [[int(j == 5) for j in range(40)] for _ in range(10)]
    assert torch.equal(bias[2], torch.zeros(10, 40))  # transparent: nothing stood out


def test_lineless_union_gives_a_noise_head_the_other_heads_lines():
    a = _two_patterns_and_noise()
    lines = calibrate(a, directions=(-1, 0), kappa=4.5, lineless="union")
    bias = extend(lines, 10, 40)
    assert torch.equal(bias[2], torch.maximum(bias[0], bias[1]))  # the union, values included
    assert opened(bias[2]) == [[int(j == 39 - i or j == 5) for j in range(40)] for i in range(10)]
    assert opened(bias[0]) == [[int(j == 39 - i) for j in range(40)] for i in range(10)]  # others untouched
    # the choice travels with the saved lines
    assert torch.equal(extend(CalibratedLines.from_state(lines.state()), 10, 40), bias)


def test_lineless_union_with_no_line_anywhere_stays_transparent():
    a = 0.5 + 0.01 * torch.randn(2, 8, 30, generator=torch.Generator().manual_seed(1))
    bias = extend(calibrate(a, directions=(-1, 0), kappa=4.5, lineless="union"), 10, 40)
    assert torch.equal(bias, torch.zeros(2, 10, 40))


def test_lineless_must_be_known():
    with pytest.raises(ValueError, match="lineless"):
        calibrate(torch.eye(4)[None], lineless="closed")

def test_all_directions_merge_by_max():
    # anti-diagonal (1.0) plus an "attention sink" column (0.9). Each direction is normalized
    # by its own d_max, so both patterns open at 0; cell (0, 0) lies on the sink column
    # (vertical: 0) and on a length-1 anti-diagonal (0.9 − 1.0 = −0.1): the max, 0, wins.
    m, n = 8, 30
    a = torch.zeros(1, m, n)
    a[0, torch.arange(m), n - 1 - torch.arange(m)] = 1.0
    a[0, :, 0] = 0.9
    lines = calibrate(a, directions=(-1, 0), kappa=2.0)
    anti = lines.directions[0].values[0]
    assert anti[0].item() == pytest.approx(-0.1) and anti[29].item() == 0.0
    bias = extend(lines, 8, 30)[0]
    expected = torch.full((8, 30), INF)
    expected[torch.arange(8), 29 - torch.arange(8)] = 0.0
    expected[:, 0] = 0.0
    assert torch.equal(bias, expected)


def test_mean_lets_a_corner_cell_stand_out_and_sum_does_not():
    # A diagonal line that touches Ā only in its top-right cell has length 1, so its mean is
    # that cell's value: under "mean" it passes the drop-off, under "sum" (authors' code) not.
    m, n = 8, 30
    a = torch.zeros(1, m, n)
    a[0, torch.arange(m), n - 1 - torch.arange(m)] = 1.0
    mean = extend(calibrate(a, directions=(1,), kappa=4.5, reduce="mean"), 10, 40)[0]
    total = extend(calibrate(a, directions=(1,), kappa=4.5, reduce="sum"), 10, 40)[0]
    assert opened(mean)[1][30] == 1 and opened(mean)[0][29] == 1  # the corner's diagonal c = 29
    assert torch.equal(total, torch.zeros(10, 40))  # nothing stands out: transparent


def test_sum_along_lines_is_an_option():
    a = torch.eye(4)[None]
    lines = calibrate(a, directions=(1,), kappa=None, reduce="sum")
    # the main diagonal sums to 4, the first off-diagonals to 0; values are d_l − d_max
    assert lines.directions[0].values[0].tolist() == [-4.0, -4.0, -4.0, 0.0, -4.0, -4.0, -4.0]


@pytest.mark.parametrize("reduce", ["mean", "sum"])
@pytest.mark.parametrize("kappa", [4.5, 0.87, None])
def test_vectorized_matches_the_per_element_algorithm(reduce, kappa):
    torch.manual_seed(1)
    a = torch.rand(3, 6, 13) ** 4
    fast = extend(calibrate(a, kappa=kappa, reduce=reduce), 9, 21)
    slow = extend_loop(a, 9, 21, kappa=kappa, reduce=reduce)
    assert torch.allclose(fast, slow, atol=1e-5) and torch.equal(torch.isinf(fast), torch.isinf(slow))


def test_state_round_trips_through_plain_tensors(tmp_path):
    lines = calibrate(torch.rand(2, 5, 9), kappa=0.87)
    torch.save(lines.state(), tmp_path / "lines.pt")
    back = CalibratedLines.from_state(torch.load(tmp_path / "lines.pt", weights_only=True))
    assert torch.equal(extend(lines, 7, 15), extend(back, 7, 15))


def test_bias_source_never_closes_a_whole_row():
    a = torch.zeros(1, 6, 6)
    a[0, torch.arange(1, 6), torch.arange(5)] = 1.0  # only the sub-diagonal: row 0 would be closed
    source = CalibratedBias({"decoder": calibrate(a, directions=(1,), kappa=0.87)})
    bias = source("decoder", 8, 8, torch.device("cpu"))
    assert (bias[0, 0] == 0).all()  # row 0 opened in full
    assert torch.isinf(bias[0, 4, 4]) and bias[0, 4, 3] == 0


def test_soft_bias_has_no_minus_infinity():
    a = torch.zeros(1, 8, 30)
    a[0, torch.arange(8), 29 - torch.arange(8)] = 1.0
    hard = CalibratedBias({"cross": calibrate(a, kappa=0.87)})("cross", 10, 40, torch.device("cpu"))
    soft = CalibratedBias({"cross": calibrate(a, kappa=0.87)}, soft=True)("cross", 10, 40, torch.device("cpu"))
    assert torch.isinf(hard).any() and torch.isfinite(soft).all()
    assert torch.equal(soft[~torch.isinf(hard)], hard[~torch.isinf(hard)])


def test_kappa_above_the_z_bound_closes_everything_and_warns():
    a = torch.zeros(1, 4, 4)
    a[0, torch.arange(4), 3 - torch.arange(4)] = 1.0  # 7 anti-diagonal lines: z <= sqrt(6) = 2.45
    with pytest.warns(UserWarning, match="cannot be passed"):
        lines = calibrate(a, directions=(-1,), kappa=4.5)
    assert torch.equal(extend(lines, 4, 4), torch.zeros(1, 4, 4))  # transparent
    assert opened(extend(calibrate(a, directions=(-1,), kappa=2.0), 4, 4)[0])[0] == [0, 0, 0, 1]


def test_invalid_cells_belong_to_no_line():
    a = torch.full((1, 3, 3), 5.0)
    a[0] = a[0].tril() + torch.triu(torch.full((3, 3), 100.0), 1)  # garbage above the diagonal
    valid = torch.ones(3, 3, dtype=torch.bool).tril()
    lines = calibrate(a, directions=(1,), kappa=None, valid=valid)
    values = lines.directions[0].values[0]
    assert values[:3].tolist() == [0.0, 0.0, 0.0]  # lines c = −2, −1, 0 all average 5
    assert torch.isinf(values[3:]).all()  # lines above the diagonal have no valid cell


def test_vertical_lines_keep_their_column_by_default_or_follow_the_nearer_edge():
    # N×1-like cross-attention: a sink on SOS (column 0) and the multiplier just before EOS
    # (column n − 2). The paper's rule keeps column n − 2 fixed, which at a longer input is
    # a digit of the other operand; "nearest" moves it with the right end of the input.
    m, n, M, N = 6, 30, 8, 50
    a = torch.zeros(1, m, n)
    a[0, :, 0] = 1.0
    a[0, :, n - 2] = 1.0
    left = extend(calibrate(a, directions=(0,), kappa=2.0), M, N)[0]
    assert opened(left)[0] == [int(j in (0, n - 2)) for j in range(N)]
    nearest = extend(calibrate(a, directions=(0,), kappa=2.0, vertical="nearest"), M, N)[0]
    assert opened(nearest)[0] == [int(j in (0, N - 2)) for j in range(N)]
    assert opened(nearest)[M - 1] == opened(nearest)[0]
    back = CalibratedLines.from_state(calibrate(a, directions=(0,), kappa=2.0, vertical="nearest").state())
    assert torch.equal(extend(back, M, N), nearest[None])


def _two_operand_attention(width: int) -> torch.Tensor:
    """``$ a + b &`` with operands of ``width``; head 0 reads a_i, head 1 reads b_i at output row i."""
    m, n = width + 1, 2 * width + 3
    a = torch.zeros(2, m, n)
    rows = torch.arange(width)
    a[0, rows, width - rows] = 1.0  # a's least significant digit sits at column `width`
    a[1, rows, 2 * width + 1 - rows] = 1.0  # b's at column 2·width + 1
    return a


def test_segment_alignment_follows_each_operand_of_a_longer_addition():
    from abc_lightning.tasks import get_task

    W, W2 = 8, 20
    a = _two_operand_attention(W)
    segments = get_task("addition").growing_segments(2 * W + 3)
    assert segments == [(1, W), (W + 2, W)]
    lines = calibrate(a, directions=(-1,), kappa=3.0, segments=segments)
    bias = extend(lines, W2 + 1, 2 * W2 + 3)
    for i in range(W2):
        assert opened(bias[0])[i] == [int(j == W2 - i) for j in range(2 * W2 + 3)]  # a_i, at any length
        assert opened(bias[1])[i] == [int(j == 2 * W2 + 1 - i) for j in range(2 * W2 + 3)]  # b_i
    # the paper's corner rule moves the first operand's line by both operands' growth: into b
    corner = extend(calibrate(a, directions=(-1,), kappa=3.0), W2 + 1, 2 * W2 + 3)
    assert opened(corner[0])[0].index(1) == W + 2 * (W2 - W)
    # at the calibration size both rules agree, and the choice travels with the saved lines
    assert torch.equal(extend(lines, W + 1, 2 * W + 3), extend(calibrate(a, directions=(-1,), kappa=3.0), W + 1, 2 * W + 3))
    assert CalibratedLines.from_state(lines.state()).segments == segments


def test_segment_alignment_with_one_operand_is_the_corner_rule_and_moves_vertical_lines():
    m, n = 8, 20
    a = torch.zeros(2, m, n)
    a[0, torch.arange(m), n - 2 - torch.arange(m)] = 1.0  # reads x_i (EOS is the last column)
    a[1, :, n - 1] = 1.0  # the EOS column
    segments = [(1, n - 2)]
    # (sums along lines: a mean would let the one-cell anti-diagonals at the column's foot pass)
    bias = extend(calibrate(a, directions=(-1, 0), kappa=3.0, reduce="sum", segments=segments), 12, 30)
    assert torch.equal(bias[0], extend(calibrate(a[:1], directions=(-1,), kappa=3.0, reduce="sum"), 12, 30)[0])
    assert opened(bias[1]) == [[int(j == 29) for j in range(30)] for _ in range(12)]  # EOS follows the end


def test_segment_alignment_with_nearest_keeps_vertical_lines_on_leading_zeros():
    # addition's first layer: every row reads b's first column (a leading zero at the
    # training width) and a's last. Place value moves both with their operand's right end;
    # "nearest" keeps a column of an operand's left half on that operand's start.
    W, W2 = 8, 20
    a = torch.zeros(1, W + 1, 2 * W + 3)
    a[0, :, W + 2] = 1.0  # b's first column
    a[0, :, W] = 1.0  # a's last column
    segments = [(1, W), (W + 2, W)]
    N = 2 * W2 + 3
    place = extend(calibrate(a, directions=(0,), kappa=2.0, reduce="sum", segments=segments), W2 + 1, N)[0]
    assert opened(place)[0] == [int(j in (W2, W2 + 2 + W2 - W)) for j in range(N)]
    near = calibrate(a, directions=(0,), kappa=2.0, reduce="sum", segments=segments, vertical="nearest")
    bias = extend(near, W2 + 1, N)[0]
    assert opened(bias) == [[int(j in (W2, W2 + 2)) for j in range(N)]] * (W2 + 1)
    assert torch.equal(extend(CalibratedLines.from_state(near.state()), W2 + 1, N)[0], bias)
    assert torch.equal(extend(near, W + 1, 2 * W + 3), extend(calibrate(a, directions=(0,), kappa=2.0, reduce="sum"),
                                                           W + 1, 2 * W + 3))  # unchanged at its own size


def test_segment_alignment_refuses_sizes_the_operands_cannot_make():
    lines = calibrate(_two_operand_attention(8), directions=(-1,), kappa=3.0, segments=[(1, 8), (10, 8)])
    with pytest.raises(ValueError, match="grew equally"):
        extend(lines, 12, 2 * 8 + 3 + 3)  # 3 more keys cannot be split over two operands
    with pytest.raises(ValueError, match="segments"):
        calibrate(_two_operand_attention(8), segments=[(15, 8)])  # runs past the 19 keys


def test_growing_segments_match_the_source_layout():
    import numpy as np

    from abc_lightning import vocab
    from abc_lightning.tasks import get_task

    for name, op in (("addition", vocab.TOKEN["+"]), ("nx1", vocab.TOKEN["*"]), ("successor", None), ("parity", None)):
        task = get_task(name)
        for length in (6, 30):
            src = task.source(task.sample(np.random.default_rng(0), 3, length))
            segments = task.growing_segments(src.shape[1])
            assert src[0, 0] == vocab.SOS and src[0, -1] == vocab.EOS
            for start, width in segments:  # each segment is digits only, with the padding on its left
                assert np.all(src[:, start : start + width] < 10)
            assert segments[0][1] == task.eval_width(length)  # the first operand has the task's width
            if op is not None:
                assert src[0, segments[0][0] + segments[0][1]] == op


def test_square_segment_alignment_keeps_encoder_lines_between_operands():
    # encoder self-attention on "$ a + b &" (width 8): each digit of b attends to the digit
    # of a with the same place value, 9 columns to its left at this width
    W, W2 = 8, 11
    a = torch.zeros(1, 2 * W + 3, 2 * W + 3)
    a[0, W + 2 + torch.arange(W), 1 + torch.arange(W)] = 1.0
    lines = calibrate(a, directions=(1,), kappa=3.0, reduce="sum", segments=[(1, W), (W + 2, W)], square=True)
    N = 2 * W2 + 3
    bias = extend(lines, N, N)[0]
    for k in range(W2):  # b_k attends to a_k, now W2 + 1 columns to its left
        assert opened(bias)[W2 + 2 + k] == [int(j == 1 + k) for j in range(N)]
    assert torch.equal(extend(lines, 2 * W + 3, 2 * W + 3), extend(calibrate(a, directions=(1,), kappa=3.0, reduce="sum"),
                                                                    2 * W + 3, 2 * W + 3))  # unchanged at its own size
    assert CalibratedLines.from_state(lines.state()).square
    with pytest.raises(ValueError, match="square"):
        extend(lines, N - 2, N)


def test_one_model_calibrates_the_same_lines_on_one_and_two_threads():
    # What ABC averages and the lines it keeps do not depend on the thread count (runs that
    # were trained on different thread counts differ, but that is training, not calibration).
    from abc_lightning.evaluation import average_attention
    from abc_lightning.data import data_module_for
    from abc_lightning.model.positional import Sinusoidal
    from abc_lightning.model.transformer import Seq2SeqTransformer

    torch.manual_seed(0)
    model = Seq2SeqTransformer(32, 4, 1, 2, 64, 0.0, Sinusoidal(), None).eval()
    data = data_module_for("addition").length_set(6, 256, salt=1).data
    threads, kept = torch.get_num_threads(), []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            with torch.inference_mode():
                a_bar = average_attention(model, data.src.long(), data.tgt_out.shape[1], "weights")["cross"][-1]
            kept.append(calibrate(a_bar, kappa=0.5, reduce="sum").directions)
    finally:
        torch.set_num_threads(threads)
    for one, two in zip(*kept):
        assert torch.equal(one.values, two.values)
    assert any(torch.isfinite(d.values).any() for d in kept[0])  # some line was kept


def test_a_line_at_kappa_is_decided_the_same_under_float_noise():
    """Summation order (the thread count) moves averaged attention by ~1e-7: a line whose
    z-score sits at κ must not flip with it."""
    from abc_lightning.calibration.lines import drop_off

    values = torch.tensor([[1.0, 2.0, 3.0, 4.0, 10.0]], dtype=torch.float64)
    present = torch.ones(5, dtype=torch.bool)
    v = values[0]
    z_top = float((v[-1] - v.mean()) / v.std(unbiased=False))
    kept = []
    for noise in (-1e-7, 0.0, 1e-7):
        nudged = values.clone()
        nudged[0, -1] += noise
        kept.append(torch.isfinite(drop_off(nudged, present, kappa=z_top)).tolist())
    assert kept[0] == kept[1] == kept[2]  # without the rounding, -1e-7 drops the line and +1e-7 keeps it
    assert torch.isfinite(drop_off(values, present, kappa=round(z_top, 4) - 0.01))[0, -1]  # clearly above κ: kept
