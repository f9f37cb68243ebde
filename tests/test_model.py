import math

import pytest
import torch

from abc_lightning import vocab
from abc_lightning.scaffolding import WindowBias
from abc_lightning.errors import ConfigError
from abc_lightning.model import CyclicIndex, LinearIndex, NoPE, Seq2SeqTransformer, Sinusoidal
from tests.helpers import random_batch as batch


def tiny(**kw) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    args = dict(d_model=32, heads=4, encoder_layers=1, decoder_layers=2, feedforward=64, dropout=0.0)
    return Seq2SeqTransformer(**{**args, **kw}).eval()




def test_cyclic_position_indexing():
    assert CyclicIndex(3)(7).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert LinearIndex()(4).tolist() == [0, 1, 2, 3]
    for bad in (0, -1):
        with pytest.raises(ConfigError, match="T must be an integer >= 1"):
            CyclicIndex(bad)
    with pytest.raises(ConfigError, match="source_from must be one of start, end"):
        CyclicIndex(3, source_from="middle")


def test_cpi_counted_from_the_input_end_keeps_each_answer_step_at_one_phase():
    start, end = CyclicIndex(3), CyclicIndex(3, source_from="end")
    assert start.source(7).tolist() == start(7).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert end.source(7).tolist() == [0, 2, 1, 0, 2, 1, 0]
    assert end(7).tolist() == start(7).tolist()  # the decoder counts from its first token
    # the last k input tokens (the least significant digits, which the first answer steps
    # read) have the same indices at every input length; counted from the start they move
    for n in range(5, 40):
        assert end.source(n)[-5:].tolist() == [1, 0, 2, 1, 0]
    assert len({tuple(start.source(n)[-5:].tolist()) for n in range(5, 40)}) == 3


def test_cpi_counted_from_the_input_end_reaches_the_encoder_and_not_the_decoder():
    m = tiny(position_index=CyclicIndex(3, source_from="end"))
    seen = []
    embed = m.positional.embed
    m.positional.embed = lambda positions: seen.append(positions.tolist()) or embed(positions)
    src, _ = batch(b=2, s=8)
    m.generate(src, 4, use_cache=False)
    assert seen[0] == [1, 0, 2, 1, 0, 2, 1, 0]  # the encoder: counted back from the input's last token
    assert seen[1:] == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 0]]  # the decoder: from its first token


def test_cpi_indices_reach_the_positional_scheme():
    m = tiny(position_index=CyclicIndex(3))
    pos = m.position_index(6)
    emb = m.positional.embed(pos)
    assert torch.equal(emb[0], emb[3]) and not torch.equal(emb[0], emb[1])


def test_sinusoidal_formula():
    s = Sinusoidal()
    s.setup(8, 2)
    p = s.embed(torch.arange(5))
    j = 3
    assert p[j, 0].item() == pytest.approx(math.sin(j))
    assert p[j, 1].item() == pytest.approx(math.cos(j))
    assert p[j, 2].item() == pytest.approx(math.sin(j / 10000 ** (2 / 8)))


def test_forward_with_and_without_bias():
    src, tgt = batch()
    m = tiny(positional=NoPE())
    plain = m(src, tgt).logits
    assert plain.shape == (3, 8, vocab.VOCAB_SIZE)
    m.install_bias("abs_window", WindowBias(self_width=1, cross_width=1))
    windowed = m(src, tgt).logits
    assert windowed.shape == plain.shape
    assert not torch.allclose(plain, windowed)
    m.remove_bias("abs_window")
    assert torch.allclose(m(src, tgt).logits, plain)


def test_closed_cells_get_zero_attention_and_maps_have_documented_shapes():
    src, tgt = batch()
    m = tiny(positional=NoPE())
    m.install_bias("abs_window", WindowBias(self_width=1, cross_width=0))
    out = m(src, tgt, return_attention=True)
    assert set(out.attention) == {"encoder", "decoder", "cross"}
    assert len(out.attention["decoder"]) == 2 and len(out.attention["encoder"]) == 1
    cross = out.attention["cross"][-1]
    assert cross.weights.shape == (3, 4, 8, 9) and cross.scores.shape == (3, 4, 8, 9)
    closed = m.bias_sources["abs_window"]("cross", 8, 9, torch.device("cpu"))[0] == float("-inf")
    assert (cross.weights[:, :, closed] == 0).all()
    assert torch.allclose(cross.weights.sum(-1), torch.ones(3, 4, 8))
    self_w = out.attention["decoder"][0].weights
    assert (self_w.triu(1) == 0).all()  # causal


