#!/usr/bin/env python3
"""Mutation testing of zeroc's suite: plausible one-line bugs, each planted in a scratch copy
of the tree and run against the tests that claim to cover it.

    bash scripts/mutate.sh                  # every mutant (hours on two busy cores: 34 in an hour at load 10-23)
    bash scripts/mutate.sh --check          # only whether each mutant's original text is still there
    bash scripts/mutate.sh --only s23-rs-sum,wpe-decay --no-baseline

A mutant is a file, an original string that must occur exactly once in it, its replacement and
the tests (names without test_) that claim to catch it, with an environment that narrows a test
where it can (tests/zero_check.py's ZERO_CHECK_* subsets). Each one is applied to a scratch copy
of the tracked files (data/ copied, node_modules/ linked), and its tests run one by one with
`TESTS=name bash tests/run.sh` until one fails: KILLED by that test. If all pass it SURVIVED.
A mutant whose original string is missing or not unique is STALE (the code moved on): it counts
neither way, and --check lists each with the file's closest line, to fix the string by hand. One
the compiler refuses is INVALID and counts neither way either. The copy builds at -O1 (the
compile is most of a mutant's time); the baseline shows the tests pass so.
A baseline first runs every test the selected mutants name on the unmutated copy: all must pass.
Results: a table on stdout and build/mutate/results.json; each test's log in build/mutate/logs/.
"""
import argparse, difflib, json, os, re, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def M(mid, path, old, new, tests, env=None, why="", equivalent=""):
    """equivalent: why no test can tell the mutant from the code (it is listed, not run, not counted)"""
    return {"id": mid, "file": path, "old": old, "new": new, "tests": tests.split(","), "env": env or {}, "why": why,
            "equivalent": equivalent}


Z2 = {"ZERO_CHECK_STAGES": "2", "ZERO_CHECK_WORLDS": "3"}
Z3 = {"ZERO_CHECK_STAGES": "3", "ZERO_CHECK_WORLDS": "3"}
Z01 = {"ZERO_CHECK_STAGES": "0,1", "ZERO_CHECK_WORLDS": "2"}

