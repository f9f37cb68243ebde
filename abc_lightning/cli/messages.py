"""How the CLI speaks: one line per mistake, a quiet console, and the checks of settings
that LightningCLI would accept and then fail on.

:class:`ConciseParser` turns jsonargparse's nested reports into one line that names the key,
the value and what was expected (:func:`concise`); :func:`check_config_file` refuses a
``--config`` that is not UTF-8 YAML holding settings; :func:`check_trainer` the trainer
values Lightning divides by or silently reads as "off"; :func:`quiet_third_party` keeps
the console to our own notices, the progress bar and the tables.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from pathlib import Path

from lightning.pytorch.cli import LightningArgumentParser

from abc_lightning.training import BiasStrategy
from abc_lightning.data import ArithmeticDataModule, data_module_names
from abc_lightning.errors import ConfigError


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
    if str(filename).startswith(str(Path(__file__).resolve().parents[1])):  # the package
        return f"abc_lightning: warning: {message}\n"
    return ours_as_notices.default(message, category, filename, lineno, line)


ours_as_notices.default = warnings.formatwarning


def known_classes(base: type) -> list[str]:
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
        from abc_lightning.model.position_index import PositionIndex

        bases = {"model.positional": PositionalScheme, "model.position_index": PositionIndex,
                 "data": ArithmeticDataModule, "bias": BiasStrategy}
        known = known_classes(bases[key.group(1)]) if key.group(1) in bases else []
        hint = f"; choose one of {known}" if known else ""
        return f"{key.group(1)}: unknown class {path.group(1)!r}{hint}"
    missing = re.search(r"File does not exist: '([^']+)'", message)
    if key and key.group(1) == "config" and missing:
        return missing_config(missing.group(1))
    lines = [ln.strip(" -") for ln in message.splitlines() if ln.strip(" -")]
    problem = re.search(r"Problem with given class_path '([^']+)':\s*\n\s*(.+)", message)
    if key and problem and key.group(1) == "data" and "'task'" in problem.group(2):
        return ("data.task is gone since abc_lightning 0.2: choose the task's data module by class, e.g. "
                f"--data=Addition (YAML data: {{class_path: Addition}}); one of {data_module_names()}")
    typed = typed_problem(message, key.group(1) if key else None, problem.group(1) if problem else None)
    if typed:
        return typed
    if key and problem:  # a class was found, but not its option: name the option
        detail = problem.group(2).strip()
        return f"{key.group(1)} ({problem.group(1).rsplit('.', 1)[-1]}): {detail}"
    if key:
        detail = next((ln for ln in lines if ln.startswith("Expected")), lines[-1])
        return f"{key.group(1)}: {detail}"
    return " ".join(lines)


TYPE_WORDS = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
              "NoneType": "null", "list": "a list", "dict": "a mapping"}


def typed_problem(message: str, key: str | None, class_path: str | None) -> str | None:
    """jsonargparse's nested type errors -> ``key: expected <types>, got <value>``, and an
    unknown option -> the class's options."""
    if key is None:
        return None
    klass = class_path.rsplit(".", 1)[-1] if class_path else None
    unknown = re.search(r"Option '([^']+)' is not accepted", message)
    if unknown and class_path:
        import importlib
        import inspect

        module, _, name = class_path.rpartition(".")
        try:
            options = [p for p in inspect.signature(getattr(importlib.import_module(module), name)).parameters
                       if p not in ("self", "args", "kwargs")]
        except (ImportError, AttributeError, ValueError, TypeError):
            options = []
        listed = f"; its options: {options}" if options else ""
        return f"{key}: {klass} has no option {unknown.group(1)!r}{listed}"
    if class_path:  # the problem is one of the class's own options
        inner = re.search(r'Problem with given class_path[^\n]*\n\s*Parser key "([^"]+)"', message)
        if inner is None:
            return None
        key, message = f"{key}.{inner.group(1)}", message[inner.end():].split("\n    - ", 1)[0]
    types = []
    for cls, literal in re.findall(r"Expected a (?:<class '(?:[\w.]*\.)?(\w+)'>|typing\.Literal\[([^\]]*)\])", message):
        word = f"one of [{literal}]" if literal else TYPE_WORDS.get(cls, cls)
        if word not in types:
            types.append(word)
    value = re.search(r"Got value: (.+)", message) or re.search(r"Given value: (.+)", message)
    if not types or value is None:
        return None
    where = f" ({klass})" if klass else ""
    expected = types[0] if len(types) == 1 else f"{', '.join(types[:-1])} or {types[-1]}"
    return f"{key}{where}: expected {expected}, got {value.group(1).strip()!r}"


