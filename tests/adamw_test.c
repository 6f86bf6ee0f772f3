// tests/adamw_test.c: CPU AdamW (adamw.cuh).
//   (a) every SIMD path (scalar, AVX2, AVX-512 where the CPU has them), threaded, against the
//       single-threaded scalar reference: odd sizes, fp32/16-bit grads, 16-bit output on/off, the
//       16-bit format bf16 or fp16 (hp.fp16), special values sprinkled in; max ulp difference
//       reported (limit 1, expected 0)
//   (b) 10 steps against torch.optim.AdamW (tests/adamw_torch_ref.py, /usr/bin/python3 or
//       $PYTHON), with and without weight decay, and against torch.optim.Adam with L2 weight
//       decay (l2_decay: DeepSpeed's "Adam" with adam_w_mode false), within 1e-6 relative
//   (c) the tiled variant: identical results, on_tile covers every element exactly once, in
//       order, on the calling thread, after the tile's outputs are final
//   (d) bf16 round-to-nearest-even on hand-picked ties, overflow, NaN and Inf handling
//   (e) fp16 (util/common.h's float_to_fp16_rne / fp16_to_float) against the compiler's _Float16:
//       every half decoded, every tie and its neighbours and 44 million other floats encoded
// Exit 0 on pass, 1 on failure.
#include "util/common.h"
#include "adamw.cuh"
#include <pthread.h>
#include <unistd.h>
#include <sys/stat.h>

static int g_fail = 0;
#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); g_fail++; } } while (0)

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// distance in units in the last place; NaN == NaN; NaN vs number = huge
static int64_t ulp_diff(float a, float b) {
    if (isnan(a) || isnan(b)) return (isnan(a) && isnan(b)) ? 0 : (int64_t)1 << 40;
    uint32_t ua = f2u(a), ub = f2u(b);
    int64_t oa = (ua & 0x80000000u) ? -(int64_t)(ua & 0x7fffffffu) : (int64_t)ua;
    int64_t ob = (ub & 0x80000000u) ? -(int64_t)(ub & 0x7fffffffu) : (int64_t)ub;
    return oa > ob ? oa - ob : ob - oa;
}
static int64_t max_ulp(const float *a, const float *b, size_t n) {
    int64_t mx = 0;
    for (size_t i = 0; i < n; i++) { int64_t d = ulp_diff(a[i], b[i]); if (d > mx) mx = d; }
    return mx;
}
static float from_x16(int fp16, uint16_t b);
// in 16-bit ulps (bf16, or fp16 with fp16 set)
static int64_t max_ulp_x16(int fp16, const uint16_t *a, const uint16_t *b, size_t n) {
    int64_t mx = 0;
    for (size_t i = 0; i < n; i++) { int64_t d = ulp_diff(from_x16(fp16, a[i]), from_x16(fp16, b[i])); if (d > mx) mx = d; }
    return mx >> (fp16 ? 13 : 16);
}

static float *falloc(size_t n) { return (float *)xmalloc(n * sizeof(float), "test buffer"); }
static uint16_t *halloc(size_t n) { return (uint16_t *)xmalloc(n * sizeof(uint16_t), "test buffer"); }

// grads for step s: normal * a scale that varies by element, with specials sprinkled in
static void make_grads(Rng *r, float *g, size_t n, int specials) {
    for (size_t i = 0; i < n; i++) {
        float sc = (i % 3 == 0) ? 1e-3f : (i % 3 == 1 ? 1.0f : 30.0f);
        g[i] = rng_normal(r) * sc;
        if (specials && rng_u64(r) % 1000 == 0) {
            static const uint32_t sp[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,
                                          0x00000123u, 0x80400000u, 0x7149f2cau /*1e30*/, 0x0d000000u};
            g[i] = u2f(sp[rng_u64(r) % (sizeof(sp) / sizeof(sp[0]))]);
        }
    }
}
static void make_params(Rng *r, float *p, size_t n, int specials) {
    for (size_t i = 0; i < n; i++) {
        p[i] = rng_normal(r) * 0.05f;
        if (specials && rng_u64(r) % 1000 == 0) {
            static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu};
            p[i] = u2f(sp[rng_u64(r) % (sizeof(sp) / sizeof(sp[0]))]);
        }
    }
}

static AdamWParams hparams(float lr, float wd, int t, float gs, int l2) {
    AdamWParams hp;
    hp.lr = lr; hp.beta1 = 0.9f; hp.beta2 = 0.95f; hp.eps = 1e-8f; hp.weight_decay = wd; hp.t = t; hp.grad_scale = gs;
    hp.l2_decay = l2;
    hp.fp16 = 0;
    return hp;
}
static uint16_t to_x16(int fp16, float f) { return fp16 ? float_to_fp16_rne(f) : float_to_bf16_rne(f); }
static float from_x16(int fp16, uint16_t b) { return fp16 ? fp16_to_float(b) : bf16_to_float(b); }

