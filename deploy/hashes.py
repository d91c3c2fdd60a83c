"""Which hash the device checks pushed files with, and the host's digests of the files (once per deploy).

Why a fast hash is enough here: the on-device check guards against *accidental* corruption (a flaky
cable or hub, a failing flash chip, a push cut half-way, a local file changed after it was recorded),
not against an attacker: whoever can alter the bytes on the adb link can run any shell command on the
phone anyway.  For accidental damage every one of MD5, SHA-1 and SHA-256 misses a change with
probability ~2^-128 or less; their known weaknesses are *constructed* collisions, which need an
adversary.  So the cheapest of them that the device has and that computes correctly is used (a CRC-32
such as `cksum` is not: 2^-32 per file is too weak for tens of MB per model, every day).

Order, cheapest first, for a phone without crypto libraries (toybox's built-in C code): SHA-1 and MD5
cost about the same (84 MB: 0.10 s vs 0.11 s user time with coreutils here), SHA-1 is the one ARMv8
crypto extensions accelerate when toybox is built with libcrypto, and on the host (which hashes each
file once per deploy, see LocalHashes) SHA-1 is 2.5x cheaper than MD5 (SHA-NI).  SHA-256 is last: in
toybox without libcrypto it does not exist at all (toys/lsb/md5sum.c, see docs/facts.md).

Whatever the device checks with, the host also computes the file's sha256: that is what the convert
manifest records and what the hash index on the device stores.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Dict, Optional, Tuple

from toolchain.errors import DeviceError, command
from toolchain.fsutil import atomic_write_text

log = logging.getLogger(__name__)

# (device command, hashlib name), cheapest first
HASH_TOOLS: Tuple[Tuple[str, str], ...] = (("sha1sum", "sha1"), ("md5sum", "md5"), ("sha256sum", "sha256"))
TOOL_OF = {algo: tool for tool, algo in HASH_TOOLS}
HEX_LEN = {algo: hashlib.new(algo).digest_size * 2 for _tool, algo in HASH_TOOLS}
_READ = 1 << 20
HASH_CACHE_NAME = "local-hashes.json"  # in the results directory


def probe_command() -> str:
    """A read-only shell command that hashes empty input with the candidate tools, cheapest first, one line
    per tool, and stops at the first that prints the right digest (one process on most devices)."""
    tools = " ".join(tool for tool, _algo in HASH_TOOLS)
    right = "|".join(f'"{tool} {hashlib.new(algo, b"").hexdigest()}"*' for tool, algo in HASH_TOOLS)
    return (f'for h in {tools}; do r="$h $($h </dev/null 2>/dev/null)"; echo "$r"; '
            f'case "$r" in {right}) break;; esac; done')


def pick_algo(probe_output: str) -> Optional[str]:
    """The cheapest tool whose digest of empty input is the right one (present AND computing that hash)."""
    seen: Dict[str, str] = {}
    for line in probe_output.splitlines():
        words = line.split()
        if len(words) >= 2:
            seen[words[0]] = words[1].lower()
    for tool, algo in HASH_TOOLS:
        if seen.get(tool) == hashlib.new(algo, b"").hexdigest():
            return algo
    return None


def no_hash_tool(serial: str) -> DeviceError:
    tools = ", ".join(tool for tool, _algo in HASH_TOOLS)
    return DeviceError(
        f"{serial} has none of {tools} (or they compute wrong digests)",
        cause="pushed files are checked on the device before they get their final name, and that needs one of them",
        remedy=f"check `{command('adb', '-s', serial, 'shell', 'sha1sum', '/system/build.prop')}`; a device without toybox or busybox "
               "hash tools cannot be deployed to",
    )


def file_digests(path: Path, algo: str) -> Tuple[str, str]:
    """``(sha256, <algo> digest)`` of a file in one read."""
    sha = hashlib.sha256()
    other = sha if algo == "sha256" else hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_READ), b""):
            sha.update(block)
            if other is not sha:
                other.update(block)
    return sha.hexdigest(), other.hexdigest()


class LocalHashes:
    """The host's digests of local files, computed once per deploy and shared by every device worker.

    A file is keyed by path, size, mtime, ctime and inode, so a file replaced or rewritten (even with its old
    mtime: the ctime changes) is hashed again.  With ``cache`` (a JSON file of this host's digests, see ``load``),
    a file whose key is unchanged since an earlier deploy is not read again (rsync's quick check, with ctime and
    inode).  A wrong cached digest cannot put a wrong file in place: the device checks what arrived against the
    bytes sent.
    """

    def __init__(self, cache: Optional[Path] = None):
        self._lock = threading.Lock()
        self._known: Dict[str, Tuple[str, str]] = {}
        self._cache_path: Optional[Path] = None
        self._cached: Dict[str, list] = {}
        if cache is not None:
            self.load(cache)

    def load(self, cache: Path) -> None:
        """Use (and on close, update) the digest cache in ``cache``; an unreadable one is ignored."""
        self._cache_path = Path(cache)
        try:
            data = json.loads(self._cache_path.read_text())
            self._cached = {k: v for k, v in data.get("files", {}).items() if isinstance(v, list) and len(v) == 2}
        except (OSError, ValueError, AttributeError):
            self._cached = {}

    @staticmethod
    def _key(path: Path, algo: str) -> str:
        st = os.stat(path)  # every time: a file changed meanwhile gets another key
        return f"{Path(path).resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}|{algo}"

    def lookup(self, path: Path, algo: str) -> Tuple[str, Optional[Tuple[str, str]]]:
        """``(key, (sha256, <algo> digest) or None)``: what is known of the file now, without reading it."""
        key = self._key(path, algo)
        with self._lock:
            hit = self._known.get(key) or self._cached.get(key)
        return key, (hit[0], hit[1]) if hit else None

    def store(self, key: str, digests: Tuple[str, str]) -> None:
        """Remember the digests of the file as it was when ``lookup`` gave ``key`` (e.g. hashed while pushed)."""
        with self._lock:
            self._known[key] = digests

    def get(self, path: Path, algo: str) -> Tuple[str, str]:
        """``(sha256, <algo> digest)`` of the file (two workers asking at once may both compute it: harmless)."""
        key, hit = self.lookup(path, algo)
        if hit is None:
            hit = file_digests(Path(path), algo)
            self.store(key, hit)
        return hit

    def close(self) -> None:
        """Write the cache (when one was loaded) with the digests of this deploy."""
        if self._cache_path is None:
            return
        files = {**self._cached, **{k: list(v) for k, v in self._known.items()}}
        files = dict(list(files.items())[-1000:])  # bounded: the newest entries
        try:
            atomic_write_text(self._cache_path, json.dumps({"kind": "torchdroid.local-hashes", "files": files}))
        except Exception as e:  # a cache: never a reason to fail a deploy (read-only or full results directory)
            log.debug("could not write %s: %s", self._cache_path, e)

    def __enter__(self) -> "LocalHashes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
