/*
 * env_rados_wfile.c — the RADOS env's files open for writing (env.h's
 * lsm_wfile), and the table of them by object that a sync or truncate by
 * path settles first (rados_settle_writers).
 */
#include "env_rados_impl.h"

#include "lsm_malloc.h"
#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WFILE_BUF (256 * 1024)
/* Sends of one file in flight at most: a burst of unsynced appends (one
 * send per flush) waits here instead of queueing thousands of ops at the
 * OSDs, where the lease's renewal would wait behind them until the lease
 * lapsed (and the memory they hold is bounded). */
#define WFILE_MAX_INFLIGHT 32

/* ------------------------------------------------------------- wfile */

/* A send in flight: its bytes (written at off), its completion, and
 * whether it has been answered. */
struct pending {
    rados_completion_t c;
    rados_completion_t refused; /* the first completion, when sent again */
    struct rados_wfile *f;
    char *data;
    size_t len;
    uint64_t off;
    uint64_t seq;
    int flags; /* the op's: FULL_FORCE when freed space covered it */
    int ret;
    bool done;
    struct pending *next;
};

/* Appends collect in buf and go out as one guarded aio write op, each at
 * its own offset (the object is new: the file's bytes start at 0); sends
 * are pipelined. A flush sends at once when nothing is in flight; else its
 * bytes are held and go, with whatever was flushed after them, as one send
 * when the sends in flight are answered (the OSD applies one object's
 * writes in turn, so many small sends queue there: one send a round trip
 * carries them all); while a sync is coming (hold_for_sync) they wait for
 * it. A sync, a close, a sync by path and a full buffer send at once. A sync waits until every send up to its own is acknowledged.
 * A failed send is sticky: every later append, flush and sync fails. */
struct rados_wfile {
    lsm_wfile base;
    struct rados_env *re;
    char oid[RADOS_OID_MAX];
    char *path;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf;             /* GUARDED_BY(mu) */
    size_t len;            /* GUARDED_BY(mu) */
    bool held;             /* GUARDED_BY(mu): buf holds flushed bytes that
                            * go when the sends in flight are answered */
    bool hold;             /* GUARDED_BY(mu): a sync is coming: flushed bytes
                            * wait for it (hold_for_sync) */
    uint64_t off;          /* GUARDED_BY(mu): where buf goes in the object */
    uint64_t sent;         /* GUARDED_BY(mu): sends made */
    uint64_t acked;        /* GUARDED_BY(mu): every send <= acked is answered */
    struct pending *head;  /* GUARDED_BY(mu): sends not yet reaped, oldest first */
    struct pending *tail;  /* GUARDED_BY(mu) */
    lsm_status *err;       /* GUARDED_BY(mu): sticky */
    struct rados_wfile *open_next; /* GUARDED_BY(re->open_mu) */
};

static void send_done(rados_completion_t c, void *arg);

/* Whether flushed bytes go now: nothing is in flight and no sync is coming
 * to carry them (else send_done, the sync or the hold's end sends them).
 * REQUIRES: f->mu held. */
static bool may_send_flushed(const struct rados_wfile *f)
{
    return f->acked == f->sent && !f->hold;
}
static lsm_status *send_now(struct rados_wfile *f);

/* Sends p's bytes with op (guarded by the caller, released by it) and
 * flags; 0, or librados' error (nothing sent). */
static int send_write(struct pending *p, rados_write_op_t op, int flags)
{
    rados_completion_t c;
    rados_write_op_write(op, p->data, p->len, p->off);
    int r = rados_aio_create_completion2(p, send_done, &c);
    if (r < 0)
        return r;
    p->flags = flags;
    if ((r = rados_aio_write_op_operate(op, p->f->re->io, c, p->f->oid, NULL, flags)) < 0)
        rados_aio_release(c);
    else
        p->c = c;
    return r;
}

/* A send the full pool refused, sent again past its full flag: the env
 * took these bytes, so they land (the pool outgrows its quota by at most
 * the sends in flight as it filled; later appends are refused before they
 * are sent, wfile_append). 0, or the send failed. REQUIRES: f->mu held. */
static int send_forced(struct pending *p)
{
    rados_write_op_t op = rados_create_write_op();
    lsm_status *s = rados_guard(p->f->re, op, "append to", p->f->path);
    rados_completion_t first = p->c;
    int r = s != NULL ? -EIO : send_write(p, op, LIBRADOS_OPERATION_FULL_FORCE);
    if (r == 0)
        p->refused = first;
    lsm_status_free(s);
    rados_release_write_op(op);
    return r;
}

/* librados' callback: marks p answered, advances acked; a send the full
 * pool refused goes again first. */
