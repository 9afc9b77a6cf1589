"""The scan cache on disk (``scan(..., cache=DIR)``): one SQLite database in ``DIR``.

It holds, per array, the summaries of the regions scanned and of the subtrees of their
merge tree, each keyed by the fingerprints of the storage units below it
(``sources.fingerprints``), and the last complete report of each input, for
``report.changes``. SQLite makes every write a transaction, so a killed writer leaves no
half-written entry that reads as valid, and two scans at once wait for each other's writes.
A file of another version, or one that is not a cache, under the cache's name is moved aside
(never deleted) and the cache is made anew; a scan with other options rebuilds the entries
of the arrays it scans. After a complete scan only the entries of the array's current tree
are kept: the cache stays about the size of one scan's summaries.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import warnings

from ..compute.digests import digest
from ..errors import SourceError

FILENAME = "fastfinite-cache.sqlite"
FORMAT = "fastfinite-cache/1"
BUSY_SECONDS = 60.0  # how long a scan waits for another's write

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS arrays (
    name TEXT PRIMARY KEY, akey BLOB NOT NULL, identity TEXT NOT NULL, options TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
    akey BLOB NOT NULL, nkey BLOB NOT NULL, level INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (akey, nkey)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS racy (
    akey BLOB NOT NULL, fp BLOB NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (akey, fp));
CREATE TABLE IF NOT EXISTS reports (
    target TEXT PRIMARY KEY, okey BLOB NOT NULL, report TEXT NOT NULL, written REAL NOT NULL);
"""


