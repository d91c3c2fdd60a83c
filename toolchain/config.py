"""Resolve CLI > config > default, and the project's config defaults (declared once)."""

from __future__ import annotations

import os
from typing import Any, Mapping

# Every config key with its default.  tasks.py hands this to ``ns.configure`` so
# invoke.yaml and INVOKE_* variables can override any of it.
DEFAULTS: dict = {
    "build_dir": "build",
    "all": {"weights": "auto"},  # auto: pretrained when they can be had, else random (announced and recorded)
    "debug": False,
    "convert": {
        "out": "build/models",
        "model": "mobilenet_v2",
        "quant": ["none", "core", "full"],
        "weights": "pretrained",
        "calibration": None,  # a directory of images; None: the built-in synthetic set
        "calibration_count": 32,
        "seed": 0,
        "format": "torchscript",  # torchscript | lite, plus executorch for .pte programs (comma list)
        "executorch_delegates": ["xnnpack", "portable", "vulkan"],
    },
    "bench": {
        "warmup": 5,
        "iter": 50,
        "threads": 1,
        "out": "build/bench",
    },
    "pytorch": {
        "lane": "current",
        "commit": None,
        "repo_url": None,
        "source_dir": None,  # None: <build_dir>/src/pytorch-<sha12>, one checkout per commit
        "python": None,  # host Python for the build scripts; None: the one running torchdroid
        "git_jobs": 4,  # submodules fetched in parallel
    },
    "ndk": {"path": None},
    "android": {"abi": "arm64-v8a", "api_level": 29, "max_jobs": None, "sdk": None, "java_home": None},
    "app": {
        "out": "build/app",
        "name": "torchdroid demo",
        "application_id": "org.torchdroid.demo",
        "abi_filters": ["arm64-v8a"],
        "min_sdk": 21,
        "target_sdk": None,  # None: the lane's compileSdk (34 on the current lane)
        "pytorch_android": None,
        "model": "quant_full",
        "models": None,  # None: convert.out
        "aar": None,  # a local pytorch_android AAR (e.g. from `invoke build-android --aar`)
        "gradle_timeout": 3600,
    },
    "deploy": {
        "adb_host": None,  # None: ANDROID_ADB_SERVER_ADDRESS or 127.0.0.1 (adb's -H)
        "adb_port": None,  # None: ANDROID_ADB_SERVER_PORT or 5037 (adb's -P)
        "servers": [],  # HOST:PORT of every adb server to deploy through; [] = the one above
        "device_dir": "/data/local/tmp/torchdroid",
        "warmup": 5,
        "iter": 200,
        "repeat": 3,
        "threads": 1,
        "results": "build/results",
        # added by the deploy stage
        "project": None,  # None: the name of the current directory (one device directory per project)
        "serials": [],  # [] = ANDROID_SERIAL, else every connected device
        "variants": [],  # [] = every variant in the manifest
        "build_info": None,  # None: <build_dir>/android/<android.abi>/build-info.json
        "binary": None,  # a speed_benchmark_torch instead of the build-info's
        "app_dir": None,  # None: app.out (where torchdroid-app.json is)
        "apk": None,
        "install": True,
        "bench": True,
        "app_bench": True,
        "caching_allocator": False,  # --use_caching_allocator=true for CPU models
        "bundled_input": 0,  # --use_bundled_input=N; -1: --input_dims/--input_type from the manifest
        "timeout": 120,  # seconds per adb call
        "bench_timeout": 600,  # seconds per benchmark run
        "app_wait": 60,  # seconds for the app's first progress line (start + model load); later lines scale with iter
        "cooldown": 0,  # seconds between models (a hot phone throttles)
        "gatord": None,  # path to Arm's gatord: run the benchmarks under `gatord --app`
        "allow_mismatch": False,
        "report_source": "binary",  # binary | app
    },
    "verify": {
        "float_atol": 1e-4,
        "float_rtol": 1e-5,  # plus this fraction of the largest reference output magnitude
        "max_lsb": 1,  # per NNAPI operation on the CPU model's values, under nnapi rounding (qnnpack: 0, see docs/host-nnapi.md)
        "min_top1_agreement": 0.75,
        "min_top5_agreement": 0.8,
        "rounding": "qnnpack",  # quantized kernels: qnnpack (match the CPU model) | nnapi (what a conformant device computes)
        "random_inputs": 3,  # besides the bundled inputs
        "seed": 0,
        "layerwise": "auto",  # auto/always: compare every operation of the shipped model | never: end to end only
        "after_convert": "warn",  # after `invoke convert`: warn (print a failed check) | fail (exit 8) | off
        "out": None,  # default: <models>/verify.json
        "cache": None,  # where the host libneuralnetworks.so is built; default ~/.cache/torchdroid/host-nnapi
    },
}


def pick(cli: Any, config: Mapping, key: str, default: Any = None) -> Any:
    """CLI value if given, else ``config[key]`` (dotted keys allowed), else ``default``."""
    if cli is not None and cli != [] and cli != ():
        return cli
    node: Any = config
    for part in key.split("."):
        try:
            node = node[part]
        except (KeyError, TypeError, AttributeError):
            return default
    return default if node is None else node


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")
