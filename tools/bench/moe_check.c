#include "tools/bench/moe_check.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "templates/layout/codes.h"
#include "templates/layout/symm_layout.h"
#include "tests/reference/quant.h"

int mj_bench_shared_format(const mj_bench_moe_variant *v, const mj_moe_format_row *row) {
    return v->shared_format ? v->shared_format - 1 : mj_moe_shared_format_of(row);
}

int mj_bench_check_sample(int total, int *idx) {
    if (total <= MJ_BENCH_CHECK_ALL) {
        for (int i = 0; i < total; i++)
            idx[i] = i;
        return total;
    }
    for (int i = 0; i < MJ_BENCH_CHECK_SAMPLE; i++)
        idx[i] = (int)((long long)i * (total - 1) / (MJ_BENCH_CHECK_SAMPLE - 1));
    return MJ_BENCH_CHECK_SAMPLE;
}

double mj_bench_check_bar(int weight_fmt, int dispatch_fmt) {
    return weight_fmt == MJ_FMT_BF16 && dispatch_fmt == MJ_FMT_BF16 ? 1e-4 : 1e-3;
}

void mj_bench_scan_output(const uint16_t *y, size_t written, size_t total, size_t *unwritten,
                          size_t *nonfinite, size_t *past) {
    *unwritten = *nonfinite = *past = 0;
    for (size_t i = 0; i < written; i++) {
        if (y[i] == MJ_BENCH_POISON)
            (*unwritten)++;
        else if ((y[i] & 0x7F80u) == 0x7F80u)
            (*nonfinite)++;
    }
    for (size_t i = written; i < total; i++)
        *past += y[i] != MJ_BENCH_POISON;
}

struct mj_bench_check_job {
    mj_bench_check_job *next;
    mj_bench_weights *w;
    mjr_moe_shape shape;
    int n;
    uint8_t *x, *x_sf;
    float *x_scales;
    int32_t *ids; /* mapped to weight classes */
    float *tw;
    uint16_t *y;
    mj_bench_check_result *out;
};

static void job_free(mj_bench_check_job *j) {
    if (!j) return;
    mj_bench_weights_release(j->w);
    free(j->x);
    free(j->x_sf);
    free(j->x_scales);
    free(j->ids);
    free(j->tw);
    free(j->y);
    free(j);
}

mj_bench_check_job *mj_bench_check_job_new(mj_bench_weights *w, const mj_moe_format_row *row,
                                           const mj_bench_moe_variant *v, int hidden,
                                           int intermediate, int topk, int n, const uint16_t *x,
                                           const int32_t *ids, const float *tw, const uint16_t *y,
                                           mj_bench_check_result *out) {
    mj_bench_check_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->w = mj_bench_weights_retain(w);
    const int fmt = row->dispatch_fmt, group = mj_format_group(fmt);
    const size_t H = (size_t)hidden, K = (size_t)topk, rows = (size_t)n;
    const size_t x_row = H * (size_t)mj_format_bits(fmt) / 8,
                 sf_row = group ? H / (size_t)group : 0;
    j->shape = (mjr_moe_shape){.hidden = hidden,
                               .inter = intermediate,
                               .experts = w->classes,
                               .topk = topk,
                               .ranks = 1,
                               .max_tokens = n,
                               .weight_fmt = row->weight_fmt,
                               .dispatch_fmt = fmt,
                               .l2_fmt = row->l2_input_fmt,
                               .activation = v->activation,
                               .has_clamp = v->clamp > 0,
                               .clamp = v->clamp,
                               .shared_inter = v->shared * intermediate,
                               .shared_fmt = v->shared ? w->shared_fmt : 0};
    j->n = n;
    j->x = malloc(rows * x_row);
    j->x_sf = group ? malloc(rows * sf_row) : NULL;
    j->x_scales = fmt == MJ_FMT_NVFP4 ? malloc(rows * sizeof(float)) : NULL;
    j->ids = malloc(rows * K * sizeof(int32_t));
    j->tw = malloc(rows * K * sizeof(float));
    j->y = malloc(rows * H * sizeof(uint16_t));
    j->out = out;
    if (!j->x || (group && !j->x_sf) || (fmt == MJ_FMT_NVFP4 && !j->x_scales) || !j->ids ||
        !j->tw || !j->y) {
        job_free(j);
        return NULL;
    }
    float unused_scale;
    for (size_t t = 0; t < rows; t++)
        mjr_quantize_row(fmt, x + t * H, hidden, j->x + t * x_row,
                         group ? j->x_sf + t * sf_row : NULL,
                         j->x_scales ? j->x_scales + t : &unused_scale);
    for (size_t i = 0; i < rows * K; i++)
        j->ids[i] = ids[i] < 0 ? -1 : ids[i] % w->classes;
    memcpy(j->tw, tw, rows * K * sizeof(float));
    memcpy(j->y, y, rows * H * sizeof(uint16_t));
    return j;
}

