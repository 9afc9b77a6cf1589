"""How every kernel is compiled and cached: one decorator (``kernel``), Numba's settings
for it, and where its machine code is kept between processes.

The cache. Numba keys a cached kernel on its own file's text only, so a kernel would keep
running an old copy of a helper from another file. Here every kernel's cache is keyed on
the text of the whole kernel package and of the modules whose constants it bakes in
(``_SOURCES``): any change compiles everything again. It is kept where Numba would keep it
(``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the source); where that cannot be
written (a read-only site-packages, a read-only ``NUMBA_CACHE_DIR``), in a directory of
the user's (``$XDG_CACHE_HOME/fastfinite``, else the temporary directory), said once; and
where nothing can be written, nowhere (each process compiles again), said once too.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path

from numba import njit
from numba.core import config
from numba.core.caching import (
    CompileResultCacheImpl,
    FunctionCache,
    IndexDataCacheFile,
    InTreeCacheLocator,
    UserProvidedCacheLocator,
    UserWideCacheLocator,
)

log = logging.getLogger("fastfinite")

_HERE = Path(__file__).resolve().parent
# the kernels bake constants of these modules into their machine code
_SOURCES = sorted(_HERE.glob("*.py")) + [
    _HERE.parent / "model" / "cast_forms.py",
    _HERE.parent / "model" / "kinds.py",
    _HERE.parent / "model" / "stats.py",
]


def _codegen_as_default() -> bool:
    """Whether numba generates code with its default settings. Only then are the kernels
    read from and written to the cache, which is keyed on the source and the CPU, not on
    these settings (numba/numba#10821): a kernel compiled for a profiler (no inlining, no
    vectors) would be loaded by every later process, 20x slower."""
    return (
        int(config.OPT) == 3
        and not getattr(config.OPT, "is_opt_max", False)
        and not config.DEBUGINFO_DEFAULT
        and not config.ENABLE_PROFILING  # set by numba itself under a profiler it detects
        and bool(config.LOOP_VECTORIZE)
        and not config.SLP_VECTORIZE
        and not config.BOUNDSCHECK
        and not config.EXTEND_VARIABLE_LIFETIMES
    )


def _stamp() -> str:
    h = hashlib.sha256()
    for path in _SOURCES:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


STAMP = _stamp()


def user_cache_dir() -> Path:
    """fastfinite's own cache directory for this user."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fastfinite" / "numba"


class _Stamped:
    """A locator whose freshness is the whole kernel package's text (``STAMP``)."""

    def get_source_stamp(self):
        return STAMP


class _Given(_Stamped, UserProvidedCacheLocator):
    pass


class _Beside(_Stamped, InTreeCacheLocator):
    pass


class _Users(_Stamped, UserWideCacheLocator):
    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = str(user_cache_dir() / self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self


class _Temporary(_Users):
    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        name = f"fastfinite-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
        sub = self.get_suitable_cache_subpath(py_file)
        self._cache_path = os.path.join(tempfile.gettempdir(), name, sub)


class _Impl(CompileResultCacheImpl):
    _locator_classes = [_Given, _Beside, _Users, _Temporary]


@contextlib.contextmanager
def _locked(path: str):
    """An advisory lock on ``path`` (POSIX ``flock``), held for the block; where there is
    none (Windows, a file system refusing it) the block runs unlocked."""
    try:
        import fcntl

        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # closing releases the lock


class _SharedFile(IndexDataCacheFile):
    """Numba's index and data files, safe for processes compiling into one cache at once
    (numba/numba#10128). Numba numbers a function's data files from the index it read, so
    two processes that read the same index both wrote ``f.1.nbc``, each for its own
    signature: the index of one then pointed at the other's machine code, and a later
    process loaded a float32 kernel for float64 (a TypingError at best). Here a data file is
    named by a digest of its key (two processes compiling one signature write the same file,
    two compiling different ones never do), and the index is read, extended and written
    under a lock, so no process drops another's entry."""

    def __init__(self, cache_path, filename_base, source_stamp):
        super().__init__(cache_path, filename_base, source_stamp)
        self._base = filename_base

    def save(self, key, data):
        # the key's text: its pickle numbers numba's types in the order a process made them
        name = f"{self._base}.{hashlib.sha256(repr(key).encode()).hexdigest()[:16]}.nbc"
        self._save_data(name, data)  # before the index names it
        with _locked(self._index_path + ".lock"):
            overloads = self._load_index()
            if overloads.get(key) != name:
                overloads[key] = name
                self._save_index(overloads)


class _Cache(FunctionCache):
    _impl_class = _Impl

    def __init__(self, py_func):
        super().__init__(py_func)
        f = self._cache_file
        self._cache_file = _SharedFile(
            f._cache_path, f._index_name[: -len(".nbi")], f._source_stamp
        )


_said: set[str] = set()


def _say_once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)
        log.warning(message)


def _preferred() -> type:
    return _Given if config.CACHE_DIR else _Beside


def _attach_cache(dispatcher) -> None:
    """Give ``dispatcher`` the package's cache (see the module's docstring)."""
    try:
        cache = _Cache(dispatcher.py_func)
    except RuntimeError:  # no directory can be written
        _say_once(
            "none",
            "fastfinite: no directory for compiled kernels can be written (tried "
            "NUMBA_CACHE_DIR, the package's __pycache__, ~/.cache and the temporary "
            "directory): each process compiles them again",
        )
        return
    chosen = type(cache._impl.locator)
    if chosen is not _preferred() and not config.CACHE_LOCATOR_CLASSES:
        where = config.CACHE_DIR or os.path.join(os.path.dirname(dispatcher.py_func.__code__.co_filename), "__pycache__")  # fmt: skip
        _say_once(
            "moved",
            f"fastfinite: cannot write compiled kernels to {where}; they are kept in "
            f"{os.path.dirname(cache.cache_path)} instead",
        )
    dispatcher._cache = cache


CACHED = _codegen_as_default()


def kernel(fn=None, **options):
    """``numba.njit(nogil=True)`` with the package's cache (when Numba generates code
    with its default settings: ``_codegen_as_default``). Never ``fastmath``: its
    ``nnan``/``ninf`` flags would let LLVM delete the very NaN and inf tests this package
    exists for."""

    def wrap(f):
        d = njit(nogil=True, error_model="numpy", **options)(f)
        if CACHED:
            _attach_cache(d)
        return d

    return wrap(fn) if fn is not None else wrap


def helper(fn=None, **options):
    """A kernel called only by other kernels: ``kernel`` without the wrappers that make a
    function callable from Python (less code to generate)."""
    return kernel(fn, no_cpython_wrapper=True, no_cfunc_wrapper=True, **options)


def cache_directory() -> str | None:
    """Where this process keeps compiled kernels (None: nowhere)."""
    cache = getattr(kernel(_probe), "_cache", None)
    return os.path.dirname(cache.cache_path) if isinstance(cache, _Cache) else None


def _probe():  # pragma: no cover - never called: only located
    return 0
