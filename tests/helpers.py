"""Shared test helpers."""

from pathlib import Path

import torch

from abc_lightning import vocab


def random_batch(b: int = 3, s: int = 9, t: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Random digit sources framed by SOS/EOS and decoder inputs starting with SOS."""
    src = torch.randint(0, 10, (b, s))
    src[:, 0], src[:, -1] = vocab.SOS, vocab.EOS
    tgt = torch.randint(0, 10, (b, t))
    tgt[:, 0] = vocab.SOS
    return src, tgt


def as_int(digits, base: int = 10) -> int:
    """A row of digits (most significant first) -> the integer it writes."""
    return int("".join(str(int(d)) for d in digits), base)


def worst_case_rows(task_name: str, length: int):
    """A task and its worst-case set at ``length``: ``(task, [(expression, target row), …])``."""
    from abc_lightning.tasks import get_task

    task = get_task(task_name)
    _, _, operands, texts = task.worst_case_set(length)
    return task, list(zip(texts, task.target(operands)))


def own_cross_window(task_name: str, length: int):
    """A task with a cross window of its own, at ``length``: ``(task, operands, window)``,
    after checking that every output token opens one or two source tokens."""
    import numpy as np

    from abc_lightning.tasks import get_task

    task = get_task(task_name)
    operands = task.sample(np.random.default_rng(0), 1, length)
    src, tgt = task.source(operands, aligned=task.form == "aligned"), task.target(operands)
    window = task.dependency_windows(tgt.shape[1] + 1, src.shape[1], aligned=task.form == "aligned")[1]
    assert window.sum(dim=1).max() == 2 and window.sum(dim=1).min() == 1
    return task, operands, window


def abs_window_of(data_class: str):
    """The window bias ``configs/abs.yaml`` installs for ``--data=<data_class>``, after
    checking that the task kept the form its windows are drawn on."""
    from pathlib import Path

    from abc_lightning.callbacks import AttentionWindow
    from abc_lightning.cli import ABCLightningCLI

    config = Path(__file__).resolve().parents[1] / "configs" / "abs.yaml"
    cli = ABCLightningCLI(args=["--config", str(config), f"--data={data_class}", "--trainer.logger=false"], run=False)
    form = cli.datamodule.task.form
    assert form is not None and cli.datamodule.aligned == (form == "aligned")  # whatever abs.yaml asks for
    window = next(cb for cb in cli.trainer.callbacks if isinstance(cb, AttentionWindow))
    window.apply_to(cli.model, cli.datamodule)
    return cli.model.model.bias_sources["abs_window"]


def assert_abs_cell_uses_the_task_windows(task_name: str, self_width: int, n_queries: int, n_keys: int) -> None:
    """``configs/abs.yaml`` on the task installs the task's own windows: its decoder width and,
    at (n_queries, n_keys), the cross window built from what its tokens need."""
    from abc_lightning.tasks import class_name, get_task

    bias = abs_window_of(class_name(task_name))
    assert bias.self_width == self_width and bias.dependencies is not None
    task = get_task(task_name)
    cross = bias("cross", n_queries, n_keys, torch.device("cpu"))[0]
    assert torch.equal(torch.isfinite(cross), task.dependency_windows(n_queries, n_keys, aligned=task.form == "aligned")[1])


def one_error_line(capsys) -> str:
    """The single ``abc_lightning: error:`` line a failed command printed on stderr."""
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("abc_lightning: error:")]
    assert len(lines) == 1, lines
    return lines[0]


def assert_cached_decoding_matches_recomputation(task, src: torch.Tensor, steps: int, period: int,
                                                 monkeypatch) -> None:
    """A small model under ``task``'s dependency windows (CPI of ``period``, counted from the
    input's end): cached decoding, whole and a block of rows at a time, gives the tokens of
    recomputing the whole prefix at every step."""
    from functools import partial

    from abc_lightning.scaffolding import WindowBias
    from abc_lightning.model import CyclicIndex, Seq2SeqTransformer, Sinusoidal, decoding

    torch.manual_seed(0)
    m = Seq2SeqTransformer(d_model=32, heads=4, encoder_layers=1, decoder_layers=2, feedforward=64, dropout=0.0,
                           positional=Sinusoidal(), position_index=CyclicIndex(period, source_from="end")).eval()
    m.install_bias("abs_window", WindowBias(dependencies=partial(task.dependency_windows, aligned=False)))
    full = m.generate(src, steps, use_cache=False)
    assert torch.equal(m.generate(src, steps), full)
    monkeypatch.setattr(decoding, "DENSE_CELLS", 64)  # rows built a block at a time
    monkeypatch.setattr(decoding, "BLOCK_ROWS", 7)
    assert torch.equal(m.generate(src, steps), full)
    # and each block built over the keys its rows read (Task.dependency_spans), as a fit installs it
    m.install_bias("abs_window", WindowBias(dependencies=partial(task.dependency_windows, aligned=False),
                                            spans=partial(task.dependency_spans, aligned=False)))
    assert torch.equal(m.generate(src, steps), full)


def load_script(path: Path):
    """A script or benchmark outside the package, imported as a module (``path``'s stem)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