static void send_done(rados_completion_t c, void *arg)
{
    struct pending *p = arg;
    struct rados_wfile *f = p->f;
    rados_seam(f->re, "answered", f->oid);
    pthread_mutex_lock(&f->mu);
    int ret = rados_aio_get_return_value(c);
    rados_space_answered(f->re, ret, p->flags);
    if (ret == -EDQUOT && p->flags == 0 && send_forced(p) == 0) {
        pthread_mutex_unlock(&f->mu);
        return; /* answered again once the forced write lands */
    }
    p->ret = ret;
    p->done = true;
    for (struct pending *q = f->head; q != NULL && q->done; q = q->next)
        f->acked = q->seq;
    if (f->held && may_send_flushed(f))
        lsm_status_free(send_now(f)); /* a failure is sticky in f->err */
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Releases the answered sends at the head, keeping the first error.
 * REQUIRES: f->mu held. */
static void reap(struct rados_wfile *f)
{
    while (f->head != NULL && f->head->done && f->head->seq <= f->acked) {
        struct pending *p = f->head;
        if (p->ret < 0 && f->err == NULL)
            f->err = p->ret == -ECANCELED ? rados_fenced_error("append to", f->path)
                                          : rados_error(p->ret, "append to", f->path);
        f->head = p->next;
        if (f->head == NULL)
            f->tail = NULL;
        rados_aio_release(p->c);
        if (p->refused)
            rados_aio_release(p->refused);
        free(p->data);
        free(p);
    }
}

/* Sends the buffer as one guarded append now (never waits: also called
 * from librados' callback); a failure is also kept in f->err.
 * REQUIRES: f->mu held. */
static lsm_status *send_now(struct rados_wfile *f)
{
    if (f->err)
        return status_copy(f->err);
    f->held = false;
    if (f->len == 0)
        return NULL;
    rados_seam(f->re, "send", f->oid);
    struct pending *p = lsm_calloc(1, sizeof *p);
    char *next = p != NULL ? lsm_malloc(WFILE_BUF) : NULL; /* p takes buf */
    if (next == NULL) {
        free(p);
        return status_new(LSM_NO_MEMORY, "append to %s: out of memory", f->path);
    }
    *p = (struct pending){.f = f, .data = f->buf, .len = f->len, .off = f->off,
                          .seq = f->sent + 1};
    rados_write_op_t op = rados_create_write_op();
    lsm_status *s = rados_guard(f->re, op, "append to", f->path);
    int r = s != NULL ? 0 : send_write(p, op, rados_space_grow_flags(f->re, f->len));
    rados_release_write_op(op);
    if (s == NULL && r < 0)
        s = rados_error(r, "append to", f->path);
    if (s != NULL) {
        free(next);
        free(p);
        f->err = status_copy(s);
        return s;
    }
    f->buf = next;
    f->off += f->len;
    f->sent = p->seq;
    f->len = 0;
    if (f->tail)
        f->tail->next = p;
    else
        f->head = p;
    f->tail = p;
    return NULL;
}

/* Sends the buffer as one guarded append, once fewer than
 * WFILE_MAX_INFLIGHT sends are unanswered. REQUIRES: f->mu held. */
static lsm_status *send_buf(struct rados_wfile *f)
{
    while (f->len > 0 && f->sent - f->acked >= WFILE_MAX_INFLIGHT)
        pthread_cond_wait(&f->cv, &f->mu);
    reap(f);
    return send_now(f);
}

static lsm_status *wfile_append(lsm_wfile *base, const void *data, size_t n)
{
    struct rados_wfile *f = (struct rados_wfile *)base;
    const char *src = data;
    lsm_status *s = NULL;
    pthread_mutex_lock(&f->mu);
    reap(f);
    if (f->err)
        s = status_copy(f->err);
    else if (rados_space_refuses(f->re, f->len + n))
        s = status_new(LSM_NO_SPACE, "rados append to %s: the pool is over its quota", f->path);
    while (s == NULL && n > 0) {
        size_t take = WFILE_BUF - f->len < n ? WFILE_BUF - f->len : n;
        memcpy(f->buf + f->len, src, take);
        f->len += take;
        src += take;
        n -= take;
        if (f->len == WFILE_BUF)
            s = send_buf(f);
    }
    pthread_mutex_unlock(&f->mu);
    return s;
}

/* Sends now if nothing is in flight, else holds the bytes for send_done. */
static lsm_status *wfile_flush(lsm_wfile *base)
{
    struct rados_wfile *f = (struct rados_wfile *)base;
    pthread_mutex_lock(&f->mu);
    reap(f);
    lsm_status *s = NULL;
    if (f->err)
        s = status_copy(f->err);
    else if (may_send_flushed(f))
        s = send_buf(f);
    else
        f->held = f->len > 0;
    pthread_mutex_unlock(&f->mu);
    return s;
}

/* Waits until every send up to want is answered, reaps them; a copy of the
 * sticky error. REQUIRES: f->mu held. */
static lsm_status *wait_answered(struct rados_wfile *f, uint64_t want)
{
    while (f->acked < want)
        pthread_cond_wait(&f->cv, &f->mu);
    reap(f);
    return f->err ? status_copy(f->err) : NULL;
}

/* Sends the buffer, then waits for every send up to it. */
static lsm_status *wfile_sync(lsm_wfile *base)
{
    struct rados_wfile *f = (struct rados_wfile *)base;
    pthread_mutex_lock(&f->mu);
    lsm_status *s = send_buf(f);
    if (s == NULL)
        s = wait_answered(f, f->sent);
    pthread_mutex_unlock(&f->mu);
    return s;
}

/* While on, flushes keep their bytes for the coming sync; off sends what
 * was kept if nothing is in flight (else send_done does). */
static void wfile_hold_for_sync(lsm_wfile *base, bool on)
{
    struct rados_wfile *f = (struct rados_wfile *)base;
    pthread_mutex_lock(&f->mu);
    f->hold = on;
    if (f->held && may_send_flushed(f))
        lsm_status_free(send_now(f)); /* a failure is sticky in f->err */
    pthread_mutex_unlock(&f->mu);
}

/* Room ahead is nothing to RADOS: appends go out as they come. */
static lsm_status *wfile_preallocate(lsm_wfile *base, uint64_t len, enum wfile_space mode)
{
    (void)base;
    (void)len;
    (void)mode;
    return NULL;
}

/* Enters f in its env's table of open files. */
static void open_files_add(struct rados_wfile *f)
{
    pthread_mutex_lock(&f->re->open_mu);
    f->open_next = f->re->open_files;
    f->re->open_files = f;
    pthread_mutex_unlock(&f->re->open_mu);
}

static void open_files_remove(struct rados_wfile *f)
{
    pthread_mutex_lock(&f->re->open_mu);
    struct rados_wfile **at = &f->re->open_files;
    while (*at != f)
        at = &(*at)->open_next;
    *at = f->open_next;
    pthread_mutex_unlock(&f->re->open_mu);
}

/* The writer's bytes not yet sent that would land at or past cut are
 * dropped; its next bytes go at cut. REQUIRES: f->mu held, nothing in
 * flight. */
static void cut_unsent(struct rados_wfile *f, uint64_t cut)
{
    if (f->off + f->len <= cut)
        return;
    f->len = f->off < cut ? (size_t)(cut - f->off) : 0;
    if (f->off > cut)
        f->off = cut;
}

lsm_status *rados_settle_writers(struct rados_env *re, const char *oid, uint64_t cut)
{
    lsm_status *s = NULL;
    pthread_mutex_lock(&re->open_mu);
    for (struct rados_wfile *f = re->open_files; f != NULL; f = f->open_next) {
        if (strcmp(f->oid, oid) != 0)
            continue;
        pthread_mutex_lock(&f->mu);
        lsm_status *e = f->held ? send_buf(f) : NULL;
        lsm_status *w = wait_answered(f, f->sent);
        if (e == NULL)
            e = w;
        else
            lsm_status_free(w);
        cut_unsent(f, cut);
        pthread_mutex_unlock(&f->mu);
        if (s == NULL)
            s = e;
        else
            lsm_status_free(e);
    }
    pthread_mutex_unlock(&re->open_mu);
    return s;
}

static lsm_status *wfile_close(lsm_wfile *base)
{
    struct rados_wfile *f = (struct rados_wfile *)base;
    pthread_mutex_lock(&f->mu);
    lsm_status *s = send_buf(f);
    lsm_status *w = wait_answered(f, f->sent);
    pthread_mutex_unlock(&f->mu);
    if (s == NULL)
        s = w;
    else
        lsm_status_free(w);
    open_files_remove(f);
    lsm_status_free(f->err);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f->buf);
    free(f->path);
    free(f);
    return s;
}

