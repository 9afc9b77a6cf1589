"""Short content digests: the keys of the scan cache's entries, and the keys of the merge
tree's subtrees (``node_key``, ``tree_keys``) that a scan with a cache recalls and keeps."""

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


def node_key(left: bytes, right: bytes) -> bytes:
    """The key of a subtree from its halves' keys."""
    return digest("node", left, right)


def tree_keys(leaves: list[bytes]) -> list[list[bytes]]:
    """Keys of every aligned subtree over the leaves' keys (the regions'): ``levels[j][m]``
    covers leaves ``m*2**j`` to ``(m+1)*2**j``; the keys ``summary.PairwiseMerger`` gives
    the subtrees it forms."""
    levels = [leaves]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append([node_key(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)])
    return levels
