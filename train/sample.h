// train/sample.h: text generation, one code for --sample 1 (train/loop.h's
// sample_run: sampling instead of training, from --init or --resume) and for the
// samples of --sample-every during training.
//
// Every sample starts from <|endoftext|>, as every training document does, then the
// prompt's tokens (tokenizer.h), and continues for --sample-len tokens. Each token
// is drawn from the logits of the last position, filtered as Hugging Face
// transformers' generate() filters them and in its order: the logits are divided by
// --temperature; the --top-k most likely tokens are kept (TopKLogitsWarper); then
// the most likely tokens whose renormalized probabilities first reach --top-p are
// kept (TopPLogitsWarper, Holtzman et al. 2019), the token that crosses p included.
// One uniform draw of the splitmix64 RNG picks among them. Temperature 0 is greedy:
// the argmax, the lowest id among equal logits. Without filters the draw walks the
// ids in order; top-k selects its k in O(V log k); top-p alone sorts the vocabulary.
//
// With the KV cache (the default) each step runs the model on ONE new position per
// sequence (gpt_decode, train/passes.h). Its keys and values join the cache, and its
// attention reads those of the earlier positions; the context is read the same way,
// one position per step. So a token costs one position's forward, not a forward over
// the whole prefix. --kv-cache 0 runs a full forward over the sequence so far for
// every token, on the model's B x T activations: the reference the tests compare
// the cache against.
//
// All ranks run every pass, because under ZeRO-3 each pass gathers the units with
// collectives. Rank 0 draws each token and broadcasts it, so the ranks feed the same
// tokens in lockstep; rank 0 prints.
//
// The trainer provides, beside train/passes.h's gpt_forward and gpt_decode:
//   void gpt_decode_alloc(GPT *m, int B, int max_len), gpt_decode_free(GPT *m)
//   const float *gpt_decode_logits_host(GPT *m)      [B, Vp] of the last decode step
//   const float *gpt_logits_host(GPT *m, int b, int t)  after a forward without training
// Include this file after the trainer's GPT is defined (train/loop.h includes it).
#pragma once
#include "tokenizer.h"

typedef struct {
    Tokenizer tok;
    int n;                  // sequences sampled together (--num-samples)
    int n_ctx;              // context tokens: <|endoftext|> and the prompt's
    int len;                // tokens generated per sequence (--sample-len)
    int kv;                 // 1: the KV cache; 0: a full forward per token
    float temperature, top_p;
    int top_k;
    int *seq;               // [n][n_ctx + len]: the context, then the samples
    int *step;              // [n]: the tokens of one step
    int *order;             // [V]: token ids by logit (top-k, top-p)
    double *prob;           // [V]: unnormalized probabilities in that order
    size_t cache_bytes;     // the KV cache's size (0 without it)
} Sampler;

#define SAMPLE_SEQ(s, b, t) ((s)->seq[(size_t)(b) * ((s)->n_ctx + (s)->len) + (t)])

