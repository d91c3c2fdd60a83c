#!/usr/bin/env python3
"""build-android speed and fetch-size ratios, measured in one run against the local fixture.

* no-op rebuild time / cold build time (cold = fetch + configure + build into an empty build dir);
* bytes fetched for the pinned commit (shallow, submodules shallow) / bytes of a full recursive clone
  of the same fixture repository (superproject and submodule object stores).

Usage: python benchmarks/bench_build_android.py [--bulk-bytes N] [--history N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ndk_build import BuildSettings, build_android  # noqa: E402
from tests.ndk_support import git_test_env, make_fake_ndk, make_fake_pytorch  # noqa: E402
from toolchain.runner import run  # noqa: E402


def object_bytes(checkout: Path) -> int:
    """Bytes in the git object stores of a checkout and its submodules."""
    total = 0
    for store in [checkout / ".git" / "objects", *(checkout / ".git" / "modules").glob("**/objects")]:
        for p in store.rglob("*"):
            if p.is_file():
                total += p.stat().st_size
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bulk-bytes", type=int, default=1_000_000, help="size of the blob each older commit rewrites")
    ap.add_argument("--history", type=int, default=4, help="older commits before the pinned one")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args()
    os.environ.update(git_test_env())
    with tempfile.TemporaryDirectory(prefix="bench-build-android-") as tmp:
        tmp = Path(tmp)
        os.environ["CCACHE_DIR"] = str(tmp / "ccache")  # a cold build is cold: no compiler cache from earlier runs
        remote = make_fake_pytorch(tmp / "remote", bulk_bytes=args.bulk_bytes, extra_commits=args.history)
        ndk = make_fake_ndk(tmp / "ndk")
        settings = BuildSettings(build_dir=tmp / "build", commit=remote.pinned, repo_url=remote.url, ndk=str(ndk),
                                 abi="x86_64", api_level=29, max_jobs=2, env={"PATH": os.environ["PATH"]})
        t0 = time.monotonic()
        cold = build_android(settings)
        cold_s = time.monotonic() - t0
        t0 = time.monotonic()
        noop = build_android(settings)
        noop_s = time.monotonic() - t0
        assert noop.reused and not cold.reused
        fetched = object_bytes(Path(cold.info["source_dir"]))
        full = tmp / "full"
        run(["git", "clone", "-q", "--no-local", "--recurse-submodules", remote.url, str(full)], what="full clone")
        full_bytes = object_bytes(full)
    result = {
        "cold_build_s": round(cold_s, 3),
        "noop_rebuild_s": round(noop_s, 3),
        "noop_over_cold": round(noop_s / cold_s, 4),
        "pinned_fetch_bytes": fetched,
        "full_clone_bytes": full_bytes,
        "pinned_over_full": round(fetched / full_bytes, 4),
        "fixture": {"bulk_bytes": args.bulk_bytes, "history": args.history},
    }
    print(f"no-op rebuild {noop_s:.3f}s / cold build {cold_s:.3f}s = {result['noop_over_cold']:.4f}")
    print(f"pinned-commit fetch {fetched} B / full clone {full_bytes} B = {result['pinned_over_full']:.4f}")
    print(json.dumps(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
