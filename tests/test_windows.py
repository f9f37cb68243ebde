"""The ABS masks against hand-written matrices (1 = open, 0 = closed)."""

import pytest
import torch

from abc_lightning.scaffolding import WindowBias, cross_window, self_window
from abc_lightning.errors import ConfigError


def opened(mask: torch.Tensor) -> list[list[int]]:
    return (mask == 0).int().tolist()


def test_self_window_w1():
    assert opened(self_window(4, 1)) == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]


def test_self_window_w0_is_the_diagonal():
    assert opened(self_window(3, 0)) == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def test_cross_window_unary_trailing_w1():
    # source $ a3 a2 a1 & ; query i predicts digit i+1 and also sees the less-significant
    # neighbour; row 0 is anchored on EOS; rows past the number fall back to SOS.
    assert opened(cross_window(5, 5, 1, stride=1, geometry="trailing")) == [
        [0, 0, 0, 1, 1],
        [0, 0, 1, 1, 0],
        [0, 1, 1, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 0, 0, 0, 0],
    ]


def test_cross_window_aligned_binary_trailing_w0():
    # source $ + a2 b2 a1 b1 & : each query opens exactly its digit pair.
    assert opened(cross_window(3, 7, 0, stride=2, geometry="trailing")) == [
        [0, 0, 0, 0, 1, 1, 0],
        [0, 0, 1, 1, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
    ]


def test_cross_window_aligned_binary_trailing_w1():
    assert opened(cross_window(3, 7, 1, stride=2, geometry="trailing")) == [
        [0, 0, 0, 0, 1, 1, 1],
        [0, 0, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 0, 0, 0],
    ]


def test_cross_window_symmetric_and_leading():
    assert opened(cross_window(3, 5, 1, geometry="symmetric")) == [
        [0, 0, 1, 1, 1],
        [0, 1, 1, 1, 0],
        [1, 1, 1, 0, 0],
    ]
    assert opened(cross_window(3, 5, 1, geometry="leading")) == [
        [0, 0, 1, 1, 1],
        [0, 1, 1, 0, 0],
        [1, 1, 0, 0, 0],
    ]


@pytest.mark.parametrize("geometry", ["trailing", "symmetric", "leading"])
@pytest.mark.parametrize("stride", [1, 2])
def test_no_row_is_ever_fully_closed(geometry, stride):
    for w in range(3):
        mask = cross_window(40, 3 + stride * 20, w, stride, geometry)
        assert ((mask == 0).sum(1) > 0).all()


def test_window_bias_contract():
    bias = WindowBias(self_width=1, cross_width=0, stride=2)
    assert bias("decoder", 4, 4, torch.device("cpu")).shape == (1, 4, 4)
    assert bias("cross", 3, 7, torch.device("cpu")).shape == (1, 3, 7)
    assert bias("encoder", 7, 7, torch.device("cpu")) is None


@pytest.mark.parametrize("kwargs,match", [(dict(self_width=-1), "w >= 0"), (dict(cross_width=-2), "w >= 0"),
                                          (dict(geometry="diagonal"), "unknown window geometry")])
def test_bad_windows_are_named(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        WindowBias(**kwargs)


@pytest.mark.parametrize("name", ["successor", "addition", "nx1", "parity"])
def test_the_paper_tasks_windows_built_from_what_their_tokens_need_are_their_width_windows(name):
    """ABS builds every task's windows from Task.needs; for the papers' four tasks that must
    give exactly the paper's windows (self w=1, the trailing digit-aligned cross band), at
    training, test and long sizes, and block by block as long decoding asks for them."""
    import numpy as np

    from abc_lightning.tasks import get_task

    task = get_task(name)
    aligned = task.arity > 1  # the papers' binary tasks read the aligned form under ABS
    for length in (1, 2, 6, 7, 20, 61, 600):
        operands = task.sample(np.random.default_rng(length), 1, length)
        n_q, n_k = task.target(operands).shape[1] + 1, task.source(operands, aligned).shape[1]
        own, cross = task.dependency_windows(n_q, n_k, aligned=aligned)
        assert torch.equal(own, torch.isfinite(self_window(n_q, task.self_width)))
        assert torch.equal(cross, torch.isfinite(cross_window(n_q, n_k, task.cross_width, task.digit_stride(aligned))))
        rows = slice(n_q // 3, n_q // 3 + 5)
        own_rows, cross_rows = task.dependency_windows(n_q, n_k, rows, aligned=aligned)
        assert torch.equal(own_rows, own[rows]) and torch.equal(cross_rows, cross[rows])


def test_what_a_token_needs_maps_onto_the_source_in_either_form():
    """(operand, digit) pairs land on their tokens; digit −1 is the token after the operand,
    a digit past its top the token before it, an operand past the last EOS; unused pairs
    and unused answers open nothing, and a token that reads nothing reads EOS."""
    from abc_lightning.tasks.needs import Needs, dependency_windows
    from abc_lightning.tasks import get_task

    task = get_task("addition")
    pairs = torch.tensor([[[0, 0], [1, 0], [0, -1], [1, 3], [2, 0], [-1, 5]]])
    # natural: $ a2 a1 a0 + b2 b1 b0 &   (positions 0..8)
    assert task.source_positions(pairs, (3, 3), False, 9).tolist() == [[3, 7, 4, 4, 8, -1]]
    # aligned: $ + a2 b2 a1 b1 a0 b0 &   (digit 3 is past the top: the operator, then SOS)
    assert task.source_positions(pairs, (3, 3), True, 9).tolist() == [[6, 7, 8, 1, 8, -1]]
    needs = Needs(torch.tensor([[[-1, 0]], [[0, 1]]]), torch.tensor([[-5], [-1]]))
    own, cross = dependency_windows(needs, torch.tensor([[-1], [2]]), torch.tensor([0, 1]), 2, 4)
    assert own.int().tolist() == [[1, 0], [1, 1]]  # row 1 opens SOS (answer −1) and its own input
    assert cross.int().tolist() == [[0, 0, 0, 1], [0, 0, 1, 0]]