def test_map_path_matches_fused_attention():
    src, tgt = batch()
    m = tiny()
    m.install_bias("abs_window", WindowBias(self_width=1, cross_width=1))
    assert torch.allclose(m(src, tgt).logits, m(src, tgt, return_attention=True).logits, atol=1e-5)


@pytest.mark.parametrize("positional", [Sinusoidal(), NoPE()])
@pytest.mark.parametrize("index", [LinearIndex(), CyclicIndex(3), CyclicIndex(3, source_from="end")])
@pytest.mark.parametrize("window", [None, WindowBias(1, 1), WindowBias(1, 0, stride=2)])
def test_cached_decoding_matches_full_recomputation(positional, index, window):
    m = tiny(positional=positional, position_index=index)
    if window is not None:
        m.install_bias("abs_window", window)
    src, _ = batch(b=16, s=23)
    full = m.generate(src, 22, use_cache=False)
    assert torch.equal(m.generate(src, 22), full)
    assert torch.equal(m.generate(src, 22, skip_closed=False), full)


def test_band_decoding_matches_under_a_calibrated_bias():
    from abc_lightning.calibration.bias import CalibratedBias
    from abc_lightning.calibration.lines import calibrate

    m = tiny(positional=NoPE())
    diagonal = torch.zeros(4, 8, 8)
    diagonal[:, torch.arange(8), torch.arange(8)] = 1.0  # every head looks along the diagonal
    m.install_bias("abc", CalibratedBias({"cross": calibrate(diagonal.clone(), kappa=1.0),
                                          "decoder": calibrate(diagonal.clone(), directions=[1], kappa=1.0)}))
    src, _ = batch(b=16, s=30)
    full = m.generate(src, 29, use_cache=False)
    assert torch.equal(m.generate(src, 29), full)


@pytest.mark.parametrize("setup", ["window", "encoder_window", "leading", "calibrated", "alibi", "open"])
def test_decoding_in_row_blocks_matches_the_whole_bias(monkeypatch, setup):
    """Long sequences build their biases a block of rows at a time (memory linear in the
    length); with the block threshold made tiny, every path gives the whole-bias tokens."""
    from abc_lightning.calibration.bias import CalibratedBias
    from abc_lightning.calibration.lines import calibrate
    from abc_lightning.model import decoding
    from abc_lightning.model.positional import ALiBi

    m = tiny(positional=ALiBi() if setup == "alibi" else NoPE(), position_index=CyclicIndex(3))
    if setup in ("window", "encoder_window", "leading"):
        m.install_bias("abs_window", WindowBias(1, 1, geometry="leading" if setup == "leading" else "trailing",
                                                encoder_width=1 if setup == "encoder_window" else None))
    if setup == "calibrated":
        diagonal = torch.zeros(4, 8, 8)
        diagonal[:, torch.arange(8), torch.arange(8)] = 1.0
        m.install_bias("abc", CalibratedBias({"cross": calibrate(diagonal.clone(), kappa=1.0),
                                              "decoder": [calibrate(diagonal.clone(), directions=[1], kappa=1.0)] * 2}))
    src, _ = batch(b=8, s=41)
    whole_memory, whole = m.encode(src)[0], m.generate(src, 40)
    monkeypatch.setattr(decoding, "DENSE_CELLS", 64)
    monkeypatch.setattr(decoding, "BLOCK_ROWS", 7)  # blocks that do not divide the 40 steps
    assert len(decoding.row_blocks(40, 41)) == 6
    assert torch.allclose(m.encode(src)[0], whole_memory, atol=1e-5)
    assert torch.equal(m.generate(src, 40), whole)
    if setup == "encoder_window":
        pos = torch.arange(41)
        assert m._long_bands(pos)[0][1].bias.shape[-2:] == (41, 3)  # the band alone, never (41, 41)


