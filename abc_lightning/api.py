"""Use a trained model from Python: load a checkpoint, predict, look at attention, evaluate.

>>> from abc_lightning import load
>>> m = load("runs/abs/version_2/checkpoints/best.ckpt")  # an addition model
>>> m.predict(["123+456", "99999+1"])
['579', '100000']
>>> m.evaluate(lengths=[60], samples=1000)[0]["worst"]  # also "accuracy", "worst_families", …
100.0

The checkpoint rebuilds its own run (model, positional scheme and index, task and input
form, and the ABS window or ABC's calibrated bias), so answers are the ones ``predict``
and ``test`` give on the command line. Nothing is written to disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from abc_lightning.checkpoints import load_checkpoint, stored_config
from abc_lightning.errors import CheckpointError, ConfigError, InputError
from abc_lightning.evaluation import decode_batch, evaluate_by_length, group_inputs


@dataclass
class TrainedModel:
    """A checkpoint's model with its biases installed, and the data module of its task."""

    module: "ArithmeticTransformer"  # noqa: F821 (the LightningModule; ``.model`` is the nn.Module)
    data: "ArithmeticDataModule"  # noqa: F821
    config: str  # the run's resolved config (YAML)

    @property
    def task(self):
        return self.data.task

    def predict_rows(self, inputs: list[str] | str, batch_size: int | None = None) -> list[dict]:
        """One row per input, in order: ``input``, ``output`` (the answer), ``expected``,
        ``correct`` (the whole output sequence matched) and both raw token strings. Inputs
        are decoded in batches of equal length; a bare string is one input."""
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(inputs, (list, tuple)):
            raise InputError(f"inputs must be a list of strings such as {[self.task.example_input()]}, "
                             f"got {type(inputs).__name__}")
        batch_size = positive("batch_size", batch_size)
        parsed = [self.data.parse(text) for text in inputs]
        rows = []
        with torch.inference_mode():
            for batch in group_inputs(parsed, batch_size or self.data.eval_batch_size):
                rows += decode_batch(self.module.model, self.task, batch)
        return [{k: v for k, v in row.items() if k != "index"} for row in sorted(rows, key=lambda r: r["index"])]

    def predict(self, inputs: list[str] | str, batch_size: int | None = None) -> list[str] | str:
        """The model's answers to ``inputs`` (e.g. ``["123+456"]`` for addition), in order;
        one answer for one bare string (``"123+456"`` -> ``"579"``)."""
        answers = [row["output"] for row in self.predict_rows(inputs, batch_size)]
        return answers[0] if isinstance(inputs, str) else answers

    def attention(self, text: str) -> dict[str, list[torch.Tensor]]:
        """Attention weights on the model's own answer to ``text``: ``{kind: [(heads, q, k)
        per layer]}`` for ``encoder``, ``decoder`` and ``cross``, ready for
        :func:`abc_lightning.plotting.attention_heatmaps`."""
        item = self.data.parse(text)
        with torch.inference_mode():
            maps = self.module.model.attention_on_own_output(item["src"], item["tgt_out"].shape[1])
        return {kind: [m.weights[0].clone() for m in layers] for kind, layers in maps.items()}

    def evaluate(self, lengths: list[int] = (6, 10, 15, 20, 60), samples: int = 10_000,
                 batch_size: int | None = None, worst_case: bool = True) -> list[dict]:
        """The test protocol at ``lengths`` (the test sets ``test`` uses, capped at
        ``samples`` each): rows of ``{"length", "samples", "accuracy"}`` (percent), and with
        ``worst_case`` the worst-case set's ``worst``, ``worst_samples`` and ``worst_families``."""
        from abc_lightning.data import check_lengths

        lengths = check_lengths("lengths", [lengths] if isinstance(lengths, int) else list(lengths), self.data.task)
        samples = positive("samples", samples)
        batch_size = positive("batch_size", batch_size)
        with torch.inference_mode():
            return evaluate_by_length(self.module.model, self.data, lengths, samples,
                                      batch_size or self.data.eval_batch_size, worst_case)


def positive(name: str, value: int | None) -> int | None:
    """An optional count: None, or what :func:`abc_lightning.data.check_count` accepts."""
    from abc_lightning.data import check_count

    return None if value is None else check_count(name, value)


def check_device(device: str | torch.device) -> torch.device:
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device {device!r} is not a torch device; e.g. 'cpu', 'cuda' or 'cuda:1'") from None
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise ConfigError(f"device {str(device)!r}: torch sees {torch.cuda.device_count()} CUDA GPU(s) here; "
                          "use 'cpu'" + (" or 'cuda:0'" if torch.cuda.is_available() else ""))
    return device


def load(path: str | Path, device: str | torch.device = "cpu") -> TrainedModel:
    """Rebuild the run a checkpoint was trained in, from the checkpoint alone."""
    from abc_lightning.cli import quiet_third_party
    from abc_lightning.cli.check import Unseeded

    quiet_third_party()
    if not isinstance(path, (str, Path)):
        raise CheckpointError(f"load takes a checkpoint's path, e.g. 'runs/abs/version_0/checkpoints/best.ckpt'; "
                              f"got {type(path).__name__}")
    device = check_device(device)
    ckpt = load_checkpoint(path)
    config = stored_config(ckpt)
    if config is None:
        raise CheckpointError(f"{path} carries no config (it was written before checkpoints did); "
                              "rebuild it with the CLI and the config it was trained with")

    cli = Unseeded(args=["--config", config, "--trainer.logger=false", "--trainer.enable_progress_bar=false",
                        "--wandb.mode=disabled"], run=False)
    module = cli.model
    module.load_state_dict(ckpt["state_dict"])
    states = ckpt.get("callbacks") or {}
    for callback in cli.trainer.callbacks:
        if callback.state_key in states:
            callback.load_state_dict(states[callback.state_key])
        if hasattr(callback, "apply_to"):  # the bias strategy: ABS window, ABC calibrated bias
            callback.apply_to(module, cli.datamodule)
    module.to(device).eval()
    return TrainedModel(module, cli.datamodule, config)
