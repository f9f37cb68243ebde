"""The command line: LightningCLI over the module and data module, plus friendly failures.

Every subcommand of LightningCLI works (``fit``, ``validate``, ``test``, ``predict``);
``python -m abc_lightning reproduce …`` regenerates the results tables (see reproduce.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import warnings
from pathlib import Path

import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from abc_lightning.callbacks import AccuracyTable, BiasStrategy, RunInfo
from abc_lightning.callbacks.training import LineProgress, RunConfig, run_dir
from abc_lightning import data as _data  # noqa: F401 (every task's data module, for --data=Addition)
from abc_lightning import files
from abc_lightning.data import ArithmeticDataModule, data_module_names
from abc_lightning.errors import CheckpointError, ConfigError, InputError
from abc_lightning.checkpoints import (CKPT_KEYWORDS, AtomicCheckpointIO, check_compatible, conflicts, flatten,
                                       load_checkpoint, stored_config)
from abc_lightning.module import ArithmeticTransformer
from abc_lightning.wandb_logging import make_logger

# Imported so that short class names resolve on the command line (--model.positional=NoPE).
from abc_lightning import callbacks as _callbacks  # noqa: F401
from abc_lightning.model import positional as _positional, positions as _positions  # noqa: F401


#: Third-party warnings that say nothing true or useful about our runs.
NOISE = (
    r"Experiment logs directory .* exists and is not empty",  # we created that folder ourselves
    r".*isinstance\(treespec, LeafSpec\)",  # Lightning's own use of a torch API it will update
    r"The dirpath has changed from",  # test/predict never resume the checkpoint callback
    r"LightningCLI's args parameter",  # we pass the command line on, with a checkpoint's config added
)


def quiet_third_party() -> None:
    """Keep the console to the progress bar, our one-line notices and the accuracy table.

    Lightning's info lines (seed, GPU/TPU availability, tips) and W&B's banners go; our own
    notices say what matters (where the run is, W&B offline and how to sync). Real warnings
    stay, except the known-false ones in :data:`NOISE`.
    """
    os.environ.setdefault("WANDB_SILENT", "true")
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for message in NOISE:
        warnings.filterwarnings("ignore", message=message)
    if warnings.formatwarning is not ours_as_notices:
        ours_as_notices.default = warnings.formatwarning
        warnings.formatwarning = ours_as_notices


def ours_as_notices(message, category, filename, lineno, line=None) -> str:
    """Our own warnings (e.g. a κ no line can pass) read as one ``abc_lightning: warning:``
    line, like the other notices; everyone else's keep Python's format."""
    if str(filename).startswith(str(Path(__file__).resolve().parent)):
        return f"abc_lightning: warning: {message}\n"
    return ours_as_notices.default(message, category, filename, lineno, line)


ours_as_notices.default = warnings.formatwarning


def prog() -> str:
    """How the user called us, for usage lines."""
    return "abc-lightning" if Path(sys.argv[0]).name == "abc-lightning" else "python -m abc_lightning"


SUBCOMMANDS = """subcommands:
  fit        train a model (e.g. fit --config configs/abs.yaml --data=Parity)
  validate   validate a checkpoint on the validation sets
  test       the paper's test protocol on a checkpoint (--ckpt_path)
  predict    answer your own inputs with a checkpoint (--data.predict_inputs)
  reproduce  regenerate a results table (reproduce --help)
  sweep      run a W&B sweep YAML locally, one run per GPU if asked (sweep --help)"""


def _known_classes(base: type) -> list[str]:
    found, todo = [], [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub.__name__)
            todo.append(sub)
    return sorted(found)


def concise(message: str) -> str:
    """jsonargparse's multi-line validation message -> one line that names key and value."""
    key = re.search(r'Parser key "([^"]+)"', message)
    path = re.search(r"Expected a dot import path string: (\S+)", message)
    if key and path:
        from abc_lightning.model.positional import PositionalScheme
        from abc_lightning.model.positions import PositionIndex

        bases = {"model.positional": PositionalScheme, "model.position_index": PositionIndex,
                 "data": ArithmeticDataModule, "bias": BiasStrategy}
        known = _known_classes(bases[key.group(1)]) if key.group(1) in bases else []
        hint = f"; choose one of {known}" if known else ""
        return f"{key.group(1)}: unknown class {path.group(1)!r}{hint}"
    missing = re.search(r"File does not exist: '([^']+)'", message)
    if key and key.group(1) == "config" and missing:
        return missing_config(missing.group(1))
    lines = [ln.strip(" -") for ln in message.splitlines() if ln.strip(" -")]
    problem = re.search(r"Problem with given class_path '([^']+)':\s*\n\s*(.+)", message)
    if key and problem:  # a class was found, but not its option: name the option
        detail = problem.group(2).strip()
        if key.group(1) == "data" and "'task'" in detail:
            return ("data.task is gone since abc_lightning 0.2: choose the task's data module by class, e.g. "
                    f"--data=Addition (YAML data: {{class_path: Addition}}); one of {data_module_names()}")
        return f"{key.group(1)} ({problem.group(1).rsplit('.', 1)[-1]}): {detail}"
    if key:
        detail = next((ln for ln in lines if ln.startswith("Expected")), lines[-1])
        return f"{key.group(1)}: {detail}"
    return " ".join(lines)