MUTANTS = [
    # ---- zero.h: the four stages
    M("s0-allreduce-sum", "zero.h",
      "zero_full_grads(z, u), z->plan.u[u].padded, ZPARAM_DT, OP_AVG);",
      "zero_full_grads(z, u), z->plan.u[u].padded, ZPARAM_DT, OP_SUM);", "zero", Z01,
      "stage 0's all-reduce sums instead of averaging"),
    M("s1-rs-sum", "zero.h",
      "zero_grad_slice(z, u), z->plan.u[u].shard, ZPARAM_DT, OP_AVG);",
      "zero_grad_slice(z, u), z->plan.u[u].shard, ZPARAM_DT, OP_SUM);", "zero", Z01,
      "stage 1's reduce-scatter sums"),
    M("s23-rs-sum", "zero.h",
      "r = comm_ireduce_scatter(z->comm, z->unit_grads[u], z->rs_scratch, U->shard, ZPARAM_DT, OP_AVG);",
      "r = comm_ireduce_scatter(z->comm, z->unit_grads[u], z->rs_scratch, U->shard, ZPARAM_DT, OP_SUM);", "zero", Z2,
      "the issue's: stage 2-3 reduce-scatter sums instead of averaging"),
    M("s2-accum-first", "zero.h",
      "z->grad_shard + U->shard_off, z->rs_scratch, U->shard, z->micro == 0);",
      "z->grad_shard + U->shard_off, z->rs_scratch, U->shard, z->micro == 1);", "zero", Z2,
      "the reduced slice overwrites instead of accumulating on the wrong micro-step"),
    M("s2-final-micro", "zero.h",
      "if (z->micro == z->cfg->accum - 1) { zero_grad_final(z, u); z->reduced_in_backward++; }",
      "if (z->micro == z->cfg->accum) { zero_grad_final(z, u); z->reduced_in_backward++; }", "zero", Z2,
      "the last micro-step's bookkeeping one off"),
    M("norm-no-allreduce", "zero.h",
      "if (ZERO_STAGE >= 1) comm_all_reduce_host(z->comm, &sumsq, 1, DT_F64, OP_SUM);",
      "if (ZERO_STAGE >= 2) comm_all_reduce_host(z->comm, &sumsq, 1, DT_F64, OP_SUM);", "zero", Z01,
      "the gradient-norm all-reduce skipped below stage 2"),
    M("clip-coef", "zero.h",
      "< 1.0f ? grad_clip / (norm + 1e-6f) : 1.0f;",
      "< 1.0f ? grad_clip / (norm * norm + 1e-6f) : 1.0f;", "gpt_cpu",
      None, "the clip coefficient from the squared norm"),
    M("clip-never", "zero.h",
      "return grad_clip > 0 && grad_clip / (norm + 1e-6f) < 1.0f ?",
      "return grad_clip > 0 && grad_clip / (norm + 1e-6f) > 1.0f ?", "gpt_cpu", None,
      "clipping applied when it should not be"),
    M("s12-no-gather", "zero.h",
      "if (ZERO_STAGE == 1 || ZERO_STAGE == 2) zero_all_gather_params(z);",
      "if (ZERO_STAGE == 1) zero_all_gather_params(z);", "zero", Z2,
      "stage 2 forgets to all-gather the updated slices"),
    M("s3-persistent-gather", "zero.h",
      "if (!U->persistent || z->place.whole) continue;",
      "if (U->persistent || z->place.whole) continue;", "zero", Z3,
      "stage 3 refreshes the wrong units after the step"),
    M("s3-prefetch-off-by-one", "zero.h",
      "        zero_start_gather(z, z->cursor, 0);",
      "        zero_start_gather(z, z->cursor + 1 < z->n_order ? z->cursor + 1 : z->cursor, 0);", "zero", Z3,
      "stage 3 prefetches the unit after next"),
    M("s3-release-keep", "zero.h",
      "if (z->training && s->keep_for_backward) return;",
      "if (s->keep_for_backward) return;", "zero,sample", Z3,
      "an evaluation forward keeps the units a backward would reuse",
      equivalent="the units kept are the forward's last, so nothing is gathered after them and the pass's end releases "
                 "them; a training forward keeps the same units, so no peak grows: no output changes"),
    M("s3-live-leak", "zero.h",
      "    z->live -= z->ring[s].n;",
      "", "zero", Z3,
      "stage 3 never subtracts a released unit from the live count"),
    M("s2-slot-alternate", "zero.h",
      "if (slot < 0) { slot = z->slot_next; z->slot_next ^= 1; }",
      "if (slot < 0) { slot = z->slot_next; }", "zero", Z2,
      "stage 2's two slots do not alternate",
      equivalent="on the CPU a unit's reduce-scatter is complete before the next unit opens a slot, so one slot is "
                 "enough; on the GPU the reduce stream would race the next unit's backward, which only a GPU run shows"),
    M("s2-slot-not-zeroed", "zero.h",
      "    zb_fill(&z->be, g, 0, z->plan.u[u].padded * sizeof(floatX));",
      "", "zero", Z2,
      "a stage-2 gradient slot opened without zeroing it"),
    M("step-begin-zero", "zero.h",
      "if (ZERO_STAGE <= 1) zb_fill(&z->be, z->grads, 0, z->plan.full_elems * sizeof(floatX));",
      "if (ZERO_STAGE < 1) zb_fill(&z->be, z->grads, 0, z->plan.full_elems * sizeof(floatX));", "zero", Z01,
      "stage 1 accumulates gradients across steps"),
    # ---- zero/: the plan, the backend, loading
    M("plan-slice-start", "zero/plan.h",
      "static size_t zero_slice_start(const ZeroPlan *p, int u) { return (size_t)p->part * p->u[u].shard; }",
      "static size_t zero_slice_start(const ZeroPlan *p, int u) { return (size_t)p->part * p->u[u].shard + (p->part > 0); }",
      "zero", Z2, "a slice start off by one"),
    M("plan-seg-end", "zero/plan.h",
      "b = t->offset + t->numel < hi ? t->offset + t->numel : hi;",
      "b = t->offset + t->numel < hi ? t->offset + t->numel - 1 : hi;", "zero,gpt_cpu", Z2,
      "an optimizer segment one element short"),
    M("plan-persistent", "zero/plan.h",
      "u->persistent = stage == 3 && (long long)u->numel <= cfg->persistence_threshold;",
      "u->persistent = stage == 3 && (long long)u->numel < cfg->persistence_threshold;", "zero,memory", Z3,
      "persistence threshold strict instead of inclusive (DeepSpeed: <=)"),
    M("plan-live-cap", "zero/plan.h",
      "p->arena_elems = p->live_cap + max_np;",
      "p->arena_elems = p->live_cap;", "zero", Z3,
      "the gather ring without its largest unit of slack"),
    M("host-sumsq-tail", "zero/host.h",
      "for (int l = 0; i < n; i++, l++) lane[l] += (double)g[i] * g[i];",
      "for (int l = 0; i + 1 < n; i++, l++) lane[l] += (double)g[i] * g[i];", "gpt_cpu", None,
      "the norm drops the last element of a block"),
    M("host-accum-first", "zero/host.h",
      "acc[i] = first ? x : acc[i] + x;",
      "acc[i] = acc[i] + x;", "zero", Z2,
      "stage 2-3 gradient shard not reset at the first micro-step"),
    M("load-s3-lo", "zero/load.h",
      "size_t lo = ZERO_STAGE == 3 ? zero_slice_start(p, i) : 0, n = ZERO_STAGE == 3 ? U->shard : U->padded;",
      "size_t lo = 0, n = ZERO_STAGE == 3 ? U->shard : U->padded;", "zero", Z3,
      "stage 3 loads every rank's slice from the unit's start"),
    # ---- ZeRO-Offload's delayed update and Twin-Flow's split
    M("dpu-delay-early", "zero/dpu.h",
      "return z->place.dpu && t > z->cfg->dpu_warmup;",
      "return z->place.dpu && t >= z->cfg->dpu_warmup;", "dpu", None,
      "the delay starts one update early"),
    M("dpu-save-no-install", "train/loop.h",
      "    zero_step_install(&m->zero);   // DPU: a checkpoint holds the pending update applied (zero/dpu.h)",
      "    ;", "dpu", None,
      "a checkpoint saved with the delayed update still in flight"),
    M("dpu-hpz-fresh", "zero.h",
      "    if (!zero_dpu_install(z)) return 0;\n    zero_zpp_step_end(z);",
      "    if (!zero_dpu_install(z)) return 0;", "dpu", None,
      "hpZ's secondary parts kept across DPU's install"),
    M("twin-split-late", "zero/placement.h",
      "if (in == 0 && k == first) off = zero_seg_shard_off(p, &p->seg[s]);",
      "if (in == 0 && k == first + 1) off = zero_seg_shard_off(p, &p->seg[s]);", "dpu", None,
      "CPU-Adam's side starts one sub-group late"),
    # ---- adamw.cuh: test_adamw checks it against torch too, but takes 3-4 minutes at -O1 on a busy
    # machine; test_gpt_cpu's AdamW steps against PyTorch (and test_config's Adam with L2) are quicker
    M("adam-bias1", "adamw.cuh",
      "double bc1 = 1.0 - pow((double)hp.beta1, (double)t);",
      "double bc1 = 1.0 - pow((double)hp.beta1, (double)(t + 1));", "gpt_cpu", None,
      "bias correction one step ahead"),
    M("adam-bias2", "adamw.cuh",
      "k.ibc2 = (float)(1.0 / sqrt(bc2));",
      "k.ibc2 = (float)(1.0 / bc2);", "gpt_cpu", None,
      "the second moment's bias correction without its square root"),
    M("adam-wd-lr", "adamw.cuh",
      "k.nlrwd = hp.l2_decay ? 0.0f : (float)(-((double)hp.lr * (double)hp.weight_decay));",
      "k.nlrwd = hp.l2_decay ? 0.0f : (float)(-((double)hp.weight_decay));", "gpt_cpu", None,
      "decoupled decay not scaled by the learning rate"),
    M("adam-l2-off", "adamw.cuh",
      "k.l2wd = hp.l2_decay ? hp.weight_decay : 0.0f;",
      "k.l2wd = 0.0f;", "config", None,
      "Adam's L2 decay dropped"),
    M("adam-t0", "adamw.cuh",
      "int t = hp.t < 1 ? 1 : hp.t;",
      "int t = hp.t < 1 ? 1 : hp.t - 1 < 1 ? 1 : hp.t - 1;", "gpt_cpu", None,
      "the step count one behind"),
    # ---- model layout: the weight-decay flags
    M("wpe-decay", "model/model.h",
      'if (gpt2) unit_add(u, "wpe", c->max_seq, C, 1, std, 0, c->max_seq);',
      'if (gpt2) unit_add(u, "wpe", c->max_seq, C, 0, std, 0, c->max_seq);', "gpt_cpu", None,
      "the issue's: GPT-2's position embedding no longer decayed"),
    M("lnf-decay", "model/model.h",
      'unit_add(u, gpt2 ? "lnf_w" : "norm_w", 1, C, 0, 0, 1, 1);',
      'unit_add(u, gpt2 ? "lnf_w" : "norm_w", 1, C, 1, 0, 1, 1);', "gpt_cpu", None,
      "the final norm's weight decayed"),
    # ---- checkpoints
    M("ckpt-rng", "train/checkpoint.h",
      "    st->rng = m.rng;",
      "    st->rng = st->rng;", "gpt_cpu,signals", None,
      "the issue's: the sampling RNG not restored on resume"),
    M("ckpt-step", "train/checkpoint.h",
      "    st->step = m.step;",
      "    st->step = m.step - 1;", "gpt_cpu", None,
      "the resumed step one behind"),
    M("ckpt-reshard-src", "train/checkpoint.h",
      "size_t src_off = w_shard_off[i] + (a - (size_t)wp * w_shard), dst = U->shard_off + (a - lo);",
      "size_t src_off = w_shard_off[i] + (a - (size_t)wp * w_shard), dst = U->shard_off + (a - lo) + (lo > 0);",
      "gpt_cpu", None, "resharding puts a piece one element off"),
    M("ckpt-reshard-v", "train/checkpoint.h",
      "ok = fseeko(of, 1024 + 4 * (off_t)(which * w_shard_elems + src_off), SEEK_SET) == 0",
      "ok = fseeko(of, 1024 + 4 * (off_t)(src_off), SEEK_SET) == 0", "gpt_cpu", None,
      "v read from m's place on resume"),
    M("ckpt-manifest-crc", "train/checkpoint_format.h",
      "if (crc != (uint32_t)own)",
      "if (crc != (uint32_t)own && 0)", "resume_checks", None,
      "an edited manifest accepted"),
    M("ckpt-keep-last", "train/checkpoint.h",
      "static void checkpoint_prune(const char *dir, int keep, int saved, int say) {",
      "static void checkpoint_prune(const char *dir, int keep, int saved, int say) { keep++;", "resume_checks", None,
      "--keep-last keeps one too many"),
    # ---- the DeepSpeed config mapping
    M("ds-accum", "config/ds_config.h",
      "case K_ACCUM: c->accum = (int)d; c->from[FROM_ACCUM] = path; break;",
      "case K_ACCUM: c->accum = (int)d + 1; c->from[FROM_ACCUM] = path; break;", "config", None,
      "gradient_accumulation_steps one off"),
    M("ds-betas", "config/ds_config.h",
      "c->beta2 = (float)cJSON_GetArrayItem(v, 1)->valuedouble;",
      "c->beta2 = (float)cJSON_GetArrayItem(v, 0)->valuedouble;", "config", None,
      "betas[1] read from betas[0]"),
    M("ds-wd", "config/ds_config.h",
      "case K_WEIGHT_DECAY: c->weight_decay = (float)d; break;",
      "case K_WEIGHT_DECAY: break;", "config", None,
      "optimizer.params.weight_decay ignored"),
    M("ds-hysteresis", "config/ds_config.h",
      "case K_HYSTERESIS: c->hysteresis = (int)d; break;",
      "case K_HYSTERESIS: c->hysteresis = (int)d + 1; break;", "config", None,
      "fp16.hysteresis one off"),
    M("ds-warmup-type", "config/ds_config.h",
      'static const char *const types[] = {"linear", "log"};',
      'static const char *const types[] = {"log", "linear"};', "config", None,
      "warmup_type's names swapped"),
    M("ds-total-steps", "config/ds_config.h",
      "case K_TOTAL_STEPS: c->sched_total = (int)d; c->steps = (int)d; c->from[FROM_SCHED_TOTAL] = path; break;",
      "case K_TOTAL_STEPS: c->sched_total = (int)d; c->from[FROM_SCHED_TOTAL] = path; break;", "config", None,
      "total_num_steps no longer the run's length"),
    # ---- the loss scaler
    M("scaler-iter-on-overflow", "train/loss_scaler.h",
      "        s->last_overflow_iter = s->iter;",
      "        s->last_overflow_iter = s->iter + 1;", "config", None,
      "the iteration of the last overflow one off"),
    M("scaler-window", "train/loss_scaler.h",
      "if ((s->iter - s->last_overflow_iter) % s->window == 0) {",
      "if ((s->iter - s->last_overflow_iter + 1) % s->window == 0) {", "config", None,
      "the scale doubles one step early"),
    M("scaler-hysteresis-refill", "train/loss_scaler.h",
      "if (!s->consecutive_hysteresis) s->cur_hysteresis = s->hysteresis;",
      "if (s->consecutive_hysteresis) s->cur_hysteresis = s->hysteresis;", "config", None,
      "the hysteresis not refilled when the scale doubles"),
    M("scaler-min", "train/loss_scaler.h",
      "s->scale = next > s->min_scale ? next : s->min_scale;",
      "s->scale = next;", "config", None,
      "the scale falls below min_loss_scale"),
    # ---- the dataloader
    M("data-epoch-boundary", "dataloader.h",
      "if (d->next + stride > d->n_seq) {",
      "if (d->next + stride >= d->n_seq) {", "shards", None,
      "an epoch ends one batch early"),
    M("data-permute", "dataloader.h",
      "long long j = (long long)(rng_u64(r) % (uint64_t)(i + 1));",
      "long long j = (long long)(rng_u64(r) % (uint64_t)i);", "shards", None,
      "Fisher-Yates' j never i (Sattolo's cycle)"),
    M("data-rng-epoch", "dataloader.h",
      "r.state = rng_u64(&r) ^ (uint64_t)epoch;",
      "r.state = rng_u64(&r);", "shards", None,
      "every epoch shuffled the same way"),
    M("data-first-seq", "dataloader.h",
      "long long f = (s + d->T - 1) / d->T;                 // first multiple of T at or after s",
      "long long f = s / d->T;                 // first multiple of T at or after s", "shards", None,
      "a shard's first sequence rounded down"),
    # ---- the tokenizer
    M("tok-tie", "tokenizer.h",
      "if (q->rank < it.rank || (q->rank == it.rank && q->pos < it.pos)) break;",
      "if (q->rank < it.rank || (q->rank == it.rank && q->pos > it.pos)) break;", "tokenizer", None,
      "a BPE merge tie broken the wrong way"),
    M("tok-pop-child", "tokenizer.h",
      "(t->heap[c + 1].rank == t->heap[c].rank && t->heap[c + 1].pos < t->heap[c].pos))) c++;",
      "(t->heap[c + 1].rank == t->heap[c].rank && t->heap[c + 1].pos > t->heap[c].pos))) c++;", "tokenizer", None,
      "the heap's sift-down prefers the rightmost of equal ranks"),
    M("tok-rank-limit", "tokenizer.h",
      "if (whole >= 0 && whole < t->rank_limit) { tokvec_push(v, whole); return; }",
      "if (whole >= 0) { tokvec_push(v, whole); return; }", "tokenizer,hf_tokenizer", None,
      "a whole piece taken as a token past the merge limit"),
    # ---- the sampler
    M("sample-temperature", "train/sample.h",
      "s->prob[j] = exp((logits[s->order[j]] - mx) / t);",
      "s->prob[j] = exp((logits[s->order[j]] - mx) * t);", "sample", None,
      "temperature multiplies instead of dividing"),
    M("sample-top-p", "train/sample.h",
      "if (cum >= keep) { n = j + 1; sum = cum; break; }",
      "if (cum >= keep) { n = j + 1; break; }", "sample", None,
      "top-p keeps the full sum (renormalises wrongly)"),
    M("sample-pick", "train/sample.h",
      "for (int j = 0; j < n; j++) { acc += s->prob[j]; if (acc > r) return s->order[j]; }",
      "for (int j = 0; j < n; j++) { acc += s->prob[j]; if (acc > r) return s->order[j > 0 ? j - 1 : 0]; }",
      "sample", None, "the token before the one drawn"),
    # ---- the monitors
    M("mon-samples", "train/monitor.h",
      "long long before = (long long)(s->step - 1) * mon->samples_per_step, after = before + mon->samples_per_step;",
      "long long before = (long long)s->step * mon->samples_per_step, after = before + mon->samples_per_step;", "monitor",
      None, "the training loss logged at the samples after the step"),
    M("mon-keep", "train/monitor.h",
      "return MONITOR_METRICS[i].at_start ? step < s : step <= s;",
      "return MONITOR_METRICS[i].at_start ? step <= s : step <= s;", "monitor", None,
      "a resumed run keeps a record it writes again"),
    M("mon-grad-norm", "train/monitor.h",
      "monitor_write(mon, MON_GRAD_NORM, s->grad_norm, before);",
      "monitor_write(mon, MON_GRAD_NORM, s->grad_norm, after);", "monitor", None,
      "grad_norm at the wrong samples"),
]


