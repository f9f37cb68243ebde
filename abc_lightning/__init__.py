"""abc_lightning: length-generalizing arithmetic Transformers (ABS and ABC) in PyTorch Lightning."""

__version__ = "0.1.0"