def test_rows_of_a_window_are_the_rows_of_the_whole_window():
    from abc_lightning.scaffolding.windows import cross_window

    for geometry in ("trailing", "symmetric", "leading"):
        whole = cross_window(30, 45, 1, 2, geometry)
        assert torch.equal(cross_window(30, 45, 1, 2, geometry, slice(0, 7)), whole[:7])
        assert torch.equal(cross_window(30, 45, 1, 2, geometry, slice(7, 30)), whole[7:])
    source = WindowBias(2, 1, encoder_width=1)
    for kind, q, k in (("decoder", 30, 30), ("cross", 30, 45), ("encoder", 45, 45)):
        whole = source(kind, q, k, torch.device("cpu"))
        assert torch.equal(source(kind, q, k, torch.device("cpu"), rows=slice(5, 12)), whole[:, 5:12])


def test_open_span_per_row():
    from abc_lightning.model.decoding import open_span
    from abc_lightning.model.transformer import causal_mask

    bias = WindowBias(self_width=1, cross_width=None)("decoder", 6, 6, torch.device("cpu")) + causal_mask(6, "cpu")
    first, last = open_span(bias, 6, causal=True)
    assert first.tolist() == [0, 0, 1, 2, 3, 4] and last.tolist() == [1, 2, 3, 4, 5, 6]
    closed_row = torch.zeros(1, 3, 5)
    closed_row[0, 1] = float("-inf")  # a row with nothing open keeps every key
    closed_row[0, 2, :3] = float("-inf")
    first, last = open_span(closed_row, 5)
    assert first.tolist() == [0, 0, 3] and last.tolist() == [5, 5, 5]


def test_band_decoding_keeps_a_cache_of_constant_size():
    m = tiny(positional=NoPE())
    m.install_bias("abs_window", WindowBias(self_width=1, cross_width=1))
    sizes = []
    original = m.decoder[0].forward

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        cache, step = args[-2:]  # passed positionally
        sizes.append((cache["k"].shape[2], read_count(step.read)))
        return out

    m.decoder[0].forward = spy
    m.generate(batch(b=2, s=41)[0], 40)
    # w = 1: a cache of 2 slots at every step; step 0 reads its own key, every later step 2
    assert len(sizes) == 40 and set(sizes[1:]) == {(2, 2)} and sizes[0] == (2, 1)


def read_count(read) -> int:
    return read.stop - read.start if isinstance(read, slice) else read.numel()


def test_a_dependency_window_far_back_reads_its_few_keys_not_the_cache():
    """A task's dependency window that reads one key a whole row back (k-operand addition)
    keeps a row of keys in the cache, but each step attends only to its open ones, so the
    time per step does not grow with the row."""
    from functools import partial

    import numpy as np

    from abc_lightning.tasks import get_task

    task = get_task("addition_k").with_operands(3)
    ops = task.sample(np.random.default_rng(0), 4, 30)
    src, steps = torch.as_tensor(task.source(ops)), task.target(ops).shape[1] + 1
    m = tiny(positional=NoPE())
    m.install_bias("abs_window", WindowBias(dependencies=partial(task.dependency_windows, aligned=False)))
    seen = []
    original = m.decoder[0].forward

    def spy(*args, **kwargs):
        cache, step = args[-2:]
        out = original(*args, **kwargs)
        seen.append((cache["k"].shape[2], read_count(step.read)))
        return out

    m.decoder[0].forward = spy
    tokens = m.generate(src, steps)
    row = 2 * task.row_width(ops[0].shape[1])
    assert max(n for n, _ in seen) >= row // 2  # the row above's digits stay in the cache
    assert max(r for _, r in seen) <= 3  # the token before, the carry before it, the row above
    m.decoder[0].forward = original
    assert torch.equal(tokens, m.generate(src, steps, use_cache=False))


