// train/passes.h: the forward and backward passes of both trainers, as walks over
// model/model.h's schedule with zero.h's calls around each step. The trainer gives
// the compute of each kind of step. It works on named views of the parameters that
// zero.h fetched and, in the backward, of the gradients that zero.h opened:
//
//   void  embed_forward(GPT *m, EmbedView w)              x = wte[tokens] (+ wpe)
//   void  layer_forward(GPT *m, int l, LayerView w)       one transformer layer
//   float head_forward(GPT *m, HeadView w, const int *targets, int training)
//                                                         final norm, logits, loss; returns as gpt_forward
//   void  head_backward(GPT *m, HeadView w, HeadView g, const int *targets, float dloss)
//   void  layer_backward(GPT *m, int l, LayerView w, LayerView g)
//   void  embed_backward(GPT *m, EmbedView g)             needs only the token ids
//
// and, for sampling with a KV cache (train/sample.h), the same on one new position
// of each of the B sequences:
//
//   void  embed_decode(GPT *m, EmbedView w, const int *tokens, int pos)
//   void  layer_decode(GPT *m, int l, LayerView w, int pos)   appends to layer l's KV cache
//   void  head_decode(GPT *m, HeadView w)                     the logits of the next token
//
// and its GPT has `ModelLayout layout` and `Zero zero`. Include this file after
// those are defined (train_gpt.c, train_gpt.cu).
#pragma once

// Forward over m->inputs. With targets and without `training`, returns the mean
// loss. With `training` it returns 0: the mean loss joins the step's, which the
// trainer's gpt_step_loss returns once per step; the GPU keeps it on the device
// until then. The head's parameters then stay gathered for gpt_backward, as the
// schedule's `keep_for_backward` says.
static float gpt_forward(GPT *m, const int *targets, int training) {
    Zero *z = &m->zero;
    const ModelLayout *L = &m->layout;
    const Schedule *S = &L->schedule;
    float loss = 0;
    zero_begin_pass(z, training);
    for (int i = 0; i < S->n_fwd; i++) {
        const PassStep *s = &S->fwd[i];
        floatX *const *p = zero_fetch(z, s);
        switch (s->kind) {
        case STEP_EMBED: embed_forward(m, embed_view(L, p)); break;
        case STEP_LAYER: layer_forward(m, s->layer, layer_view(L, p[s->params[0]])); break;
        case STEP_HEAD:  loss = head_forward(m, head_view(L, p), targets, training); break;
        }
        zero_release(z, s);
    }
    if (!training) zero_end_pass(z);
    return loss;
}

// Backward of the last training forward. dloss is d(step loss)/d(this micro-batch's
// mean loss): 1 / accumulation steps, times the loss scale with fp16. The mean over
// the ranks is left to the gradient reduction, which averages.
static void gpt_backward(GPT *m, const int *targets, float dloss) {
    Zero *z = &m->zero;
    const ModelLayout *L = &m->layout;
    const Schedule *S = &L->schedule;
    for (int i = 0; i < S->n_bwd; i++) {
        const PassStep *s = &S->bwd[i];
        floatX *const *p = zero_fetch(z, s);
        floatX *const *g = zero_grads_open(z, s);
        switch (s->kind) {
        case STEP_HEAD:  head_backward(m, head_view(L, p), head_view(L, g), targets, dloss); break;
        case STEP_LAYER:
            if (s->recompute) layer_forward(m, s->layer, layer_view(L, p[s->params[0]]));
            layer_backward(m, s->layer, layer_view(L, p[s->params[0]]), layer_view(L, g[s->grads[0]]));
            break;
        case STEP_EMBED: embed_backward(m, embed_view(L, g)); break;
        }
        zero_release(z, s);
        zero_grads_close(z, s);
    }
    zero_end_pass(z);
}

// One decode step: the model on position `pos` of each sequence of the decode
// batch, whose token there is tokens[b]; its keys and values join the KV cache.
// It is a forward-only pass over the same schedule, so stage 3 gathers and
// releases every unit exactly as gpt_forward does, on every rank.
static void gpt_decode(GPT *m, const int *tokens, int pos) {
    Zero *z = &m->zero;
    const ModelLayout *L = &m->layout;
    const Schedule *S = &L->schedule;
    zero_begin_pass(z, 0);
    for (int i = 0; i < S->n_fwd; i++) {
        const PassStep *s = &S->fwd[i];
        floatX *const *p = zero_fetch(z, s);
        switch (s->kind) {
        case STEP_EMBED: embed_decode(m, embed_view(L, p), tokens, pos); break;
        case STEP_LAYER: layer_decode(m, s->layer, layer_view(L, p[s->params[0]]), pos); break;
        case STEP_HEAD:  head_decode(m, head_view(L, p)); break;
        }
        zero_release(z, s);
    }
    zero_end_pass(z);
}
