"""The version of fastfinite (its own module: code anywhere in the package can name it)."""

__version__ = "0.1.0"