def run(cmd, cwd, env=None, log=None, timeout=None):
    with open(log or os.devnull, "w") as f:
        try:
            return subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return 124


def occurrences(m, root):
    path = os.path.join(root, m["file"])
    if not os.path.exists(path):
        return -1, ""
    text = open(path).read()
    return text.count(m["old"]), text


def stale_hint(m, text):
    """the file's line closest to the mutant's original text"""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    best = difflib.get_close_matches(m["old"].strip(), lines, n=1, cutoff=0.4)
    return best[0] if best else "(no similar line)"


def scratch_copy(dest):
    """the tracked and untracked-not-ignored files of the tree, as they are now"""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in files:
        src = os.path.join(ROOT, f)
        if not f or not os.path.lexists(src) or os.path.isdir(src) and not os.path.islink(src):
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, f)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, f), follow_symlinks=False)
    # data/ is copied, not linked: a tokenizer mutant rebuilds prepare_data, and the tests' make data would
    # then rewrite the shards in place; node_modules/ is only read
    if os.path.isdir(os.path.join(ROOT, "data")) and not os.path.lexists(os.path.join(dest, "data")):
        shutil.copytree(os.path.join(ROOT, "data"), os.path.join(dest, "data"))
    if os.path.isdir(os.path.join(ROOT, "node_modules")) and not os.path.lexists(os.path.join(dest, "node_modules")):
        os.symlink(os.path.realpath(os.path.join(ROOT, "node_modules")), os.path.join(dest, "node_modules"))