def test_a_long_decode_builds_each_block_of_bias_rows_from_the_keys_they_can_open(monkeypatch):
    """Decoding a long answer a block of rows at a time, a block under a task's dependency
    windows is built over the keys its rows read: from the first answer step they read (the
    row above), and over the source tokens they read (one operand's digits), not over every
    step and token, so the bias work per step does not grow with the answer or the input;
    same tokens as full recomputation, and as blocks built over every key. The cross-attention
    keys and values a block reads are made for those source tokens only."""
    from functools import partial

    import numpy as np

    from abc_lightning.model import decoding
    from abc_lightning.tasks import get_task

    task = get_task("addition_k").with_operands(4)
    ops = task.sample(np.random.default_rng(1), 3, 12)
    src, steps = torch.as_tensor(task.source(ops)), task.target(ops).shape[1] + 1
    m = tiny(positional=NoPE())
    m.install_bias("abs_window", WindowBias(dependencies=partial(task.dependency_windows, aligned=False),
                                            spans=partial(task.dependency_spans, aligned=False)))
    full = m.generate(src, steps, use_cache=False)
    monkeypatch.setattr(decoding, "DENSE_CELLS", 64)
    monkeypatch.setattr(decoding, "BLOCK_ROWS", 8)
    widths, cross_widths, original = [], [], m.attention_bias

    def spy(kind, *args, **kwargs):
        bias = original(kind, *args, **kwargs)
        if kwargs.get("rows") is not None:
            (widths if kind == "decoder" else cross_widths).append(bias.shape[-1])
        return bias

    monkeypatch.setattr(m, "attention_bias", spy)
    memory_widths, keys_values = [], m.decoder[0].cross_attn.source_major_keys_values
    monkeypatch.setattr(m.decoder[0].cross_attn, "source_major_keys_values",  # x: (source tokens, b, d)
                        lambda x: memory_widths.append(x.shape[0]) or keys_values(x))
    assert torch.equal(m.generate(src, steps), full)
    assert len(memory_widths) > 1 and max(memory_widths) <= max(cross_widths) < src.shape[1]
    row = 2 * task.row_width(ops[0].shape[1])
    assert steps > 3 * row  # four rows: a whole-answer block would be over three rows wide
    assert max(widths) <= row + 8 + 2  # the row above, the block, the carry before it
    assert src.shape[1] > 40 and max(cross_widths) <= 2 * 8 // 2 + 2  # a block's digits of one operand, not the input
    m.install_bias("abs_window", WindowBias(dependencies=partial(task.dependency_windows, aligned=False)))
    widths.clear()
    cross_widths.clear()
    memory_widths.clear()
    assert torch.equal(m.generate(src, steps), full)  # without the promise: every key, the same tokens
    assert max(widths) == steps and min(cross_widths) == src.shape[1]
    assert memory_widths == [src.shape[1]]  # the whole memory's keys and values, made once


def test_open_keys_are_where_the_promises_of_the_sources_overlap():
    """A cell is open only where every bias leaves it open, so a block can be built over the
    overlap of the key spans the sources promise; a window of width w promises the row less
    w on; a task's windows the answer steps and source tokens its rows read."""
    from functools import partial

    import numpy as np

    from abc_lightning.tasks import get_task

    m = tiny(positional=NoPE())
    assert m.open_keys("decoder", 40, 40, slice(16, 24)) == slice(0, 40)  # no source: no promise
    m.install_bias("abs_window", WindowBias(2, 1))
    assert m.open_keys("decoder", 40, 40, slice(16, 24)) == slice(14, 40)
    assert m.open_keys("cross", 40, 41, slice(16, 24)) == slice(0, 41)
    task = get_task("addition_k").with_operands(3)
    ops = task.sample(np.random.default_rng(0), 2, 9)
    n_src, n_ans = task.source(ops).shape[1], task.target(ops).shape[1] + 1
    windows = WindowBias(dependencies=partial(task.dependency_windows, aligned=False),
                         spans=partial(task.dependency_spans, aligned=False))
    cpu = torch.device("cpu")
    for rows in (slice(0, 5), slice(20, 33), slice(n_ans - 6, n_ans)):
        for kind, n_q, n_k in (("decoder", n_ans, n_ans), ("cross", n_ans, n_src)):
            whole = windows(kind, n_q, n_k, cpu, rows=rows, sizes=(n_src, n_ans))
            keys = windows.open_keys(kind, n_q, n_k, rows, (n_src, n_ans))
            assert torch.isinf(whole[..., : keys.start]).all() and torch.isinf(whole[..., keys.stop :]).all()
            part = windows(kind, n_q, n_k, cpu, rows=rows, sizes=(n_src, n_ans), keys=keys)
            assert torch.equal(part, whole[..., keys])
    m = tiny(positional=NoPE())
    m.install_bias("abs_window", WindowBias(2, 1))
    whole = m.attention_bias("decoder", torch.arange(40), torch.arange(40), rows=slice(16, 24))
    part = m.attention_bias("decoder", torch.arange(40), torch.arange(40), rows=slice(16, 24), keys=slice(14, 24))
    assert torch.equal(part, whole[..., 14:24])
    assert torch.isinf(whole[..., :14]).all()


