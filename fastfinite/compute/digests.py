"""Short content digests: the keys of the scan cache's entries."""

from __future__ import annotations

import hashlib
from typing import Any


def digest(*parts: bytes | str) -> bytes:
    """A 16-byte BLAKE2b digest of ``parts`` (each length-prefixed: no two splits collide)."""
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


def content_digest(data: Any) -> bytes:
    """The digest of a buffer's bytes."""
    return hashlib.blake2b(memoryview(data), digest_size=16).digest()