// ---------------------------------------------------------------------------
// (a) SIMD paths vs scalar reference
static void test_paths(void) {
    printf("(a) SIMD paths vs the scalar reference (3 steps each, threaded where n >= %zu)\n", (size_t)ADAMW_PAR_MIN);
    static const size_t sizes[] = {1, 7, 8, 15, 16, 17, 31, 33, 63, 65, 1000, 65537, 1000003};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    int paths[3], npaths = 0;
    for (int p = ADAMW_PATH_SCALAR; p <= ADAMW_PATH_AVX512; p++) {
        if (adamw_cpu_path_supported(p)) paths[npaths++] = p;
        else printf("    path %s: not supported by this CPU, skipped\n", adamw_path_name(p));
    }
    for (int pi = 0; pi < npaths; pi++) {
        int path = paths[pi];
        int64_t mp = 0, mm = 0, mv = 0, mo = 0;
        int cases = 0;
        for (int si = 0; si < nsizes; si++) {
            size_t n = sizes[si];
            for (int x16 = 0; x16 < (n > 100000 ? 1 : 2); x16++)   // the 16-bit format: bf16, fp16 (variant 0, n <= 65537)
            for (int gbf = 0; gbf < 2; gbf++)
            for (int outon = 0; outon < 2; outon++)
            for (int variant = 0; variant < (x16 ? 1 : 3); variant++) {
                // variant 0: wd 0.1, grad_scale 1; variant 1: wd 0, grad_scale 0.37, 3 threads;
                // variant 2: L2 weight decay 0.1 (Adam), grad_scale 0.8
                Rng r = {1234 + n * 7 + gbf * 3 + outon + variant * 11 + x16 * 101};
                float *p0 = falloc(n), *g = falloc(n), *pr = falloc(n), *mr = falloc(n), *vr = falloc(n);
                float *pt = falloc(n), *mt = falloc(n), *vt = falloc(n);
                uint16_t *gb = halloc(n), *orf = halloc(n), *ot = halloc(n);
                make_params(&r, p0, n, 1);
                memcpy(pr, p0, n * 4); memcpy(pt, p0, n * 4);
                memset(mr, 0, n * 4); memset(vr, 0, n * 4); memset(mt, 0, n * 4); memset(vt, 0, n * 4);
                memset(orf, 0, n * 2); memset(ot, 0xff, n * 2);
#ifdef _OPENMP
                int saved = omp_get_max_threads();
                if (variant == 1) omp_set_num_threads(3);
#endif
                for (int t = 1; t <= 3; t++) {
                    make_grads(&r, g, n, 1);
                    for (size_t i = 0; i < n; i++) gb[i] = to_x16(x16, g[i]);
                    AdamWParams hp = hparams(1e-3f * t, variant == 1 ? 0.0f : 0.1f, t, variant == 1 ? 0.37f : (variant ? 0.8f : 1.0f),
                                             variant == 2);
                    hp.fp16 = x16;
                    AdamWConsts k = adamw_consts(hp);
                    adamw_range_scalar(&k, pr, gbf ? NULL : g, gbf ? gb : NULL, mr, vr, outon ? orf : NULL, n);
                    adamw_cpu_set_path(path);
                    if (gbf) adamw_cpu_step_bf16grad(pt, gb, mt, vt, outon ? ot : NULL, n, hp);
                    else adamw_cpu_step(pt, g, mt, vt, outon ? ot : NULL, n, hp);
                }
#ifdef _OPENMP
                omp_set_num_threads(saved);
#endif
                int64_t a = max_ulp(pt, pr, n), b = max_ulp(mt, mr, n), c = max_ulp(vt, vr, n);
                int64_t d = outon ? max_ulp_x16(x16, ot, orf, n) : 0;
                mp = a > mp ? a : mp; mm = b > mm ? b : mm; mv = c > mv ? c : mv; mo = d > mo ? d : mo;
                CHECK(a <= 1 && b <= 1 && c <= 1 && d <= 1, "path %s n=%zu %s grads16=%d out=%d variant=%d: ulp p %lld m %lld v %lld out %lld",
                      adamw_path_name(path), n, x16 ? "fp16" : "bf16", gbf, outon, variant, (long long)a, (long long)b, (long long)c, (long long)d);
                if (outon) {   // the 16-bit copy bit for bit (NaN payloads included)
                    size_t diff = 0;
                    for (size_t i = 0; i < n; i++) diff += ot[i] != orf[i];
                    CHECK(diff == 0, "path %s n=%zu %s: %zu 16-bit outputs differ in their bits", adamw_path_name(path), n,
                          x16 ? "fp16" : "bf16", diff);
                }
                if (!outon) {   // bf16 output off must leave the buffer untouched
                    int touched = 0;
                    for (size_t i = 0; i < n; i++) touched |= ot[i] != 0xffff;
                    CHECK(!touched, "path %s n=%zu: bf16 output written although NULL", adamw_path_name(path), n);
                }
                free(p0); free(g); free(pr); free(mr); free(vr); free(pt); free(mt); free(vt); free(gb); free(orf); free(ot);
                cases++;
            }
        }
        printf("    path %-6s %3d cases: max ulp diff p %lld, m %lld, v %lld, 16-bit out %lld%s\n", adamw_path_name(path), cases,
               (long long)mp, (long long)mm, (long long)mv, (long long)mo,
               (mp | mm | mv | mo) == 0 ? " (bitwise identical)" : "");
    }
    adamw_cpu_set_path(ADAMW_PATH_AUTO);

    // the scalar reference itself against the formula evaluated in double (one step, finite data),
    // decoupled (AdamW) and L2 (Adam) weight decay
    for (int l2 = 0; l2 < 2; l2++) {
        size_t n = 100003;
        Rng r = {99};
        float *p = falloc(n), *g = falloc(n), *m = falloc(n), *v = falloc(n);
        double maxrel = 0;
        make_params(&r, p, n, 0); make_grads(&r, g, n, 0);
        for (size_t i = 0; i < n; i++) { m[i] = rng_normal(&r) * 0.01f; v[i] = fabsf(rng_normal(&r)) * 1e-4f; }
        AdamWParams hp = hparams(3e-3f, 0.1f, 5, 0.8f, l2);
        double *pd = (double *)xmalloc(n * sizeof(double), "pd");
        double *md = (double *)xmalloc(n * sizeof(double), "md"), *vd = (double *)xmalloc(n * sizeof(double), "vd");
        for (size_t i = 0; i < n; i++) {
            double gg = (double)g[i] * hp.grad_scale + (l2 ? (double)hp.weight_decay * p[i] : 0.0);
            md[i] = hp.beta1 * (double)m[i] + (1.0 - hp.beta1) * gg;
            vd[i] = hp.beta2 * (double)v[i] + (1.0 - hp.beta2) * gg * gg;
            double pp = (double)p[i] - (l2 ? 0.0 : (double)hp.lr * hp.weight_decay * p[i]);
            pd[i] = pp - hp.lr / (1 - pow(hp.beta1, hp.t)) * md[i] / (sqrt(vd[i]) / sqrt(1 - pow(hp.beta2, hp.t)) + hp.eps);
        }
        float *p0 = falloc(n);
        memcpy(p0, p, n * 4);
        AdamWConsts k = adamw_consts(hp);
        adamw_range_scalar(&k, p, g, NULL, m, v, NULL, n);
        // normwise errors (m cancels, so elementwise relative error says nothing): the update p - p0 against
        // the exact update, m and v against exact
        double du = 0, mu = 0, dm = 0, mm = 0, dv = 0, mv = 0;
        for (size_t i = 0; i < n; i++) {
            du = fmax(du, fabs(((double)p[i] - p0[i]) - (pd[i] - p0[i]))); mu = fmax(mu, fabs(pd[i] - p0[i]));
            dm = fmax(dm, fabs(m[i] - md[i])); mm = fmax(mm, fabs(md[i]));
            dv = fmax(dv, fabs(v[i] - vd[i])); mv = fmax(mv, fabs(vd[i]));
        }
        maxrel = fmax(dm / mm, dv / mv);
        printf("    scalar reference (%s weight decay) vs the formula in double, one step: normwise rel err of the update %.2e, m %.2e, v %.2e\n",
               l2 ? "L2" : "decoupled", du / mu, dm / mm, dv / mv);
        CHECK(du / mu < 1e-5 && maxrel < 1e-6, "scalar reference (l2 %d) differs from the double-precision formula", l2);
        free(md); free(vd); free(p0);
        free(p); free(g); free(m); free(v); free(pd);
    }
}