// The prompt, the lengths and the KV cache, allocated once for n sequences of every
// position a sample feeds. Every rank calls it with the same flags, so every rank
// fails alike.
static void sampler_init(Sampler *s, GPT *m, const TrainConfig *tc) {
    memset(s, 0, sizeof(*s));
    const ModelConfig *c = &m->cfg;
    int V = c->vocab_size;
    tokenizer_init(&s->tok, tc->tokenizer_path);
    if (V > tokenizer_vocab_size(&s->tok))
        fatal("sampling: the model's vocabulary (%d) is larger than the tokenizer's (%d, %s): its samples could not be printed",
              V, tokenizer_vocab_size(&s->tok), tc->tokenizer_path);
    int *prompt;
    size_t np = tokenizer_encode(&s->tok, tc->prompt, strlen(tc->prompt), &prompt);
    s->n = tc->num_samples; s->len = tc->sample_len; s->kv = tc->kv_cache;
    s->temperature = tc->temperature; s->top_k = tc->top_k; s->top_p = tc->top_p;
    s->n_ctx = 1 + (int)np;
    long long positions = (long long)s->n_ctx + s->len - 1;   // every token but the last one generated is fed
    if (positions > c->max_seq)
        fatal("--sample-len %d after a context of %d token%s (<|endoftext|> and %zu of --prompt) needs %lld positions; the model has %d (--max-seq)",
              s->len, s->n_ctx, s->n_ctx > 1 ? "s" : "", np, positions, c->max_seq);
    if (!s->kv && (s->n > m->B || positions > m->T))
        fatal("--kv-cache 0: %d sample%s of %d positions need the full forward's --batch >= %d and --seq >= %lld (have %d and %d)",
              s->n, s->n > 1 ? "s" : "", (int)positions, s->n, positions, m->B, m->T);
    s->seq = (int *)xmalloc(sizeof(int) * s->n * (s->n_ctx + s->len), "samples");
    s->step = (int *)xmalloc(sizeof(int) * s->n, "samples");
    s->order = (int *)xmalloc(sizeof(int) * V, "sampling scratch");
    s->prob = (double *)xmalloc(sizeof(double) * V, "sampling scratch");
    for (int b = 0; b < s->n; b++) {
        SAMPLE_SEQ(s, b, 0) = GPT2_EOT < V ? GPT2_EOT : 0;
        for (size_t i = 0; i < np; i++) {
            if (prompt[i] >= V) {
                size_t nb;
                const unsigned char *bytes = tokenizer_decode(&s->tok, prompt[i], &nb);
                fatal("--prompt: token %d ('%.*s') is outside the model's vocabulary of %d tokens", prompt[i], (int)nb, bytes, V);
            }
            SAMPLE_SEQ(s, b, 1 + i) = prompt[i];
        }
    }
    free(prompt);
    if (s->kv) {
        gpt_decode_alloc(m, s->n, (int)positions);
        s->cache_bytes = 2 * sizeof(floatX) * (size_t)c->n_layer * s->n * positions * c->n_kv_head * (c->d_model / c->n_head);
    }
}

static void sampler_free(Sampler *s, GPT *m) {
    if (s->kv) gpt_decode_free(m);
    tokenizer_free(&s->tok);
    free(s->seq); free(s->step); free(s->order); free(s->prob);
}

// Token ids by logit, largest first, the lower id first among equals: a total
// order, so any sort gives the same result.
static int logit_before(const float *l, int i, int j) { return l[i] > l[j] || (l[i] == l[j] && i < j); }
static int sample_by_logit(const void *a, const void *b, void *ctx) {
    int i = *(const int *)a, j = *(const int *)b;
    return i == j ? 0 : logit_before((const float *)ctx, i, j) ? -1 : 1;
}

// ids[0..k) = the k first ids in that order, in O(V log k): one pass over V keeps the
// k best in a heap whose root is the last of them, then the k are sorted
static void top_k_ids(int *ids, int k, const float *l, int V) {
    for (int i = 0; i < V; i++) {
        int at;
        if (i < k) {                                 // grow the heap: sift the new id up
            for (at = i; at > 0 && logit_before(l, ids[(at - 1) / 2], i); at = (at - 1) / 2) ids[at] = ids[(at - 1) / 2];
        } else if (logit_before(l, i, ids[0])) {     // better than the worst kept: replace the root, sift down
            at = 0;
            for (;;) {
                int c = 2 * at + 1;
                if (c >= k) break;
                if (c + 1 < k && logit_before(l, ids[c], ids[c + 1])) c++;   // the later-ranked child
                if (!logit_before(l, i, ids[c])) break;
                ids[at] = ids[c];
                at = c;
            }
        } else continue;
        ids[at] = i;
    }
    qsort_r(ids, k, sizeof(int), sample_by_logit, (void *)l);
}