static const struct lsm_wfile_ops rados_wfile_ops = {
    .append = wfile_append,
    .flush = wfile_flush,
    .sync = wfile_sync,
    .preallocate = wfile_preallocate,
    .close = wfile_close,
    .hold_for_sync = wfile_hold_for_sync,
};

/* A fresh object under path's name; a file that had the name loses it. */
lsm_status *rados_new_wfile(lsm_env *env, const char *path, lsm_wfile **out)
{
    struct rados_env *re = rados_env_of(env);
    *out = NULL;
    struct rados_entry e;
    lsm_status *s = rados_resolve(re, path, &e);
    if (s == NULL && e.found && e.is_dir)
        s = rados_error(-EISDIR, "create", path);
    struct rados_wfile *f = s ? NULL : lsm_calloc(1, sizeof *f);
    if (s == NULL && (f == NULL || (f->buf = lsm_malloc(WFILE_BUF)) == NULL ||
                      (f->path = lsm_strdup(path)) == NULL))
        s = status_new(LSM_NO_MEMORY, "create %s: out of memory", path);
    char id[24], oid[RADOS_OID_MAX], val[RADOS_OID_MAX + 4];
    rados_new_id(id, sizeof id);
    snprintf(oid, sizeof oid, "lsmfs.f.%s", id);
    struct rados_entry made = {.found = true, .is_dir = false};
    snprintf(made.oid, sizeof made.oid, "%s", oid);
    rados_entry_value(&made, val, sizeof val);
    if (s == NULL)
        s = rados_create_named(re, &e, oid, val, path); /* the old file's name leaves */
    if (s != NULL) {
        if (f) {
            free(f->buf);
            free(f->path);
        }
        free(f);
        return s;
    }
    f->base.ops = &rados_wfile_ops;
    f->re = re;
    snprintf(f->oid, sizeof f->oid, "%s", oid);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    open_files_add(f);
    *out = &f->base;
    return NULL;
}

