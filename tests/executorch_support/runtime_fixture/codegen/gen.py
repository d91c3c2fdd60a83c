"""Fixture stand-in for ExecuTorch's codegen/gen.py (docs/facts.md E14): run as ``PYTHON -m codegen.gen`` in a build
step, it needs PyYAML and torch's torchgen in that Python, as the real generator does (it imports both at the top)."""

import argparse
import os

import torchgen  # noqa: F401  (ships with torch)
import yaml

parser = argparse.ArgumentParser()
parser.add_argument("--torchgen-dir", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
if not os.path.isdir(args.torchgen_dir):
    raise SystemExit(f"torchgen directory {args.torchgen_dir!r} (from the configure-time probe) does not exist")
kernels = yaml.safe_load("- add.out\n- mul.out\n- convolution.out\n")
os.makedirs(os.path.dirname(args.out), exist_ok=True)
with open(args.out, "w") as f:
    f.write(f"int fixture_registered_kernels(void) {{ return {len(kernels)}; }}\n")
