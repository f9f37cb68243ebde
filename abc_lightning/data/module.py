"""ArithmeticDataModule: the Π split, one loader per length, epoch-seeded shuffling, DDP shards."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from abc_lightning.data.sets import (EVAL_SOURCE_TOKENS, Encoded, EncodedDataset, EpochShuffle, GroupedDataset,
                                     MAX_EVAL_LENGTH, RICH_DIGITS, ResumableLoader, SALT_CARRY_RICH, SALT_PROBE, SALT_TEST, SALT_TRAIN,
                                     SALT_TRAIN_FRAME, SALT_TRAIN_K, SALT_VAL, SALT_VAL_SPLIT, Shard,
                                     WorstCaseDataset, identity_collate, carry_rich_values, concat, encode, eval_size, widen)
from abc_lightning.errors import ConfigError, InputError
from abc_lightning.evaluation import group_inputs
from abc_lightning.tasks import TASKS, Task, class_name
from abc_lightning.tasks.base import POOL_MAX


def check_count(name: str, value) -> int:
    """A size or sample count must be an integer >= 1 (a bool is not a count)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def check_lengths(name: str, lengths: list[int], task: Task | None = None) -> list[int]:
    """Evaluation lengths must be distinct integers in [1, MAX_EVAL_LENGTH] (and within the
    ``task``'s own ``max_length``, where its answers grow faster than its operands)."""
    if name == "data.val_lengths" and not lengths:
        raise ConfigError("data.val_lengths is empty: validation needs at least one length, e.g. [6, 20]")
    limit = min(MAX_EVAL_LENGTH, task.max_length) if task is not None else MAX_EVAL_LENGTH
    bad = [x for x in lengths if not isinstance(x, int) or isinstance(x, bool) or not 1 <= x <= limit]
    if bad:
        scope = f" for {task.name} ({task.max_length_reason})" if limit < MAX_EVAL_LENGTH else ""
        raise ConfigError(f"{name} must be digit counts between 1 and {limit}{scope}; cannot produce {bad}")
    if len(set(lengths)) != len(lengths):
        raise ConfigError(f"{name} has repeated lengths: {lengths}")
    return list(lengths)


