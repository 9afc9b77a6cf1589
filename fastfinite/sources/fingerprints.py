"""What a cache compares to tell that a storage unit did not change since it was scanned: a
fingerprint per unit (chunk or shard file, or object), taken from the store's listing before
any unit is read.

- A local file: size, modification and change times (ns) and inode. A file changed less than
  a tick of the file system's clock before it was listed (``RACY_FINE_SECONDS``, or
  ``RACY_SECONDS`` where times are whole seconds) may be rewritten again within that tick,
  unseen by its times: its content hash is taken too (git's "racy clean"),
  kept by the cache beside the entry and compared at the next scan (``Fingerprints.settle``).
- An object in an object store: its ETag, version id, last-modified time and size.
- Anything else (a store in memory, a zip file): the hash of the unit's bytes.

Nothing here decodes a unit: hashing bytes costs a read, not a decompression and a scan.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..compute.digests import content_digest, digest

_STAT = struct.Struct("<qqqQ")  # size, mtime and ctime (ns), inode: no hash to make
# above the granularity of a file system's timestamps: one whose times are whole seconds may
# tick in seconds (FAT's, in two); others (ext4, XFS, btrfs, NTFS, APFS) tick in ms or less
RACY_SECONDS = 2.0
RACY_FINE_SECONDS = 0.1
ABSENT = b"absent"  # a unit the store does not hold: it reads as the fill value


def file_fingerprint(path: str, st: os.stat_result, now_ns: int) -> tuple[bytes, bytes | None]:
    """The fingerprint of a local file from its ``stat``, and its content hash when it
    changed within a clock tick of ``now_ns`` (else None): ``RACY_FINE_SECONDS``, or
    ``RACY_SECONDS`` when its times are whole seconds."""
    fp = _STAT.pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    coarse = st.st_mtime_ns % 1_000_000_000 == 0 and st.st_ctime_ns % 1_000_000_000 == 0
    window = RACY_SECONDS if coarse else RACY_FINE_SECONDS
    racy = now_ns - max(st.st_mtime_ns, st.st_ctime_ns) < window * 1e9
    return fp, file_hash(path) if racy else None


def file_hash(path: str) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.digest()


def whole_file(path: str) -> Fingerprints:
    """One fingerprint for a whole file (``.npy``, HDF5: every region shares it)."""
    fp, racy = file_fingerprint(path, os.stat(path), time.time_ns())
    return Fingerprints(whole=fp, racy={(): racy} if racy else {}, rehash=lambda _: file_hash(path))


def grid_fingerprints(folder: str, encode: Callable, grid) -> Fingerprints:
    """The fingerprints of the unit files of a grid in ``folder`` (``encode``: coordinates ->
    key), each file's ``stat`` taken by its path: no directory listed (with one folder per
    row of chunks, as Zarr 3 lays them out, listing costs several times more)."""
    import numpy as np

    if not os.path.isdir(folder):
        from ..errors import SourceError

        raise SourceError(f"the array's folder {folder} is not there")
    now = time.time_ns()
    units, racy = {}, {}
    base = folder.rstrip(os.sep) + os.sep
    sep = os.sep
    for coords in np.ndindex(*grid.grid):
        path = base + encode(coords).replace("/", sep)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        units[coords], h = file_fingerprint(path, st, now)
        if h is not None:
            racy[coords] = h
    return Fingerprints(units, grid, racy=racy, rehash=lambda c: file_hash(base + encode(c)))


_ETAG_FIELDS = ("ETag", "etag", "e_tag", "VersionId", "version_id", "version", "generation")
_TIME_FIELDS = ("LastModified", "last_modified", "mtime", "updated", "last-modified")


def object_fingerprint(info: dict) -> bytes | None:
    """An object's fingerprint from its listing entry (fsspec's or obstore's), or None when
    the entry holds neither an ETag nor a version nor a modification time."""
    tags = [f"{k}={info[k]}" for k in _ETAG_FIELDS if info.get(k) not in (None, "")]
    times = [f"{k}={info[k]}" for k in _TIME_FIELDS if info.get(k) not in (None, "")]
    if not tags and not times:
        return None
    return digest("object", str(info.get("size")), *tags, *times)


def store_fingerprints(store_path: Any) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """``{key relative to the array: fingerprint}`` of every key below a zarr ``StorePath``:
    from an fsspec or obstore listing where it gives ETags or times, else from the bytes
    (no racy hashes: an object's ETag or version is of its content)."""
    store = store_path.store
    prefix = store_path.path.strip("/")
    fs = getattr(store, "fs", None)
    if fs is not None:
        found = _fsspec_listing(fs, f"{str(store.path).rstrip('/')}/{prefix}".rstrip("/"))
    elif type(store).__name__ == "ObjectStore":
        found = _obstore_listing(store.store, prefix)
    else:
        found = None
    if found is not None and all(v is not None for v in found.values()):
        return found, {}  # type: ignore[return-value]
    return _hashed(store, prefix), {}


def _fsspec_listing(fs: Any, root: str) -> dict[str, bytes | None] | None:
    try:
        infos = fs.find(root, detail=True)
    except Exception:
        return None
    base = fs._strip_protocol(root).rstrip("/") + "/"
    out = {}
    for path, info in infos.items():
        rel = fs._strip_protocol(path)
        if rel.startswith(base):
            out[rel[len(base) :]] = object_fingerprint(info)
    return out


def _obstore_listing(inner: Any, prefix: str) -> dict[str, bytes | None] | None:
    try:
        import obstore

        batches = obstore.list(inner, prefix=prefix + "/" if prefix else None)
        entries = [e for batch in batches for e in batch]
    except Exception:
        return None
    strip = len(prefix) + 1 if prefix else 0
    return {str(e["path"])[strip:]: object_fingerprint(dict(e)) for e in entries}


def _hashed(store: Any, prefix: str) -> dict[str, bytes]:
    """The hash of every value below ``prefix``, read through zarr's store interface."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    async def read_all() -> dict[str, bytes]:
        out = {}
        strip = len(prefix) + 1 if prefix else 0
        async for key in store.list_prefix(prefix + "/" if prefix else ""):
            buf = await store.get(key, default_buffer_prototype())
            if buf is not None:
                out[key[strip:]] = digest("bytes", content_digest(buf.to_bytes()))
        return out

    return sync(read_all())


class Fingerprints:
    """The fingerprints of a source's units, and of a region from those of its units.

    Parameters
    ----------
    units : dict, optional
        ``{grid coordinates: fingerprint}`` of the units the store holds.
    grid : ChunkGrid, optional
        The units' grid (with ``units``).
    whole : bytes, optional
        One fingerprint for every region (a single file).
    racy : dict, optional
        ``{coordinates (() for a whole file): content hash}`` of the units changed just
        before they were listed.
    rehash : callable, optional
        Coordinates -> the unit's content hash now.
    """

    def __init__(self, units=None, grid=None, whole=None, racy=None, rehash=None):
        self.units = units or {}
        self.grid = grid
        self.whole = whole
        self.racy = racy or {}
        self.rehash = rehash
        self._listed: set[bytes] = set()  # listed fingerprints that ``settle`` replaced
        # the units missing -> the chunks missing (a sharded array: those its shards lack)
        self.chunks_missing: Callable | None = None

    @classmethod
    def from_keys(cls, found, racy, parse: Callable, grid, rehash=None) -> Fingerprints:
        units, hashes = {}, {}
        for key, fp in found.items():
            coords = parse(key)
            if coords is not None and all(c < g for c, g in zip(coords, grid.grid)):
                units[coords] = fp
                if key in racy:
                    hashes[coords] = racy[key]
        return cls(units, grid, racy=hashes, rehash=rehash)

    def settle(self, records: dict[bytes, bytes]) -> tuple[list, list]:
        """Compare with ``records`` (``{fingerprint: content hash}`` of units that were racy
        when an earlier scan listed them): a unit whose times are the same but whose content
        is not gets another fingerprint (its regions are scanned again). Returns the records
        to add (units racy now) and to drop (units no longer racy, their content checked)."""
        fps = {(): self.whole} if self.whole is not None else self.units
        add, drop = [], []
        for coords, fp in fps.items():
            now = self.racy.get(coords)
            if fp in records:
                h = now if now is not None else self.rehash(coords)
                if h != records[fp]:  # rewritten within one tick: the times cannot tell
                    self._set(coords, digest("rewritten", fp, h))
                elif now is None:
                    drop.append(fp)
            elif now is not None:
                add.append((fp, now))
        return add, drop

    def _set(self, coords, fp: bytes) -> None:
        self._listed.add(self.whole if self.whole is not None else self.units[coords])
        if self.whole is not None:
            self.whole = fp
        else:
            self.units[coords] = fp

    def current(self) -> set[bytes]:
        """Every unit's fingerprint, and the listed ones ``settle`` replaced (their racy
        records still tell the next scan that the content is not the one cached)."""
        now = {self.whole} if self.whole is not None else set(self.units.values())
        return now | self._listed

    def of(self, region) -> bytes:
        """The fingerprint of a region: its box and the fingerprints of its units."""
        box = ",".join(f"{r.start}:{r.stop}" for r in region)
        if self.whole is not None:
            return digest("region", box, self.whole)
        fps: Iterable[bytes] = (self.units.get(c, ABSENT) for c in self.grid.units_in(region))
        return digest("region", box, *fps)

    def missing(self) -> list[tuple[int, ...]] | None:
        """Grid coordinates of the units the store does not hold, in C order."""
        if self.grid is None:
            return None
        import numpy as np

        present = np.zeros(self.grid.grid, dtype=bool)
        for coords in self.units:
            present[coords] = True
        missing = [tuple(int(i) for i in c) for c in np.argwhere(~present)]
        return missing if self.chunks_missing is None else self.chunks_missing(missing)
