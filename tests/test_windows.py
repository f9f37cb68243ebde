"""The ABS masks against hand-written matrices (1 = open, 0 = closed)."""

import pytest
import torch

from abc_lightning.biases import WindowBias, cross_window, self_window
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