def test_env(m, test):
    """a mutant's environment narrows tests/zero_check.py only: the other tests run whole"""
    return m["env"] if test == "zero" else {}


def run_test(tree, test, env_extra, log, timeout):
    env = dict(os.environ, TESTS=test, MAKEFLAGS="-j2", **env_extra)
    t0 = time.time()
    rc = run(["nice", "bash", "tests/run.sh"], tree, env, log, timeout)
    full = os.path.join(tree, "build", "logs", f"test_{test}.log")   # run.sh shows only the tail
    if os.path.exists(full):
        with open(log, "a") as f:
            f.write("\n---- the whole log ----\n" + open(full, errors="replace").read())
    return rc, time.time() - t0


def results_from_log(path):
    """the results of a run stopped before its results file, from its output"""
    text = open(path).read()
    head = re.search(r"at (\w+)( with uncommitted changes)?, scratch copy \S+, started (.+? UTC)", text)
    results = []
    for v, mid, f, killer, secs in re.findall(r"^(KILLED|SURVIVED|INVALID) +(\S+) +(\S+) +(\S+(?: \(timeout\))?) +(\d+)s", text, re.M):
        m = next(x for x in MUTANTS if x["id"] == mid)
        results.append({"id": mid, "file": f, "tests": m["tests"], "verdict": v, "killed_by": "" if killer == "-" else killer,
                         "seconds": int(secs), "why": m["why"]})
    return {"commit": head.group(1), "dirty": bool(head.group(2)), "started": head.group(3), "mutants": len(results),
            "results": results}