// The next token from one row of logits (the first V are real).
static int sample_pick(Sampler *s, const float *logits, int V, Rng *rng) {
    float mx = -INFINITY;
    int arg = 0;
    for (int i = 0; i < V; i++) if (logits[i] > mx) { mx = logits[i]; arg = i; }
    if (s->temperature == 0) return arg;
    float t = s->temperature;
    int n = V;
    double sum = 0;
    if (s->top_k > 0 && s->top_k < V) {
        n = s->top_k;
        top_k_ids(s->order, n, logits, V);
    } else {
        for (int i = 0; i < V; i++) s->order[i] = i;
        if (s->top_p < 1) qsort_r(s->order, V, sizeof(int), sample_by_logit, (void *)logits);
    }
    for (int j = 0; j < n; j++) { s->prob[j] = exp((logits[s->order[j]] - mx) / t); sum += s->prob[j]; }
    if (s->top_p < 1) {
        double keep = s->top_p * sum, cum = 0;
        for (int j = 0; j < n; j++) {
            cum += s->prob[j];
            if (cum >= keep) { n = j + 1; sum = cum; break; }
        }
    }
    double r = rng_uniform(rng) * sum, acc = 0;
    for (int j = 0; j < n; j++) { acc += s->prob[j]; if (acc > r) return s->order[j]; }
    return s->order[n - 1];
}

// Rank 0 draws the token after position `pos` of every sequence from the last
// pass's logits and broadcasts them; every rank appends them.
static void sample_next(GPT *m, Sampler *s, Rng *rng, int pos) {
    int V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab;
    if (m->comm->rank == 0) {
        const float *dec = s->kv ? gpt_decode_logits_host(m) : NULL;
        for (int b = 0; b < s->n; b++)
            s->step[b] = sample_pick(s, s->kv ? dec + (size_t)b * Vp : gpt_logits_host(m, b, pos), V, rng);
    }
    comm_broadcast_host(m->comm, s->step, sizeof(int) * s->n, 0);
    for (int b = 0; b < s->n; b++) SAMPLE_SEQ(s, b, pos + 1) = s->step[b];
}

// Generates the samples on every rank. Rank 0 prints each one's prompt and
// continuation to `out` (NULL: nothing) after "label: ", or "label i/n: " when there
// are several; without a label, several samples each follow a "--- sample i/n" line.
static void gpt_generate(GPT *m, Sampler *s, Rng *rng, FILE *out, const char *label) {
    int total = s->n_ctx + s->len;
    if (s->kv) {
        for (int pos = 0; pos + 1 < total; pos++) {
            for (int b = 0; b < s->n; b++) s->step[b] = SAMPLE_SEQ(s, b, pos);
            gpt_decode(m, s->step, pos);
            if (pos + 1 >= s->n_ctx) sample_next(m, s, rng, pos);   // past the context: a new token
        }
    } else {
        for (int i = 0; i < m->B * m->T; i++) m->inputs[i] = SAMPLE_SEQ(s, 0, 0);
        for (int b = 0; b < s->n; b++)
            for (int t = 0; t < s->n_ctx; t++) m->inputs[b * m->T + t] = SAMPLE_SEQ(s, b, t);
        for (int pos = s->n_ctx - 1; pos + 1 < total; pos++) {
            gpt_forward(m, NULL, 0);
            sample_next(m, s, rng, pos);
            for (int b = 0; b < s->n; b++) m->inputs[b * m->T + pos + 1] = SAMPLE_SEQ(s, b, pos + 1);
        }
    }
    if (!out) return;
    for (int b = 0; b < s->n; b++) {
        if (label && s->n > 1) fprintf(out, "%s %d/%d: ", label, b + 1, s->n);
        else if (label) fprintf(out, "%s: ", label);
        else if (s->n > 1) fprintf(out, "--- sample %d/%d\n", b + 1, s->n);
        for (int t = 1; t < total; t++) {
            size_t nb;
            const unsigned char *bytes = tokenizer_decode(&s->tok, SAMPLE_SEQ(s, b, t), &nb);
            fwrite(bytes, 1, nb, out);
        }
        fprintf(out, "\n");
    }
    fflush(out);
}