def missing_config(path: str) -> str:
    """A --config file that is not there; the per-task configs of 0.1 (``abs_parity.yaml``) get
    the command that replaced them."""
    from abc_lightning.tasks import TASKS, class_name

    prefix, _, rest = Path(path).stem.partition("_")
    task = max((name for name in TASKS if rest == name or rest.startswith(name + "_")), key=len, default=None)
    if prefix in ("abs", "abc", "baseline") and task:
        return (f"config: {path} does not exist; since abc_lightning 0.2 one config serves every task: "
                f"--config configs/{prefix}.yaml --data={class_name(task)}")
    folder = Path(path).parent
    there = sorted(p.name for p in folder.glob("*.yaml")) if folder.is_dir() else []
    return f"config: {path} does not exist" + (f"; {folder} has {there}" if there else "")


class ConciseParser(LightningArgumentParser):
    """Prints one line per mistake instead of the usage block and a nested report."""

    def error(self, message: str, ex: Exception | None = None):
        if not self.exit_on_error:
            return super().error(message, ex)
        print(f"abc_lightning: error: {concise(message)} (see --help)", file=sys.stderr)
        sys.exit(2)


#: The bias strategies' class names (the ``bias`` slot's choices).
BIAS_STRATEGIES = tuple(_known_classes(BiasStrategy))


