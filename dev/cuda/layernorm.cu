// dev/cuda/layernorm.cu: LayerNorm forward (out, mean, rstd), the fused residual-add +
// LayerNorm forward, and the backward (dinp +=, dweight +=, dbias +=) against a CPU
// reference in double; checks that the backward is bitwise deterministic; the fused forward
// against residual_forward + layernorm_forward (bitwise: the trainer's residual + LN1 fusion
// relies on it); timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/residual.cuh"
#include "cuda/layernorm.cuh"

static void ln_forward_ref(std::vector<float> &out, std::vector<float> &mean, std::vector<float> &rstd,
                           const std::vector<float> &x, const std::vector<float> &w, const std::vector<float> &b,
                           int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *xr = &x[(size_t)n * C];
        double m = 0;
        for (int c = 0; c < C; c++) m += xr[c];
        m /= C;
        double v = 0;
        for (int c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        v /= C;
        double s = 1.0 / sqrt(v + eps);
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (float)((xr[c] - m) * s * w[c] + b[c]);
        mean[n] = (float)m;
        rstd[n] = (float)s;
    }
}

static void run_case(int N, int C, int do_time) {
    const float eps = 1e-5f;
    printf("N=%d C=%d\n", N, C);
    size_t NC = (size_t)N * C;
    std::vector<float> x = rand_normal_bf16(NC, 1.0f), x2 = rand_normal_bf16(NC, 1.0f);
    for (size_t i = 0; i < NC; i++) x[i] = bf16_round(x[i] + 0.5f);  // a non-zero mean
    std::vector<float> w = rand_uniform_bf16(C, 0.5f, 1.5f), b = rand_normal_bf16(C, 0.2f);
    std::vector<float> dout = rand_normal_bf16(NC, 1.0f);
    std::vector<float> dinp0 = rand_normal_bf16(NC, 1.0f), dw0 = rand_normal_bf16(C, 1.0f), db0 = rand_normal_bf16(C, 1.0f);

    // forward reference
    std::vector<float> out_ref(NC), mean_ref(N), rstd_ref(N);
    ln_forward_ref(out_ref, mean_ref, rstd_ref, x, w, b, N, C, eps);
    // fused: residual = bf16(x + x2), then LN of that
    std::vector<float> resid_ref(NC), fout_ref(NC), fmean_ref(N), frstd_ref(N);
    for (size_t i = 0; i < NC; i++) resid_ref[i] = bf16_round(x[i] + x2[i]);
    ln_forward_ref(fout_ref, fmean_ref, frstd_ref, resid_ref, w, b, N, C, eps);
    // backward reference (uses the reference statistics)
    std::vector<float> dinp_ref(NC), dw_ref(C), db_ref(C);
    std::vector<double> dw_acc(C, 0.0), db_acc(C, 0.0);
    for (int n = 0; n < N; n++) {
        const float *xr = &x[(size_t)n * C], *dr = &dout[(size_t)n * C];
        double m = mean_ref[n], s = rstd_ref[n];
        double sum_dn = 0, sum_dnx = 0;
        for (int c = 0; c < C; c++) {
            double xhat = (xr[c] - m) * s, dn = (double)dr[c] * w[c];
            sum_dn += dn;
            sum_dnx += dn * xhat;
            dw_acc[c] += dr[c] * xhat;
            db_acc[c] += dr[c];
        }
        for (int c = 0; c < C; c++) {
            double xhat = (xr[c] - m) * s, dn = (double)dr[c] * w[c];
            double g = s * (dn - sum_dn / C - xhat * sum_dnx / C);
            dinp_ref[(size_t)n * C + c] = (float)(dinp0[(size_t)n * C + c] + g);
        }
    }
    for (int c = 0; c < C; c++) {
        dw_ref[c] = (float)(dw0[c] + dw_acc[c]);
        db_ref[c] = (float)(db0[c] + db_acc[c]);
    }

    floatX *d_x = to_device_bf16(x), *d_x2 = to_device_bf16(x2), *d_w = to_device_bf16(w), *d_b = to_device_bf16(b);
    floatX *d_out = dev_alloc<floatX>(NC), *d_resid = dev_alloc<floatX>(NC), *d_dout = to_device_bf16(dout);
    floatX *d_dinp = dev_alloc<floatX>(NC), *d_dw = dev_alloc<floatX>(C), *d_db = dev_alloc<floatX>(C);
    float *d_mean = dev_alloc<float>(N), *d_rstd = dev_alloc<float>(N);
    float *d_scratch = dev_alloc<float>(norm_backward_scratch_floats(C));

    dev_poison(d_out, NC); dev_poison(d_mean, N); dev_poison(d_rstd, N);
    layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C, eps, 0);
    check_close("layernorm_forward out", from_device_bf16(d_out, NC), out_ref, 2e-3f, 1e-2f);
    check_close("layernorm_forward mean", from_device_f32(d_mean, N), mean_ref, 1e-5f, 1e-4f);
    check_close("layernorm_forward rstd", from_device_f32(d_rstd, N), rstd_ref, 1e-5f, 1e-4f);

    dev_poison(d_out, NC); dev_poison(d_resid, NC);
    float *d_fmean = dev_alloc<float>(N), *d_frstd = dev_alloc<float>(N);
    fused_residual_layernorm_forward(d_resid, d_out, d_fmean, d_frstd, d_x, d_x2, d_w, d_b, N, C, eps, 0);
    check_close("fused residual", from_device_bf16(d_resid, NC), resid_ref, 1e-6f, 1e-6f);
    check_close("fused layernorm out", from_device_bf16(d_out, NC), fout_ref, 2e-3f, 1e-2f);
    check_close("fused layernorm rstd", from_device_f32(d_frstd, N), frstd_ref, 1e-5f, 1e-4f);
    // the two kernels the fused one replaces (train_gpt's default, --fuse-residual 0, at a layer boundary): the same bits
    floatX *d_res_u = dev_alloc<floatX>(NC), *d_out_u = dev_alloc<floatX>(NC);
    float *d_mean_u = dev_alloc<float>(N), *d_rstd_u = dev_alloc<float>(N);
    residual_forward(d_res_u, d_x, d_x2, NC, 0);
    layernorm_forward(d_out_u, d_mean_u, d_rstd_u, d_res_u, d_w, d_b, N, C, eps, 0);
    check_true("fused == residual + layernorm, bitwise",
               from_device_bf16(d_resid, NC) == from_device_bf16(d_res_u, NC) &&
               from_device_bf16(d_out, NC) == from_device_bf16(d_out_u, NC) &&
               from_device_f32(d_fmean, N) == from_device_f32(d_mean_u, N) &&
               from_device_f32(d_frstd, N) == from_device_f32(d_rstd_u, N));

    // backward, with the device's own forward statistics
    upload_bf16(d_dinp, dinp0.data(), NC);
    upload_bf16(d_dw, dw0.data(), C);
    upload_bf16(d_db, db0.data(), C);
    layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_x, d_w, d_mean, d_rstd, N, C, 0);
    std::vector<float> g_dinp = from_device_bf16(d_dinp, NC), g_dw = from_device_bf16(d_dw, C), g_db = from_device_bf16(d_db, C);
    check_close("layernorm_backward dinp (+=)", g_dinp, dinp_ref, 2e-3f, 1e-2f);
    check_close("layernorm_backward dweight", g_dw, dw_ref, 1e-3f, 1e-2f);
    check_close("layernorm_backward dbias", g_db, db_ref, 1e-3f, 1e-2f);
    // determinism: the same call from the same state gives the same bits
    upload_bf16(d_dinp, dinp0.data(), NC);
    upload_bf16(d_dw, dw0.data(), C);
    upload_bf16(d_db, db0.data(), C);
    layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_x, d_w, d_mean, d_rstd, N, C, 0);
    std::vector<float> g_dw2 = from_device_bf16(d_dw, C), g_db2 = from_device_bf16(d_db, C), g_dinp2 = from_device_bf16(d_dinp, NC);
    check_true("backward bitwise deterministic",
               memcmp(g_dw.data(), g_dw2.data(), C * sizeof(float)) == 0 &&
               memcmp(g_db.data(), g_db2.data(), C * sizeof(float)) == 0 &&
               memcmp(g_dinp.data(), g_dinp2.data(), NC * sizeof(float)) == 0);

    if (do_time) {
        float us = time_us([&] { layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C, eps, 0); });
        report_bw("layernorm_forward", us, 2.0 * NC * sizeof(floatX));
        // bytes: the pair reads x, x2, the residual and writes the residual, out (5 NC); fused: 4 NC
        float us_pair, us_fused;
        time_us_alternating([&] { residual_forward(d_res_u, d_x, d_x2, NC, 0);
                                  layernorm_forward(d_out_u, d_mean_u, d_rstd_u, d_res_u, d_w, d_b, N, C, eps, 0); },
                            [&] { fused_residual_layernorm_forward(d_resid, d_out, d_fmean, d_frstd, d_x, d_x2, d_w, d_b,
                                                                   N, C, eps, 0); },
                            &us_pair, &us_fused);
        report_bw("residual + layernorm (2 kernels)", us_pair, 5.0 * NC * sizeof(floatX));
        report_bw("fused_residual_layernorm_forward", us_fused, 4.0 * NC * sizeof(floatX));
        us = time_us([&] { layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_x, d_w, d_mean, d_rstd, N, C, 0); });
        report_bw("layernorm_backward", us, 4.0 * NC * sizeof(floatX));
    }
    cudaCheck(cudaFree(d_x)); cudaCheck(cudaFree(d_x2)); cudaCheck(cudaFree(d_w)); cudaCheck(cudaFree(d_b));
    cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_resid)); cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_dinp)); cudaCheck(cudaFree(d_dw)); cudaCheck(cudaFree(d_db));
    cudaCheck(cudaFree(d_mean)); cudaCheck(cudaFree(d_rstd)); cudaCheck(cudaFree(d_fmean)); cudaCheck(cudaFree(d_frstd));
    cudaCheck(cudaFree(d_scratch));
    cudaCheck(cudaFree(d_res_u)); cudaCheck(cudaFree(d_out_u)); cudaCheck(cudaFree(d_mean_u)); cudaCheck(cudaFree(d_rstd_u));
}

int main(void) {
    dev_require_gpu();
    run_case(8 * 1024, 768, 0);
    run_case(333, 64, 0);     // tiny preset width, rows not a multiple of the warps per block
    run_case(1000, 2048, 0);  // larger width: fewer warps per block in the backward
    run_case(16 * 1024, 768, 1);
    return dev_finish("layernorm");
}