// ---------------------------------------------------------------------------
// (b) against torch.optim.AdamW
static void write_f32(const char *dir, const char *name, const float *x, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen_or_die(path, "wb");
    fwrite_or_die(x, sizeof(float), n, f, path);
    fclose(f);
}
static int read_f32(const char *dir, const char *name, float *x, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(x, sizeof(float), n, f);
    fclose(f);
    return got == n;
}

// One comparison with torch: the inputs (written to dir for tests/adamw_torch_ref.py), and the
// reference's outputs checked against every CPU path. l2: torch.optim.Adam (weight decay added to
// the gradient) against l2_decay.
typedef struct {
    size_t n; int steps; float wd; int bf16_grads, vary_scale, l2;
    char dir[32];
    float *p0, *grads, lrs[64], scales[64];
    uint16_t *gb;
} TorchCase;
static const float TORCH_B1 = 0.9f, TORCH_B2 = 0.95f, TORCH_EPS = 1e-8f;

static void torch_case_write(TorchCase *c) {
    strcpy(c->dir, "/tmp/adamw_test.XXXXXX");
    if (!mkdtemp(c->dir)) fatal("mkdtemp failed");
    size_t n = c->n; int steps = c->steps, bf16_grads = c->bf16_grads, vary_scale = c->vary_scale;
    const char *dir = c->dir;
    Rng r = {4242 + n + (size_t)(c->wd * 1000) + bf16_grads};
    float *p0 = c->p0 = falloc(n), *grads = c->grads = falloc(n * steps), *lrs = c->lrs, *scales = c->scales;
    uint16_t *gb = c->gb = halloc(n * steps);
    make_params(&r, p0, n, 0);
    for (int s = 0; s < steps; s++) {
        make_grads(&r, grads + (size_t)s * n, n, 0);
        if (bf16_grads)
            for (size_t i = 0; i < n; i++) {
                gb[(size_t)s * n + i] = float_to_bf16_rne(grads[(size_t)s * n + i]);
                grads[(size_t)s * n + i] = bf16_to_float(gb[(size_t)s * n + i]);
            }
        lrs[s] = 1e-3f * (float)(s + 1) / (float)steps * 2.0f;   // a warmup ramp: lr changes every step
        scales[s] = vary_scale ? 0.5f + 0.05f * (float)s : 1.0f;
    }
    write_f32(dir, "p0.f32", p0, n);
    write_f32(dir, "grads.f32", grads, n * steps);
    write_f32(dir, "lrs.f32", lrs, steps);
    write_f32(dir, "scales.f32", scales, steps);
}

