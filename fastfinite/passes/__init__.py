"""Second passes over the flagged parts of the data only: the errstate replay of the
standardization (``localize``) and the scaled casts (``scaled``)."""
