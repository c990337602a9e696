/* NVTX injection library: times a task's own benchmark region (an NVTX range, "bench_region" by
 * default) the way CUDABeaver's reference timings name it ("region/bench_region"), without a
 * profiler. NVTX v3 is header-only: on the first NVTX call a program loads the library named by
 * NVTX_INJECTION64_PATH and calls its InitializeInjectionNvtx2, which here takes over the range
 * push/pop entries of the core function table.
 *
 * At the push and at the pop of a matching range the current CUDA context is synchronised (driver
 * API, looked up at run time, so the library needs no CUDA at build time): work queued before the
 * region stays out of it, work queued inside it is counted. Each finished region appends
 * "<name> <milliseconds>" to the file named by HERCULES_NVTX_OUT.
 *
 * Build: cc -shared -fPIC -O2 -I<cuda>/include nvtx_region_timer.c -o libhercules_nvtx.so -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nvtx3/nvToolsExt.h>

#define MAX_DEPTH 64

typedef int (*ctx_sync_fn)(void);

static ctx_sync_fn ctx_sync = NULL;
static const char *region_name = "bench_region";
static const char *out_path = NULL;
static int depth = 0;
static int timed[MAX_DEPTH];      /* whether the range at this depth is a timed region */
static double started[MAX_DEPTH]; /* its start, in ms */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sync_device(void) {
    if (ctx_sync) ctx_sync(); /* an error (no context yet) leaves nothing to wait for */
}

static int push(const char *message) {
    int d = depth++;
    if (d < MAX_DEPTH) {
        timed[d] = message != NULL && strcmp(message, region_name) == 0;
        if (timed[d]) {
            sync_device();
            started[d] = now_ms();
        }
    }
    return d;
}

static int NVTX_API push_a(const char *message) { return push(message); }

static int NVTX_API push_ex(const nvtxEventAttributes_t *attr) {
    const char *message = NULL;
    if (attr && attr->messageType == NVTX_MESSAGE_TYPE_ASCII) message = attr->message.ascii;
    return push(message);
}

static int NVTX_API pop(void) {
    if (depth == 0) return -1;
    int d = --depth;
    if (d < MAX_DEPTH && timed[d]) {
        sync_device();
        double ms = now_ms() - started[d];
        FILE *f = out_path ? fopen(out_path, "a") : NULL;
        if (f) {
            fprintf(f, "%s %.6f\n", region_name, ms);
            fclose(f);
        }
    }
    return d;
}

int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    const NvtxExportTableCallbacks *callbacks =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!callbacks || !callbacks->GetModuleFunctionTable ||
        !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table ||
        size <= NVTX_CBID_CORE_RangePop)
        return 0;
    out_path = getenv("HERCULES_NVTX_OUT");
    if (getenv("HERCULES_NVTX_REGION")) region_name = getenv("HERCULES_NVTX_REGION");
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (cuda) ctx_sync = (ctx_sync_fn)dlsym(cuda, "cuCtxSynchronize");
    *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)push_a;
    *table[NVTX_CBID_CORE_RangePushEx] = (NvtxFunctionPointer)push_ex;
    *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)pop;
    return 1;
}