// status: the reference's exit status (77: torch missing, already reported)
static void torch_case_check(TorchCase *c, int status) {
    size_t n = c->n; int steps = c->steps, bf16_grads = c->bf16_grads, vary_scale = c->vary_scale, l2 = c->l2;
    const char *dir = c->dir;
    const float b1 = TORCH_B1, b2 = TORCH_B2, eps = TORCH_EPS, wd = c->wd;
    float *p0 = c->p0, *grads = c->grads, *lrs = c->lrs, *scales = c->scales;
    uint16_t *gb = c->gb;
    float *pt = falloc(n), *mt = falloc(n), *vt = falloc(n);
    if (status == 77) {
        // no torch: test_torch said so once; only the files go
    } else if (status != 0 || !read_f32(dir, "p.f32", pt, n) || !read_f32(dir, "m.f32", mt, n) || !read_f32(dir, "v.f32", vt, n)) {
        CHECK(0, "torch reference failed (exit %d) for %s", status, dir);
    } else {
        // exact reference: the same steps in double from the same float inputs
        double *pd = (double *)xmalloc(n * sizeof(double), "pd"), *md = (double *)xcalloc(n * sizeof(double), "md");
        double *vd = (double *)xcalloc(n * sizeof(double), "vd");
        for (size_t i = 0; i < n; i++) pd[i] = p0[i];
        for (int s = 0; s < steps; s++) {
            double bc1 = 1 - pow((double)b1, s + 1), bc2 = 1 - pow((double)b2, s + 1);
            for (size_t i = 0; i < n; i++) {
                double g = (double)grads[(size_t)s * n + i] * (double)scales[s];
                if (l2) g += (double)wd * pd[i];
                md[i] = (double)b1 * md[i] + (1 - (double)b1) * g;
                vd[i] = (double)b2 * vd[i] + (1 - (double)b2) * g * g;
                if (!l2) pd[i] -= (double)lrs[s] * (double)wd * pd[i];
                pd[i] -= (double)lrs[s] / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + (double)eps);
            }
        }
        // error measure: normwise, max_i |a_i - b_i| / max_i |b_i| per tensor. Elementwise relative error
        // is not meaningful here: m cancels (b1*m + (1-b1)*g with opposite signs) and p crosses zero,
        // so even torch is 1e-2 (m) and 1e-5 (p) away from the exact result elementwise.
        double tp, tm, tv, mp = 0, mm = 0, mv = 0, dp = 0, dm = 0, dv = 0;
        for (size_t i = 0; i < n; i++) {
            mp = fmax(mp, fabs(pd[i])); mm = fmax(mm, fabs(md[i])); mv = fmax(mv, fabs(vd[i]));
            dp = fmax(dp, fabs(pt[i] - pd[i])); dm = fmax(dm, fabs(mt[i] - md[i])); dv = fmax(dv, fabs(vt[i] - vd[i]));
        }
        tp = dp / mp; tm = dm / mm; tv = dv / mv;
        printf("    %s n=%zu wd=%g %s grads%s (normwise rel err, max|a-b|/max|b|)\n      torch  vs fp64 exact:                                    p %.2e m %.2e v %.2e\n",
               l2 ? "Adam (L2)" : "AdamW", n, (double)wd, bf16_grads ? "bf16" : "fp32", vary_scale ? ", grad_scale" : "", tp, tm, tv);
        for (int path = ADAMW_PATH_SCALAR; path <= ADAMW_PATH_AVX512; path++) {
            if (!adamw_cpu_path_supported(path)) continue;
            adamw_cpu_set_path(path);
            float *p = falloc(n), *m = falloc(n), *v = falloc(n);
            memcpy(p, p0, n * 4); memset(m, 0, n * 4); memset(v, 0, n * 4);
            for (int s = 0; s < steps; s++) {
                AdamWParams hp = {lrs[s], b1, b2, eps, wd, s + 1, scales[s], l2};
                if (bf16_grads) adamw_cpu_step_bf16grad(p, gb + (size_t)s * n, m, v, NULL, n, hp);
                else adamw_cpu_step(p, grads + (size_t)s * n, m, v, NULL, n, hp);
            }
            double ap = 0, am = 0, av = 0, rp = 0, rm = 0, rv = 0, xp = 0, xm = 0, xv = 0;
            int64_t up = 0;
            for (size_t i = 0; i < n; i++) {
                ap = fmax(ap, fabs((double)p[i] - pt[i])); am = fmax(am, fabs((double)m[i] - mt[i]));
                av = fmax(av, fabs((double)v[i] - vt[i]));
                rp = fmax(rp, fabs((double)pt[i])); rm = fmax(rm, fabs((double)mt[i])); rv = fmax(rv, fabs((double)vt[i]));
                xp = fmax(xp, fabs(p[i] - pd[i])); xm = fmax(xm, fabs(m[i] - md[i])); xv = fmax(xv, fabs(v[i] - vd[i]));
                int64_t u = ulp_diff(p[i], pt[i]); if (fabs(pt[i]) > 1e-2 && u > up) up = u;
            }
            double ep = ap / rp, em = am / rm, ev = av / rv;
            printf("      path %-6s vs torch: p %.2e m %.2e v %.2e (p: %lld ulp max where |p|>1e-2) | vs fp64 exact: p %.2e m %.2e v %.2e\n",
                   adamw_path_name(path), ep, em, ev, (long long)up, xp / mp, xm / mm, xv / mv);
            CHECK(ep <= 1e-6 && em <= 1e-6 && ev <= 1e-6, "vs torch: n=%zu wd=%g path %s: rel err p %g m %g v %g", n, (double)wd,
                  adamw_path_name(path), ep, em, ev);
            free(p); free(m); free(v);
        }
        free(pd); free(md); free(vd);
        adamw_cpu_set_path(ADAMW_PATH_AUTO);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("warning: could not remove %s\n", dir);
    free(p0); free(grads); free(gb); free(pt); free(mt); free(vt);
}

