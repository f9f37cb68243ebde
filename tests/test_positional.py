"""Each positional scheme against its reference formula, and its composition with CPI."""

from pathlib import Path

import pytest
import torch

from abc_lightning.scaffolding import WindowBias
from abc_lightning.cli import ABCLightningCLI, run_cli
from abc_lightning.errors import ConfigError
from abc_lightning.model import (
    SCHEMES, ALiBi, CyclicIndex, Learned, RandomizedIndex, Rotary, Seq2SeqTransformer, T5Relative,
)
from abc_lightning.model.positional import alibi_slopes, t5_bucket
from tests.helpers import random_batch

DEBUG = str(Path(__file__).resolve().parents[1] / "configs" / "debug.yaml")


def test_t5_buckets_reproduce_seed_002_example():
    # B = 5, D = 6: the bucket matrix printed in Kazemnejad et al. (2023, appendix B) for distances t - i (0 above the diagonal)
    expected = [
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        [2, 1, 0, 0, 0, 0, 0, 0, 0, 0],
        [2, 2, 1, 0, 0, 0, 0, 0, 0, 0],
        [3, 2, 2, 1, 0, 0, 0, 0, 0, 0],
        [3, 3, 2, 2, 1, 0, 0, 0, 0, 0],
        [4, 3, 3, 2, 2, 1, 0, 0, 0, 0],
        [4, 4, 3, 3, 2, 2, 1, 0, 0, 0],
        [4, 4, 4, 3, 3, 2, 2, 1, 0, 0],
        [4, 4, 4, 4, 3, 3, 2, 2, 1, 0],
    ]
    pos = torch.arange(10)
    dist = (pos[:, None] - pos[None, :]).clamp(min=0)
    assert t5_bucket(dist, 5, 6).tolist() == expected


def test_t5_negative_distances_have_their_own_buckets():
    t5 = T5Relative(buckets=5, max_distance=6)
    t5.setup(8, 2)
    ids = t5.bucket(torch.tensor([-3, -1, 0, 1, 3]))
    assert ids.tolist() == [5 + 2, 5 + 1, 0, 1, 2]


def test_alibi_slopes_8_and_6_heads():
    assert alibi_slopes(8).tolist() == pytest.approx([2.0**-k for k in range(1, 9)])
    # 6 heads: the 4-head slopes (1/4 … 1/256), then every other 8-head slope (1/2, 1/8)
    assert alibi_slopes(6).tolist() == pytest.approx([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])


def test_alibi_bias_is_minus_slope_times_distance():
    alibi = ALiBi()
    alibi.setup(16, 8)
    pos = torch.arange(4)
    bias = alibi.score_bias("decoder", pos, pos)
    assert bias.shape == (8, 4, 4)
    assert bias[0, 3, 1].item() == pytest.approx(-0.5 * 2)
    assert bias[7, 2, 0].item() == pytest.approx(-(2**-8) * 2)


def test_rope_scores_depend_only_on_relative_distance():
    rope = Rotary()
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
    pos = torch.arange(5)

    def scores(offset):
        return rope.rotate(q, pos + offset) @ rope.rotate(k, pos + offset).transpose(-1, -2)

    assert torch.allclose(scores(0), scores(37), atol=1e-4)
    assert not torch.allclose(scores(0), q @ k.transpose(-1, -2), atol=1e-3)


def test_rope_qk_bias_switch():
    with_bias = Seq2SeqTransformer(d_model=16, heads=2, decoder_layers=1, feedforward=16, positional=Rotary())
    without = Seq2SeqTransformer(d_model=16, heads=2, decoder_layers=1, feedforward=16,
                                 positional=Rotary(qk_bias=False))
    assert with_bias.decoder[0].self_attn.q_proj.bias is not None
    assert without.decoder[0].self_attn.q_proj.bias is None and without.decoder[0].cross_attn.k_proj.bias is None
    assert without.decoder[0].self_attn.v_proj.bias is not None


class Recorder:
    """Wraps a scheme's hooks and records the position indices they receive."""

    def __init__(self, scheme):
        self.seen = []
        for hook in ("embed", "score_bias", "rotate"):
            original = getattr(scheme, hook)

            def wrapped(*args, _original=original, _hook=hook):
                for a in args:
                    if isinstance(a, torch.Tensor) and a.dtype == torch.long and a.dim() == 1:
                        self.seen.append(a.clone())
                return _original(*args)

            setattr(scheme, hook, wrapped)




@pytest.mark.parametrize("scheme_cls", SCHEMES, ids=lambda c: c.__name__)
def test_cpi_indices_feed_every_scheme(scheme_cls):
    scheme = scheme_cls()
    model = Seq2SeqTransformer(d_model=16, heads=2, decoder_layers=1, feedforward=16, dropout=0.0,
                               positional=scheme, position_index=CyclicIndex(3))
    recorder = Recorder(scheme)
    model(*random_batch(b=2, s=11, t=9))
    assert {len(positions) for positions in recorder.seen} == {11, 9}  # the input's and the answer's
    for positions in recorder.seen:
        assert torch.equal(positions, torch.arange(len(positions)) % 3)


@pytest.mark.parametrize("scheme_cls", SCHEMES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("index", [CyclicIndex(3), RandomizedIndex(64)], ids=["cpi", "randomized"])
def test_every_scheme_composes_with_windows_and_caching(scheme_cls, index):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(d_model=16, heads=2, decoder_layers=2, feedforward=16, dropout=0.0,
                               positional=scheme_cls(), position_index=index).eval()
    model.install_bias("abs_window", WindowBias(self_width=1, cross_width=1))
    src, tgt = random_batch(b=8, s=15, t=9)
    out = model(src, tgt, return_attention=True)
    assert torch.isfinite(out.logits).all()
    assert torch.equal(model.generate(src, 14), model.generate(src, 14, use_cache=False))


def test_randomized_positions_are_sorted_distinct_and_repeatable_in_eval():
    idx = RandomizedIndex(100)
    train = idx(20)
    assert train.tolist() == sorted(set(train.tolist())) and int(train.max()) < 100
    idx.eval()
    assert torch.equal(idx(20), idx(20))
    with pytest.raises(ConfigError, match="max_position >= 200"):
        idx(200)


def test_learned_positions_refuse_lengths_past_their_table():
    model = Seq2SeqTransformer(d_model=16, heads=2, decoder_layers=1, feedforward=16, positional=Learned(32))
    model.check_length(32)
    with pytest.raises(ConfigError, match="encodes positions < 32"):
        model.check_length(33)


@pytest.mark.parametrize("name", [c.__name__ for c in SCHEMES])
def test_cli_selects_every_scheme_by_name(name):
    cli = ABCLightningCLI(args=["--config", DEBUG, f"--model.positional={name}"], run=False)
    assert type(cli.model.model.positional).__name__ == name


@pytest.mark.parametrize("name", [c.__name__ for c in SCHEMES])
def test_fit_runs_with_every_scheme(name):
    assert run_cli(["fit", "--config", DEBUG, f"--model.positional={name}", "--trainer.max_epochs=1",
                    "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1",
                    "--trainer.enable_progress_bar=false"]) == 0


def test_learned_too_short_for_the_evaluation_fails_at_start(capsys):
    code = run_cli(["fit", "--config", DEBUG, "--model.positional=Learned", "--model.positional.max_position=16",
                    "--trainer.max_epochs=1"])
    assert code == 2
    assert "encodes positions < 16" in capsys.readouterr().err