class ABCLightningCLI(LightningCLI):
    """LightningCLI with the result table always on and checkpoints checked before use."""

    def __init__(self, args: list[str] | None = None, run: bool = True) -> None:
        super().__init__(
            ArithmeticTransformer,
            ArithmeticDataModule,
            subclass_mode_data=True,  # one data module per task, chosen by class name: --data=Addition
            args=args,
            run=run,
            save_config_callback=RunConfig,  # config.yaml in each run's own folder, whatever the logger
            save_config_kwargs={"overwrite": True},
            # deterministic kernels where torch has them; the data module shards for DDP itself
            trainer_defaults={"deterministic": "warn", "use_distributed_sampler": False},
            parser_class=ConciseParser,
            parser_kwargs={"default_env": False, "prog": prog(), "epilog": SUBCOMMANDS,
                           "description": "Length-generalizing arithmetic Transformers: ABS and ABC."},
        )

    def init_parser(self, **kwargs) -> LightningArgumentParser:
        from jsonargparse import DefaultHelpFormatter

        class KeepLines(DefaultHelpFormatter):  # the subcommand list keeps its lines
            def _fill_text(self, text, width, indent):
                return "".join(indent + line for line in text.splitlines(keepends=True))

        kwargs.setdefault("formatter_class", KeepLines)
        return super().init_parser(**kwargs)

    def instantiate_trainer(self, **kwargs):
        """The Trainer; what its constructor refuses (devices, strategy, precision …) is a
        setting the user gave, so it becomes a one-line ``trainer:`` error."""
        try:
            return super().instantiate_trainer(**kwargs)
        except (MisconfigurationException, ValueError, TypeError) as exc:
            if user_error(exc) is not None:
                raise
            raise ConfigError(f"trainer: {str(exc).strip().splitlines()[0]}") from None

    def _instantiate_trainer(self, config: dict, callbacks: list) -> "Trainer":  # noqa: F821
        # an empty ``bias`` slot (no strategy) is None among the extra callbacks
        if not config.get("plugins"):  # checkpoints written whole or not at all
            config = {**config, "plugins": [AtomicCheckpointIO()]}
        return super()._instantiate_trainer(config, [c for c in callbacks if c is not None])

    def _prepare_subcommand_parser(self, klass, subcommand: str, **kwargs) -> LightningArgumentParser:
        parser = super()._prepare_subcommand_parser(klass, subcommand, **kwargs)
        if subcommand in ("validate", "test"):
            parser.set_defaults(verbose=False)  # AccuracyTable prints the one table
        return parser

    def before_instantiate_classes(self) -> None:
        trainer = (self.config[self.subcommand] if self.subcommand else self.config).get("trainer", {})
        accelerator = trainer.get("accelerator")
        if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
            raise ConfigError(f"trainer.accelerator={accelerator}, but torch sees no CUDA GPU here; "
                              "use --trainer.accelerator=auto or cpu")
        callbacks = trainer.get("callbacks") or []
        misplaced = [str(c.class_path).rsplit(".", 1)[-1] for c in callbacks
                     if str(getattr(c, "class_path", "")).rsplit(".", 1)[-1] in BIAS_STRATEGIES]
        if misplaced:
            raise ConfigError(f"{misplaced[0]} is a bias strategy: give it as bias (YAML 'bias: {{class_path: "
                              f"{misplaced[0]}, init_args: …}}', or --bias={misplaced[0]}), not in trainer.callbacks")
        has_bar = any("Progress" in str(getattr(c, "class_path", "")) for c in callbacks)
        if trainer.get("enable_progress_bar") is not False and not has_bar and not sys.stdout.isatty():
            # piped or redirected: plain lines instead of carriage returns and cursor codes
            self.trainer_defaults["callbacks"] = [LineProgress()]

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(AccuracyTable, "accuracy_table")
        parser.add_lightning_class_args(RunInfo, "run_info")
        # The bias strategy, one slot addressed by name: --bias=AttentionWindow --bias.self_width=2
        parser.add_lightning_class_args(BiasStrategy, "bias", subclass_mode=True, required=False)
        parser.add_argument("--wandb.mode", type=str, default="auto",
                            help="W&B beside the run's CSV/TensorBoard logs: auto (online if usable, else offline), "
                                 "online, offline or disabled")
        parser.add_argument("--wandb.project", type=str, default="abc_lightning", help="W&B project")

    def _user_ckpt(self, subcommand: str) -> dict | None:
        """The checkpoint named by --ckpt_path, loaded safely once; None for none or a keyword."""
        ckpt_path = self.config[subcommand].get("ckpt_path")
        if ckpt_path in CKPT_KEYWORDS and subcommand != "fit":
            raise CheckpointError(f"--ckpt_path {ckpt_path} only names a checkpoint inside one fit; {subcommand} "
                                  "needs the file, e.g. runs/<name>/version_0/checkpoints/best.ckpt")
        if ckpt_path is None or ckpt_path in CKPT_KEYWORDS:
            return None
        if getattr(self, "_ckpt", None) is None:
            self._ckpt = load_checkpoint(ckpt_path)
        return self._ckpt

    def parse_arguments(self, parser, args) -> None:
        if args is None or isinstance(args, list):
            args = self._with_checkpoint_config(list(sys.argv[1:] if args is None else args))
        super().parse_arguments(parser, args)

    def _with_checkpoint_config(self, argv: list[str]) -> list[str]:
        """``validate``/``test``/``predict --ckpt_path X`` without ``--config``: the checkpoint's
        own config goes first, so only evaluation settings need to be given."""
        if not argv or argv[0] not in ("validate", "test", "predict"):
            return argv
        if any(a in ("-c", "--config") or a.startswith("--config=") for a in argv):
            return argv
        path = next((a.split("=", 1)[1] for a in argv if a.startswith("--ckpt_path=")), None)
        if path is None and "--ckpt_path" in argv[:-1]:
            path = argv[argv.index("--ckpt_path") + 1]
        if path is None or path in CKPT_KEYWORDS:
            return argv
        self._ckpt = load_checkpoint(path)
        text = stored_config(self._ckpt)
        if text is None:
            raise CheckpointError(f"{path} carries no config (it was written before checkpoints did); "
                                  "pass --config with the config it was trained with")
        return [argv[0], "--config", text, *argv[1:]]

    def _parse_ckpt_path(self) -> None:
        # LightningCLI merges the checkpoint's hyperparameters into the model config here,
        # over what the user gave; compare the two first and refuse a run that mixes them.
        subcommand = self.config.get("subcommand")
        ckpt = self._user_ckpt(subcommand) if subcommand else None
        text = stored_config(ckpt) if ckpt is not None else None
        if text is not None:
            import yaml

            stored = yaml.safe_load(text)
            given = yaml.safe_load(self._parser(subcommand).dump(self.config[subcommand], skip_none=False,
                                                                 skip_validation=True))
            differ = conflicts(stored, given, subcommand)
            if differ:
                more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
                raise CheckpointError(f"{self.config[subcommand].ckpt_path} was trained with another config: "
                                      f"{'; '.join(differ[:4])}{more}. " + (
                                          "Resume with the config it was trained with" if subcommand == "fit" else
                                          "Leave out --config (the checkpoint carries its own) and change only "
                                          "evaluation settings (lengths, samples, inputs, batch sizes)"))
        super()._parse_ckpt_path()

    def _check_ckpt(self, subcommand: str, required: bool) -> None:
        if self.config[subcommand].get("ckpt_path") is None and required:
            raise CheckpointError(f"{subcommand} needs a trained model: pass --ckpt_path PATH")
        ckpt = self._user_ckpt(subcommand)
        if ckpt is not None:
            check_compatible(ckpt["state_dict"], self.model.state_dict())

    def _preflight(self, stage: str) -> None:
        """Every check that needs the model, data and callbacks together, run before a run
        folder or a W&B run exists: a mistake found here leaves nothing behind."""
        dm, model = self.datamodule, self.model
        if stage == "predict":
            dm.setup("predict")  # malformed inputs fail here, before any model work
        model.model.check_length(dm.max_tokens(stage))
        if stage == "fit" and model.hparams.get("init_from") and self.config.fit.get("ckpt_path") is None:
            model.init_weights(model.hparams.init_from)
        if stage == "fit":
            model.check_schedule(self.trainer)
        for callback in self.trainer.callbacks:
            if hasattr(callback, "check_data"):
                callback.check_data(dm)
        period = getattr(model.model.position_index, "period", None)
        if period is not None and period != dm.task.cpi_period and stage == "fit":
            warnings.warn(f"{dm.task.name} declares CPI period {dm.task.cpi_period} (see its task file), and this "
                          f"run uses {period}: --model.position_index.period={dm.task.cpi_period}", stacklevel=2)

    def _claim_version(self) -> None:
        """Give a CSV/TensorBoard logger without a version its own ``version_N`` folder now.

        Lightning picks "highest existing + 1" lazily, so runs started together with one
        save_dir (sweeps, ``reproduce --jobs``) could pick the same folder and overwrite
        each other's files. Creating the folder is atomic: a run that loses the race takes
        the next number. Only global rank 0 claims; other ranks receive its log_dir.
        Without any logger (``--trainer.logger=false``) the run still gets a folder of its
        own, ``runs/no_logger/version_N``, instead of writing into the current directory.
        """
        if not launched_as_rank_zero():
            return
        trainer = self.trainer
        if not trainer.loggers and Path(trainer.default_root_dir).resolve() == Path.cwd().resolve():
            trainer._default_root_dir = str(claim_folder(Path("runs") / "no_logger", 0))
        for logger in trainer.loggers:
            if isinstance(logger, (CSVLogger, TensorBoardLogger)) and getattr(logger, "_version", 0) is None:
                logger._version = int(claim_folder(Path(logger.root_dir), logger._get_next_version()).name[8:])

    def _add_wandb(self) -> None:
        """Add W&B (see :mod:`abc_lightning.wandb_logging`) beside a CSV/TensorBoard logger."""
        loggers = self.trainer.loggers
        if not loggers or not isinstance(loggers[0], (CSVLogger, TensorBoardLogger)) or not launched_as_rank_zero():
            return  # other ranks log nothing; rank 0's W&B run is the run
        options = self.config[self.config.subcommand].get("wandb") or {}
        wandb_logger = make_logger(options.get("mode", "auto"), options.get("project", "abc_lightning"), loggers[0])
        if wandb_logger is None:
            return
        self.trainer.loggers = [*loggers, wandb_logger]
        config = self.config[self.config.subcommand].clone()
        config.pop("wandb", None)
        wandb_logger.log_hyperparams(flatten(config.as_dict()))  # the resolved config, inside the W&B run

    def _start(self, stage: str, needs_ckpt: bool, wandb: bool = True) -> None:
        self._check_ckpt(stage, required=needs_ckpt)
        self._preflight(stage)
        self._claim_version()
        if wandb:
            self._add_wandb()

    def before_fit(self) -> None:
        self._start("fit", needs_ckpt=False)
        weights = sum(p.numel() for p in self.model.parameters())
        print(f"abc_lightning: fit {self.datamodule.task.name}, {weights:,} weights, run folder "
              f"{run_dir(self.trainer)}", file=sys.stderr, flush=True)

    def before_validate(self) -> None:
        self._start("validate", needs_ckpt=False)

    def before_test(self) -> None:
        self._start("test", needs_ckpt=True)

    def before_predict(self) -> None:
        self._start("predict", needs_ckpt=True, wandb=False)

    def after_predict(self) -> None:
        rows = sorted(self.model.predictions, key=lambda r: r["index"])
        out = run_dir(self.trainer)
        out.mkdir(parents=True, exist_ok=True)
        with files.atomic_open(out / "predictions.jsonl", "w") as fh:
            for r in rows:
                fh.write(json.dumps({k: v for k, v in r.items() if k != "index"}) + "\n")
        shown = rows[:SHOWN]
        width = max(len(r["input"]) for r in shown)
        for r in shown:
            mark = "ok" if r["correct"] else (f"WRONG (expected {r['expected']}; generated {r['raw_output']!r}, "
                                              f"expected {r['raw_expected']!r}, least significant digit first)")
            print(f"{r['input']:>{width}} = {r['output']}   {mark}")
        right = sum(r["correct"] for r in rows)
        more = f"; the first {SHOWN} are shown" if len(rows) > SHOWN else ""
        print(f"{right} of {len(rows)} right{more}; every answer in {out / 'predictions.jsonl'}")