static void test_torch(void) {
    const char *py = getenv("PYTHON");
    if (!py || !*py) py = "/usr/bin/python3";
    printf("(b) 10 steps against torch.optim.AdamW and torch.optim.Adam (L2) (%s; lr ramps each step; betas 0.9/0.95, eps 1e-8)\n", py);
    TorchCase cases[] = {
        {.n = 1000003, .steps = 10, .wd = 0.1f},
        {.n = 1000003, .steps = 10, .wd = 0.0f, .vary_scale = 1},
        {.n = 17, .steps = 10, .wd = 0.1f, .bf16_grads = 1, .vary_scale = 1},
        {.n = 1000003, .steps = 10, .wd = 0.1f, .vary_scale = 1, .l2 = 1},
        {.n = 17, .steps = 10, .wd = 0.1f, .bf16_grads = 1, .vary_scale = 1, .l2 = 1},
    };
    int n_cases = (int)(sizeof cases / sizeof cases[0]);
    // one python for all the cases: starting it and importing torch is most of its time
    char cmd[2048];
    int len = snprintf(cmd, sizeof cmd, "'%s' tests/adamw_torch_ref.py", py);
    for (int k = 0; k < n_cases; k++) {
        TorchCase *c = &cases[k];
        torch_case_write(c);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s %zu %d %.9g %.9g %.9g %.9g %s", c->dir, c->n, c->steps,
                        (double)TORCH_B1, (double)TORCH_B2, (double)TORCH_EPS, (double)c->wd, c->l2 ? "adam" : "adamw");
    }
    int rc = system(cmd);
    int status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
    if (status == 77) printf("    SKIPPED: torch is not importable by %s (set PYTHON=...)\n", py);
    for (int k = 0; k < n_cases; k++) torch_case_check(&cases[k], status);
}

// ---------------------------------------------------------------------------
// (c) tiled variant
typedef struct {
    size_t n, next, calls, max_count;
    int *cover;
    int order_ok, thread_ok;
    pthread_t caller;
    const float *p; const uint16_t *out;   // live outputs
    float *snap_p; uint16_t *snap_out;     // copies taken inside the callback
} TileCtx;

static void on_tile(size_t off, size_t cnt, void *vctx) {
    TileCtx *c = (TileCtx *)vctx;
    if (off != c->next) c->order_ok = 0;
    c->next = off + cnt;
    c->calls++;
    if (cnt > c->max_count) c->max_count = cnt;
    if (!pthread_equal(pthread_self(), c->caller)) c->thread_ok = 0;
    for (size_t i = off; i < off + cnt && i < c->n; i++) c->cover[i]++;
    memcpy(c->snap_p + off, c->p + off, cnt * sizeof(float));        // what a cudaMemcpyAsync would see
    if (c->out) memcpy(c->snap_out + off, c->out + off, cnt * sizeof(uint16_t));
}

