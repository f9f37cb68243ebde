"""abc_lightning: length-generalizing arithmetic Transformers (ABS and ABC) in PyTorch Lightning."""

from abc_lightning.version import __version__


def __getattr__(name: str):
    # ``from abc_lightning import load`` without importing Lightning for every ``import abc_lightning``
    if name == "load":
        from abc_lightning.api import load

        return load
    raise AttributeError(f"module 'abc_lightning' has no attribute {name!r}")