class ScanCache:
    """The cache in directory ``path`` (see the module's docstring)."""

    def __init__(self, path: str):
        self.file = os.path.join(path, FILENAME)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise SourceError(f"cannot make the cache directory {path}: {e.strerror}") from None
        self.notes: list[str] = []
        self.db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        for attempt in (0, 1):
            try:
                db = sqlite3.connect(self.file, timeout=BUSY_SECONDS, isolation_level=None)
                # a page written by no transaction (a disk error, a stray write): the file is
                # not trusted at all
                if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                    raise sqlite3.DatabaseError("its pages do not check")
                db.execute("PRAGMA journal_mode=WAL")
                # no sync at each commit: a crash may lose the last writes, never corrupt
                db.execute("PRAGMA synchronous=NORMAL")
                with db:  # BEGIN ... COMMIT: two first scans at once make it once
                    db.execute("BEGIN IMMEDIATE")
                    for stmt in filter(str.strip, _SCHEMA.split(";")):
                        db.execute(stmt)
                    row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
                    if row is None:
                        db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
                    elif row[0] != FORMAT:
                        raise sqlite3.DatabaseError(f"a cache of format {row[0]!r}")
                return db
            except sqlite3.DatabaseError as e:
                if attempt:
                    raise SourceError(f"cannot use the cache {self.file}: {e}") from None
                try:
                    db.close()
                except Exception:
                    pass
                self._move_aside(str(e))
        raise AssertionError("unreachable")

    def _move_aside(self, why: str) -> None:
        aside = f"{self.file}.unusable-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.file + suffix):
                os.replace(self.file + suffix, aside + suffix)
        note = f"the cache file was not usable ({why}): moved to {aside}, cache made anew"
        warnings.warn(note, stacklevel=4)
        self.notes.append(note)

    def close(self) -> None:
        self.db.close()

    # -- arrays -----------------------------------------------------------------------

    def array_key(self, name: str, identity: dict, options: dict) -> tuple[bytes, str | None]:
        """The key of one array's entries, and why they were dropped when the array or the
        options differ from the last scan's (None when they are the same, or new)."""
        ident = json.dumps(identity, sort_keys=True)
        opts = json.dumps(options, sort_keys=True)
        akey = digest("array", ident, opts)
        row = self.db.execute("SELECT akey FROM arrays WHERE name=?", (name,)).fetchone()
        if row is not None and bytes(row[0]) == akey:
            return akey, None  # as it was: nothing to write
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            row = self.db.execute(
                "SELECT akey, identity, options FROM arrays WHERE name=?", (name,)
            ).fetchone()
            why = None
            if row is not None and bytes(row[0]) != akey:
                what = "the options" if row[1] == ident else "the array's layout or metadata"
                if row[1] == ident:
                    old, new = json.loads(row[2]), options
                    what = ", ".join(k for k in sorted(new) if old.get(k) != new.get(k))
                    what = f"the options ({what})"
                why = f"{name}: {what} changed since the cached scan: its entries were rebuilt"
                self.db.execute("DELETE FROM nodes WHERE akey=?", (bytes(row[0]),))
                self.db.execute("DELETE FROM racy WHERE akey=?", (bytes(row[0]),))
            self.db.execute(
                "INSERT OR REPLACE INTO arrays VALUES (?, ?, ?, ?)", (name, akey, ident, opts)
            )
        return akey, why

    def node_keys(self, akey: bytes) -> set[bytes]:
        rows = self.db.execute("SELECT nkey FROM nodes WHERE akey=?", (akey,))
        return {bytes(r[0]) for r in rows}

    def load_many(self, akey: bytes, keys: list[bytes]) -> dict[bytes, bytes]:
        """The entries of ``keys`` that the cache holds, read in one transaction (another
        scan's ``retain`` may drop entries between a listing of keys and their reading)."""
        out: dict[bytes, bytes] = {}
        with self.db:
            self.db.execute("BEGIN")
            for i in range(0, len(keys), 500):
                batch = keys[i : i + 500]
                marks = ",".join("?" * len(batch))
                rows = self.db.execute(
                    f"SELECT nkey, data FROM nodes WHERE akey=? AND nkey IN ({marks})",
                    (akey, *batch),
                )
                out.update((bytes(k), bytes(d)) for k, d in rows)
        return out

    def store(self, rows: list[tuple[bytes, bytes, int, bytes]]) -> None:
        """Write ``(akey, nkey, level, data)`` rows in one transaction."""
        if rows:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.executemany("INSERT OR IGNORE INTO nodes VALUES (?, ?, ?, ?)", rows)

    def racy(self, akey: bytes) -> dict[bytes, bytes]:
        """``{unit fingerprint: content hash}`` of the units that were racy when listed."""
        rows = self.db.execute("SELECT fp, hash FROM racy WHERE akey=?", (akey,))
        return {bytes(f): bytes(h) for f, h in rows}

    def update_racy(self, akey: bytes, add: list, drop: list) -> None:
        if add or drop:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.executemany(
                    "INSERT OR REPLACE INTO racy VALUES (?, ?, ?)", ((akey, f, h) for f, h in add)
                )
                self.db.executemany(
                    "DELETE FROM racy WHERE akey=? AND fp=?", ((akey, f) for f in drop)
                )

    def retain(self, akey: bytes, keep: set[bytes], units: set[bytes]) -> None:
        """Drop the array's entries that are not in ``keep`` (its current tree), and the
        racy records of units that are not in ``units``."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("CREATE TEMP TABLE IF NOT EXISTS keep (nkey BLOB PRIMARY KEY)")
            self.db.execute("DELETE FROM keep")
            stale = [f for f in self.racy(akey) if f not in units]
            self.db.executemany(
                "DELETE FROM racy WHERE akey=? AND fp=?", ((akey, f) for f in stale)
            )
            self.db.executemany("INSERT OR IGNORE INTO keep VALUES (?)", ((k,) for k in keep))
            self.db.execute(
                "DELETE FROM nodes WHERE akey=? AND nkey NOT IN (SELECT nkey FROM keep)", (akey,)
            )
            self.db.execute("DELETE FROM keep")

    # -- reports ----------------------------------------------------------------------

    def swap_report(
        self, target: str, okey: bytes, text: str | None
    ) -> tuple[str | None, str | None]:
        """Keep ``text`` (when not None) as the last complete report of ``target`` with
        these options, and give back the JSON of the one it replaces, and why there is none
        when there is one of other options."""
        with self.db:  # read and replaced in one transaction: no scan's report is lost
            if text is not None:
                self.db.execute("BEGIN IMMEDIATE")
            row = self.db.execute(
                "SELECT okey, report FROM reports WHERE target=?", (target,)
            ).fetchone()
            same = row is not None and bytes(row[0]) == okey
            if text is not None and not (same and row[1] == text):
                self.db.execute(
                    "INSERT OR REPLACE INTO reports VALUES (?, ?, ?, ?)",
                    (target, okey, text, time.time()),
                )
        if row is None:
            return None, None
        if not same:
            return None, "the last cached report of it was made with other options"
        return row[1], None

    def nbytes(self) -> int:
        """The cache's size on disk (its database and its write-ahead log)."""
        return sum(
            os.path.getsize(self.file + s) for s in ("", "-wal") if os.path.exists(self.file + s)
        )