static void test_tiled(void) {
    int fail0 = g_fail;
    printf("(c) tiled variant: identical results, on_tile covers every element once, outputs final at the callback\n");
    static const size_t sizes[] = {7, 1000, 1000003};
    static const size_t tiles[] = {0, 1, 64, 100, 4096, 65536, 333333, 1000003, 5000000};
    int cases = 0;
    for (int si = 0; si < 3; si++)
    for (int ti = 0; ti < (int)(sizeof(tiles) / sizeof(tiles[0])); ti++)
    for (int gbf = 0; gbf < 2; gbf++) {
        size_t n = sizes[si], tile = tiles[ti];
        Rng r = {777 + n + tile};
        float *p0 = falloc(n), *g = falloc(n), *pa = falloc(n), *ma = falloc(n), *va = falloc(n);
        float *pb = falloc(n), *mb = falloc(n), *vb = falloc(n), *snap_p = falloc(n);
        uint16_t *gb = halloc(n), *oa = halloc(n), *ob = halloc(n), *snap_out = halloc(n);
        int *cover = (int *)xcalloc(n * sizeof(int), "cover");
        make_params(&r, p0, n, 0);
        memcpy(pa, p0, n * 4); memcpy(pb, p0, n * 4);
        memset(ma, 0, n * 4); memset(va, 0, n * 4); memset(mb, 0, n * 4); memset(vb, 0, n * 4);
        memset(oa, 0, n * 2); memset(ob, 0, n * 2); memset(snap_out, 0, n * 2);
        for (int t = 1; t <= 2; t++) {
            make_grads(&r, g, n, 0);
            for (size_t i = 0; i < n; i++) gb[i] = float_to_bf16_rne(g[i]);
            AdamWParams hp = hparams(1e-3f, 0.1f, t, 1.0f, 0);
            const void *gr = gbf ? (const void *)gb : (const void *)g;
            adamw_cpu_step_tiled(pa, gr, gbf, ma, va, oa, n, hp, 0, NULL, NULL);
            TileCtx c;
            memset(&c, 0, sizeof c);
            c.n = n; c.cover = cover; c.order_ok = 1; c.thread_ok = 1; c.caller = pthread_self();
            c.p = pb; c.out = ob; c.snap_p = snap_p; c.snap_out = snap_out;
            memset(cover, 0, n * sizeof(int));
            adamw_cpu_step_tiled(pb, gr, gbf, mb, vb, ob, n, hp, tile, on_tile, &c);
            size_t expect_tile = tile == 0 || tile >= n ? n : (tile + 63) / 64 * 64;
            if (expect_tile > n) expect_tile = n;
            int covered = 1;
            for (size_t i = 0; i < n; i++) covered &= cover[i] == 1;
            CHECK(c.calls == (n + expect_tile - 1) / expect_tile, "tiled n=%zu tile=%zu: %zu calls", n, tile, c.calls);
            CHECK(covered && c.order_ok && c.next == n, "tiled n=%zu tile=%zu: on_tile coverage/order wrong", n, tile);
            CHECK(c.thread_ok, "tiled n=%zu tile=%zu: on_tile not called on the calling thread", n, tile);
            CHECK(c.max_count == expect_tile, "tiled n=%zu tile=%zu: tile of %zu elements, expected %zu", n, tile,
                  c.max_count, expect_tile);
            CHECK(!memcmp(snap_p, pb, n * 4) && !memcmp(snap_out, ob, n * 2),
                  "tiled n=%zu tile=%zu: a tile's outputs were not final when on_tile ran", n, tile);
        }
        int same = !memcmp(pa, pb, n * 4) && !memcmp(ma, mb, n * 4) && !memcmp(va, vb, n * 4) && !memcmp(oa, ob, n * 2);
        CHECK(same, "tiled n=%zu tile=%zu gbf16=%d: results differ from the untiled step", n, tile, gbf);
        cases++;
        free(p0); free(g); free(pa); free(ma); free(va); free(pb); free(mb); free(vb); free(snap_p);
        free(gb); free(oa); free(ob); free(snap_out); free(cover);
    }
    printf("    %d cases (n in {7, 1000, 1000003}, tile in {0, 1, 64, 100, 4096, 65536, 333333, n, >n}, fp32/bf16 grads): %s\n",
           cases, g_fail > fail0 ? "FAILURES above" : "all bitwise identical, every element covered once");
}

