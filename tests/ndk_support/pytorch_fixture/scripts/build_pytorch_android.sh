#!/bin/bash
# Test fixture with the interface of PyTorch's scripts/build_pytorch_android.sh: ABIs as arguments,
# needs ANDROID_HOME (an SDK) and ANDROID_NDK, leaves the AAR under
# android/pytorch_android/build/outputs/aar/.  It packs the fixture's install tree into a zip.
set -e
PYTORCH_DIR="$(cd $(dirname $0)/..; pwd -P)"
if [ -z "$ANDROID_HOME" ] || [ ! -d "$ANDROID_HOME/platforms" ]; then
  echo "ANDROID_HOME not set or has no platforms/; please set it to the Android SDK directory"
  exit 1
fi
ABI="${1:-arm64-v8a}"
OUT="$PYTORCH_DIR/android/pytorch_android/build/outputs/aar"
mkdir -p "$OUT"
${PYTHON:-python3} - "$OUT/pytorch_android-release.aar" "$ABI" "${AAR_JNI_LIB:-}" <<'PY'
import sys, zipfile
aar, abi, lib = sys.argv[1:4]
with zipfile.ZipFile(aar, "w") as z:
    z.writestr("AndroidManifest.xml", '<manifest package="org.pytorch"/>\n')
    z.writestr(f"jni/{abi}/libpytorch_jni.so", open(lib, "rb").read() if lib else b"fixture")
PY
echo "AAR: $OUT/pytorch_android-release.aar"
