/* FIXTURE_NDK_API_LEVEL comes from the fixture NDK toolchain's compile flags (fixed at project(), docs/facts.md F34). */
#ifndef FIXTURE_NDK_API_LEVEL
#error "built without the (fixture) NDK toolchain file: no API level"
#endif
/* The note the NDK's crtbegin puts into every Android executable: owner "Android",
 * type 1, desc = API level (u32), NDK version[64], NDK build number[64]. */
#include <stdint.h>
struct android_ident_note {
  uint32_t namesz, descsz, type;
  char name[8];
  uint32_t api_level;
  char ndk_version[64];
  char ndk_build_number[64];
};
__attribute__((section(".note.android.ident"), aligned(4), used))
static const struct android_ident_note fixture_android_note = {
  8, 4 + 64 + 64, 1, "Android", FIXTURE_NDK_API_LEVEL, "fixture", "0"};