class ArithmeticDataModule(L.LightningDataModule):
    """Data for one task; the subclass of each task sets ``task_class``.

    Args:
        aligned: interleave operand digits (ABS input alignment) instead of the natural form
            (a task whose own windows are drawn on one form, ``Task.form``, keeps that form).
        seed: seeds the permutation Π and every evaluation sample; left out, the run's
            ``seed_everything`` (0 without one), so that one flag seeds a run.
        batch_size: training batch size.
        val_lengths: lengths checked after every training epoch (``val/acc@L``).
        val_samples: samples per validation length (kept small: fit stays fast).
        val_split_samples: in-distribution samples from the held-out 1/8 (``val/loss``, ``val/acc``).
        test_lengths: lengths of the test protocol (``test/acc@L``).
        test_samples: the cap n in min(10^L − 10^(L−1), n).
        worst_case: also test each test length on the task's worst-case set
            (``test/worst@L``): hand-picked inputs, such as 99…9 + 1, that random sampling
            almost never draws.
        eval_batch_size: batch size for greedy decoding.
        predict_inputs: expressions for ``predict``, e.g. ``["123456789+987654321"]``.
        predict_file: a text file with one ``predict`` expression per line (blank lines are
            skipped), read after ``predict_inputs``.
        carry_rich: share of the training split made of carry-rich rows (every operand from
            :func:`carry_rich_values`), added beside the pool's rows; None takes the task's
            own (0, the papers' protocol, except where a task's hard cases need it: the
            carries of 2 in three-operand addition).
        rich_digits: how a carry-rich row's digits are drawn: ``nines`` (half of them 9s) or
            ``extremes`` (a third 9s, a third 0s), see :func:`carry_rich_values`.
        operands: for a task whose operand count varies (``addition_k``), the count of every
            validation length, test and worst-case input (default: the largest trained; the
            in-distribution split ``val/loss`` and ``val/acc`` stays at that one).
        train_operands: for such a task, the counts it trains on; each training batch holds
            one of them (default: the task's own, 2 to 4).
        train_frames: how many training frames: 1 (default) pads every training operand to
            the training width; f splits the training rows into f groups, padded with 0 to
            f − 1 more leading zeros (a multiplier of fixed width stays as it is), so that the
            top of the frame meets the cyclic index at f phases in training, not one. Each
            batch holds one frame.
        second_length: for a task whose operands may differ in length (``multiplication``),
            the second operand's digits in every validation length, test and worst-case input
            (default: the first's), e.g. 6 with ``test_lengths: [60]`` for 60×6.
    """

    task_class: type[Task] | None = None

    def __init__(
        self,
        aligned: bool = False,
        seed: int | None = None,
        batch_size: int = 128,
        val_lengths: list[int] = [6, 10, 20, 60],  # noqa: B006 (jsonargparse needs a literal default)
        val_samples: int = 200,
        val_split_samples: int = 1000,
        test_lengths: list[int] = [6, 10, 15, 20, 60],  # noqa: B006
        test_samples: int = 10_000,
        worst_case: bool = True,
        eval_batch_size: int = 1000,
        predict_inputs: list[str] = [],  # noqa: B006
        predict_file: str | None = None,
        carry_rich: float | None = None,
        rich_digits: str = "nines",
        operands: int | None = None,
        train_operands: list[int] | None = None,
        second_length: int | None = None,
        train_frames: int = 1,
    ) -> None:
        super().__init__()
        if self.task_class is None:
            raise ConfigError(f"choose a task's data module, e.g. --data=Addition; one of {[class_name(n) for n in TASKS]}")
        self.task = self.task_class()
        self.train_tasks = [self.task]
        if getattr(self.task, "variable_arity", False):
            counts = list(self.task.train_operands if train_operands is None else train_operands)
            if not counts:
                raise ConfigError(f"data.train_operands must name at least one operand count, got {train_operands!r}")
            self.train_tasks = [self.task.with_operands(k) for k in counts]
            self.task = self.task.with_operands(max(counts) if operands is None else operands)
        elif operands is not None or train_operands is not None:
            raise ConfigError(f"{self.task.name} has a fixed number of operands ({self.task.arity}); "
                              "data.operands and data.train_operands are for addition_k")
        if getattr(self.task, "unequal_lengths", False):
            if second_length is not None:
                check_lengths("data.second_length", [second_length], self.task)
            self.task = self.task.with_second_length(second_length)
        elif second_length is not None:
            raise ConfigError(f"{self.task.name} draws its operands at one length; data.second_length is for "
                              "multiplication")
        self.aligned = aligned
        if self.task.arity == 1:
            self.aligned = False  # unary input has nothing to interleave
        elif self.task.form is not None:
            self.aligned = self.task.form == "aligned"  # a task with windows of its own keeps their form
        for name, value in dict(batch_size=batch_size, val_samples=val_samples, val_split_samples=val_split_samples,
                                test_samples=test_samples, eval_batch_size=eval_batch_size).items():
            check_count(f"data.{name}", value)
        self.seed = 0 if seed is None else seed
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.val_lengths = check_lengths("data.val_lengths", val_lengths, self.task)
        self.test_lengths = check_lengths("data.test_lengths", test_lengths, self.task)
        self.val_samples, self.val_split_samples, self.test_samples = val_samples, val_split_samples, test_samples
        self.predict_inputs, self.predict_file = list(predict_inputs), predict_file
        self.worst_case = worst_case
        self.carry_rich = self.task.carry_rich if carry_rich is None else carry_rich
        if not isinstance(self.carry_rich, (int, float)) or not 0 <= self.carry_rich < 1:
            raise ConfigError(f"data.carry_rich must be a share in [0, 1), got {carry_rich!r}")
        if rich_digits not in RICH_DIGITS:
            raise ConfigError(f"data.rich_digits must be one of {sorted(RICH_DIGITS)}, got {rich_digits!r}")
        self.rich_digits = rich_digits
        self.train_frames = check_count("data.train_frames", train_frames)
        self._train: EncodedDataset | GroupedDataset | None = None
        self._val: list[EncodedDataset] = []
        self._test: list[EncodedDataset] = []
        self._predict: list[dict] = []

    @property
    def train_set(self) -> Encoded:
        """The encoded training split (after ``setup("fit")``): ``src``, ``tgt_in``, ``tgt_out``
        (the largest operand count's, where the count varies)."""
        if self._train is None:
            self.setup("fit")
        return self._train.groups[-1].data if isinstance(self._train, GroupedDataset) else self._train.data

    @property
    def digit_stride(self) -> int | None:
        """Source tokens per output digit (1 unary, the operand count aligned, None natural)."""
        return self.task.digit_stride(self.aligned)

    def max_tokens(self, stage: str) -> int:
        """The longest source or decoder sequence this stage will feed the model.

        Measured on real encoded samples (one at the longest length, or the predict
        inputs, and in fit the widest training frame), so every task's own layout decides;
        evaluation widths are never below the training width, so training sequences are
        covered too.
        """
        if stage == "predict":
            self.setup("predict")
            shapes = [(b["src"].shape[1], b["tgt_out"].shape[1]) for b in self._predict]
        else:
            lengths = self.test_lengths if stage == "test" else self.val_lengths
            data = self.length_set(max(lengths), 1, salt=SALT_PROBE).data
            shapes = [(data.src.shape[1], data.tgt_in.shape[1])]
            if stage == "fit" and self.train_frames > 1:  # the widest training frame
                for task in self.train_tasks:
                    data = self._from_pool(np.zeros(1, dtype=np.int64), None, SALT_PROBE, task, self.train_frames - 1)
                    shapes.append((data.src.shape[1], data.tgt_in.shape[1]))
        return max((max(shape) for shape in shapes), default=0)

    # ---- splits -------------------------------------------------------------------
    def pool_split(self) -> tuple[np.ndarray, np.ndarray]:
        """The seeded permutation Π of [0, 2^20], split 7:1 into (train, validation)."""
        perm = np.random.default_rng(self.seed).permutation(POOL_MAX + 1)
        cut = len(perm) * 7 // 8
        return perm[:cut], perm[cut:]

    def train_tokens(self) -> int:
        """The longest source or decoder sequence of a training batch (the widest frame)."""
        return max(max(data.src.shape[1], data.tgt_in.shape[1]) for data in (
            self._from_pool(np.zeros(1, dtype=np.int64), None, SALT_PROBE, task, self.train_frames - 1)
            for task in self.train_tasks))

    def _from_pool(self, values: np.ndarray, n: int | None, salt: int, task: Task | None = None,
                   extra: int = 0) -> Encoded:
        task = task or self.task
        rng = np.random.default_rng([self.seed, salt])
        count = len(values) if n is None else min(n, len(values))
        first = values[:count] if n is None else rng.choice(values, size=count, replace=False)
        operands = [first] + [rng.choice(values, size=count) for _ in range(task.arity - 1)]
        return encode(task, widen(task, task.from_pool(operands), extra), self.aligned)

    def _carry_rich(self, train: np.ndarray, n_pool: int, task: Task | None = None, extra: int = 0) -> Encoded:
        """The carry-rich rows: ``carry_rich`` of the whole split, beside ``n_pool`` pool rows."""
        task = task or self.task
        rng = np.random.default_rng([self.seed, SALT_CARRY_RICH])
        allowed = np.zeros(POOL_MAX + 1, dtype=bool)
        allowed[train] = True
        n = round(n_pool * self.carry_rich / (1 - self.carry_rich))
        operands = task.rich_rows(rng, [carry_rich_values(rng, n, allowed, self.rich_digits) for _ in range(task.arity)])
        return encode(task, widen(task, task.from_pool(operands), extra), self.aligned)

    def length_set(self, length: int, n: int, salt: int) -> EncodedDataset:
        """Samples of exactly ``length`` digits, seeded by (seed, length, salt)."""
        rng = np.random.default_rng([self.seed, length, salt])
        operands = self.task.sample(rng, eval_size(length, n), length)
        return EncodedDataset(encode(self.task, operands, self.aligned), length)

    def test_set(self, length: int, n: int) -> EncodedDataset:
        """The test protocol's samples at ``length`` (capped at ``n``), as ``test`` decodes them."""
        return self.length_set(length, n, salt=SALT_TEST)

    def worst_set(self, length: int) -> WorstCaseDataset:
        """The task's worst-case set at ``length`` (exact, the same for every seed)."""
        families, family, operands, texts = self.task.worst_case_set(length)
        return WorstCaseDataset(encode(self.task, operands, self.aligned), length, families, family, texts)

    def setup(self, stage: str) -> None:
        needs_train = stage == "fit" and self._train is None
        needs_val = stage in ("fit", "validate") and not self._val
        if needs_train or needs_val:
            train, val = self.pool_split()
        if needs_train:
            groups = []
            shares = len(self.train_tasks) * self.train_frames
            # the training frame's own group last (with the largest operand count): ``train_set``
            for extra in reversed(range(self.train_frames)):
                for task in self.train_tasks:  # one, unless the operand count varies
                    # several groups share the split's size: each draws its rows from the whole split
                    n, salt = ((None, SALT_TRAIN) if len(self.train_tasks) == 1
                               else (len(train) // len(self.train_tasks), SALT_TRAIN_K + task.arity))
                    if self.train_frames > 1:
                        n, salt = len(train) // shares, salt + SALT_TRAIN_FRAME * (extra + 1)
                    data = self._from_pool(train, n, salt=salt, task=task, extra=extra)
                    if self.carry_rich > 0:
                        data = concat(data, self._carry_rich(train, len(data.src), task, extra))
                    groups.append(EncodedDataset(data, "train"))
            self._train = groups[0] if len(groups) == 1 else GroupedDataset(groups)
        if needs_val:
            # in distribution: at the largest trained operand count (val/loss picks best.ckpt)
            trained = max(self.train_tasks, key=lambda task: task.arity)
            self._val = [EncodedDataset(self._from_pool(val, self.val_split_samples, salt=SALT_VAL_SPLIT, task=trained), "val")]
            self._val += [self.length_set(length, self.val_samples, salt=SALT_VAL) for length in self.val_lengths]
        if stage == "test" and not self._test:
            self._test = [self.test_set(length, self.test_samples) for length in self.test_lengths]
            if self.worst_case:
                self._test += [self.worst_set(length) for length in self.test_lengths]
        if stage == "predict" and not self._predict:
            texts = self.all_predict_inputs()
            if not texts:
                raise ConfigError('predict needs inputs: --data.predict_inputs=\'["123+456"]\' or '
                                  "--data.predict_file=FILE (one expression per line)")
            self._predict = group_inputs([self.parse(text) for text in texts], self.eval_batch_size)

    def all_predict_inputs(self) -> list[str]:
        """``predict_inputs``, then the lines of ``predict_file``."""
        texts = list(self.predict_inputs)
        if self.predict_file is not None:
            path = Path(self.predict_file)
            if not path.is_file():
                raise ConfigError(f"data.predict_file {'is a folder' if path.is_dir() else 'not found'}: {path}")
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"data.predict_file {path} is not UTF-8 text (byte {exc.start}); it takes one "
                                  "expression per line") from None
            texts += [line.strip() for line in text.splitlines() if line.strip()]
        return texts

    def parse(self, text: str) -> dict:
        """One predict expression -> a batch of one (raises InputError if malformed)."""
        if not isinstance(text, str):
            raise InputError(f"predict input {text!r} is not a string; expected e.g. {self.task.example_input()!r}")
        digits, symbols = sum(c.isdigit() for c in text), self.task.symbols(MAX_EVAL_LENGTH)
        limit = f"{MAX_EVAL_LENGTH} digits per operand" + (f", {symbols} symbols" if symbols != MAX_EVAL_LENGTH else "")
        if digits > symbols * self.task.arity:
            raise InputError(f"predict input of {digits} digits is longer than this project evaluates ({limit})")
        operands = self.task.parse(text)
        widest = max(op.shape[1] for op in operands)  # symbols, with the frame's spare leading zeros
        if self.task.max_length < MAX_EVAL_LENGTH and widest > self.task.operand_width(self.task.max_length):
            raise InputError(f"an operand of {text[:20]!r}... is longer than {self.task.name} evaluates "
                             f"({self.task.max_length} digits per operand: {self.task.max_length_reason})")
        if widest > self.task.operand_width(MAX_EVAL_LENGTH):
            raise InputError(f"an operand of {text[:20]!r}... is longer than this project evaluates ({limit})")
        enc = encode(self.task, operands, self.aligned)
        return {"src": enc.src.long(), "tgt_out": enc.tgt_out.long(), "tag": "predict", "text": text}

    # ---- loaders ------------------------------------------------------------------
    def _loader(self, ds: EncodedDataset, batch_size: int, shuffle: bool) -> DataLoader:
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        sampler = EpochShuffle(len(ds), self.seed, rank, world) if shuffle else Shard(len(ds), rank, world)
        # Its own generator: creating an iterator draws a seed, which must not consume the
        # global random stream (dropout) that checkpoints carry for exact resumes.
        loader = (ResumableLoader if shuffle else DataLoader)(
            ds, batch_size=batch_size, sampler=sampler, collate_fn=identity_collate,
            generator=torch.Generator().manual_seed(self.seed))
        if shuffle:
            loader.batches_done = self._batches_done
        return loader

    def train_dataloader(self) -> DataLoader:
        return self._loader(self._train, self.batch_size, shuffle=True)

    def _batches_done(self) -> int:
        """Batches of the current epoch trained so far (the one whose end is being saved included)."""
        trainer = self.trainer
        return 0 if trainer is None else trainer.fit_loop.epoch_loop.batch_progress.current.processed

    def _eval_batch(self, ds: EncodedDataset) -> int:
        """``eval_batch_size``, or fewer rows where the inputs are long (:data:`EVAL_SOURCE_TOKENS`)."""
        return max(1, min(self.eval_batch_size, EVAL_SOURCE_TOKENS // ds.data.src.shape[1]))

    def val_dataloader(self) -> list[DataLoader]:
        return [self._loader(ds, self._eval_batch(ds), shuffle=False) for ds in self._val]

    def test_dataloader(self) -> list[DataLoader]:
        return [self._loader(ds, self._eval_batch(ds), shuffle=False) for ds in self._test]

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self._predict, batch_size=None, collate_fn=identity_collate)  # batches grouped by length
