// Loads a HIP plugin with dlopen(RTLD_LOCAL) and runs it: HIP and ROCr then live outside the
// global symbol scope, where an LD_PRELOAD interposer's RTLD_NEXT cannot see them.
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_host PLUGIN.so\n");
        return 2;
    }
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL plugin.load: %s\nRESULT: FAIL\n", dlerror());
        return 1;
    }
    int (*run)(void) = (int (*)(void))dlsym(h, "plugin_run");
    int rc = run ? run() : -1;
    if (rc == 0) {
        printf("PASS plugin.vadd\nRESULT: PASS\n");
        return 0;
    }
    printf("FAIL plugin.vadd: plugin_run returned %d\nRESULT: FAIL\n", rc);
    return 1;
}
