"""Sources: one adapter per kind of input. A source knows its shape, dtype and chunk grid,
how to cut itself into regions and how to read one; nothing else."""
