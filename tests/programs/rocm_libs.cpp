// ROCm 6.4 libraries on the emulated GPU: each subcommand calls one library the way an
// application does and checks that every status is a success; with --values (where the
// emulator executes the kernels: gfx90a code objects on its ISA interpreter) it also checks the
// results against the host's. Built with the ROCm 6.4 root's hipcc:
//   hipcc --offload-arch=gfx90a rocm_libs.cpp -lhipblas -lrocblas -lMIOpen -lrocfft -lhipsparse -lhiprand
// Usage: rocm_libs [--values] SUBCOMMAND...  with sgemm (hipBLAS then rocBLAS), conv (MIOpen
// find + forward), fft (rocFFT), spmv (hipSPARSE), rand (hipRAND), all.
#include <hip/hip_runtime.h>
#include <hipblas/hipblas.h>
#include <hiprand/hiprand.h>
#include <hipsparse/hipsparse.h>
#include <miopen/miopen.h>
#include <rocblas/rocblas.h>
#include <rocfft/rocfft.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static int failures = 0;
static bool check_values = false;

// A result check, made and counted only with --values.
static void check_value(const char* name, bool ok, const char* detail) {
    if (!check_values) return;
    if (ok) {
        printf("PASS %s\n", name);
    } else {
        printf("FAIL %s: %s\n", name, detail);
        failures++;
    }
}

static std::vector<float> download(const float* d, size_t n) {
    std::vector<float> h(n, NAN);
    if (hipMemcpy(h.data(), d, n * sizeof(float), hipMemcpyDeviceToHost) != hipSuccess) h.assign(n, NAN);
    return h;
}

static float* upload(const std::vector<float>& h) {
    float* p = nullptr;
    if (hipMalloc(&p, h.size() * sizeof(float)) != hipSuccess) return nullptr;
    if (hipMemcpy(p, h.data(), h.size() * sizeof(float), hipMemcpyHostToDevice) != hipSuccess) return nullptr;
    return p;
}