// ---------------------------------------------------------------------------
// (d) bf16 rounding and special values
static void test_bf16(void) {
    printf("(d) bf16 round-to-nearest-even, overflow, NaN and Inf\n");
    static const struct { uint32_t in; uint16_t out; const char *what; } cases[] = {
        {0x3f800000u, 0x3f80, "1.0 exact"},
        {0x3f808000u, 0x3f80, "tie 1+2^-8 -> even (down)"},
        {0x3f818000u, 0x3f82, "tie -> even (up)"},
        {0x3f808001u, 0x3f81, "just above a tie -> up"},
        {0x3f807fffu, 0x3f80, "just below a tie -> down"},
        {0xbf818000u, 0xbf82, "negative tie -> even"},
        {0x7f7f0000u, 0x7f7f, "max bf16 exact"},
        {0x7f7f8000u, 0x7f80, "tie above max bf16 -> +Inf"},
        {0x7f7fffffu, 0x7f80, "FLT_MAX -> +Inf"},
        {0xff7fffffu, 0xff80, "-FLT_MAX -> -Inf"},
        {0x7f800000u, 0x7f80, "+Inf"},
        {0xff800000u, 0xff80, "-Inf"},
        {0x7fc00000u, 0x7fc0, "qNaN"},
        {0x7f800001u, 0x7fc0, "sNaN, low payload -> qNaN (not Inf)"},
        {0xff800001u, 0xffc0, "-sNaN -> -qNaN"},
        {0x7fffffffu, 0x7fff, "NaN all ones (no carry into sign)"},
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x00008000u, 0x0000, "denormal tie -> even (0)"},
        {0x00018000u, 0x0002, "denormal tie -> even (up)"},
        {0x00000001u, 0x0000, "smallest denormal -> 0"},
        {0x007fffffu, 0x0080, "largest denormal -> min normal"},
    };
    const int nc = (int)(sizeof(cases) / sizeof(cases[0]));
    int bad = 0;
    for (int i = 0; i < nc; i++) {
        uint16_t o = float_to_bf16_rne(u2f(cases[i].in));
        if (o != cases[i].out) { bad++; CHECK(0, "bf16(0x%08x) = 0x%04x, expected 0x%04x (%s)", cases[i].in, o, cases[i].out, cases[i].what); }
    }
    CHECK(f2u(bf16_to_float(0x3f80)) == 0x3f800000u && f2u(bf16_to_float(0xffc1)) == 0xffc10000u, "bf16_to_float");
    CHECK(adamw_bf16_round(1.00390625f) == 1.0f, "adamw_bf16_round tie");
    printf("    float_to_bf16_rne: %d/%d hand-picked cases right\n", nc - bad, nc);

    // the same values through each SIMD path's output rounding: a step with lr = 0, wd = 0 and
    // zero gradients leaves p as is (sNaN gets quieted), so out must be bf16_rne(p)
    for (int path = ADAMW_PATH_SCALAR; path <= ADAMW_PATH_AVX512; path++) {
        if (!adamw_cpu_path_supported(path)) continue;
        adamw_cpu_set_path(path);
        const size_t reps = 3;   // fill 66 elements so the SIMD bodies and the tails both see every case
        size_t n = (size_t)nc * reps;
        float *p = falloc(n), *g = falloc(n), *m = falloc(n), *v = falloc(n);
        uint16_t *o = halloc(n);
        for (size_t i = 0; i < n; i++) { p[i] = u2f(cases[i % nc].in); g[i] = 0; m[i] = 0; v[i] = 0; }
        adamw_cpu_step(p, g, m, v, o, n, hparams(0.0f, 0.0f, 1, 1.0f, 0));
        int wrong = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t in = cases[i % nc].in;
            int is_nan = (in & 0x7fffffffu) > 0x7f800000u;
            uint32_t expect_p = is_nan ? (in | 0x00400000u) : in;
            if (f2u(p[i]) != expect_p || o[i] != cases[i % nc].out) wrong++;
        }
        CHECK(wrong == 0, "path %s: %d of %zu special values changed or rounded wrong by a no-op step", adamw_path_name(path), wrong, n);

        // NaN / Inf gradients: NaN poisons p, m, v (and the bf16 copy stays NaN); +-Inf gives m = +-Inf,
        // v = Inf and p = NaN (Inf/Inf); neighbours are unaffected
        for (size_t i = 0; i < n; i++) { p[i] = 0.5f; g[i] = 0.25f; m[i] = 0; v[i] = 0; }
        for (size_t i = 0; i < n; i += 5) g[i] = u2f(0x7fc00000u);
        for (size_t i = 1; i < n; i += 5) g[i] = u2f(0x7f800000u);
        for (size_t i = 2; i < n; i += 5) g[i] = u2f(0xff800000u);
        adamw_cpu_step(p, g, m, v, o, n, hparams(1e-3f, 0.1f, 1, 1.0f, 0));
        int bad_nan = 0, bad_inf = 0, bad_ok = 0;
        for (size_t i = 0; i < n; i++) {
            int ob_nan = (o[i] & 0x7fff) > 0x7f80;
            if (i % 5 == 0) bad_nan += !(isnan(p[i]) && isnan(m[i]) && isnan(v[i]) && ob_nan);
            else if (i % 5 <= 2) bad_inf += !(isnan(p[i]) && isinf(m[i]) && (m[i] > 0) == (i % 5 == 1) && isinf(v[i]) && ob_nan);
            else bad_ok += !(isfinite(p[i]) && p[i] < 0.5f && o[i] == float_to_bf16_rne(p[i]));
        }
        CHECK(bad_nan + bad_inf + bad_ok == 0, "path %s: NaN/Inf gradient handling wrong (%d NaN, %d Inf, %d finite cases)",
              adamw_path_name(path), bad_nan, bad_inf, bad_ok);
        printf("    path %-6s: no-op step keeps specials and rounds them right: %s; NaN/Inf grads -> NaN params: %s\n",
               adamw_path_name(path), wrong ? "NO" : "yes", bad_nan + bad_inf + bad_ok ? "NO" : "yes");
        free(p); free(g); free(m); free(v); free(o);
    }
    adamw_cpu_set_path(ADAMW_PATH_AUTO);
}

