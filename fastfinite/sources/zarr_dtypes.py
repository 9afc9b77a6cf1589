"""bfloat16 and float8 as Zarr data types, so that zarr-python opens stores holding them.

Zarr 3 names them as zarr-extensions and other implementations (tensorstore, zarrs) write
them: ``"data_type": "bfloat16"``, ``"float8_e4m3fn"``, ... zarr-python 3 has no such types
of its own; ``register()`` adds them to its registry, backed by ml_dtypes' NumPy dtypes (the
only ones there are), once per process; ml_dtypes itself is imported only when a store of
one of them is read (its import takes about a second, which every Zarr scan paid). Fill values are JSON numbers, ``"NaN"``,
``"Infinity"``, ``"-Infinity"`` or hex strings of the bits, as for the core float types.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..model.casts import NARROW

_done = False


def register() -> bool:
    """Add the formats of ``casts.NARROW`` to zarr's data types (when ml_dtypes is there).
    Returns whether they are registered."""
    global _done
    if _done:
        return True
    if importlib.util.find_spec("ml_dtypes") is None:
        return False
    from zarr.core.dtype import Float16, data_type_registry

    for name in NARROW:
        cls = _zdtype(Float16, name)
        globals()[cls.__name__] = cls  # pickled by name: an array goes to Dask workers
        if name not in data_type_registry.contents:
            data_type_registry.register(name, cls)
    _done = True
    return True


def __getattr__(attr: str) -> Any:
    """A class of ``register`` named by a pickle, in a process that has not registered them
    yet (a Dask worker unpickling a zarr array of bfloat16)."""
    if not _done and attr[:1].isupper() and register() and attr in globals():
        return globals()[attr]
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def _zdtype(base: type, name: str) -> type:
    """A zarr data type class for ml_dtypes' ``name``, so named in Zarr 3 metadata."""

    @functools.cache
    def native() -> np.dtype:
        import ml_dtypes

        dtype = np.dtype(getattr(ml_dtypes, name))
        Narrow.dtype_cls = type(dtype)
        return dtype

    @dataclass(frozen=True, kw_only=True)
    class Narrow(base):  # type: ignore[misc, valid-type]
        _zarr_v3_name = name
        _zarr_v2_names: ClassVar[tuple[str, ...]] = (name,)

        @classmethod
        def _check_native_dtype(cls, d: Any) -> bool:
            return isinstance(d, np.dtype) and d.name == name

        def to_native_dtype(self) -> np.dtype:
            dtype = native()
            return (
                dtype
                if dtype.itemsize == 1 or self.endianness != "big"
                else dtype.newbyteorder(">")
            )

        @property
        def item_size(self) -> int:
            return native().itemsize

        def to_json(self, zarr_format: int) -> Any:
            if zarr_format == 2:
                return {"name": name, "object_codec_id": None}
            return name

    Narrow.__name__ = Narrow.__qualname__ = "".join(p.capitalize() for p in name.split("_"))
    return Narrow
