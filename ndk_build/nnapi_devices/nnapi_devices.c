/* torchdroid_nnapi_devices: the NNAPI devices (drivers) a phone offers, from the NDK's device API (API 29).
 *
 * The library is opened at run time (dlopen), so one binary runs on every phone: below Android 10, or where
 * libneuralnetworks.so lacks the device API, it says so instead of failing to load.  Output, one line each,
 * tab-separated (deploy/nnapi_log.py reads it):
 *
 *   devices <count>
 *   device  <index> <name> <type code> <feature level> <version>
 *   unavailable: <reason>           (exit 2: no library, 3: no device API, 4: a call failed)
 *
 * The function names, signatures and codes are those of NeuralNetworks.h (docs/facts.md NH9).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef struct Device Device; /* ANeuralNetworksDevice, opaque */
typedef int (*CountFn)(uint32_t *);
typedef int (*DeviceFn)(uint32_t, Device **);
typedef int (*TextFn)(const Device *, const char **);
typedef int (*TypeFn)(const Device *, int32_t *);
typedef int (*LevelFn)(const Device *, int64_t *);

struct Api {
    CountFn count;
    DeviceFn device;
    TextFn name;
    TypeFn type;
    LevelFn level;
    TextFn version;
};

static int load(void *lib, struct Api *api) {
    api->count = (CountFn)dlsym(lib, "ANeuralNetworks_getDeviceCount");
    api->device = (DeviceFn)dlsym(lib, "ANeuralNetworks_getDevice");
    api->name = (TextFn)dlsym(lib, "ANeuralNetworksDevice_getName");
    api->type = (TypeFn)dlsym(lib, "ANeuralNetworksDevice_getType");
    api->level = (LevelFn)dlsym(lib, "ANeuralNetworksDevice_getFeatureLevel");
    api->version = (TextFn)dlsym(lib, "ANeuralNetworksDevice_getVersion");
    return api->count && api->device && api->name && api->type && api->level && api->version;
}

static int print_device(const struct Api *api, uint32_t i) {
    Device *dev = NULL;
    const char *name = NULL, *version = NULL;
    int32_t type = 0;
    int64_t level = 0;
    int rc = api->device(i, &dev);
    if (rc == 0) rc = api->name(dev, &name);
    if (rc == 0) rc = api->type(dev, &type);
    if (rc == 0) rc = api->level(dev, &level);
    if (rc == 0) rc = api->version(dev, &version);
    if (rc != 0 || name == NULL) {
        printf("unavailable: device %u: the NNAPI call returned %d\n", i, rc);
        return 0;
    }
    printf("device\t%u\t%s\t%d\t%lld\t%s\n", i, name, (int)type, (long long)level, version ? version : "");
    return 1;
}

int main(void) {
    void *lib = dlopen("libneuralnetworks.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        printf("unavailable: libneuralnetworks.so does not load: %s\n", why ? why : "?");
        return 2;
    }
    struct Api api;
    if (!load(lib, &api)) {
        printf("unavailable: libneuralnetworks.so has no device API (ANeuralNetworks_getDeviceCount needs "
               "Android 10, API 29)\n");
        return 3;
    }
    uint32_t n = 0;
    int rc = api.count(&n);
    if (rc != 0) {
        printf("unavailable: ANeuralNetworks_getDeviceCount returned %d\n", rc);
        return 4;
    }
    printf("devices\t%u\n", n);
    for (uint32_t i = 0; i < n; i++) {
        if (!print_device(&api, i)) return 4;
    }
    fflush(stdout);
    return 0;
}