def report(paths):
    """docs/testing.md's table from one run and its reruns"""
    by_id, runs = {}, []
    for p in paths:
        r = json.load(open(p)) if p.endswith(".json") else results_from_log(p)
        runs.append(f"{r['started']} at {r['commit']}{' (uncommitted changes)' if r['dirty'] else ''}: {r['mutants']} mutants")
        for x in r["results"]:
            by_id[x["id"]] = x
    equivalent = {m["id"]: m for m in MUTANTS if m["equivalent"]}
    order = [m["id"] for m in MUTANTS if m["id"] in by_id and m["id"] not in equivalent]
    killed = sum(by_id[i]["verdict"] == "KILLED" for i in order)
    n = len(order) + len(equivalent)
    print("runs: " + "; ".join(runs))
    print(f"{n} mutants: {killed} killed, {len(order) - killed} survived, {len(equivalent)} equivalent (not run): "
          f"{100.0 * killed / len(order):.1f}% of the others killed ({100.0 * killed / n:.1f}% of all)\n")
    print("| mutant | file | the bug | killed by |")
    print("|---|---|---|---|")
    for m in MUTANTS:
        i = m["id"]
        if i in equivalent:
            print(f"| `{i}` | `{m['file']}` | {m['why']} | equivalent: {m['equivalent']} |")
        elif i in by_id:
            x = by_id[i]
            print(f"| `{i}` | `{x['file']}` | {x['why']} | {x['killed_by'] if x['verdict'] == 'KILLED' else '**survived**'} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--check", action="store_true", help="only check that every original string occurs once")
    ap.add_argument("--list", action="store_true", help="list the mutants")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the tests")
    ap.add_argument("--timeout", type=int, default=1500, help="seconds per test run (default 1500)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "mutate", "results.json"), help="the results file")
    ap.add_argument("--report", nargs="+", metavar="RESULTS", help="print the Markdown table of results files (a later "
                    "file's verdict on a mutant replaces an earlier's, as a rerun after a new test) and exit")
    a = ap.parse_args()
    if a.report:
        return report(a.report)
    mutants = MUTANTS
    ids = [m["id"] for m in MUTANTS]
    assert len(ids) == len(set(ids)), "duplicate mutant ids"
    if a.only:
        want = a.only.split(",")
        unknown = [w for w in want if w not in ids]
        if unknown:
            sys.exit(f"mutate: error: --only: unknown mutant {', '.join(unknown)} (see --list)")
        mutants = [m for m in MUTANTS if m["id"] in want]
    if a.list:
        for m in mutants:
            print(f"{m['id']:26s} {m['file']:26s} {','.join(m['tests']):24s} {m['why']}")
        return 0
    stale = []
    for m in mutants:
        n, text = occurrences(m, ROOT)
        if n != 1:
            why = "file missing" if n < 0 else "original text not found" if n == 0 else f"original text found {n} times"
            stale.append((m, why, stale_hint(m, text) if n == 0 else ""))
    for m, why, hint in stale:
        print(f"STALE {m['id']}: {m['file']}: {why}\n      wanted:  {m['old'].strip()}" + (f"\n      closest: {hint}" if hint else ""))
    if a.check:
        print(f"mutate --check: {len(mutants) - len(stale)} of {len(mutants)} mutants apply, {len(stale)} stale")
        return 1 if stale else 0
    equivalent = [m for m in mutants if m["equivalent"]]
    live = [m for m in mutants if m not in [s[0] for s in stale] and not m["equivalent"]]
    out = os.path.join(ROOT, "build", "mutate")
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    tree = tempfile.mkdtemp(prefix="zeroc_mutate_")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"mutate: {len(live)} mutants ({len(stale)} stale, {len(equivalent)} equivalent: not run) at {commit}{' with uncommitted changes' if dirty else ''}, "
          f"scratch copy {tree}, started {started}, load {os.getloadavg()[0]:.1f}", flush=True)
    results = []
    try:
        scratch_copy(tree)
        # every mutant rebuilds the trainers it touches: at -O1 that takes half the time of -O3, and the
        # baseline shows the suite passes at -O1 as well
        mk = os.path.join(tree, "Makefile")
        text = open(mk).read()
        open(mk, "w").write(text.replace("CFLAGS := -O3 ", "CFLAGS := -O1 ", 1))
        if not a.no_baseline:
            # every test with every environment a selected mutant runs it with
            runs = sorted({(t, json.dumps(test_env(m, t), sort_keys=True)) for m in live for t in m["tests"]})
            for t, envj in runs:
                rc, secs = run_test(tree, t, json.loads(envj), os.path.join(logs, f"baseline_{t}.log"), a.timeout)
                print(f"baseline {t} {envj if envj != '{}' else ''}: {'pass' if rc == 0 else 'FAIL'} ({secs:.0f}s)", flush=True)
                if rc != 0:
                    print(f"mutate: error: test {t} fails without any mutant (build/mutate/logs/baseline_{t}.log): fix it first")
                    return 2
        for m in live:
            path = os.path.join(tree, m["file"])
            original = open(path).read()
            open(path, "w").write(original.replace(m["old"], m["new"]))
            verdict, killer, total = "SURVIVED", "", 0.0
            try:
                for t in m["tests"]:
                    rc, secs = run_test(tree, t, test_env(m, t), os.path.join(logs, f"{m['id']}_{t}.log"), a.timeout)
                    total += secs
                    if rc != 0:
                        verdict, killer = "KILLED", t + (" (timeout)" if rc == 124 else "")
                        # a mutant the compiler refuses proves nothing about the tests
                        if re.search(r"^\s*\S+\.(c|h|cuh):\d+:\d+: error:", open(os.path.join(logs, f"{m['id']}_{t}.log")).read(), re.M):
                            verdict, killer = "INVALID", "does not compile"
                        break
            finally:
                open(path, "w").write(original)
            results.append({"id": m["id"], "file": m["file"], "tests": m["tests"], "verdict": verdict, "killed_by": killer,
                            "seconds": round(total), "why": m["why"]})
            print(f"{verdict:8s} {m['id']:26s} {m['file']:26s} {killer or '-':18s} {total:5.0f}s  {m['why']}", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(tree, ignore_errors=True)
    invalid = [r for r in results if r["verdict"] == "INVALID"]
    results = [r for r in results if r["verdict"] != "INVALID"]
    killed = sum(r["verdict"] == "KILLED" for r in results)
    rate = 100.0 * killed / len(results) if results else 0.0
    summary = {"commit": commit, "dirty": bool(dirty), "started": started, "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "mutants": len(results), "killed": killed, "stale": [s[0]["id"] for s in stale],
               "invalid": [r["id"] for r in invalid], "equivalent": {m["id"]: m["equivalent"] for m in equivalent},
               "kill_rate": round(rate, 1),
               "results": results}
    json.dump(summary, open(a.out, "w"), indent=1)
    print(f"mutate: {len(results)} mutants, {killed} killed, {len(results) - killed} survived, {len(stale)} stale, "
          f"{len(invalid)} not compiling: kill rate {rate:.1f}%")
    for r in results:
        if r["verdict"] == "SURVIVED":
            print(f"  survived: {r['id']} ({r['file']}): {r['why']}")
    return 0 if killed == len(results) and not stale and not invalid else 1


if __name__ == "__main__":
    sys.exit(main())