CONFIG_BYTES = 1 << 20  # a config file's largest size
CONFIG_ALIASES = 64  # and the most YAML aliases it uses


def _unique_mapping(loader, node, deep: bool = False):
    """A YAML mapping whose keys are all different (PyYAML would keep the last of two)."""
    import yaml

    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            repeated = key in seen
        except TypeError:  # an unhashable key: PyYAML's own error follows
            continue
        if repeated:
            raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} appears twice",
                                                    key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


def _unique_key_loader():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
    return Loader


def check_config_file(value: str) -> None:
    """A ``--config`` file must be UTF-8 YAML holding a mapping of settings (a checkpoint or
    any other file gets one line, not a decoding traceback or the file's contents)."""
    import yaml

    path = Path(value)
    if "\n" in value or not path.exists():
        return  # YAML text itself, or a missing file (the parser's own message names it)
    if path.is_dir():
        raise ConfigError(f"config: {path} is a folder; name a YAML file, e.g. configs/abs_parity.yaml")
    if not path.is_file():
        raise ConfigError(f"config: {path} is not a regular file (a pipe or a device); name a YAML file")
    if path.stat().st_size > CONFIG_BYTES:
        raise ConfigError(f"config: {path} is {path.stat().st_size:,} bytes; a config is at most {CONFIG_BYTES:,}")
    hint = "; a checkpoint goes to --ckpt_path" if path.suffix == ".ckpt" else ""
    try:
        text = path.read_text(encoding="utf-8")
        aliases = sum(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader))
        if aliases > CONFIG_ALIASES:
            raise ConfigError(f"config: {path} uses {aliases} YAML aliases (*name); a config uses at most "
                              f"{CONFIG_ALIASES}, since each can repeat a whole section")
        loaded = yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 (a SafeLoader)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config: {path} is not UTF-8 text (byte {exc.start}){hint}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config: {path} is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if loaded is None:
        raise ConfigError(f"config: {path} is empty; a config is a YAML mapping of settings (key: value lines)")
    if not isinstance(loaded, dict):
        raise ConfigError(f"config: {path} holds a YAML {type(loaded).__name__}, not a mapping of settings "
                          f"(key: value lines){hint}")


def missing_config(path: str) -> str:
    """A --config file that is not there; a per-task name with no file of its own
    (``abs_subtraction.yaml``) gets the command that serves every task."""
    from abc_lightning.tasks import TASKS, class_name

    prefix, _, rest = Path(path).stem.partition("_")
    task = max((name for name in TASKS if rest == name or rest.startswith(name + "_")), key=len, default=None)
    if prefix in ("abs", "abc", "baseline") and task:
        return (f"config: {path} does not exist; one config serves every task: "
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


#: Trainer settings whose out-of-range values Lightning accepts and then divides by, or
#: silently reads as "off": (key, lowest allowed, what it means).
TRAINER_RANGES = (("val_check_interval", 0, "a share of an epoch in (0, 1], or a number of steps >= 1"),
                  ("accumulate_grad_batches", 1, "batches per optimizer step, >= 1"),
                  ("check_val_every_n_epoch", 1, "epochs between validations, >= 1 (or null)"),
                  ("gradient_clip_val", 0, "a norm or value >= 0; 0 or null switches clipping off"),
                  ("log_every_n_steps", 1, "steps between logged rows, >= 1"))


def check_trainer(trainer: dict) -> None:
    for key, lowest, meaning in TRAINER_RANGES:
        value = trainer.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value < lowest or (key == "val_check_interval" and value == 0):
            raise ConfigError(f"trainer.{key}={value}: expected {meaning}")
    interval, batches = trainer.get("val_check_interval"), trainer.get("limit_train_batches")
    if isinstance(batches, float) and batches.is_integer() and batches > 1:  # 100 read as 100.0: batches
        batches = int(batches)
    if (isinstance(interval, int) and not isinstance(interval, bool) and isinstance(batches, int)
            and not isinstance(batches, bool) and trainer.get("check_val_every_n_epoch", 1) is not None
            and interval > batches):
        raise ConfigError(f"trainer.val_check_interval={interval}: more steps than an epoch's {batches} "
                          f"(trainer.limit_train_batches); give at most {batches}, or validate every N epochs with "
                          "trainer.check_val_every_n_epoch=N")


def check_sections(config) -> None:
    """The model section is settings (a mapping), not null, a value or a list."""
    value = config.get("model")
    if value is None:
        raise ConfigError("model: expected its settings (e.g. d_model: 64), got null; leave the key out for the "
                          "defaults")
    if not (hasattr(value, "items") or hasattr(value, "__dict__")):
        raise ConfigError(f"model: expected its settings (e.g. d_model: 64), got {type(value).__name__} {value!r}")