// ---------------------------------------------------------------------------
// (e) fp16 against the compiler's _Float16 (GCC: IEEE binary16, round to nearest even)
static uint16_t f16_bits(_Float16 h) { uint16_t b; memcpy(&b, &h, 2); return b; }
static void test_fp16(void) {
    printf("(e) fp16 conversion (util/common.h) against the compiler's _Float16\n");
    size_t bad_dec = 0, bad_enc = 0, n_enc = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        _Float16 x;
        uint16_t b = (uint16_t)h;
        memcpy(&x, &b, 2);
        float want = (float)x, got = fp16_to_float(b);
        if (isnan(want) ? !isnan(got) : f2u(want) != f2u(got)) bad_dec++;
    }
    CHECK(bad_dec == 0, "fp16_to_float: %zu of 65536 halves decoded differently from _Float16", bad_dec);
    // encode: every half-way point between neighbouring halves (the ties), one float ulp either
    // side, and a stride through all 2^32 float bit patterns
    for (int pass = 0; pass < 2; pass++) {
        uint64_t count = pass == 0 ? 65536ull * 3 : (1ull << 32) / 97;
        for (uint64_t i = 0; i < count; i++) {
            float f;
            if (pass == 0) {
                uint16_t h = (uint16_t)(i / 3);
                if ((h & 0x7c00) == 0x7c00) continue;
                float lo = fp16_to_float(h), hi = fp16_to_float((uint16_t)(h + 1));
                if ((h & 0x7fff) == 0x7bff) hi = 65536.0f;   // above the largest half: the next binade
                if (h & 0x8000) { if ((h & 0x7fff) == 0x7bff) hi = -65536.0f; }
                float mid = (lo + hi) / 2;                    // exact: fp16 has 11 significant bits
                f = i % 3 == 0 ? mid : bits_float(f2u(mid) + (i % 3 == 1 ? 1 : -1));
            } else {
                f = u2f((uint32_t)(i * 97));
            }
            uint16_t want = f16_bits((_Float16)f), got = float_to_fp16_rne(f);
            n_enc++;
            if (want != got) {
                if (isnan(f) && (want & 0x7c00) == 0x7c00 && (want & 0x3ff) && (got & 0x7c00) == 0x7c00 && (got & 0x3ff)) bad_nan++;
                else if (bad_enc++ < 5) printf("    float 0x%08x: fp16 0x%04x, _Float16 0x%04x\n", f2u(f), got, want);
            }
        }
    }
    CHECK(bad_enc == 0, "float_to_fp16_rne: %zu of %zu floats encoded differently from _Float16", bad_enc, n_enc);
    printf("    fp16_to_float: %zu of 65536 halves differ; float_to_fp16_rne: %zu of %zu floats differ (%zu NaNs with another payload)\n",
           bad_dec, bad_enc, n_enc, bad_nan);
    CHECK(float_to_fp16_rne(65504.0f) == 0x7bff && float_to_fp16_rne(65519.99f) == 0x7bff && float_to_fp16_rne(65520.0f) == 0x7c00 &&
          float_to_fp16_rne(-1e6f) == 0xfc00 && fp16_round(5.9604645e-8f) == 5.9604645e-8f && fp16_round(2.9802322e-8f) == 0.0f,
          "fp16: 65504 is the largest half, 65520 rounds to Inf, 2^-24 is the smallest, 2^-25 ties to 0");
}

int main(void) {
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("adamw_test: best CPU path %s, %d OpenMP threads\n", adamw_path_name(adamw_cpu_path()), threads);
    double t0 = wall_time();
    test_paths();
    if (getenv("ADAMW_TEST_NO_TORCH")) printf("(b) skipped (ADAMW_TEST_NO_TORCH set)\n");
    else test_torch();
    test_tiled();
    test_bf16();
    test_fp16();
    printf("adamw_test: %s (%d failure%s, %.1fs)\n", g_fail ? "FAIL" : "PASS", g_fail, g_fail == 1 ? "" : "s", wall_time() - t0);
    return g_fail ? 1 : 0;
}
