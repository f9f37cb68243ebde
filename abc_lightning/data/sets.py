"""The rows a data module serves: encoding, carry-rich rows, wider frames, datasets and samplers.

Every set is seeded by the data seed and a salt of its own (``SALT_*``), so each is the same
rows whichever others a run builds, and in whatever order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from abc_lightning import vocab
from abc_lightning.tasks import Task
from abc_lightning.tasks.base import POOL_MAX, pad_left

MAX_EVAL_LENGTH = 10_000

# Salts of the seeded random streams: each set draws from (data.seed, [length,] salt), so no
# two sets share a stream and adding one changes none of the others.
SALT_PROBE = 0  # one row at the longest length: the longest sequence a stage feeds the model
SALT_TRAIN = 1  # the training split
SALT_TRAIN_K = 10  # + k: the training rows of k operands, where the operand count varies
SALT_VAL_SPLIT = 2  # the in-distribution validation rows
SALT_VAL = 3  # the validation lengths
SALT_TEST = 4  # the test protocol's sets
SALT_CARRY_RICH = 5  # the carry-rich training rows
SALT_TRAIN_FRAME = 100  # + extra cells: the training rows of a wider frame (data.train_frames)
#: Input tokens per evaluation batch at most: a batch of long inputs (40 operands of 60
#: digits are 2,521 tokens) holds fewer rows than ``data.eval_batch_size`` (600 digits of two
#: aligned operands, 1,207 tokens, still hold 1,000), so that the
#: encoder's output and the cross-attention keys stay within a few GB.
EVAL_SOURCE_TOKENS = 1_250_000


@dataclass
class Encoded:
    """A whole split as token tensors: ``src (n, S)``, ``tgt_in``/``tgt_out (n, m + 1)``."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor


def encode(task: Task, operands: list[np.ndarray], aligned: bool) -> Encoded:
    """Operands -> encoder tokens and teacher-forcing pairs (``SOS y…`` / ``y… EOS``)."""
    target = task.target(operands)
    n = target.shape[0]
    tgt_in = np.concatenate([np.full((n, 1), vocab.SOS, dtype=target.dtype), target], axis=1)
    tgt_out = np.concatenate([target, np.full((n, 1), vocab.EOS, dtype=target.dtype)], axis=1)
    as_tensor = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.uint8)  # noqa: E731
    return Encoded(as_tensor(task.source(operands, aligned)), as_tensor(tgt_in), as_tensor(tgt_out))


#: ``data.rich_digits``: (share of digits drawn 9, share drawn 0) in a carry-rich row; the rest uniform
RICH_DIGITS = {"nines": (0.5, 0.0), "extremes": (1 / 3, 1 / 3)}


def carry_rich_values(rng: np.random.Generator, n: int, allowed: np.ndarray, kind: str = "nines") -> np.ndarray:
    """``n`` integers of Π's training part whose decimal digits are mostly 9s (``nines``), or
    mostly 9s and 0s (``extremes``).

    A length of 1 to 7 digits is drawn uniformly, then each digit is 9 with probability 1/2
    and uniform otherwise (the first one not 0); numbers above 2^20 or outside ``allowed``
    (a mask over [0, 2^20], the training part of Π) are drawn again. A digit is 9 with
    probability 0.55, so three such operands put 9 + 9 + 9 in about one column in six that
    all three reach, and chains of such columns with a carry of 2 through them, which
    uniformly drawn operands almost never hold.

    ``extremes`` draws each digit 9 with probability 1/3, 0 with 1/3 and uniform otherwise.
    Two such operands put 0 + 0 in about one column in seven, and a column summing to 9
    over two such columns (``…90 00 00…`` aligned) in about one place in 70, which uniform
    operands hold once in 10^5 columns: the local pattern behind rare column errors at long
    lengths (docs/results.md, "The training recipe").
    """
    p9, p0 = RICH_DIGITS[kind]
    size = len(str(POOL_MAX))  # 7: the digits of 2^20
    out: list[np.ndarray] = []
    have = 0
    while have < n:
        m = 2 * (n - have) + 16
        length = rng.integers(1, size + 1, size=(m, 1))
        u = rng.random((m, size))
        digits = np.where(u < p9, 9, np.where(u < p9 + p0, 0, rng.integers(0, 10, size=(m, size))))
        col = np.arange(size)[None, :]
        digits = np.where(col == size - length, np.maximum(digits, 1), digits)  # the leading digit is not 0
        digits = np.where(col < size - length, 0, digits)
        values = digits @ (10 ** np.arange(size - 1, -1, -1, dtype=np.int64))
        values = values[(values <= POOL_MAX)]
        values = values[allowed[values]]
        out.append(values)
        have += len(values)
    return np.concatenate(out)[:n]


def widen(task: Task, operands: list[np.ndarray], extra: int) -> list[np.ndarray]:
    """Training operands in a frame ``extra`` cells wider: each operand of the training width
    gets that many more leading zeros (a multiplier of fixed width stays as it is)."""
    if not extra:
        return operands
    return [pad_left(op, op.shape[1] + extra) if op.shape[1] == task.train_width else op for op in operands]


