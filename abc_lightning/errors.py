"""User-facing errors. The CLI turns these into one-line messages instead of tracebacks."""


class ConfigError(ValueError):
    """A configuration value that cannot work (unknown task, w < 0, T < 1, bad lengths ...)."""


class InputError(ValueError):
    """A predict input that is not a well-formed expression for the task."""


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, or does not fit the configured model."""
