// ROCm 6.4 libraries on the emulated GPU: each subcommand calls one library the way an
// application does and checks that every status is a success (results need kernel execution,
// which the emulator does not have yet). Built with the ROCm 6.4 root's hipcc:
//   hipcc --offload-arch=gfx90a rocm_libs.cpp -lhipblas -lrocblas -lMIOpen -lrocfft -lhipsparse -lhiprand
// Usage: rocm_libs SUBCOMMAND...  with sgemm (hipBLAS then rocBLAS), conv (MIOpen find +
// forward), fft (rocFFT), spmv (hipSPARSE), rand (hipRAND), all.
#include <hip/hip_runtime.h>
#include <hipblas/hipblas.h>
#include <hiprand/hiprand.h>
#include <hipsparse/hipsparse.h>
#include <miopen/miopen.h>
#include <rocblas/rocblas.h>
#include <rocfft/rocfft.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static int failures = 0;

#define CHECK(name, expr, ok)                                                           \
    do {                                                                                \
        auto _s = (expr);                                                               \
        if (_s == (ok)) {                                                               \
            printf("PASS %s\n", name);                                                  \
        } else {                                                                        \
            printf("FAIL %s: status %d\n", name, (int)_s);                              \
            failures++;                                                                 \
        }                                                                               \
    } while (0)

static float* dev_floats(size_t n, float v) {
    float* p = nullptr;
    if (hipMalloc(&p, n * sizeof(float)) != hipSuccess) return nullptr;
    std::vector<float> h(n, v);
    if (hipMemcpy(p, h.data(), n * sizeof(float), hipMemcpyHostToDevice) != hipSuccess) return nullptr;
    return p;
}

static void sgemm() {
    const int n = 256;
    float *a = dev_floats(n * n, 1.0f), *b = dev_floats(n * n, 2.0f), *c = dev_floats(n * n, 0.0f);
    const float alpha = 1.0f, beta = 0.0f;
    hipblasHandle_t hb;
    CHECK("hipblas.create", hipblasCreate(&hb), HIPBLAS_STATUS_SUCCESS);
    CHECK("hipblas.sgemm", hipblasSgemm(hb, HIPBLAS_OP_N, HIPBLAS_OP_N, n, n, n, &alpha, a, n, b, n, &beta, c, n), HIPBLAS_STATUS_SUCCESS);
    CHECK("hipblas.sync", hipDeviceSynchronize(), hipSuccess);
    CHECK("hipblas.destroy", hipblasDestroy(hb), HIPBLAS_STATUS_SUCCESS);
    rocblas_handle rb;
    CHECK("rocblas.create", rocblas_create_handle(&rb), rocblas_status_success);
    CHECK("rocblas.sgemm", rocblas_sgemm(rb, rocblas_operation_none, rocblas_operation_transpose, n, n, n, &alpha, a, n, b, n, &beta, c, n), rocblas_status_success);
    CHECK("rocblas.sync", hipDeviceSynchronize(), hipSuccess);
    CHECK("rocblas.destroy", rocblas_destroy_handle(rb), rocblas_status_success);
    hipFree(a);
    hipFree(b);
    hipFree(c);
}

