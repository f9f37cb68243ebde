"""Bounds before work: the memory a config asks for, estimated before anything is allocated.

A batch size, a sample count or a model width far past the machine would otherwise grow
until the operating system kills the run (or the allocator fails with a traceback). Each
check here is a *lower* bound of what the setting needs (the tensors it cannot do
without), compared with the memory free on the device that will hold them; a setting past
it is refused with one line that names it, what it needs, and the largest value that fits.
"""

from __future__ import annotations

import os

from abc_lightning.errors import ConfigError

FLOAT, INDEX = 4, 8  # bytes of a float32 activation and of an int64 token


def free_bytes(device=None) -> int:
    """Memory free for a run: the GPU's free memory on CUDA, else the machine's available RAM."""
    import torch

    if device is not None and getattr(device, "type", "cpu") == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: nothing is refused


def gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def weights_bytes(model) -> int:
    """The model's weights, their gradients and Adam's two moments (a fit keeps all four)."""
    return 4 * FLOAT * sum(p.numel() for p in model.parameters())


def step_bytes_per_row(model, tokens: int) -> int:
    """A lower bound of one training row's activations at ``tokens`` per sequence: the
    residual stream and feed-forward of every layer, and each attention's scores."""
    layers = len(model.encoder) + len(model.decoder)
    attentions = len(model.encoder) + 2 * len(model.decoder)
    width = model.d_model * 4 + model.decoder[0].ff[0].out_features if len(model.decoder) else model.d_model * 4
    return FLOAT * tokens * (layers * width + attentions * model.heads * tokens)


def check_fit(module, datamodule, tokens: int, device=None) -> None:
    """The weights, and one training batch at its widest sequence (``tokens``), must fit."""
    model, free = module.model, free_bytes(device)
    weights = weights_bytes(model)
    per_row = step_bytes_per_row(model, tokens)
    need = weights + datamodule.batch_size * per_row
    if weights > free:
        raise ConfigError(f"the model's weights with their gradients and optimizer state need {gib(weights)}, "
                          f"and {gib(free)} is free: make model.d_model, model.feedforward or the layers smaller")
    if need > free:
        fits = max(0, (free - weights) // per_row)
        raise ConfigError(f"data.batch_size={datamodule.batch_size}: one training step at {tokens} tokens needs at "
                          f"least {gib(need)}, and {gib(free)} is free; the largest batch that fits is about {fits:,}")


def check_samples(name: str, samples: int, lengths: int, tokens: int, free: int | None = None) -> None:
    """``samples`` inputs at each of ``lengths`` lengths, ``tokens`` per input and answer, are
    made and kept whole before decoding (the source and the answer, as integers)."""
    free = free_bytes() if free is None else free
    need = samples * lengths * tokens * 2 * INDEX
    if need > free:
        fits = max(1, free // (lengths * tokens * 2 * INDEX))
        raise ConfigError(f"{name}={samples}: its inputs at {lengths} length(s) of up to {tokens} tokens need at least "
                          f"{gib(need)}, and {gib(free)} is free; the most that fits is about {fits:,}")