def test_a_line_open_in_every_row_keeps_few_keys_not_the_whole_past():
    """ABC on parity calibrated a decoder line that keeps the first output steps open in
    every row; decoding must keep those keys and the window, not every key (quadratic)."""
    from abc_lightning.calibration.bias import CalibratedBias
    from abc_lightning.calibration.lines import CalibratedLines, DirectionLines

    m = tiny(positional=NoPE())
    heads = m.heads
    # decoder self-attention: the diagonal and the one below it, and the vertical line at step 0
    decoder = CalibratedLines(8, 8, [DirectionLines(1, -1, torch.tensor([[0.0, 0.0]] * heads)),
                                     DirectionLines(0, 0, torch.tensor([[0.0] + [float("-inf")] * 7] * heads))])
    m.install_bias("abc", CalibratedBias({"decoder": decoder}))
    sizes = []
    original = m.decoder[0].forward

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        sizes.append(args[-2]["k"].shape[2])  # the cache's slots
        return out

    m.decoder[0].forward = spy
    src = batch(b=8, s=61)[0]
    tokens = m.generate(src, 60)
    assert max(sizes) <= 3 and len(sizes) == 60  # step 0's key, and the window
    m.decoder[0].forward = original
    assert torch.equal(tokens, m.generate(src, 60, use_cache=False))



@pytest.mark.parametrize("positional", [Sinusoidal(), NoPE()])
def test_banded_encoder_reads_only_its_band_and_matches_dense_attention(positional):
    from abc_lightning.model.decoding import band_of

    m = tiny(positional=positional, position_index=CyclicIndex(3))
    m.install_bias("abs_window", WindowBias(self_width=1, cross_width=1, encoder_width=2))
    src, _ = batch(b=4, s=150)
    pos = torch.arange(src.shape[1])
    band_bias, first_offset = band_of(m.attention_bias("encoder", pos, pos), src.shape[1])
    assert first_offset == -2 and band_bias.shape[-1] == 5  # keys i − 2 … i + 2
    assert torch.isinf(band_bias[..., 0, :2]).all() and torch.isinf(band_bias[..., -1, 3:]).all()  # past the ends
    blocked = m.encode(src)[0]
    dense = m.encode(src, need_map=True)[0]  # maps need every cell: the dense path
    assert torch.allclose(blocked, dense, atol=1e-5)
    assert torch.equal(m.generate(src, 30), m.generate(src, 30, use_cache=False))
    # an open encoder, or a band as wide as half the keys, stays dense
    assert band_of(None, 100) is None
    assert band_of(torch.zeros(1, 100, 100), 100) is None
    assert band_of(WindowBias(1, 1, encoder_width=9)("encoder", 100, 100, torch.device("cpu")), 100) is None  # 19 wide


@pytest.mark.parametrize("kwargs,match", [(dict(d_model=30, heads=4), "must divide"),
                                          (dict(decoder_layers=0), "decoder_layers must be >= 1"),
                                          (dict(dropout=1.5), "dropout")])
