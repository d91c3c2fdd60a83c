#!/bin/sh
# The virtual phones' arm64 CPU: the binfmt_misc interpreter (entry "torchdroid-aarch64", registered by
# `./run test`) for AArch64 ELF programs.  The kernel runs it as `aarch64_cpu.sh PROGRAM ARGS...` for every
# AArch64 program exec'd on this machine.  Inside a virtual phone whose CPU is arm64 (VDEV_CPU_ABI=arm64-v8a, set
# by tests/virtual_device/device.py from ro.product.cpu.abi) the program runs under qemu-user with Debian's
# aarch64 libraries; anywhere else it is refused as the kernel refuses a foreign ELF (exit 126).
program="$1"
shift
if [ "${VDEV_CPU_ABI:-}" = "arm64-v8a" ]; then
  exec qemu-aarch64 -L /usr/aarch64-linux-gnu "$program" "$@"
fi
echo "$program: cannot execute binary file: Exec format error" >&2
exit 126