static void conv() {
    miopenHandle_t h;
    CHECK("miopen.create", miopenCreate(&h), miopenStatusSuccess);
    miopenTensorDescriptor_t x, w, y;
    miopenConvolutionDescriptor_t cd;
    miopenCreateTensorDescriptor(&x);
    miopenCreateTensorDescriptor(&w);
    miopenCreateTensorDescriptor(&y);
    miopenCreateConvolutionDescriptor(&cd);
    const int N = 1, C = 8, H = 16, W = 16, K = 8, R = 3, S = 3;
    CHECK("miopen.x", miopenSet4dTensorDescriptor(x, miopenFloat, N, C, H, W), miopenStatusSuccess);
    CHECK("miopen.w", miopenSet4dTensorDescriptor(w, miopenFloat, K, C, R, S), miopenStatusSuccess);
    CHECK("miopen.conv", miopenInitConvolutionDescriptor(cd, miopenConvolution, 1, 1, 1, 1, 1, 1), miopenStatusSuccess);
    int on, oc, oh, ow;
    CHECK("miopen.outdim", miopenGetConvolutionForwardOutputDim(cd, x, w, &on, &oc, &oh, &ow), miopenStatusSuccess);
    CHECK("miopen.y", miopenSet4dTensorDescriptor(y, miopenFloat, on, oc, oh, ow), miopenStatusSuccess);
    float *dx = dev_floats(N * C * H * W, 1.0f), *dw = dev_floats(K * C * R * S, 0.5f), *dy = dev_floats(on * oc * oh * ow, 0.0f);
    size_t ws_size = 0;
    CHECK("miopen.workspace", miopenConvolutionForwardGetWorkSpaceSize(h, w, x, cd, y, &ws_size), miopenStatusSuccess);
    void* ws = nullptr;
    if (ws_size) hipMalloc(&ws, ws_size);
    miopenConvAlgoPerf_t perf[4];
    int found = 0;
    CHECK("miopen.find", miopenFindConvolutionForwardAlgorithm(h, x, dx, w, dw, cd, y, dy, 4, &found, perf, ws, ws_size, false), miopenStatusSuccess);
    printf("miopen algorithms found: %d\n", found);
    const float alpha = 1.0f, beta = 0.0f;
    if (found > 0)
        CHECK("miopen.forward", miopenConvolutionForward(h, &alpha, x, dx, w, dw, cd, perf[0].fwd_algo, &beta, y, dy, ws, ws_size), miopenStatusSuccess);
    else
        CHECK("miopen.forward", miopenStatusUnknownError, miopenStatusSuccess);
    CHECK("miopen.sync", hipDeviceSynchronize(), hipSuccess);
    CHECK("miopen.destroy", miopenDestroy(h), miopenStatusSuccess);
    hipFree(dx);
    hipFree(dw);
    hipFree(dy);
    if (ws) hipFree(ws);
}

static void fft() {
    CHECK("rocfft.setup", rocfft_setup(), rocfft_status_success);
    const size_t n = 1024;
    float* buf = dev_floats(2 * n, 1.0f);
    rocfft_plan plan = nullptr;
    CHECK("rocfft.plan", rocfft_plan_create(&plan, rocfft_placement_inplace, rocfft_transform_type_complex_forward, rocfft_precision_single, 1, &n, 1, nullptr),
          rocfft_status_success);
    void* in[] = {buf};
    CHECK("rocfft.execute", rocfft_execute(plan, in, nullptr, nullptr), rocfft_status_success);
    CHECK("rocfft.sync", hipDeviceSynchronize(), hipSuccess);
    CHECK("rocfft.destroy", rocfft_plan_destroy(plan), rocfft_status_success);
    CHECK("rocfft.cleanup", rocfft_cleanup(), rocfft_status_success);
    hipFree(buf);
}

