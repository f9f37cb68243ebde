"""The command line: LightningCLI over the module and data module.

Every subcommand of LightningCLI works (``fit``, ``validate``, ``test``, ``predict``);
``python -m abc_lightning reproduce …`` regenerates the results tables (:mod:`abc_lightning.reproduce`).
What a mistake prints lives in :mod:`abc_lightning.cli.messages`, the checks a run passes before
it starts in :mod:`abc_lightning.cli.preflight`, run folders in :mod:`abc_lightning.runs.folders`, and :func:`run_cli` turns every mistake or fault into
one line and an exit status (:mod:`abc_lightning.cli.faults`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from abc_lightning.training import AccuracyTable, BiasStrategy, RunInfo
from abc_lightning.training.callbacks import LineProgress, PredictionWriter, RunConfig
from abc_lightning import data as _data  # noqa: F401 (every task's data module, for --data=Addition)
from abc_lightning.cli import preflight
from abc_lightning.data import ArithmeticDataModule, resolve_data_seed, resolve_task_period
from abc_lightning.errors import CheckpointError, ConfigError, Terminated, on_stop_signals, raise_terminated
from abc_lightning.cli.faults import report, user_error
from abc_lightning.cli.messages import ConciseParser, known_classes, check_config_file, check_sections, check_trainer, quiet_third_party
from abc_lightning.runs.folders import CLAIMED, checkpoint_run, claim_run_folder, latest_last_ckpt, remove_unstarted_runs, run_dir
from abc_lightning.runs.checkpoints import (CKPT_KEYWORDS, AtomicCheckpointIO, check_compatible, conflicts, flatten,
                                       load_checkpoint, stored_config)
from abc_lightning.training.module import ArithmeticTransformer
from abc_lightning.training.stopping import GracefulStop
from abc_lightning.cli.wandb_logging import add_beside

# Imported so that short class names resolve on the command line (--model.positional=NoPE).
from abc_lightning import callbacks as _callbacks, calibration as _calibration, scaffolding as _scaffolding  # noqa: F401
from abc_lightning.model import position_index as _position_index, positional as _positional  # noqa: F401


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


#: The bias strategies' class names (the ``bias`` slot's choices).
BIAS_STRATEGIES = tuple(known_classes(BiasStrategy))


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
        # private hook, the one place the extra callbacks arrive: an empty ``bias`` slot is None
        # among them, and a plugins default given as trainer_defaults would be saved in every config
        if not config.get("plugins"):  # checkpoints written whole or not at all
            config = {**config, "plugins": [AtomicCheckpointIO()]}
        return super()._instantiate_trainer(config, [GracefulStop(), *(c for c in callbacks if c is not None)])

    def _prepare_subcommand_parser(self, klass, subcommand: str, **kwargs) -> LightningArgumentParser:
        # private hook: a subcommand's own arguments (verbose) are added after every public hook ran
        parser = super()._prepare_subcommand_parser(klass, subcommand, **kwargs)
        if subcommand in ("validate", "test"):
            parser.set_defaults(verbose=False)  # AccuracyTable prints the one table
        return parser

    @property
    def stage_config(self):
        """The parsed config of the subcommand being run (the whole config without one)."""
        return self.config[self.subcommand] if self.subcommand else self.config

    def _set_seed(self) -> None:
        # private hook: LightningCLI seeds before before_instantiate_classes, so the range check is here
        config = self.stage_config
        seed = config.get("seed_everything")
        if isinstance(seed, int) and not isinstance(seed, bool) and not 0 <= seed < 2**32:
            raise ConfigError(f"seed_everything={seed}: expected an integer from 0 to {2**32 - 1} (or true)")
        super()._set_seed()

    def before_instantiate_classes(self) -> None:
        config = self.stage_config
        check_sections(config)
        resolve_task_period(config)
        resolve_data_seed(config)  # after _set_seed: seed_everything is a number (or off)
        trainer = config.get("trainer", {})
        accelerator = trainer.get("accelerator")
        if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
            raise ConfigError(f"trainer.accelerator={accelerator}, but torch sees no CUDA GPU here; "
                              "use --trainer.accelerator=auto or cpu")
        check_trainer(trainer)
        callbacks = trainer.get("callbacks") or []
        names = [str(getattr(c, "class_path", "")).rsplit(".", 1)[-1] for c in callbacks]
        misplaced = [name for name in names if name in BIAS_STRATEGIES]
        if misplaced:
            raise ConfigError(f"{misplaced[0]} is a bias strategy: give it as bias (YAML 'bias: {{class_path: "
                              f"{misplaced[0]}, init_args: …}}', or --bias={misplaced[0]}), not in trainer.callbacks")
        if names.count("ErrorReplay") > 1:
            raise ConfigError("ErrorReplay is given twice (configs/abs.yaml already ends with it): drop "
                              "--trainer.callbacks+=abc_lightning.callbacks.ErrorReplay, or set the config's "
                              "with --trainer.callbacks.init_args.rows=N")
        has_bar = any("Progress" in str(getattr(c, "class_path", "")) for c in callbacks)
        if trainer.get("enable_progress_bar") is not False and not has_bar and not sys.stdout.isatty():
            # piped or redirected: plain lines instead of carriage returns and cursor codes
            self.trainer_defaults["callbacks"] = [LineProgress()]

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(AccuracyTable, "accuracy_table")
        parser.add_lightning_class_args(RunInfo, "run_info")
        parser.add_lightning_class_args(PredictionWriter, "prediction_writer")
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
            args = list(sys.argv[1:] if args is None else args)
            for i, arg in enumerate(args):
                value = args[i + 1] if arg in ("-c", "--config") and i + 1 < len(args) else (
                    arg.split("=", 1)[1] if arg.startswith("--config=") else None)
                if value is not None:
                    check_config_file(value)
            args = self._with_checkpoint_config(args)
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
        # private hook, because LightningCLI merges the checkpoint's hyperparameters into the model config here,
        # over what the user gave; compare the two first and refuse a run that mixes them.
        subcommand = self.config.get("subcommand")
        if subcommand == "fit" and self.config.fit.get("ckpt_path") == "last":
            self.config.fit.ckpt_path = str(latest_last_ckpt(self.config.fit))
        ckpt = self._user_ckpt(subcommand) if subcommand else None
        text = stored_config(ckpt) if ckpt is not None else None
        if text is not None:
            import yaml

            resolve_task_period(self.config[subcommand])  # as the checkpoint holds it: a number
            stored = yaml.safe_load(text)
            stored_data = (stored.get("data") or {}) if isinstance(stored, dict) else {}
            stored_seed = (stored_data.get("init_args") or {}).get("seed") if isinstance(stored_data, dict) else None
            resolve_data_seed(self.config[subcommand], stored_seed if isinstance(stored_seed, int) else None)
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

    def _claim_version(self) -> None:
        """This run's own folder, claimed now (:func:`abc_lightning.runs.folders.claim_run_folder`)."""
        claim_run_folder(self.trainer, self.stage_config.get("ckpt_path"),
                         lambda: self._user_ckpt("fit").get("global_step", 0), self.subcommand or "fit")

    def _add_wandb(self) -> None:
        options = self.config[self.config.subcommand].get("wandb") or {}
        wandb_logger = add_beside(self.trainer, options.get("mode", "auto"), options.get("project", "abc_lightning"))
        if wandb_logger is not None:
            config = self.config[self.config.subcommand].clone()
            config.pop("wandb", None)
            wandb_logger.log_hyperparams(flatten(config.as_dict()))  # the resolved config, inside the W&B run

    def _start(self, stage: str, needs_ckpt: bool, wandb: bool = True) -> None:
        ACTIVE["trainer"], ACTIVE["stage"] = self.trainer, stage
        preflight.check_stage(stage, self.trainer, self.datamodule)
        self._check_ckpt(stage, required=needs_ckpt)
        resuming = stage == "fit" and self.config.fit.get("ckpt_path") is not None
        preflight.check_together(stage, self.trainer, self.model, self.datamodule, resuming)
        if stage == "fit":
            preflight.check_budget(self.trainer, self.config.fit.trainer.get("max_time"), self._user_ckpt("fit"),
                                   self.config.fit.ckpt_path)
        self._claim_version()  # every check above has passed: only now does the run get a folder
        if wandb:
            self._add_wandb()

    def before_fit(self) -> None:
        self._start("fit", needs_ckpt=False)
        weights = sum(p.numel() for p in self.model.parameters())
        ckpt = self._user_ckpt("fit")
        resumed = f", resuming {self.config.fit.ckpt_path} at step {ckpt.get('global_step', 0)}" if ckpt else ""
        print(f"abc_lightning: fit {self.datamodule.task.name}, {weights:,} weights, run folder "
              f"{run_dir(self.trainer)}{resumed}", file=sys.stderr, flush=True)

    def before_validate(self) -> None:
        self._start("validate", needs_ckpt=False)

    def before_test(self) -> None:
        self._start("test", needs_ckpt=True)

    def before_predict(self) -> None:
        self._start("predict", needs_ckpt=True, wandb=False)



