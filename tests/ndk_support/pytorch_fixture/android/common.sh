#!/bin/bash
# Test fixture with the interface of PyTorch's android/common.sh (v2.8.x).
set -eux
if [ -z "$PYTORCH_DIR" ]; then
  echo "PYTORCH_DIR not set!"
  exit 1
fi
check_android_sdk() {
  if [ -z "$ANDROID_HOME" ]; then
    echo "ANDROID_HOME not set; please set it to Android sdk directory"
    exit 1
  fi
  if [ ! -d "$ANDROID_HOME" ]; then
    echo "ANDROID_HOME not a directory; did you install it under $ANDROID_HOME?"
    exit 1
  fi
}
check_gradle() {
  GRADLE_PATH=$PYTORCH_DIR/android/gradlew
}
parse_abis_list() {
  ABIS_LIST="armeabi-v7a,arm64-v8a,x86,x86_64"
  if [ $# -gt 0 ]; then
    ABIS_LIST=$1
  fi
}
build_android() {
  BUILD_ROOT="${BUILD_ROOT:-$PYTORCH_DIR}"
  LIB_DIR="$PYTORCH_DIR/android/pytorch_android/src/main/jniLibs"
  rm -rf "$LIB_DIR" && mkdir -p "$LIB_DIR"
  for abi in $(echo "$ABIS_LIST" | tr ',' '\n'); do
    ANDROID_BUILD_ROOT="$BUILD_ROOT/build_android_$abi"
    ANDROID_ABI="$abi" BUILD_ROOT="$ANDROID_BUILD_ROOT" "$PYTORCH_DIR/scripts/build_android.sh" \
      -DANDROID_CCACHE="$(which ccache || true)"
    ln -s "$ANDROID_BUILD_ROOT/install/lib" "$LIB_DIR/$abi"
  done
}