static void spmv() {
    // A 4x4 diagonal matrix in CSR times a vector of ones.
    const int m = 4, nnz = 4;
    int hrow[] = {0, 1, 2, 3, 4}, hcol[] = {0, 1, 2, 3};
    float hval[] = {1, 2, 3, 4};
    int *row, *col;
    float *val, *x = dev_floats(m, 1.0f), *y = dev_floats(m, 0.0f);
    hipMalloc(&row, sizeof hrow);
    hipMalloc(&col, sizeof hcol);
    hipMalloc(&val, sizeof hval);
    hipMemcpy(row, hrow, sizeof hrow, hipMemcpyHostToDevice);
    hipMemcpy(col, hcol, sizeof hcol, hipMemcpyHostToDevice);
    hipMemcpy(val, hval, sizeof hval, hipMemcpyHostToDevice);
    hipsparseHandle_t h;
    CHECK("hipsparse.create", hipsparseCreate(&h), HIPSPARSE_STATUS_SUCCESS);
    hipsparseSpMatDescr_t A;
    hipsparseDnVecDescr_t vx, vy;
    CHECK("hipsparse.csr", hipsparseCreateCsr(&A, m, m, nnz, row, col, val, HIPSPARSE_INDEX_32I, HIPSPARSE_INDEX_32I, HIPSPARSE_INDEX_BASE_ZERO, HIP_R_32F),
          HIPSPARSE_STATUS_SUCCESS);
    CHECK("hipsparse.x", hipsparseCreateDnVec(&vx, m, x, HIP_R_32F), HIPSPARSE_STATUS_SUCCESS);
    CHECK("hipsparse.y", hipsparseCreateDnVec(&vy, m, y, HIP_R_32F), HIPSPARSE_STATUS_SUCCESS);
    const float alpha = 1.0f, beta = 0.0f;
    size_t bytes = 0;
    CHECK("hipsparse.buffer", hipsparseSpMV_bufferSize(h, HIPSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, vx, &beta, vy, HIP_R_32F, HIPSPARSE_SPMV_ALG_DEFAULT, &bytes),
          HIPSPARSE_STATUS_SUCCESS);
    void* buf = nullptr;
    hipMalloc(&buf, bytes ? bytes : 4);
    CHECK("hipsparse.spmv", hipsparseSpMV(h, HIPSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, vx, &beta, vy, HIP_R_32F, HIPSPARSE_SPMV_ALG_DEFAULT, buf),
          HIPSPARSE_STATUS_SUCCESS);
    CHECK("hipsparse.sync", hipDeviceSynchronize(), hipSuccess);
    hipsparseDestroySpMat(A);
    hipsparseDestroyDnVec(vx);
    hipsparseDestroyDnVec(vy);
    CHECK("hipsparse.destroy", hipsparseDestroy(h), HIPSPARSE_STATUS_SUCCESS);
}

static void rand_gen() {
    const size_t n = 1 << 16;
    float* out = dev_floats(n, 0.0f);
    hiprandGenerator_t g;
    CHECK("hiprand.create", hiprandCreateGenerator(&g, HIPRAND_RNG_PSEUDO_XORWOW), HIPRAND_STATUS_SUCCESS);
    CHECK("hiprand.seed", hiprandSetPseudoRandomGeneratorSeed(g, 1234), HIPRAND_STATUS_SUCCESS);
    CHECK("hiprand.uniform", hiprandGenerateUniform(g, out, n), HIPRAND_STATUS_SUCCESS);
    CHECK("hiprand.sync", hipDeviceSynchronize(), hipSuccess);
    CHECK("hiprand.destroy", hiprandDestroyGenerator(g), HIPRAND_STATUS_SUCCESS);
    hipFree(out);
}

static bool run(const std::string& what) {
    bool any = false;
    if (what == "sgemm" || what == "all") sgemm(), any = true;
    if (what == "conv" || what == "all") conv(), any = true;
    if (what == "fft" || what == "all") fft(), any = true;
    if (what == "spmv" || what == "all") spmv(), any = true;
    if (what == "rand" || what == "all") rand_gen(), any = true;
    return any;
}

int main(int argc, char** argv) {
    hipDeviceProp_t p;
    if (hipGetDeviceProperties(&p, 0) != hipSuccess) {
        printf("FAIL hip.properties\nRESULT: FAIL\n");
        return 1;
    }
    printf("device %s (%s), %d CUs\n", p.name, p.gcnArchName, p.multiProcessorCount);
    std::vector<std::string> what(argv + 1, argv + argc);
    if (what.empty()) what.push_back("all");
    for (const auto& w : what) {
        if (!run(w)) {
            fprintf(stderr, "rocm_libs: unknown subcommand '%s'; accepted: sgemm, conv, fft, spmv, rand, all\n", w.c_str());
            return 2;
        }
    }
    printf("RESULT: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
