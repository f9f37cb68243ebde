"""The command line built without running it, for checking a command before anything runs
(sweeps check every combination: :func:`check_args`, on :class:`ParseOnly` or :class:`BuildOnly`)."""

from __future__ import annotations

import contextlib

from abc_lightning.cli import ABCLightningCLI
from abc_lightning.cli.faults import user_error


class Unseeded(ABCLightningCLI):
    """The CLI without seeding: checking a command leaves the caller's random state alone."""

    def _set_seed(self) -> None:  # private hook: seeding is the step this class leaves out
        pass


class ParseOnly(Unseeded):
    """The CLI up to validated parsing: nothing is instantiated, seeded or run."""

    def instantiate_classes(self) -> None:
        pass

    def _add_configure_optimizers_method_to_model(self, subcommand) -> None:  # private: no public switch
        pass

    def _run_subcommand(self, subcommand) -> None:  # private: run=False would still instantiate
        pass


class BuildOnly(ParseOnly):
    """Parsing, then the model, data module, callbacks and logger built from the config (their
    constructors check values against each other); no Trainer, no folder, nothing run."""

    def instantiate_classes(self) -> None:
        self.parser.instantiate_classes(self.config)


def check_args(args: list[str], build: bool = False) -> str | None:
    """Parse ``args`` as the command line would (keys, types, class names, config files); with
    ``build``, also build the model, data and trainer, whose constructors check values against
    each other (``heads`` must divide ``d_model`` …). Nothing runs and no folder is made.
    Return the one-line error, or None."""
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            (BuildOnly if build else ParseOnly)(args=args)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return lines[-1].removeprefix("abc_lightning: error: ") if lines else "the arguments do not parse"
    except Exception as exc:  # a user error raised while parsing (a class's own check)
        cause = user_error(exc)
        if cause is None:
            raise
        return str(cause)
    return None