// C (column-major, n x n) against the host's A * op(B); small integers keep every sum exact.
static void check_gemm(const char* name, const float* dc, const std::vector<float>& a, const std::vector<float>& b, int n, bool transpose_b) {
    if (!check_values) return;
    std::vector<float> c = download(dc, (size_t)n * n);
    int bad = 0;
    char detail[160] = "";
    for (int col = 0; col < n; col++)
        for (int row = 0; row < n; row++) {
            double want = 0;
            for (int k = 0; k < n; k++) want += (double)a[row + (size_t)k * n] * (transpose_b ? b[col + (size_t)k * n] : b[k + (size_t)col * n]);
            float have = c[row + (size_t)col * n];
            if (have != (float)want && bad++ == 0) snprintf(detail, sizeof detail, "C[%d][%d] = %g, want %g", row, col, have, want);
        }
    if (bad) snprintf(detail + strlen(detail), sizeof detail - strlen(detail), " (%d of %d differ)", bad, n * n);
    check_value(name, bad == 0, detail);
}

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
    std::vector<float> ha(n * n), hb(n * n);
    for (int i = 0; i < n * n; i++) {
        ha[i] = (float)((i * 7) % 11 - 5);
        hb[i] = (float)((i * 5 + i / n) % 13 - 6);
    }
    float *a = upload(ha), *b = upload(hb), *c = dev_floats(n * n, 0.0f);
    const float alpha = 1.0f, beta = 0.0f;
    hipblasHandle_t hbl;
    CHECK("hipblas.create", hipblasCreate(&hbl), HIPBLAS_STATUS_SUCCESS);
    CHECK("hipblas.sgemm", hipblasSgemm(hbl, HIPBLAS_OP_N, HIPBLAS_OP_N, n, n, n, &alpha, a, n, b, n, &beta, c, n), HIPBLAS_STATUS_SUCCESS);
    CHECK("hipblas.sync", hipDeviceSynchronize(), hipSuccess);
    check_gemm("hipblas.sgemm_values", c, ha, hb, n, false);
    CHECK("hipblas.destroy", hipblasDestroy(hbl), HIPBLAS_STATUS_SUCCESS);
    hipMemset(c, 0, n * n * sizeof(float));
    rocblas_handle rb;
    CHECK("rocblas.create", rocblas_create_handle(&rb), rocblas_status_success);
    CHECK("rocblas.sgemm", rocblas_sgemm(rb, rocblas_operation_none, rocblas_operation_transpose, n, n, n, &alpha, a, n, b, n, &beta, c, n), rocblas_status_success);
    CHECK("rocblas.sync", hipDeviceSynchronize(), hipSuccess);
    check_gemm("rocblas.sgemm_values", c, ha, hb, n, true);
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
    if (found > 0) {
        // x = 1 everywhere, w = 0.5 everywhere, padding 1: each output is 0.5 times the number
        // of in-bounds taps (9 inside, 6 on an edge, 4 in a corner) times C.
        std::vector<float> got((size_t)on * oc * oh * ow);
        hipMemcpy(got.data(), dy, got.size() * sizeof(float), hipMemcpyDeviceToHost);
        int bad = 0;
        for (int k = 0; k < oc; k++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    int taps = 0;
                    for (int r = 0; r < R; r++)
                        for (int s = 0; s < S; s++) {
                            int yi = i + r - 1, xj = j + s - 1;
                            taps += (yi >= 0 && yi < H && xj >= 0 && xj < W);
                        }
                    float want = 0.5f * taps * C, g = got[((size_t)k * oh + i) * ow + j];
                    if (fabsf(g - want) > 1e-3f * want) bad++;
                }
        char detail[96];
        snprintf(detail, sizeof detail, "%d of %zu outputs differ from the host's", bad, got.size());
        check_value("miopen.forward_values", bad == 0, detail);
    }
    // Backward data: dy = 1, w = 0.5: each input gradient is 0.5 times K times the number of
    // output positions its taps reach (the same in-bounds count as above, the filter being
    // symmetric in its reach).
    {
        float* ddy = dev_floats(on * oc * oh * ow, 1.0f);
        float* ddx = dev_floats(N * C * H * W, 0.0f);
        size_t bws_size = 0;
        CHECK("miopen.backward_data_workspace", miopenConvolutionBackwardDataGetWorkSpaceSize(h, y, w, cd, x, &bws_size), miopenStatusSuccess);
        void* bws = nullptr;
        if (bws_size) hipMalloc(&bws, bws_size);
        int bfound = 0;
        miopenConvAlgoPerf_t bperf[4];
        CHECK("miopen.backward_data_find", miopenFindConvolutionBackwardDataAlgorithm(h, y, ddy, w, dw, cd, x, ddx, 4, &bfound, bperf, bws, bws_size, false), miopenStatusSuccess);
        if (bfound > 0) {
            CHECK("miopen.backward_data", miopenConvolutionBackwardData(h, &alpha, y, ddy, w, dw, cd, bperf[0].bwd_data_algo, &beta, x, ddx, bws, bws_size), miopenStatusSuccess);
            hipDeviceSynchronize();
            std::vector<float> got = download(ddx, (size_t)N * C * H * W);
            int bad = 0;
            for (int c = 0; c < C; c++)
                for (int i = 0; i < H; i++)
                    for (int j = 0; j < W; j++) {
                        int taps = 0;
                        for (int r = 0; r < R; r++)
                            for (int t = 0; t < S; t++) {
                                int oi = i - r + 1, oj = j - t + 1;
                                taps += (oi >= 0 && oi < oh && oj >= 0 && oj < ow);
                            }
                        float want = 0.5f * taps * K, g = got[((size_t)c * H + i) * W + j];
                        if (fabsf(g - want) > 1e-3f * want) bad++;
                    }
            char detail[96];
            snprintf(detail, sizeof detail, "%d of %zu input gradients differ from the host's", bad, got.size());
            check_value("miopen.backward_data_values", bad == 0, detail);
        } else {
            CHECK("miopen.backward_data", miopenStatusUnknownError, miopenStatusSuccess);
        }
        hipFree(ddy);
        hipFree(ddx);
        if (bws) hipFree(bws);
    }
    // Backward weights: x = 1, dy = 1: each weight gradient counts the output positions whose
    // tap (r, s) reads inside the input (15 or 16 rows times 15 or 16 columns, padding 1).
    {
        float* ddy = dev_floats(on * oc * oh * ow, 1.0f);
        float* ddw = dev_floats(K * C * R * S, 0.0f);
        size_t wws_size = 0;
        CHECK("miopen.backward_weights_workspace", miopenConvolutionBackwardWeightsGetWorkSpaceSize(h, y, x, cd, w, &wws_size), miopenStatusSuccess);
        void* wws = nullptr;
        if (wws_size) hipMalloc(&wws, wws_size);
        int wfound = 0;
        miopenConvAlgoPerf_t wperf[4];
        CHECK("miopen.backward_weights_find", miopenFindConvolutionBackwardWeightsAlgorithm(h, y, ddy, x, dx, cd, w, ddw, 4, &wfound, wperf, wws, wws_size, false), miopenStatusSuccess);
        if (wfound > 0) {
            CHECK("miopen.backward_weights", miopenConvolutionBackwardWeights(h, &alpha, y, ddy, x, dx, cd, wperf[0].bwd_weights_algo, &beta, w, ddw, wws, wws_size), miopenStatusSuccess);
            hipDeviceSynchronize();
            std::vector<float> got = download(ddw, (size_t)K * C * R * S);
            int bad = 0;
            for (size_t k = 0; k < got.size(); k++) {
                int r = (int)(k / S % R), t = (int)(k % S);
                int rows = 0, cols = 0;
                for (int i = 0; i < oh; i++) rows += (i + r - 1 >= 0 && i + r - 1 < H);
                for (int j = 0; j < ow; j++) cols += (j + t - 1 >= 0 && j + t - 1 < W);
                float want = (float)(rows * cols * N);
                if (fabsf(got[k] - want) > 1e-3f * want) bad++;
            }
            char detail[96];
            snprintf(detail, sizeof detail, "%d of %zu weight gradients differ from the host's", bad, got.size());
            check_value("miopen.backward_weights_values", bad == 0, detail);
        } else {
            CHECK("miopen.backward_weights", miopenStatusUnknownError, miopenStatusSuccess);
        }
        hipFree(ddy);
        hipFree(ddw);
        if (wws) hipFree(wws);
    }
    // Input with distinct values for pooling and batch norm: v = (c*H*W + i*W + j) % 7.
    std::vector<float> hv((size_t)N * C * H * W);
    for (size_t k = 0; k < hv.size(); k++) hv[k] = (float)(k % 7);
    float* dv = upload(hv);
    // Max pooling 2x2, stride 2.
    {
        miopenPoolingDescriptor_t pd;
        miopenCreatePoolingDescriptor(&pd);
        CHECK("miopen.pool_desc", miopenSet2dPoolingDescriptor(pd, miopenPoolingMax, 2, 2, 0, 0, 2, 2), miopenStatusSuccess);
        int pn, pc, ph, pw;
        CHECK("miopen.pool_outdim", miopenGetPoolingForwardOutputDim(pd, x, &pn, &pc, &ph, &pw), miopenStatusSuccess);
        miopenTensorDescriptor_t py;
        miopenCreateTensorDescriptor(&py);
        miopenSet4dTensorDescriptor(py, miopenFloat, pn, pc, ph, pw);
        float* dp = dev_floats((size_t)pn * pc * ph * pw, -1.0f);
        CHECK("miopen.pool", miopenPoolingForward(h, pd, &alpha, x, dv, &beta, py, dp, false, nullptr, 0), miopenStatusSuccess);
        hipDeviceSynchronize();
        std::vector<float> got = download(dp, (size_t)pn * pc * ph * pw);
        int bad = 0;
        for (int c = 0; c < pc; c++)
            for (int i = 0; i < ph; i++)
                for (int j = 0; j < pw; j++) {
                    float want = -1.0f;
                    for (int a = 0; a < 2; a++)
                        for (int b = 0; b < 2; b++)
                            want = fmaxf(want, hv[((size_t)c * H + 2 * i + a) * W + 2 * j + b]);
                    if (got[((size_t)c * ph + i) * pw + j] != want) bad++;
                }
        char detail[96];
        snprintf(detail, sizeof detail, "%d of %zu pooled values differ from the host's", bad, got.size());
        check_value("miopen.pool_values", bad == 0, detail);
        hipFree(dp);
        miopenDestroyTensorDescriptor(py);
        miopenDestroyPoolingDescriptor(pd);
    }
    // Batch norm, inference, per channel: scale 2, bias 1, mean 0.5, variance 4, epsilon 0:
    // y = 2 (v - 0.5) / 2 + 1 = v + 0.5.
    {
        miopenTensorDescriptor_t bn;
        miopenCreateTensorDescriptor(&bn);
        CHECK("miopen.bn_desc", miopenDeriveBNTensorDescriptor(bn, x, miopenBNSpatial), miopenStatusSuccess);
        float *scale = dev_floats(C, 2.0f), *bias = dev_floats(C, 1.0f), *mean = dev_floats(C, 0.5f), *var = dev_floats(C, 4.0f);
        float* db = dev_floats((size_t)N * C * H * W, -1.0f);
        CHECK("miopen.bn", miopenBatchNormalizationForwardInference(h, miopenBNSpatial, (void*)&alpha, (void*)&beta, x, dv, x, db, bn, scale, bias, mean, var, 0.0), miopenStatusSuccess);
        hipDeviceSynchronize();
        std::vector<float> got = download(db, hv.size());
        int bad = 0;
        for (size_t k = 0; k < hv.size(); k++)
            if (fabsf(got[k] - (hv[k] + 0.5f)) > 1e-4f) bad++;
        char detail[96];
        snprintf(detail, sizeof detail, "%d of %zu normalised values differ from the host's", bad, got.size());
        check_value("miopen.bn_values", bad == 0, detail);
        hipFree(scale);
        hipFree(bias);
        hipFree(mean);
        hipFree(var);
        hipFree(db);
        miopenDestroyTensorDescriptor(bn);
    }
    hipFree(dv);
    CHECK("miopen.destroy", miopenDestroy(h), miopenStatusSuccess);
    hipFree(dx);
    hipFree(dw);
    hipFree(dy);
    if (ws) hipFree(ws);
}

