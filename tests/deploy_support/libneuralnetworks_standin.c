/* Stand-in for a phone's libneuralnetworks.so: the NDK device API (NeuralNetworks.h, API 29; docs/facts.md NH9)
 * over a device list taken from the environment, for the virtual phones (LD_LIBRARY_PATH points here).
 *
 *   SBT_NNAPI_DEVICES="qti-dsp:4:30:1.2,qti-gpu:3:30"   name:type code:feature level[:version], comma-separated
 *   SBT_NNAPI_LEVEL=30                                  nnapi-reference's feature level (the runtime's; default 29)
 *   SBT_NNAPI_FAIL=1                                    ANeuralNetworks_getDeviceCount fails (returns 5)
 *
 * As the real runtime does (Manager.cpp registers CpuDevice after the drivers), nnapi-reference, type CPU (2), is
 * always the last device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ANeuralNetworksDevice {
    char name[64];
    char version[32];
    int32_t type;
    int64_t level;
} ANeuralNetworksDevice;

static ANeuralNetworksDevice devices[16];
static uint32_t count = 0;
static int loaded = 0;

static void add(const char *name, int32_t type, int64_t level, const char *version) {
    if (count >= 16) return;
    ANeuralNetworksDevice *d = &devices[count++];
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->version, sizeof d->version, "%s", version);
    d->type = type;
    d->level = level;
}

static void load(void) {
    if (loaded) return;
    loaded = 1;
    const char *spec = getenv("SBT_NNAPI_DEVICES");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    for (char *item = strtok(buf, ","); item; item = strtok(NULL, ",")) {
        char name[64] = "", version[32] = "1.0";
        int type = 0;
        long long level = 0;
        if (sscanf(item, "%63[^:]:%d:%lld:%31s", name, &type, &level, version) >= 3) add(name, type, level, version);
    }
    const char *ref = getenv("SBT_NNAPI_LEVEL");
    add("nnapi-reference", 2, ref ? atoll(ref) : 29, "1.0");
}

int ANeuralNetworks_getDeviceCount(uint32_t *n) {
    if (getenv("SBT_NNAPI_FAIL")) return 5;
    load();
    *n = count;
    return 0;
}

int ANeuralNetworks_getDevice(uint32_t i, ANeuralNetworksDevice **d) {
    load();
    if (i >= count) return 4; /* ANEURALNETWORKS_BAD_DATA */
    *d = &devices[i];
    return 0;
}

int ANeuralNetworksDevice_getName(const ANeuralNetworksDevice *d, const char **name) { *name = d->name; return 0; }
int ANeuralNetworksDevice_getType(const ANeuralNetworksDevice *d, int32_t *type) { *type = d->type; return 0; }
int ANeuralNetworksDevice_getFeatureLevel(const ANeuralNetworksDevice *d, int64_t *level) { *level = d->level; return 0; }
int ANeuralNetworksDevice_getVersion(const ANeuralNetworksDevice *d, const char **v) { *v = d->version; return 0; }
