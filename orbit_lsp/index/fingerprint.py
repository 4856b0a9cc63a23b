"""The content hash of a source file, as the graph stores it (``File.hash``).

Its own module so that readers (the command line's freshness check) compare a file on disk
with the graph without importing the parsers.
"""

from __future__ import annotations

import hashlib


def content_hash(data: bytes) -> str:
    """24 hex digits: BLAKE2b (12 bytes) of the file's raw bytes."""
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def content_digest(data: bytes) -> bytes:
    """16 bytes: BLAKE2b of ``data``, the key of caches kept per file content (parsed trees,
    test-file scans, answers read from a file)."""
    return hashlib.blake2b(data, digest_size=16).digest()