static void fft() {
    CHECK("rocfft.setup", rocfft_setup(), rocfft_status_success);
    const size_t n = 1024, f = 5;
    // x[t] = exp(2 pi i f t / n): the forward transform is n at bin f and 0 elsewhere.
    std::vector<float> h(2 * n);
    for (size_t t = 0; t < n; t++) {
        h[2 * t] = (float)cos(2 * M_PI * (double)(f * t % n) / n);
        h[2 * t + 1] = (float)sin(2 * M_PI * (double)(f * t % n) / n);
    }
    float* buf = upload(h);
    rocfft_plan plan = nullptr;
    CHECK("rocfft.plan", rocfft_plan_create(&plan, rocfft_placement_inplace, rocfft_transform_type_complex_forward, rocfft_precision_single, 1, &n, 1, nullptr),
          rocfft_status_success);
    void* in[] = {buf};
    CHECK("rocfft.execute", rocfft_execute(plan, in, nullptr, nullptr), rocfft_status_success);
    CHECK("rocfft.sync", hipDeviceSynchronize(), hipSuccess);
    if (check_values) {
        std::vector<float> y = download(buf, 2 * n);
        double worst = 0;
        size_t at = 0;
        for (size_t k = 0; k < n; k++) {
            double err = hypot(y[2 * k] - (k == f ? (double)n : 0.0), y[2 * k + 1]);
            if (!(err <= worst)) worst = err, at = k;
        }
        char detail[120];
        snprintf(detail, sizeof detail, "bin %zu off by %g (bin %zu = %g%+gi)", at, worst, f, y[2 * f], y[2 * f + 1]);
        check_value("rocfft.values", worst < 1e-2, detail);
    }
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
    // No buffer when none is needed: rocSPARSE 4 (ROCm 7.x) refuses a buffer with a size of 0
    // (HIPSPARSE_STATUS_INVALID_VALUE).
    void* buf = nullptr;
    if (bytes) hipMalloc(&buf, bytes);
    // The analysis stage: optional with hipSPARSE 3 (ROCm 6.x), required before SpMV by
    // hipSPARSE 4's documentation (ROCm 7.x).
    CHECK("hipsparse.preprocess", hipsparseSpMV_preprocess(h, HIPSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, vx, &beta, vy, HIP_R_32F, HIPSPARSE_SPMV_ALG_DEFAULT, buf),
          HIPSPARSE_STATUS_SUCCESS);
    CHECK("hipsparse.spmv", hipsparseSpMV(h, HIPSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, vx, &beta, vy, HIP_R_32F, HIPSPARSE_SPMV_ALG_DEFAULT, buf),
          HIPSPARSE_STATUS_SUCCESS);
    CHECK("hipsparse.sync", hipDeviceSynchronize(), hipSuccess);
    if (check_values) {
        std::vector<float> hy = download(y, m);
        char detail[120];
        snprintf(detail, sizeof detail, "y = [%g %g %g %g], want [1 2 3 4]", hy[0], hy[1], hy[2], hy[3]);
        check_value("hipsparse.spmv_values", hy[0] == 1 && hy[1] == 2 && hy[2] == 3 && hy[3] == 4, detail);
    }
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
    if (check_values) {
        // Uniform on (0, 1]: every value in range, mean 1/2 and variance 1/12 within a few
        // standard errors (n = 65536).
        std::vector<float> u = download(out, n);
        double sum = 0, sq = 0;
        size_t outside = 0;
        for (float x : u) {
            if (!(x > 0 && x <= 1)) outside++;
            sum += x;
            sq += (double)x * x;
        }
        double mean = sum / n, var = sq / n - mean * mean;
        char detail[120];
        snprintf(detail, sizeof detail, "%zu outside (0, 1], mean %.5f, variance %.5f", outside, mean, var);
        check_value("hiprand.uniform_values", outside == 0 && fabs(mean - 0.5) < 0.005 && fabs(var - 1.0 / 12) < 0.002, detail);
    }
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
    // Blocking waits: by default HIP spins a CPU core in every wait when the machine has more
    // cores than GPUs, and these libraries' kernels run long wherever their code is interpreted.
    if (hipSetDeviceFlags(hipDeviceScheduleBlockingSync) != hipSuccess) {
        printf("FAIL hip.set_device_flags\nRESULT: FAIL\n");
        return 1;
    }
    hipDeviceProp_t p;
    if (hipGetDeviceProperties(&p, 0) != hipSuccess) {
        printf("FAIL hip.properties\nRESULT: FAIL\n");
        return 1;
    }
    printf("device %s (%s), %d CUs\n", p.name, p.gcnArchName, p.multiProcessorCount);
    std::vector<std::string> what(argv + 1, argv + argc);
    if (!what.empty() && what[0] == "--values") {
        check_values = true;
        what.erase(what.begin());
    }
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
