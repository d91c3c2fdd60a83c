"""The one check of a pushed file (``sha256sum`` on the device against the host's sha256), and the host's digests
of the files (once per deploy).

A pushed file gets its final name only when the device's ``sha256sum`` of it is the sha256 of the local file: the
check guards against accidental damage (a flaky cable or hub, a failing flash chip, a push cut half-way, a local
file changed after convert recorded it).  sha256 is also what the convert manifest records, so one digest serves
both.  A device whose ``sha256sum`` is missing or computes something else is refused before anything is sent.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from toolchain.errors import DeviceError, RecordError, command
from toolchain.fsutil import sha256_file
from toolchain.record_base import Record

log = logging.getLogger(__name__)

HASH_TOOL = "sha256sum"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
HASH_CACHE_NAME = "local-hashes.json"  # in the results directory


def probe_command() -> str:
    """A read-only shell command: the device's sha256sum of empty input (nothing when it has none)."""
    return f"{HASH_TOOL} </dev/null 2>/dev/null"


def has_sha256(probe_output: str) -> bool:
    """Does the output of probe_command show a sha256sum that computes the right digest?"""
    words = probe_output.split()
    return bool(words) and words[0].lower() == EMPTY_SHA256


def no_hash_tool(serial: str) -> DeviceError:
    return DeviceError(
        f"{serial} has no working {HASH_TOOL} (it is missing or computes wrong digests)",
        cause="a pushed file is checked on the device with sha256sum before it gets its final name",
        remedy=f"check `{command('adb', '-s', serial, 'shell', HASH_TOOL, '/system/build.prop')}`; a device without "
               "toybox's or busybox's sha256sum cannot be deployed to",
    )


@dataclass
class HashCache(Record):
    """``local-hashes.json``: this host's digests of the files earlier deploys pushed (a cache, not a record of a run)."""

    files: Dict[str, str]  # LocalHashes' key of a file -> its sha256

    KIND, SCHEMA, REMEDY = "torchdroid.local-hashes", 1, "nothing to do: the next deploy rewrites it"

    def body(self) -> Dict[str, Any]:
        return {"files": self.files}

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "HashCache":
        return cls({k: v for k, v in data["files"].items() if isinstance(v, str) and len(v) == 64})


class LocalHashes:
    """The host's sha256 of local files, computed once per deploy and shared by every device worker.

    A file is keyed by path, size, mtime, ctime and inode, so a file replaced or rewritten (even with its old
    mtime: the ctime changes) is hashed again.  With ``cache`` (a JSON file of this host's digests, see ``load``),
    a file whose key is unchanged since an earlier deploy is not read again (rsync's quick check, with ctime and
    inode).  A wrong cached digest cannot put a wrong file in place: the device checks what arrived against the
    bytes sent.
    """

    def __init__(self, cache: Optional[Path] = None):
        self._lock = threading.Lock()
        self._known: Dict[str, str] = {}
        self._cache_path: Optional[Path] = None
        self._cached: Dict[str, str] = {}
        if cache is not None:
            self.load(cache)

    def load(self, cache: Path) -> None:
        """Use (and on close, update) the digest cache in ``cache``; an unreadable one (or an earlier torchdroid's)
        is ignored, and replaced on close."""
        self._cache_path = Path(cache)
        try:
            self._cached = HashCache.load(self._cache_path).files
        except RecordError:
            self._cached = {}

    @staticmethod
    def _key(path: Path) -> str:
        st = os.stat(path)  # every time: a file changed meanwhile gets another key
        return f"{Path(path).resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}|sha256"

    def lookup(self, path: Path) -> Tuple[str, Optional[str]]:
        """``(key, sha256 or None)``: what is known of the file now, without reading it."""
        key = self._key(path)
        with self._lock:
            return key, self._known.get(key) or self._cached.get(key)

    def store(self, key: str, digest: str) -> None:
        """Remember the sha256 of the file as it was when ``lookup`` gave ``key`` (e.g. hashed while pushed)."""
        with self._lock:
            self._known[key] = digest

    def get(self, path: Path) -> str:
        """The file's sha256 (two workers asking at once may both compute it: harmless)."""
        key, hit = self.lookup(path)
        if hit is None:
            hit = sha256_file(path)
            self.store(key, hit)
        return hit

    def close(self) -> None:
        """Write the cache (when one was loaded) with the digests of this deploy."""
        if self._cache_path is None:
            return
        files = {**self._cached, **self._known}
        files = dict(list(files.items())[-1000:])  # bounded: the newest entries
        try:
            HashCache(files).write(self._cache_path)
        except Exception as e:  # a cache: never a reason to fail a deploy (read-only or full results directory)
            log.debug("could not write %s: %s", self._cache_path, e)

    def __enter__(self) -> "LocalHashes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