ACTIVE: dict = {}  # the trainer of the run under way, for the fault handler's message


def stop_on_signals():
    """A stop signal (SIGTERM; SIGUSR1 outside SLURM) raises :class:`Terminated` wherever the
    run is, instead of ending the process unreported; a fit's training defers it to the next
    step boundary (:class:`~abc_lightning.training.stopping.GracefulStop`)."""
    return on_stop_signals(raise_terminated)


def with_run_config(argv: list[str]) -> list[str]:
    """``fit --ckpt_path <run>/checkpoints/X.ckpt`` without ``--config`` resumes with the
    run's own ``config.yaml`` (the documented resume command), given first so that every
    other argument still overrides it."""
    if not argv or argv[0] != "fit" or any(a in ("--config", "-c") or a.startswith("--config=") for a in argv):
        return argv
    ckpt = next((b for a, b in zip(argv, argv[1:]) if a == "--ckpt_path"), None) or next(
        (a.split("=", 1)[1] for a in argv if a.startswith("--ckpt_path=")), None)
    run = checkpoint_run(ckpt)
    if run is None or not (run / "config.yaml").is_file():
        return argv
    return ["fit", "--config", str(run / "config.yaml"), *argv[1:]]


def run_cli(args: list[str] | None = None) -> int:
    """Run the CLI. A mistake or a fault prints one line (:mod:`abc_lightning.cli.faults`) and
    returns 2 (the user's to change), 1 (the machine's), 130 (interrupted) or 128 + a stop
    signal (143 for SIGTERM: :func:`stop_on_signals`); folders this
    process claimed that hold only start-up files are removed, never a run with a checkpoint."""
    quiet_third_party()
    CLAIMED.clear()
    ACTIVE.clear()
    try:
        with stop_on_signals():
            ABCLightningCLI(args=with_run_config(sys.argv[1:] if args is None else args))
    except SystemExit as exc:  # Lightning turns Ctrl+C inside a loop into sys.exit(1)
        trainer = ACTIVE.get("trainer")
        if trainer is None or not trainer.interrupted or exc.code != 1:
            raise
        status = report(KeyboardInterrupt(), run_dir(trainer), stage=ACTIVE.get("stage", "fit"))
    except BaseException as exc:
        trainer = ACTIVE.get("trainer")  # the run folder names the checkpoint an interrupt resumes from
        stopped = isinstance(exc, (KeyboardInterrupt, Terminated)) and trainer is not None
        status = report(exc, run_dir(trainer) if stopped else None, stage=ACTIVE.get("stage", "fit"))
        if status is None:
            raise
    else:
        return 0
    remove_unstarted_runs(status)
    return status
