"""cslint: lint and runtime checks for PyTorch code that runs on Cerebras systems."""

__version__ = "0.1.0"
