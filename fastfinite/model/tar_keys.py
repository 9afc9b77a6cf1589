"""How a tar shard's members are keyed, known both where the keys are made
(``sources.tars``) and where a report's keys are read back into WebDataset samples
(``report.samples``): the suffixes of the members that hold arrays, and the key of what
follows a corrupt header."""

from __future__ import annotations

# members read whole and opened as the checkpoint or archive they are (``files.open_buffer``)
BUFFER_SUFFIXES = (".npz", ".safetensors", ".pth", ".pt")
ARRAY_SUFFIXES = (".npy", *BUFFER_SUFFIXES)  # the members that hold arrays
REST_OF_TAR = "(the rest of the tar)"  # the key of what follows a corrupt header
