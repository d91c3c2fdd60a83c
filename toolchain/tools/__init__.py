"""One small class per external tool: each finds itself from config and environment, checks its version
and says how to get it.  Stages and doctor ask these; nothing else looks for tools.

* :class:`~toolchain.tools.ndk.Ndk` -- the Android NDK (revision, layout facts per revision)
* :class:`~toolchain.tools.sdk.AndroidSdk` -- the Android SDK (``android.sdk``, ANDROID_HOME, local.properties)
* :class:`~toolchain.tools.jdk.Jdk` -- a JDK whose version suits a Gradle / Android Gradle Plugin pair
* :class:`~toolchain.tools.programs.CMake`, :class:`~toolchain.tools.programs.Ninja`,
  :class:`~toolchain.tools.programs.CCompiler`, :class:`~toolchain.tools.programs.GitTool`
"""

from .jdk import Jdk, agp_min_java, gradle_java_range
from .ndk import Ndk
from .git import Git
from .programs import Adb, CCompiler, Ccache, CMake, CxxCompiler, GitTool, GradleOnPath, Ninja
from .sdk import AndroidSdk

__all__ = ["Adb", "AndroidSdk", "Git", "CCompiler", "Ccache", "CMake", "CxxCompiler", "GitTool", "GradleOnPath", "Jdk", "Ndk", "Ninja", "agp_min_java", "gradle_java_range"]