def concat(*parts: Encoded) -> Encoded:
    """Splits of one layout, row after row."""
    return Encoded(*(torch.cat([getattr(p, f) for p in parts]) for f in ("src", "tgt_in", "tgt_out")))


def eval_size(length: int, cap: int) -> int:
    """min(10^L − 10^(L−1), cap): the papers' test-set size at length L."""
    return min(9 * 10 ** (length - 1), cap) if length < 8 else cap


class EncodedDataset(Dataset):
    """Fixed-width encoded samples; batches are fetched by index arrays, no per-item collate."""

    def __init__(self, data: Encoded, tag: str | int) -> None:
        self.data, self.tag = data, tag

    def __len__(self) -> int:
        return self.data.src.shape[0]

    def __getitems__(self, idx: list[int]) -> dict:
        i = torch.as_tensor(idx)
        d = self.data
        return {"src": d.src[i].long(), "tgt_in": d.tgt_in[i].long(), "tgt_out": d.tgt_out[i].long(), "tag": self.tag}


class WorstCaseDataset(EncodedDataset):
    """A task's worst-case set at one length (tag ``worst@L``): each batch also carries the
    rows' ``family`` indices (into ``families``), and their ``text``."""

    def __init__(self, data: Encoded, length: int, families: list[str], family: np.ndarray, texts: list[str]) -> None:
        super().__init__(data, f"worst@{length}")
        self.families, self.texts = families, texts
        self.family = torch.as_tensor(family, dtype=torch.long)

    def __getitems__(self, idx: list[int]) -> dict:
        return {**super().__getitems__(idx), "family": self.family[torch.as_tensor(idx)],
                "text": [self.texts[i] for i in idx]}


class GroupedDataset(Dataset):
    """Training rows of several shapes, one group each (a task whose operand count varies:
    one group per count). A batch takes the group of its first index, and every index of
    the batch, taken modulo that group's size, picks a row of it: batches stay one shape,
    each group is drawn in proportion to its size, and the order is still the sampler's
    (a function of seed and epoch)."""

    def __init__(self, groups: list[EncodedDataset]) -> None:
        self.groups, self.tag = groups, "train"
        self.sizes = torch.tensor([len(g) for g in groups])
        self.ends = torch.cumsum(self.sizes, 0)

    def __len__(self) -> int:
        return int(self.ends[-1])

    def __getitems__(self, idx: list[int]) -> dict:
        group = int(torch.searchsorted(self.ends, idx[0], right=True))
        return self.groups[group].__getitems__((torch.as_tensor(idx) % self.sizes[group]).tolist())


class EpochShuffle(Sampler):
    """A fresh permutation each epoch, a function of (seed, epoch) alone.

    Lightning calls ``set_epoch`` at every epoch start (also after a resume), so a run
    resumed from a checkpoint sees exactly the batches an uninterrupted run would. Under
    DDP, rank r of w takes every w-th index of the permutation, after dropping the last
    ``n mod w`` so that every rank runs the same number of steps.
    """

    def __init__(self, n: int, seed: int, rank: int = 0, world: int = 1) -> None:
        self.n, self.seed, self.epoch, self.rank, self.world = n, seed, 0, rank, world
        self.skip: tuple[int, int] | None = None  # (epoch, rows): where a resumed epoch goes on

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def resume(self, epoch: int, rows: int) -> None:
        """Start the next pass over ``epoch`` after its first ``rows`` indices (this rank's),
        where a run interrupted mid-epoch stopped; a pass over another epoch starts whole."""
        self.skip = (epoch, rows)

    def __len__(self) -> int:
        return self.n // self.world

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        perm = torch.randperm(self.n, generator=gen)[: len(self) * self.world]
        order = perm[self.rank :: self.world].tolist()
        skip, self.skip = self.skip, None
        return iter(order[skip[1]:] if skip is not None and skip[0] == self.epoch else order)


class ResumableLoader(DataLoader):
    """The training loader, whose place in the epoch travels in checkpoints.

    Lightning saves ``state_dict()`` with the fit loop's state and hands it back through
    ``load_state_dict`` before the loader is iterated again, so a run resumed from a
    checkpoint written mid-epoch (``every_n_train_steps``, a validation within the epoch, a
    SIGTERM) goes on with the batch the uninterrupted run would have drawn next.
    ``batches_done()`` is the number of batches of the current epoch already trained."""

    batches_done: Callable[[], int] = staticmethod(lambda: 0)

    def state_dict(self) -> dict:
        return {"epoch": self.sampler.epoch, "batches": int(self.batches_done())}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.resume(int(state["epoch"]), int(state["batches"]) * self.batch_size)


class Shard(Sampler):
    """Evaluation indices of one rank: rank, rank + w, … in order, without padding, so each
    sample is decoded on exactly one rank and summed once when metrics are synchronized
    (Lightning's DistributedSampler would pad with repeated samples)."""

    def __init__(self, n: int, rank: int = 0, world: int = 1) -> None:
        self.n, self.rank, self.world = n, rank, world

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.world))

    def __iter__(self):
        return iter(range(self.rank, self.n, self.world))


def identity_collate(batch):
    return batch