/* Runs and frees a job (what the pool's threads do). */
static void check_job_run(mj_bench_check_job *j) {
    mj_bench_check_result *out = j->out;
    const mjr_moe_shape *s = &j->shape;
    out->bar = mj_bench_check_bar(s->weight_fmt, s->dispatch_fmt);
    out->tokens = j->n;
    /* the classes, then the shared expert (experts[E] of the reference) */
    mjr_expert_weights experts[MJ_BENCH_WEIGHT_CLASSES + 1];
    for (int c = 0; c < j->w->classes; c++)
        experts[c] = mj_bench_weights_class(j->w, c);
    experts[j->w->classes] = mj_bench_weights_shared(j->w);
    const mjr_rank_input in = {j->n, j->x, j->x_sf, j->x_scales, j->ids, j->tw};
    const size_t elems = (size_t)j->n * (size_t)s->hidden;
    uint16_t *ref = malloc(elems * sizeof *ref);
    uint16_t *const y_ref[1] = {ref};
    /* A shared expert of another size than the weights hold is a bench bug
     * (the reference would read past them). */
    const int rc = !ref ? -2
                   : s->shared_inter && s->shared_inter != j->w->shared_intermediate
                       ? -1
                       : mjr_moe_forward(s, experts, &in, y_ref, NULL);
    out->calc_diff = rc == 0 ? mjr_calc_diff(ref, j->y, elems) : NAN;
    out->ok =
        rc == 0 && out->calc_diff < out->bar && !out->unwritten && !out->nonfinite && !out->past;
    size_t len = 0;
    const size_t cap = sizeof out->message;
    out->message[0] = '\0';
#define ADD(...)                                                                                   \
    len += (size_t)snprintf(out->message + (len < cap ? len : cap), len < cap ? cap - len : 0,     \
                            __VA_ARGS__)
    if (rc != 0)
        ADD("the fp64 reference refused the check (%s); ",
            rc == -2 ? "out of host memory" : "a bench bug: bad arguments");
    else if (isnan(out->calc_diff))
        ADD("calc_diff undefined over %d tokens (y holds NaN); ", j->n);
    else if (!(out->calc_diff < out->bar))
        ADD("calc_diff %.3g over %d tokens, bar %.0e; ", out->calc_diff, j->n, out->bar);
    if (out->unwritten) ADD("%zu elements of y unwritten; ", out->unwritten);
    if (out->nonfinite) ADD("%zu elements of y not finite; ", out->nonfinite);
    if (out->past) ADD("%zu elements written past num_tokens; ", out->past);
#undef ADD
    if (len >= 2 && len < cap) out->message[len - 2] = '\0';
    out->done = 1;
    free(ref);
    job_free(j);
}

struct mj_bench_checker {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    mj_bench_check_job *head, *tail;
    int stop;
    int threads;
    pthread_t tid[64];
};

static void *worker(void *arg) {
    mj_bench_checker *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        while (!c->head && !c->stop)
            pthread_cond_wait(&c->wake, &c->lock);
        mj_bench_check_job *j = c->head;
        if (j) {
            c->head = j->next;
            if (!c->head) c->tail = NULL;
        }
        pthread_mutex_unlock(&c->lock);
        if (!j) return NULL; /* stopping, and nothing left */
        check_job_run(j);
    }
}

mj_bench_checker *mj_bench_checker_new(int threads) {
    mj_bench_checker *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    const int want = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    while (c->threads < want && pthread_create(&c->tid[c->threads], NULL, worker, c) == 0)
        c->threads++;
    if (c->threads == 0) {
        pthread_cond_destroy(&c->wake);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
    }
    return c;
}

void mj_bench_checker_submit(mj_bench_checker *c, mj_bench_check_job *job) {
    pthread_mutex_lock(&c->lock);
    job->next = NULL;
    if (c->tail)
        c->tail->next = job;
    else
        c->head = job;
    c->tail = job;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
}

void mj_bench_checker_finish(mj_bench_checker *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < c->threads; i++)
        pthread_join(c->tid[i], NULL);
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