def test_bad_sizes_are_named(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        tiny(**kwargs)


@pytest.mark.parametrize("use_cache", [True, False])
def test_decoding_against_a_target_stops_once_every_row_is_wrong_and_keeps_exact_match(use_cache):
    m = tiny(positional=NoPE())
    m.install_bias("abs_window", WindowBias(1, 1))
    src, _ = batch(b=8, s=13)
    full = m.generate(src, 12, use_cache=use_cache)
    steps = []
    m.head.register_forward_hook(lambda *_: steps.append(1))

    def decode(target):
        steps.clear()
        return m.generate(src, 12, use_cache=use_cache, target=target), len(steps)

    # one row still right: every step is decoded, and the tokens are those of a plain decode
    wrong_at_3 = full.clone()
    wrong_at_3[1:, 3] = (full[1:, 3] + 1) % 10
    tokens, n = decode(wrong_at_3)
    assert torch.equal(tokens, full) and n == 12
    # every row wrong from step 3 on (row 0 at its last step): it stops after step 11 of 12
    wrong_at_3[0, 10] = (full[0, 10] + 1) % 10
    tokens, n = decode(wrong_at_3)
    assert n == 11 and torch.equal(tokens[:, :11], full[:, :11]) and (tokens[:, 11] == vocab.PAD).all()
    # every row wrong at its first step: one step, the rest PAD
    wrong_first = full.clone()
    wrong_first[:, 0] = (full[:, 0] + 1) % 10
    tokens, n = decode(wrong_first)
    assert n == 1 and (tokens[:, 1:] == vocab.PAD).all()
    # exact match against each target is what a whole decode gives
    for target in (full, wrong_at_3, wrong_first):
        got = (m.generate(src, 12, use_cache=use_cache, target=target) == target).all(1)
        assert torch.equal(got, (full == target).all(1))
    with pytest.raises(ValueError, match=r"target must be \(batch, 12\)"):
        m.generate(src, 12, target=full[:, :5])


def test_encoder_attention_drop_leaves_rows_without_their_self_attention_in_training_only():
    torch.manual_seed(0)
    kept = Seq2SeqTransformer(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, feedforward=32, dropout=0.0)
    dropping = Seq2SeqTransformer(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, feedforward=32,
                                  dropout=0.0, encoder_attention_drop=0.5)
    dropping.load_state_dict(kept.state_dict())
    src = torch.randint(3, 13, (64, 9))
    layer = kept.encoder[0]
    x = torch.randn(64, 9, 16)
    pos = torch.arange(9)
    full = layer(x, None, pos, None, False)[0]
    without = x + layer.ff(layer.norm2(x))  # the layer's output with no self-attention
    dropping.train()
    torch.manual_seed(1)
    out = dropping.encoder[0](x, None, pos, None, False)[0]
    left_out = torch.isclose(out, without, atol=1e-6).all(dim=(1, 2))
    assert torch.isclose(out[~left_out], full[~left_out], atol=1e-6).all()  # the others keep it, unscaled
    assert 16 < int(left_out.sum()) < 48  # about half the rows
    kept.eval(), dropping.eval()
    assert torch.equal(kept.encode(src)[0], dropping.encode(src)[0])  # evaluation keeps every row's
    with pytest.raises(ConfigError, match="encoder_attention_drop"):
        Seq2SeqTransformer(d_model=16, heads=2, encoder_attention_drop=1.0)


@pytest.mark.parametrize("task_name,geometry", [("addition", "task"), ("nx1", "task"), ("successor", "width")])
def test_source_major_cross_keys_give_the_tokens_of_the_batch_major_ones(task_name, geometry, monkeypatch):
    """Cross-attention keys kept (s, b, h, d) hold the values (b, h, s, d) did, so a cached
    decode gives the same tokens, bit for bit, under task and width windows."""
    from functools import partial

    import numpy as np

    from abc_lightning.model import decoding
    from abc_lightning.tasks import get_task

    task = get_task(task_name)
    ops = task.sample(np.random.default_rng(0), 6, 12)
    src, steps = torch.as_tensor(task.source(ops)), task.target(ops).shape[1] + 1
    m = tiny(position_index=CyclicIndex(3))
    if geometry == "task":
        m.install_bias("abs_window", WindowBias(dependencies=partial(task.dependency_windows, aligned=False)))
    else:
        m.install_bias("abs_window", WindowBias(self_width=1, cross_width=1))
    with torch.inference_mode():
        source_major = m.generate(src, steps)
        monkeypatch.setattr(decoding, "SOURCE_MAJOR", False)
        batch_major = m.generate(src, steps)
    assert len(set(source_major.flatten().tolist())) > 5  # an untrained model that still varies its answers
    assert torch.equal(source_major, batch_major)