SHOWN = 20  # predict answers printed; all of them go to predictions.jsonl


class Unseeded(ABCLightningCLI):
    """The CLI without seeding: building a model to look at or use leaves the caller's
    random state alone (the API's ``load``, argument checks)."""

    def _set_seed(self) -> None:
        pass


class ParseOnly(Unseeded):
    """The CLI up to validated parsing: nothing is instantiated, seeded or run."""

    def instantiate_classes(self) -> None:
        pass

    def _add_configure_optimizers_method_to_model(self, subcommand) -> None:
        pass

    def _run_subcommand(self, subcommand) -> None:
        pass


def check_args(args: list[str]) -> str | None:
    """Parse ``args`` as the command line would (keys, types, class names, config files) without
    building anything; return the one-line error, or None when they parse."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ParseOnly(args=args)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return lines[-1].removeprefix("abc_lightning: error: ") if lines else "the arguments do not parse"
    except Exception as exc:  # a user error raised while parsing (a class's own check)
        cause = user_error(exc)
        if cause is None:
            raise
        return str(cause)
    return None


def claim_folder(root: Path, version: int) -> Path:
    """Create ``root/version_N`` atomically, with N the first free number from ``version``."""
    CLAIMED.extend(reversed([d for d in [root, *root.parents] if not d.exists()]))  # parents we create
    root.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            (root / f"version_{version}").mkdir()
            CLAIMED.append(root / f"version_{version}")
            return root / f"version_{version}"
        except FileExistsError:
            version += 1


def launched_as_rank_zero() -> bool:
    """True unless a launcher (torchrun, SLURM, Lightning's DDP) says this process is another rank."""
    return all(int(os.environ.get(var, "0") or 0) == 0 for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"))


USER_ERRORS = (ConfigError, InputError, CheckpointError, MisconfigurationException)
CLAIMED: list[Path] = []  # folders this process created, removed again if a user error leaves them empty
START_UP_FILES = {"config.yaml", "hparams.yaml", "run_info.json", "wandb"}  # nothing a run has learned


def user_error(exc: BaseException) -> BaseException | None:
    """Our own error behind ``exc``: jsonargparse and Lightning wrap what constructors raise.
    Lightning's MisconfigurationException is a user error too (a trainer setting that
    cannot work on this machine)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, USER_ERRORS):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def remove_unstarted_runs() -> None:
    """Remove the run folders this process claimed that hold only start-up files."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=2)
        wandb.teardown()  # its service would otherwise outlive the run, and later runs would reuse it
    for folder in reversed(CLAIMED):  # deepest first: a parent we made goes once it is empty
        if folder.is_dir() and {p.name for p in folder.iterdir()} <= START_UP_FILES:
            shutil.rmtree(folder)
    CLAIMED.clear()


def run_cli(args: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line and return exit status 2."""
    quiet_third_party()
    CLAIMED.clear()
    try:
        ABCLightningCLI(args=args)
    except Exception as exc:
        cause = user_error(exc)
        if cause is None:
            raise
        remove_unstarted_runs()
        message = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        if isinstance(cause, MisconfigurationException) and not message.startswith("trainer:"):
            message = f"trainer: {message}"
        print(f"abc_lightning: error: {message}", file=sys.stderr)
        return 2
    return 0
