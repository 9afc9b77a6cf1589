"""The files the command reads and writes: reports read back (``merge``, ``diff``), and
every file written whole or not at all (``writing``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InvalidArgumentError, SourceError


@contextmanager
def writing(path: str) -> Iterator[str]:
    """Where to write the file ``path``: a new file beside it, renamed onto it once written
    (with the old file's permissions), so that a failed or interrupted write (Ctrl-C) leaves
    no half-written file and the old one, if any, as it was. A special file (``/dev/stdout``)
    or a file in a folder one cannot add to is written in place."""
    import secrets

    real = os.path.realpath(path)  # a symbolic link stays one: its target is replaced
    folder, name = os.path.split(real)
    if (os.path.exists(real) and not os.path.isfile(real)) or not os.access(
        folder, os.W_OK | os.X_OK
    ):
        yield path
        return
    # the same suffix: matplotlib picks the picture's format by it
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}{os.path.splitext(name)[1]}")
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # the umask's mode
    try:
        yield tmp
        if os.path.exists(real):
            import shutil

            shutil.copymode(real, tmp)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text(path: str, text: str) -> None:
    """Write ``text`` and a newline to the file ``path`` (``writing``)."""
    with writing(os.fspath(path)) as where, open(where, "w") as f:
        f.write(text + "\n")


def read_report(path: str):
    """The report in the JSON file ``path`` (written by ``scan --json`` or ``to_json``), or
    a ``SourceError`` naming the file and saying what it holds instead: missing, a
    directory, empty, binary, not JSON, JSON of another shape, a report of a newer schema.
    ``merge`` and ``diff`` read reports here, and only here."""
    import json
    import stat

    from ..report.model import ScanReport, check_schema

    def refuse(why: str) -> SourceError:
        return SourceError(f"{path} is not a fastfinite JSON report: {why}")

    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise SourceError(f"cannot read the report {path}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise refuse("it is a directory")
    if not stat.S_ISREG(mode):  # a FIFO would block the read forever
        raise refuse("it is not a regular file")
    try:
        with open(path, "rb") as f:
            head = first = f.read(64).removeprefix(b"\xef\xbb\xbf")  # a BOM: editors write it
            while head and not head.strip():  # white space before the JSON is fine
                head = f.read(1 << 16)
            if not head:
                raise refuse("it is empty" if not first else "it holds only white space")
            if head.startswith(b"\x93NUMPY"):
                raise refuse("it is a .npy file (scan it with 'fastfinite scan')")
            if not head.lstrip().startswith(b"{"):
                binary = b"\0" in head or not _is_text(head)
                raise refuse("it holds binary data" if binary else "it is not a JSON object")
            raw = head + f.read()
    except OSError as e:
        raise SourceError(f"cannot read the report {path}: {e.strerror or e}") from None
    try:
        d = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise refuse("it is not UTF-8 text") from None
    except ValueError as e:
        raise refuse(f"it is not JSON ({e})") from None
    try:
        schema = check_schema(d)  # what schemas are read is the report's to say
    except InvalidArgumentError as e:
        raise SourceError(f"{path}: {e}") from None
    try:
        return ScanReport.from_dict(d)
    except KeyError as e:
        raise refuse(f"schema {schema!r} but no {e} field") from None
    except InvalidArgumentError as e:  # it disagrees with itself: the field is named
        raise refuse(f"schema {schema!r} but {e}") from None
    except (ValueError, TypeError, AttributeError, IndexError) as e:
        raise refuse(f"schema {schema!r} but {type(e).__name__}: {e}") from None


def _is_text(head: bytes) -> bool:
    """The start of a file reads as UTF-8 text (a character cut at the end is fine)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3
    return True


def write_bad_samples(report, path: str) -> None:
    """``--bad-samples FILE``; a list that could not be complete says so on stderr."""
    from ..report.samples import write_keys

    keys = report.bad_samples()
    with writing(path) as where:
        write_keys(keys, where)
    if not keys.complete:
        more = f" (+{len(keys.notes) - 1} more)" if len(keys.notes) > 1 else ""
        print(f"fastfinite: warning: {path} is incomplete: {keys.notes[0]}{more}", file=sys.stderr)
