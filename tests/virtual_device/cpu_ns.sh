#!/bin/sh
# One shell command of a virtual phone, run by device.py as
#   unshare --user --map-root-user --mount /bin/sh cpu_ns.sh ABI COMMAND ARGS...
# In the user and mount namespaces unshare made, a binfmt_misc of this command's own (Linux 6.7+) decides what the
# phone's CPU runs: on an arm64-v8a phone AArch64 ELF programs go to aarch64_cpu.sh (qemu-user); on any other phone
# nothing is registered, so the kernel refuses them as a foreign ELF ("Exec format error").  Nothing outside sees
# the entry: no machine-wide registration, and two checkouts never replace each other's.
abi="$1"
shift
cpu="$(dirname "$0")/aarch64_cpu.sh"
dir=/proc/sys/fs/binfmt_misc
mount -t binfmt_misc binfmt_misc "$dir" || { echo "virtual phone: cannot mount a private binfmt_misc" >&2; exit 125; }
if [ "$abi" = "arm64-v8a" ]; then
  # binfmt_misc reads the \x escapes itself; the mask ignores the ELF ABI version and allows ET_EXEC and ET_DYN
  printf '%s\n' ":torchdroid-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:$cpu:" \
    > "$dir/register" || { echo "virtual phone: cannot register its arm64 CPU" >&2; exit 125; }
fi
exec "$@"
