"""The version of fastfinite (its own module: code anywhere in the package can name it)."""

__version__ = "0.1.0"

# The kernels' arithmetic: one more whenever a summary of the same data may differ in a
# last bit (another order of additions), so a cache never folds old and new summaries.
KERNELS = 7
