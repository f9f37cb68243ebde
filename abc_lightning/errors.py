"""User-facing errors. The CLI turns these into one-line messages instead of tracebacks."""

import argparse


class ConfigError(ValueError):
    """A configuration value that cannot work (unknown task, w < 0, T < 1, bad lengths ...)."""


class InputError(ValueError):
    """A predict input that is not a well-formed expression for the task."""


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, or does not fit the configured model."""


class OneLineParser(argparse.ArgumentParser):
    """argparse for ``reproduce`` and ``sweep``: a mistake is the CLI's one line, not a usage block."""

    def error(self, message: str):
        self.exit(2, f"abc_lightning: error: {message} (see {self.prog} --help)\n")
