#!/bin/bash
# Test fixture with the shape of PyTorch's scripts/build_pytorch_android.sh (v2.8.x): it sources
# android/common.sh, which runs scripts/build_android.sh per ABI with BUILD_ROOT=$BUILD_ROOT/build_android_<abi>
# and no way to pass CMake arguments, then runs android/gradlew (which checks the JDK like Gradle 6.8.3).
set -eux
PYTORCH_DIR="$(cd $(dirname $0)/..; pwd -P)"
PYTORCH_ANDROID_DIR=$PYTORCH_DIR/android
source $PYTORCH_ANDROID_DIR/common.sh
check_android_sdk
check_gradle
parse_abis_list $@
build_android
$GRADLE_PATH -PABI_FILTERS=$ABIS_LIST -p $PYTORCH_ANDROID_DIR clean assembleRelease
