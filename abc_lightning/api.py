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

from abc_lightning.runs.checkpoints import load_checkpoint, stored_config
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

        if lengths is None or isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__") and \
                not isinstance(lengths, int):
            raise ConfigError(f"lengths: expected digit counts, e.g. [6, 60], got {lengths!r}")
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
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"device {str(device)!r}: abc_lightning runs on 'cpu' or a CUDA GPU ('cuda', 'cuda:1')")
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise ConfigError(f"device {str(device)!r}: torch sees {torch.cuda.device_count()} CUDA GPU(s) here; "
                          "use 'cpu'" + (" or 'cuda:0'" if torch.cuda.is_available() else ""))
    return device


def build_from_config(config: str) -> tuple:
    """The model, data module and bias strategy of a run, built by their own constructors from
    the run's config (YAML, as a checkpoint carries it); no Trainer, no seeding, and the
    caller's random state is left as it was."""
    import yaml
    from jsonargparse import ArgumentParser

    from abc_lightning.data import ArithmeticDataModule, resolve_data_seed, resolve_task_period
    from abc_lightning.training import ArithmeticTransformer, BiasStrategy

    try:
        stored = yaml.safe_load(config)
    except yaml.YAMLError as exc:
        raise CheckpointError(f"the checkpoint's config is not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(stored, dict) or not isinstance(stored.get("model", {}), dict):
        raise CheckpointError("the checkpoint's config is not a run's config (no model and data sections)")
    parser = ArgumentParser(exit_on_error=False, default_env=False)
    parser.add_class_arguments(ArithmeticTransformer, "model")
    parser.add_subclass_arguments(ArithmeticDataModule, "data")
    parser.add_subclass_arguments(BiasStrategy, "bias", required=False)
    parser.add_argument("--seed_everything", type=int | bool | None, default=None)
    sections = {k: stored[k] for k in ("model", "data", "bias", "seed_everything") if stored.get(k) is not None}
    try:
        cfg = parser.parse_object(sections)
        resolve_data_seed(cfg)
        resolve_task_period(cfg)
        with torch.random.fork_rng(devices=[]):
            built = parser.instantiate_classes(cfg)
    except (ConfigError, InputError):
        raise
    except Exception as exc:  # jsonargparse's parse errors name the key
        raise CheckpointError(f"the checkpoint's config does not build: {str(exc).splitlines()[0]}") from None
    return built.model, built.data, built.get("bias")


def load(path: str | Path, device: str | torch.device = "cpu") -> TrainedModel:
    """Rebuild the run a checkpoint was trained in, from the checkpoint alone: the model, its
    data module and its bias strategy from their constructors and the config the checkpoint
    carries, then the trained weights and the strategy's state."""
    if not isinstance(path, (str, Path)):
        raise CheckpointError(f"load takes a checkpoint's path, e.g. 'runs/abs/version_0/checkpoints/best.ckpt'; "
                              f"got {type(path).__name__}")
    device = check_device(device)
    ckpt = load_checkpoint(path)
    config = stored_config(ckpt)
    if config is None:
        raise CheckpointError(f"{path} carries no config (it was written before checkpoints did); "
                              "rebuild it with the CLI and the config it was trained with")
    module, datamodule, strategy = build_from_config(config)
    module.load_state_dict(ckpt["state_dict"])
    if strategy is not None:  # the bias strategy: ABS window, ABC calibrated bias
        state = (ckpt.get("callbacks") or {}).get(strategy.state_key)
        if state is not None:
            strategy.load_state_dict(state)
        strategy.apply_to(module, datamodule)
    module.to(device).eval()
    return TrainedModel(module, datamodule, config)
