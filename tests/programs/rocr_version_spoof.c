// rocr_version_spoof: an LD_PRELOAD library for the tests. It makes ROCr's build identifier
// (hsa_system_get_info(HSA_AMD_SYSTEM_INFO_BUILD_VERSION)) read $XHSA_TEST_ROCR_BUILD_ID, the way
// another ROCr release would report itself; every other attribute, and every call while the
// variable is unset, goes to ROCr. Preloaded after libxhsa.so, it is the definition libxhsa's
// RTLD_NEXT lookup finds.
// Build: cc -shared -fPIC -o librocr_version_spoof.so rocr_version_spoof.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include <hsa/hsa.h>

hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void* value) {
    static hsa_status_t (*real)(hsa_system_info_t, void*);
    if (!real) real = (hsa_status_t(*)(hsa_system_info_t, void*))dlsym(RTLD_NEXT, "hsa_system_get_info");
    const char* id = getenv("XHSA_TEST_ROCR_BUILD_ID");
    if (attribute == HSA_AMD_SYSTEM_INFO_BUILD_VERSION && id && value) {
        *(const char**)value = id;
        return HSA_STATUS_SUCCESS;
    }
    return real ? real(attribute, value) : HSA_STATUS_ERROR;
}
