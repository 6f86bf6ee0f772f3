// dev/cuda/rmsnorm.cu: RMSNorm forward (out, rstd), the fused residual-add + RMSNorm forward,
// and the backward (dinp +=, dweight +=) against a CPU reference in double; bitwise
// determinism of the backward; the fused forward against residual_forward + rmsnorm_forward
// (bitwise: the trainer's residual + LN1 fusion relies on it); timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/residual.cuh"
#include "cuda/layernorm.cuh"

static void rms_forward_ref(std::vector<float> &out, std::vector<float> &rstd, const std::vector<float> &x,
                            const std::vector<float> &w, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *xr = &x[(size_t)n * C];
        double ms = 0;
        for (int c = 0; c < C; c++) ms += (double)xr[c] * xr[c];
        ms /= C;
        double s = 1.0 / sqrt(ms + eps);
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (float)(xr[c] * s * w[c]);
        rstd[n] = (float)s;
    }
}

static void run_case(int N, int C, int do_time) {
    const float eps = 1e-5f;
    printf("N=%d C=%d\n", N, C);
    size_t NC = (size_t)N * C;
    std::vector<float> x = rand_normal_bf16(NC, 1.0f), x2 = rand_normal_bf16(NC, 1.0f);
    std::vector<float> w = rand_uniform_bf16(C, 0.5f, 1.5f);
    std::vector<float> dout = rand_normal_bf16(NC, 1.0f);
    std::vector<float> dinp0 = rand_normal_bf16(NC, 1.0f), dw0 = rand_normal_bf16(C, 1.0f);

    std::vector<float> out_ref(NC), rstd_ref(N);
    rms_forward_ref(out_ref, rstd_ref, x, w, N, C, eps);
    std::vector<float> resid_ref(NC), fout_ref(NC), frstd_ref(N);
    for (size_t i = 0; i < NC; i++) resid_ref[i] = bf16_round(x[i] + x2[i]);
    rms_forward_ref(fout_ref, frstd_ref, resid_ref, w, N, C, eps);
    // backward: dx = rstd * (dn - xhat * mean(dn * xhat)), dn = dout * w, xhat = x * rstd
    std::vector<float> dinp_ref(NC), dw_ref(C);
    std::vector<double> dw_acc(C, 0.0);
    for (int n = 0; n < N; n++) {
        const float *xr = &x[(size_t)n * C], *dr = &dout[(size_t)n * C];
        double s = rstd_ref[n], sum_dnx = 0;
        for (int c = 0; c < C; c++) {
            double xhat = xr[c] * s;
            sum_dnx += (double)dr[c] * w[c] * xhat;
            dw_acc[c] += dr[c] * xhat;
        }
        for (int c = 0; c < C; c++) {
            double xhat = xr[c] * s;
            double g = s * ((double)dr[c] * w[c] - xhat * sum_dnx / C);
            dinp_ref[(size_t)n * C + c] = (float)(dinp0[(size_t)n * C + c] + g);
        }
    }
    for (int c = 0; c < C; c++) dw_ref[c] = (float)(dw0[c] + dw_acc[c]);

    floatX *d_x = to_device_bf16(x), *d_x2 = to_device_bf16(x2), *d_w = to_device_bf16(w);
    floatX *d_out = dev_alloc<floatX>(NC), *d_resid = dev_alloc<floatX>(NC), *d_dout = to_device_bf16(dout);
    floatX *d_dinp = dev_alloc<floatX>(NC), *d_dw = dev_alloc<floatX>(C);
    float *d_rstd = dev_alloc<float>(N), *d_frstd = dev_alloc<float>(N);
    float *d_scratch = dev_alloc<float>(norm_backward_scratch_floats(C));

    dev_poison(d_out, NC); dev_poison(d_rstd, N);
    rmsnorm_forward(d_out, d_rstd, d_x, d_w, N, C, eps, 0);
    check_close("rmsnorm_forward out", from_device_bf16(d_out, NC), out_ref, 2e-3f, 1e-2f);
    check_close("rmsnorm_forward rstd", from_device_f32(d_rstd, N), rstd_ref, 1e-5f, 1e-4f);
    dev_poison(d_out, NC); dev_poison(d_resid, NC);
    fused_residual_rmsnorm_forward(d_resid, d_out, d_frstd, d_x, d_x2, d_w, N, C, eps, 0);
    check_close("fused residual", from_device_bf16(d_resid, NC), resid_ref, 1e-6f, 1e-6f);
    check_close("fused rmsnorm out", from_device_bf16(d_out, NC), fout_ref, 2e-3f, 1e-2f);
    check_close("fused rmsnorm rstd", from_device_f32(d_frstd, N), frstd_ref, 1e-5f, 1e-4f);
    // the two kernels the fused one replaces (train_gpt's default, --fuse-residual 0, at a layer boundary): the same bits
    floatX *d_res_u = dev_alloc<floatX>(NC), *d_out_u = dev_alloc<floatX>(NC);
    float *d_rstd_u = dev_alloc<float>(N);
    residual_forward(d_res_u, d_x, d_x2, NC, 0);
    rmsnorm_forward(d_out_u, d_rstd_u, d_res_u, d_w, N, C, eps, 0);
    check_true("fused == residual + rmsnorm, bitwise",
               from_device_bf16(d_resid, NC) == from_device_bf16(d_res_u, NC) &&
               from_device_bf16(d_out, NC) == from_device_bf16(d_out_u, NC) &&
               from_device_f32(d_frstd, N) == from_device_f32(d_rstd_u, N));

    upload_bf16(d_dinp, dinp0.data(), NC);
    upload_bf16(d_dw, dw0.data(), C);
    rmsnorm_backward(d_dinp, d_dw, d_scratch, d_dout, d_x, d_w, d_rstd, N, C, 0);
    std::vector<float> g_dinp = from_device_bf16(d_dinp, NC), g_dw = from_device_bf16(d_dw, C);
    check_close("rmsnorm_backward dinp (+=)", g_dinp, dinp_ref, 2e-3f, 1e-2f);
    check_close("rmsnorm_backward dweight", g_dw, dw_ref, 1e-3f, 1e-2f);
    upload_bf16(d_dinp, dinp0.data(), NC);
    upload_bf16(d_dw, dw0.data(), C);
    rmsnorm_backward(d_dinp, d_dw, d_scratch, d_dout, d_x, d_w, d_rstd, N, C, 0);
    std::vector<float> g_dinp2 = from_device_bf16(d_dinp, NC), g_dw2 = from_device_bf16(d_dw, C);
    check_true("backward bitwise deterministic",
               memcmp(g_dw.data(), g_dw2.data(), C * sizeof(float)) == 0 &&
               memcmp(g_dinp.data(), g_dinp2.data(), NC * sizeof(float)) == 0);

    if (do_time) {
        float us = time_us([&] { rmsnorm_forward(d_out, d_rstd, d_x, d_w, N, C, eps, 0); });
        report_bw("rmsnorm_forward", us, 2.0 * NC * sizeof(floatX));
        // bytes: the pair reads x, x2, the residual and writes the residual, out (5 NC); fused: 4 NC
        float us_pair, us_fused;
        time_us_alternating([&] { residual_forward(d_res_u, d_x, d_x2, NC, 0);
                                  rmsnorm_forward(d_out_u, d_rstd_u, d_res_u, d_w, N, C, eps, 0); },
                            [&] { fused_residual_rmsnorm_forward(d_resid, d_out, d_frstd, d_x, d_x2, d_w, N, C, eps, 0); },
                            &us_pair, &us_fused);
        report_bw("residual + rmsnorm (2 kernels)", us_pair, 5.0 * NC * sizeof(floatX));
        report_bw("fused_residual_rmsnorm_forward", us_fused, 4.0 * NC * sizeof(floatX));
        us = time_us([&] { rmsnorm_backward(d_dinp, d_dw, d_scratch, d_dout, d_x, d_w, d_rstd, N, C, 0); });
        report_bw("rmsnorm_backward", us, 4.0 * NC * sizeof(floatX));
    }
    cudaCheck(cudaFree(d_x)); cudaCheck(cudaFree(d_x2)); cudaCheck(cudaFree(d_w));
    cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_resid)); cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_dinp)); cudaCheck(cudaFree(d_dw));
    cudaCheck(cudaFree(d_rstd)); cudaCheck(cudaFree(d_frstd)); cudaCheck(cudaFree(d_scratch));
    cudaCheck(cudaFree(d_res_u)); cudaCheck(cudaFree(d_out_u)); cudaCheck(cudaFree(d_rstd_u));
}

int main(void) {
    dev_require_gpu();
    run_case(8 * 1024, 768, 0);
    run_case(333, 64, 0);
    run_case(1000, 4096, 0);
    run_case(16 * 1024, 768, 1);
    return dev_finish("rmsnorm");
}
