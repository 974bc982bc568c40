/*
 * uring.c — FUSE over io_uring (see uring.h).
 */
#include "uring.h"

#include "fuse_kernel_abi.h"
#include "loop.h"
#include "task_state.h"

#include <linux/fuse.h>

#include <assert.h>
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ structures */

/* Bytes before an entry's payload, where the request's headers are put
 * back in front of it so that libfuse sees what /dev/fuse would give. */
#define PAYLOAD_PREFIX 4096
/* user_data of the eventfd read (entries are pointers, never this). */
#define EFD_TAG 1u
/* Errors after which a queue's entry is not registered again. */
#define MAX_REREGISTER 16
/* A request a queue thread serves itself that has run this long waits on
 * something after all, and every other request of its CPU waits behind
 * it (nobody else may serve that ring): the watch logs it. */
#define STALL_MS 10
/* After such a stall, requests of the same opcode go to workers for this
 * long (they meet the same lock or page a while): learned may_wait. */
#define LEARN_MS 1000
/* Opcodes whose stalls are learned (FUSE's are below, CUSE_INIT aside). */
#define LEARN_OPS 64

struct uring_queue;
struct uring;

struct uring_worker {
    struct uring *u; /* [const] */
    unsigned slot;   /* [const] its index in uring.workers */
    pthread_t thread; /* [const once started] */
    sem_t wake;      /* posted when it is given work, or at stop */
};

struct uring_ent {
    struct uring_queue *q;      /* [const] */
    struct ur_req_header *hdr;  /* [const] the kernel writes it while armed */
    char *base;                 /* [const] PAYLOAD_PREFIX + payload bytes */
    struct iovec iov[2];        /* [const] header, payload */
    _Atomic uint64_t unique;    /* the request being served, or 0 */
    struct fuse_in_header *in;  /* [owner] that request, rebuilt (rebuild()) */
    bool dead;                  /* [queue thread] the kernel dropped it */
};

struct uring_queue {
    struct uring *u;  /* [const] */
    unsigned qid;     /* [const] = the CPU it serves */
    pthread_t thread; /* [const once started] */
    struct io_uring ring; /* [queue thread] */
    int efd;              /* [const] wakes the thread: replies done, stop */
    uint64_t efd_val;     /* [queue thread] the eventfd read's buffer */
    struct uring_ent *ents; /* [const] depth of them */
    unsigned pending_sqes;  /* [queue thread] prepared, not submitted */
    unsigned reregistered;  /* [queue thread] */
    pthread_mutex_t mu;
    struct uring_ent **done; /* [mu] replied by workers, to commit */
    unsigned ndone;          /* [mu] */
    /* [mu] The thread waits (or is about to) in the kernel with the done
     * list empty: the worker that adds to it writes the eventfd. While it
     * is awake it commits the list before it waits, and nobody writes. */
    bool asleep;
    /* The stall watch (watch()): when the request the thread serves itself
     * began (now_ns), 0 while it serves none; and how many it began. */
    _Atomic uint64_t inline_since;
    _Atomic uint64_t inline_seq;
    _Atomic uint32_t inline_op; /* that request's opcode */
    _Atomic int tid;            /* the thread's, for its state in /proc */
};

/* Phases of the queues' start (uring.mu). */
enum { PH_SETUP, PH_GO, PH_ABORT };

struct uring {
    struct fuse_session *se; /* [const] */
    int fd;                  /* [const] the device */
    uring_config cfg;        /* [const] */
    unsigned nq;             /* [const] queues: the kernel's possible CPUs */
    struct uring_queue *qs;  /* [const once INIT is answered] */
    size_t payload_sz;       /* [const once INIT is answered] */
    _Atomic uint64_t init_unique; /* the INIT request's (set by dev_read) */
    _Atomic bool init_offered;    /* it carried FUSE_OVER_IO_URING */
    _Atomic bool started;         /* queue threads run (set at INIT) */
    _Atomic bool active;     /* the ring serves requests */
    _Atomic bool stop;       /* the threads are to end */
    _Atomic bool workers_joined; /* uring_stop joined every worker: none posts a reply any more */
    _Atomic uint64_t served; /* requests taken from the ring */
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* phase and setup changes */
    int phase;            /* [mu] */
    unsigned set_up;      /* [mu] queues done setting up */
    int setup_err;        /* [mu] first setup failure, or 0 */
    /* Workers for requests that may wait. */
    struct uring_ent **work;  /* [mu] ring of nq*depth entries */
    unsigned work_head, nwork; /* [mu] */
    /* Idle workers wait each on its own semaphore, which the queue thread
     * that hands one work posts after it let go of mu: a condition
     * variable's signal may wait for a waiter signalled before to run
     * (glibc), and a queue thread must never wait for another thread. */
    unsigned *idlers;         /* [mu] stack of the idle workers' slots */
    unsigned nidle;           /* [mu] */
    unsigned nworkers;        /* [mu] started */
    struct uring_worker *workers; /* [mu] the first nworkers are started */
    /* The stall watch: one thread, asleep while no queue thread serves a
     * request itself; queue threads wake it when it is. */
    pthread_cond_t watch_cv;   /* [mu] */
    pthread_t watcher;         /* [const once started] */
    bool watching;             /* [const once started] the watch runs */
    _Atomic bool watch_asleep; /* it waits untimed: wake it */
    _Atomic uint64_t stalls;   /* inline requests that ran past STALL_MS */
    /* Per opcode: until when (now_ns) its requests go to workers. */
    _Atomic uint64_t learned_until[LEARN_OPS];
};

/* The entry whose request this thread is serving, and the queue this
 * thread serves (NULL on other threads). */
static _Thread_local struct uring_ent *tls_ent;
static _Thread_local struct uring_queue *tls_queue;

/* Custom I/O receives only the device's fd and the file system's userdata;
 * the transport is found by its fd. Written before the session is served. */
#define MAX_TRANSPORTS 8
static struct uring *_Atomic transports[MAX_TRANSPORTS];

static struct uring *transport_of(int fd)
{
    for (unsigned i = 0; i < MAX_TRANSPORTS; i++) {
        struct uring *u = atomic_load_explicit(&transports[i], memory_order_acquire);
        if (u != NULL && u->fd == fd)
            return u;
    }
    return NULL;
}

/* ------------------------------------------------------------ settings */

int uring_parse_mode(const char *s, uring_mode *out)
{
    static const char *const names[] = {"off", "auto", "on"};
    for (unsigned i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (uring_mode)i;
            return 0;
        }
    return -1;
}

/* The first byte of a small file, or -1. */
static int first_byte(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    int c = fgetc(f);
    fclose(f);
    return c;
}

int uring_kernel_offers(void)
{
    int disabled = first_byte("/proc/sys/kernel/io_uring_disabled");
    return first_byte(URING_PARAM_PATH) == 'Y' && (disabled == -1 || disabled == '0');
}

/* The kernel's queue count: num_possible_cpus(), queue = CPU number. */
static unsigned possible_cpus(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    unsigned last = 0, a, b;
    if (f != NULL) {
        int c;
        do {
            if (fscanf(f, "%u", &a) != 1)
                break;
            b = a;
            c = fgetc(f);
            if (c == '-' && fscanf(f, "%u", &b) == 1)
                c = fgetc(f);
            if (b > last)
                last = b;
        } while (c == ',');
        fclose(f);
    }
    return last + 1;
}

/* ------------------------------------------------------------ the rings */

/* A zeroed 128-byte SQE for a command on entry ent. [queue thread] */
static struct io_uring_sqe *cmd_sqe(struct uring_ent *ent, uint32_t op, uint64_t commit_id)
{
    struct uring_queue *q = ent->q;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    assert(sqe != NULL); /* the SQ holds one per entry, and the eventfd's */
    memset(sqe, 0, 128);
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = q->u->fd;
    sqe->cmd_op = op;
    if (op == UR_CMD_REGISTER) {
        sqe->addr = (uint64_t)(uintptr_t)ent->iov;
        sqe->len = 2;
    }
    struct ur_cmd_req *req = (struct ur_cmd_req *)sqe->cmd;
    req->commit_id = commit_id;
    req->qid = (uint16_t)q->qid;
    io_uring_sqe_set_data(sqe, ent);
    q->pending_sqes++;
    return sqe;
}

static void arm_eventfd(struct uring_queue *q)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    assert(sqe != NULL);
    io_uring_prep_read(sqe, q->efd, &q->efd_val, sizeof(q->efd_val), 0);
    io_uring_sqe_set_data64(sqe, EFD_TAG);
    q->pending_sqes++;
}

/* Sends the captured reply of ent back and re-arms ent. [queue thread] */
static void commit(struct uring_ent *ent)
{
    uint64_t unique = ((struct fuse_out_header *)ent->hdr->in_out)->unique;
    cmd_sqe(ent, UR_CMD_COMMIT_AND_FETCH, unique);
}

/* Hands ent's reply to its queue: at once on the queue's own thread, else
 * through the done list and the eventfd. [any thread] */
static void reply_done(struct uring_ent *ent)
{
    struct uring_queue *q = ent->q;
    if (tls_queue == q) {
        commit(ent);
        return;
    }
    pthread_mutex_lock(&q->mu);
    q->done[q->ndone++] = ent;
    bool wake = q->asleep;
    q->asleep = false; /* one wake-up is enough */
    pthread_mutex_unlock(&q->mu);
    uint64_t one = 1;
    if (wake && write(q->efd, &one, sizeof(one)) != sizeof(one))
        fuse_log(FUSE_LOG_ERR, "lsmfs: uring: cannot wake queue %u: %s\n", q->qid,
                 strerror(errno));
}

/* The entry serving request unique, or NULL (a /dev/fuse request). */
static struct uring_ent *ent_of(struct uring *u, uint64_t unique)
{
    struct uring_ent *e = tls_ent;
    if (e != NULL && atomic_load_explicit(&e->unique, memory_order_relaxed) == unique)
        return e;
    for (unsigned q = 0; q < u->nq; q++)
        for (unsigned i = 0; i < u->cfg.depth; i++) {
            e = &u->qs[q].ents[i];
            if (atomic_load_explicit(&e->unique, memory_order_relaxed) == unique)
                return e;
        }
    return NULL;
}

/* Copies a reply (iov[0] the out header) into ent and commits it. Returns
 * the bytes taken, as writev(2) would. */
static ssize_t capture_reply(struct uring *u, struct uring_ent *ent, const struct iovec *iov,
                             int count)
{
    struct fuse_out_header oh = *(const struct fuse_out_header *)iov[0].iov_base;
    size_t total = iov[0].iov_len, n = 0;
    for (int i = 1; i < count; i++) {
        if (n + iov[i].iov_len > u->payload_sz) {
            oh.error = -EIO; /* cannot happen: the kernel sized the payload */
            n = 0;
            break;
        }
        memcpy(ent->base + PAYLOAD_PREFIX + n, iov[i].iov_base, iov[i].iov_len);
        n += iov[i].iov_len;
    }
    for (int i = 1; i < count; i++)
        total += iov[i].iov_len;
    oh.len = (uint32_t)(sizeof(oh) + n);
    memcpy(ent->hdr->in_out, &oh, sizeof(oh));
    ent->hdr->ring_ent_in_out.payload_sz = (uint32_t)n;
    atomic_store_explicit(&ent->unique, 0, memory_order_relaxed);
    reply_done(ent);
    return (ssize_t)total;
}

/* ------------------------------------------------------------- requests */

static int start_worker(struct uring *u);

/* Queues ent for a worker. */
static void hand_off(struct uring *u, struct uring_ent *ent)
{
    pthread_mutex_lock(&u->mu);
    unsigned cap = u->nq * u->cfg.depth;
    u->work[(u->work_head + u->nwork) % cap] = ent;
    u->nwork++;
    struct uring_worker *w = NULL;
    if (u->nidle > 0)
        w = &u->workers[u->idlers[--u->nidle]];
    else if (!atomic_load(&u->stop) && /* uring_stop joins the workers it counted */
             u->nworkers < u->cfg.max_workers && start_worker(u) != 0 && u->nworkers == 0)
        fuse_log(FUSE_LOG_ERR, "lsmfs: uring: cannot start a worker thread\n");
    pthread_mutex_unlock(&u->mu);
    if (w != NULL)
        sem_post(&w->wake);
}

/* Puts the request the kernel placed in ent back in the /dev/fuse layout
 * (header, first argument, the rest) in front of its payload. Returns its
 * start, or NULL if the kernel's sizes do not add up. */
static struct fuse_in_header *rebuild(struct uring *u, struct uring_ent *ent)
{
    struct fuse_in_header h;
    memcpy(&h, ent->hdr->in_out, sizeof(h));
    size_t payload = ent->hdr->ring_ent_in_out.payload_sz;
    if (h.len < sizeof(h) + payload || payload > u->payload_sz ||
        h.len - sizeof(h) - payload > UR_OP_SZ)
        return NULL;
    size_t op = h.len - sizeof(h) - payload;
    char *start = ent->base + PAYLOAD_PREFIX - op - sizeof(h);
    memcpy(start, &h, sizeof(h));
    memcpy(start + sizeof(h), ent->hdr->op_in, op);
    return (struct fuse_in_header *)start;
}

/* Runs the request in ent through libfuse. [queue thread or worker] */
static void process(struct uring *u, struct uring_ent *ent, struct fuse_in_header *in)
{
    struct fuse_buf buf = {.mem = in, .size = in->len};
    tls_ent = ent;
    fuse_session_process_buf(u->se, &buf);
    tls_ent = NULL;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* q's thread serves a request itself from now on: the watch is to look.
 * [queue thread] */
static void inline_begin(struct uring_queue *q, uint32_t opcode, uint64_t now)
{
    atomic_store_explicit(&q->inline_op, opcode, memory_order_relaxed);
    atomic_fetch_add_explicit(&q->inline_seq, 1, memory_order_relaxed);
    atomic_store(&q->inline_since, now); /* seq_cst: before the load below */
    struct uring *u = q->u;
    if (atomic_load(&u->watch_asleep)) {
        pthread_mutex_lock(&u->mu);
        if (atomic_exchange(&u->watch_asleep, false)) /* one signal per sleep */
            pthread_cond_signal(&u->watch_cv);
        pthread_mutex_unlock(&u->mu);
    }
}

/* Takes the request the kernel completed ent with. [queue thread] */
static void take_request(struct uring *u, struct uring_ent *ent)
{
    atomic_fetch_add_explicit(&u->served, 1, memory_order_relaxed);
    if (u->cfg.served != NULL)
        atomic_fetch_add_explicit(u->cfg.served, 1, memory_order_relaxed);
    struct fuse_in_header *in = rebuild(u, ent);
    if (in == NULL) {
        uint64_t unique = ((struct fuse_in_header *)ent->hdr->in_out)->unique;
        struct fuse_out_header oh = {.len = sizeof(oh), .error = -EIO, .unique = unique};
        struct iovec iov = {.iov_base = &oh, .iov_len = sizeof(oh)};
        atomic_store_explicit(&ent->unique, unique, memory_order_relaxed);
        capture_reply(u, ent, &iov, 1);
        return;
    }
    atomic_store_explicit(&ent->unique, in->unique, memory_order_relaxed);
    ent->in = in;
    uint64_t now = now_ns();
    if ((u->cfg.may_wait != NULL && u->cfg.may_wait(u->cfg.ctx, in, in->len)) ||
        (in->opcode < LEARN_OPS &&
         now < atomic_load_explicit(&u->learned_until[in->opcode], memory_order_relaxed))) {
        hand_off(u, ent);
        return;
    }
    inline_begin(ent->q, in->opcode, now);
    process(u, ent, in);
    atomic_store(&ent->q->inline_since, 0);
}

/* Serves handed-off requests until stop. An idle worker puts itself on
 * the idle stack and waits; whoever pops it posts its semaphore. */
static void *worker(void *arg)
{
    struct uring_worker *w = arg;
    struct uring *u = w->u;
    pthread_mutex_lock(&u->mu);
    for (;;) {
        if (u->nwork > 0) {
            struct uring_ent *ent = u->work[u->work_head];
            u->work_head = (u->work_head + 1) % (u->nq * u->cfg.depth);
            u->nwork--;
            pthread_mutex_unlock(&u->mu);
            process(u, ent, ent->in);
            pthread_mutex_lock(&u->mu);
            continue;
        }
        if (atomic_load(&u->stop))
            break;
        u->idlers[u->nidle++] = w->slot;
        pthread_mutex_unlock(&u->mu);
        while (sem_wait(&w->wake) != 0 && errno == EINTR)
            ;
        pthread_mutex_lock(&u->mu);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

/* REQUIRES: u->mu held, u->nworkers < max_workers. */
static int start_worker(struct uring *u)
{
    struct uring_worker *w = &u->workers[u->nworkers];
    *w = (struct uring_worker){.u = u, .slot = u->nworkers};
    sem_init(&w->wake, 0, 0);
    int err = loop_start_thread(&w->thread, worker, w, "lsmfs-uworker");
    if (err == 0)
        u->nworkers++;
    else
        sem_destroy(&w->wake);
    return err;
}

/* ------------------------------------------------------- queue threads */

/* Commits the replies workers left in q's done list. REQUIRES: q->mu
 * held. [queue thread] */
static void commit_done(struct uring_queue *q)
{
    for (unsigned i = 0; i < q->ndone; i++)
        commit(q->done[i]);
    q->ndone = 0;
}

/* Handles one completion. [queue thread] */
static void complete(struct uring_queue *q, const struct io_uring_cqe *cqe)
{
    struct uring *u = q->u;
    if (io_uring_cqe_get_data64(cqe) == EFD_TAG) {
        pthread_mutex_lock(&q->mu);
        commit_done(q);
        pthread_mutex_unlock(&q->mu);
        if (!atomic_load(&u->stop))
            arm_eventfd(q);
        return;
    }
    struct uring_ent *ent = io_uring_cqe_get_data(cqe);
    if (cqe->res >= 0) {
        take_request(u, ent);
        return;
    }
    /* The connection is going (ENOTCONN, ECANCELED) or the kernel refused
     * the entry: a commit it found no request for drops the entry, so it
     * is registered anew, a bounded number of times. */
    int err = -cqe->res;
    if (err != ENOTCONN && err != ECANCELED && err != ENODEV && !atomic_load(&u->stop) &&
        q->reregistered < MAX_REREGISTER) {
        fuse_log(FUSE_LOG_WARNING, "lsmfs: uring: queue %u: entry refused (%s), registered again\n",
                 q->qid, strerror(err));
        q->reregistered++;
        cmd_sqe(ent, UR_CMD_REGISTER, 0);
        return;
    }
    ent->dead = true;
}

/* Allocates q's entries and its ring. Returns 0 or an errno. [queue thread] */
static int queue_setup(struct uring_queue *q)
{
    struct uring *u = q->u;
    unsigned entries = 1;
    while (entries < u->cfg.depth + 1)
        entries *= 2;
    struct io_uring_params p = {0};
    /* Task work (the kernel filling an entry) runs when this thread waits
     * for completions, not by interrupting it. */
    p.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int r = io_uring_queue_init_params(entries, &q->ring, &p);
    if (r == -EINVAL) {
        memset(&p, 0, sizeof(p));
        p.flags = IORING_SETUP_SQE128;
        r = io_uring_queue_init_params(entries, &q->ring, &p);
    }
    if (r < 0)
        return -r;
    q->ents = calloc(u->cfg.depth, sizeof(*q->ents));
    q->done = calloc(u->cfg.depth, sizeof(*q->done));
    q->efd = eventfd(0, EFD_CLOEXEC);
    if (q->ents == NULL || q->done == NULL || q->efd < 0)
        return q->efd < 0 ? errno : ENOMEM;
    for (unsigned i = 0; i < u->cfg.depth; i++) {
        struct uring_ent *e = &q->ents[i];
        e->q = q;
        e->hdr = aligned_alloc(64, (sizeof(*e->hdr) + 63) & ~(size_t)63); /* C11: a multiple */
        e->base = aligned_alloc(4096, PAYLOAD_PREFIX + ((u->payload_sz + 4095) & ~(size_t)4095));
        if (e->hdr == NULL || e->base == NULL)
            return ENOMEM;
        memset(e->hdr, 0, sizeof(*e->hdr));
        e->iov[0] = (struct iovec){.iov_base = e->hdr, .iov_len = sizeof(*e->hdr)};
        e->iov[1] = (struct iovec){.iov_base = e->base + PAYLOAD_PREFIX, .iov_len = u->payload_sz};
    }
    return 0;
}

/* REQUIRES: every queue thread joined (ent_of reads every queue's entries
 * from any thread while one runs). */
static void queue_free(struct uring_queue *q)
{
    if (q->ring.ring_fd > 0)
        io_uring_queue_exit(&q->ring);
    if (q->ents != NULL)
        for (unsigned i = 0; i < q->u->cfg.depth; i++) {
            free(q->ents[i].hdr);
            free(q->ents[i].base);
        }
    free(q->ents);
    free(q->done);
    /* q->efd stays open: uring_stop writes to it, and closes it after the
     * join. */
}

/* Registers q's entries, then serves them until stop. [queue thread] */
static void queue_serve(struct uring_queue *q)
{
    struct uring *u = q->u;
    for (unsigned i = 0; i < u->cfg.depth; i++)
        cmd_sqe(&q->ents[i], UR_CMD_REGISTER, 0);
    arm_eventfd(q);
    while (!atomic_load(&u->stop)) {
        pthread_mutex_lock(&q->mu);
        commit_done(q);
        q->asleep = io_uring_cq_ready(&q->ring) == 0;
        pthread_mutex_unlock(&q->mu);
        q->pending_sqes = 0;
        int r = io_uring_submit_and_wait(&q->ring, 1);
        pthread_mutex_lock(&q->mu);
        q->asleep = false;
        pthread_mutex_unlock(&q->mu);
        if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
            fuse_log(FUSE_LOG_ERR, "lsmfs: uring: queue %u: %s\n", q->qid, strerror(-r));
            break;
        }
        struct io_uring_cqe *cqe;
        while (io_uring_peek_cqe(&q->ring, &cqe) == 0) {
            struct io_uring_cqe c = *cqe;
            io_uring_cqe_seen(&q->ring, cqe);
            complete(q, &c);
            /* Send this reply before serving the next request. */
            if (q->pending_sqes > 0 && io_uring_cq_ready(&q->ring) > 0) {
                io_uring_submit(&q->ring);
                q->pending_sqes = 0;
            }
        }
    }
    /* Workers still finishing a request post its reply after stop was set,
     * maybe after this thread's last commit_done: wait for uring_stop to
     * have joined them (a short wait, at shutdown only), then commit all. */
    struct timespec ms = {.tv_nsec = 1000000};
    while (atomic_load(&u->stop) && !atomic_load(&u->workers_joined))
        nanosleep(&ms, NULL);
    pthread_mutex_lock(&q->mu);
    commit_done(q);
    pthread_mutex_unlock(&q->mu);
    io_uring_submit(&q->ring); /* the replies of the last requests */
}

static void bind_to_cpu(unsigned cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* offline: unbound */
}

static void *queue_thread(void *arg)
{
    struct uring_queue *q = arg;
    struct uring *u = q->u;
    tls_queue = q;
    atomic_store(&q->tid, (int)gettid());
    bind_to_cpu(q->qid);
    int err = queue_setup(q);
    pthread_mutex_lock(&u->mu);
    u->set_up++;
    if (err != 0 && u->setup_err == 0)
        u->setup_err = err;
    pthread_cond_broadcast(&u->cv);
    while (u->phase == PH_SETUP)
        pthread_cond_wait(&u->cv, &u->mu);
    bool go = u->phase == PH_GO;
    pthread_mutex_unlock(&u->mu);
    if (go)
        queue_serve(q);
    return NULL; /* uring_stop frees q once every queue thread is gone */
}

/* Logs each queue's inline request that has run STALL_MS or more and
 * sleeps, once (seen[q]: the inline_seq last logged). Returns whether any queue thread
 * serves a request itself. REQUIRES: u->mu held. [the watch] */
static bool look(struct uring *u, uint64_t *seen)
{
    bool any = false;
    uint64_t now = now_ns();
    for (unsigned i = 0; i < u->nq; i++) {
        struct uring_queue *q = &u->qs[i];
        uint64_t since = atomic_load(&q->inline_since);
        if (since == 0)
            continue;
        any = true;
        uint64_t seq = atomic_load(&q->inline_seq);
        char wchan[64];
        if (now < since + (uint64_t)STALL_MS * 1000000u || seen[i] == seq ||
            !task_blocked(atomic_load(&q->tid), wchan, sizeof wchan))
            continue; /* not yet, already said, or it runs (or waits for a CPU) */
        seen[i] = seq;
        atomic_fetch_add(&u->stalls, 1);
        uint32_t op = atomic_load(&q->inline_op);
        if (op < LEARN_OPS)
            atomic_store(&u->learned_until[op], now + (uint64_t)LEARN_MS * 1000000u);
        fuse_log(FUSE_LOG_WARNING,
                 "lsmfs: uring: queue %u: a request (opcode %u) its thread serves itself has run "
                 "%llu ms, now asleep (in %s); the other requests of CPU %u wait behind it\n",
                 i, (unsigned)atomic_load(&q->inline_op),
                 (unsigned long long)((now - since) / 1000000u), wchan[0] ? wchan : "?", i);
    }
    return any;
}

/* The stall watch: every STALL_MS while a queue thread serves a request
 * itself, else asleep until one does (inline_begin wakes it). A request
 * that stalls its queue cannot be handed on (only the queue's thread may
 * submit to its ring, and the kernel fills its entries in that thread):
 * the watch makes it seen. */
static void *watch(void *arg)
{
    struct uring *u = arg;
    uint64_t *seen = calloc(u->nq, sizeof(*seen));
    pthread_mutex_lock(&u->mu);
    while (seen != NULL && !atomic_load(&u->stop)) {
        if (!look(u, seen)) {
            atomic_store(&u->watch_asleep, true);
            if (!look(u, seen) && !atomic_load(&u->stop)) /* one began meanwhile? */
                pthread_cond_wait(&u->watch_cv, &u->mu);
            atomic_store(&u->watch_asleep, false);
            continue;
        }
        loop_cond_wait_ms(&u->watch_cv, &u->mu, STALL_MS);
    }
    pthread_mutex_unlock(&u->mu);
    free(seen);
    return NULL;
}

/* Starts a thread per queue and waits until each set up its ring. Returns
 * 0 or the first errno. [/dev/fuse loop, at INIT] */
static int start_queues(struct uring *u)
{
    u->qs = calloc(u->nq, sizeof(*u->qs));
    u->work = calloc((size_t)u->nq * u->cfg.depth, sizeof(*u->work));
    u->workers = calloc(u->cfg.max_workers, sizeof(*u->workers));
    u->idlers = calloc(u->cfg.max_workers, sizeof(*u->idlers));
    if (u->qs == NULL || u->work == NULL || u->workers == NULL || u->idlers == NULL)
        return ENOMEM;
    unsigned started = 0;
    int err = 0;
    for (; started < u->nq && err == 0; started++) {
        struct uring_queue *q = &u->qs[started];
        q->u = u;
        q->qid = started;
        q->efd = -1;
        pthread_mutex_init(&q->mu, NULL);
        err = loop_start_thread(&q->thread, queue_thread, q, "lsmfs-uqueue");
        if (err != 0)
            pthread_mutex_destroy(&q->mu);
    }
    if (err != 0)
        started--;
    u->nq = started; /* the ones to join */
    u->started = true;
    pthread_mutex_lock(&u->mu);
    while (u->set_up < started)
        pthread_cond_wait(&u->cv, &u->mu);
    if (err == 0)
        err = u->setup_err;
    pthread_mutex_unlock(&u->mu);
    if (err == 0 && loop_start_thread(&u->watcher, watch, u, "lsmfs-uwatch") == 0)
        u->watching = true; /* else serve unwatched */
    return err;
}

static void set_phase(struct uring *u, int phase)
{
    pthread_mutex_lock(&u->mu);
    u->phase = phase;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

/* ----------------------------------------------------------- custom I/O */

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
    (void)userdata;
    ssize_t n = read(fd, buf, len);
    struct uring *u;
    if (n >= (ssize_t)(sizeof(struct fuse_in_header) + sizeof(struct fuse_init_in)) &&
        ((struct fuse_in_header *)buf)->opcode == FUSE_INIT && (u = transport_of(fd)) != NULL) {
        const struct fuse_in_header *h = buf;
        const struct fuse_init_in *in = (const void *)(h + 1);
        u->init_unique = h->unique;
        u->init_offered = (in->flags & UR_INIT_EXT) && ((uint64_t)in->flags2 << 32 & UR_OVER_IO_URING);
    }
    return n;
}

/* The ring's payload size for the connection this INIT reply sets up:
 * the kernel's max(FUSE_MIN_READ_BUFFER, max_write, max_pages pages). */
static size_t payload_size(const struct ur_init_out *o)
{
    size_t pages = (o->flags & UR_MAX_PAGES) && o->max_pages > 0 ? o->max_pages : 32;
    size_t n = pages * 4096;
    if (o->max_write > n)
        n = o->max_write;
    return n > UR_MIN_PAYLOAD ? n : UR_MIN_PAYLOAD;
}

/* Sets up the queues for the connection INIT's reply (iov) accepts, and
 * says so in the reply. Returns whether the ring is to be used. */
static bool init_ring(struct uring *u, struct iovec *iov, int count)
{
    const struct fuse_out_header *oh = iov[0].iov_base;
    if (u->cfg.mode == URING_OFF)
        return false;
    if (!u->init_offered) {
        fuse_log(u->cfg.mode == URING_ON ? FUSE_LOG_ERR : FUSE_LOG_NOTICE,
                 "lsmfs: the kernel does not offer FUSE over io_uring (%s is not Y)%s\n",
                 URING_PARAM_PATH, u->cfg.mode == URING_ON ? "" : ": serving /dev/fuse");
        return false;
    }
    if (oh->error != 0 || count < 2 || iov[1].iov_len < sizeof(struct ur_init_out))
        return false;
    struct ur_init_out *o = iov[1].iov_base;
    u->payload_sz = payload_size(o);
    int err = start_queues(u);
    if (err != 0) {
        fuse_log(u->cfg.mode == URING_ON ? FUSE_LOG_ERR : FUSE_LOG_NOTICE,
                 "lsmfs: cannot set up io_uring queues: %s%s\n", strerror(err),
                 u->cfg.mode == URING_ON ? "" : ": serving /dev/fuse");
        return false;
    }
    o->flags |= UR_INIT_EXT;
    o->flags2 |= (uint32_t)(UR_OVER_IO_URING >> 32);
    return true;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    struct uring *u = transport_of(fd);
    const struct fuse_out_header *oh = iov[0].iov_base;
    if (u == NULL || oh->unique == 0)
        return writev(fd, iov, count);
    if (atomic_load_explicit(&u->active, memory_order_acquire)) {
        struct uring_ent *ent = ent_of(u, oh->unique);
        if (ent != NULL)
            return capture_reply(u, ent, iov, count);
        return writev(fd, iov, count);
    }
    if (oh->unique != u->init_unique || u->started)
        return writev(fd, iov, count);
    if (u->cfg.init_reply != NULL)
        u->cfg.init_reply(iov, count);
    bool ring = init_ring(u, iov, count);
    ssize_t n = writev(fd, iov, count);
    if (n >= 0 && u->cfg.on_init != NULL)
        u->cfg.on_init(u->cfg.init_ctx);
    if (ring && n >= 0) {
        /* The kernel took INIT (it is processed within the write): the
         * queues may register now. */
        atomic_store_explicit(&u->active, true, memory_order_release);
        if (u->cfg.active != NULL)
            atomic_store_explicit(u->cfg.active, 1, memory_order_relaxed);
        set_phase(u, PH_GO);
        fuse_log(FUSE_LOG_NOTICE,
                 "lsmfs: serving requests over io_uring: %u queues of %u entries\n", u->nq,
                 u->cfg.depth);
    } else if (u->started) {
        set_phase(u, PH_ABORT);
    }
    if (!ring && u->cfg.mode == URING_ON)
        fuse_session_exit(u->se); /* uring=on: no mount without the ring */
    return n;
}

/* ------------------------------------------------------------ lifecycle */

int uring_attach(struct fuse_session *se, const uring_config *cfg, struct uring **out)
{
    assert(cfg->depth >= 1 && cfg->max_workers >= 1);
    struct uring *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return -ENOMEM;
    u->se = se;
    u->fd = fuse_session_fd(se);
    u->cfg = *cfg;
    u->nq = possible_cpus();
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    pthread_cond_init(&u->watch_cv, NULL);
    unsigned slot = 0;
    struct uring *none = NULL;
    while (slot < MAX_TRANSPORTS && !atomic_compare_exchange_strong(&transports[slot], &none, u)) {
        none = NULL;
        slot++;
    }
    static const struct fuse_custom_io io = {.read = dev_read, .writev = dev_writev};
    int err = slot == MAX_TRANSPORTS ? -EBUSY : fuse_session_custom_io(se, &io, u->fd);
    if (err != 0) {
        if (slot < MAX_TRANSPORTS)
            atomic_store(&transports[slot], NULL);
        pthread_cond_destroy(&u->watch_cv);
        pthread_cond_destroy(&u->cv);
        pthread_mutex_destroy(&u->mu);
        free(u);
        return err < 0 ? err : -err;
    }
    *out = u;
    return 0;
}

bool uring_active(const struct uring *u)
{
    return u != NULL && atomic_load(&u->active);
}

uint64_t uring_stalls(const struct uring *u)
{
    return u == NULL ? 0 : atomic_load_explicit(&u->stalls, memory_order_relaxed);
}

uint64_t uring_requests(const struct uring *u)
{
    return u == NULL ? 0 : atomic_load_explicit(&u->served, memory_order_relaxed);
}

void uring_stop(struct uring *u)
{
    if (u == NULL)
        return;
    atomic_store(&u->stop, true);
    if (u->started) {
        /* Workers first: their replies go through the queues. */
        pthread_mutex_lock(&u->mu);
        if (u->phase == PH_SETUP)
            u->phase = PH_ABORT;
        pthread_cond_broadcast(&u->cv);
        pthread_cond_broadcast(&u->watch_cv);
        while (u->nidle > 0)
            sem_post(&u->workers[u->idlers[--u->nidle]].wake);
        unsigned nw = u->nworkers;
        pthread_mutex_unlock(&u->mu);
        if (u->watching)
            pthread_join(u->watcher, NULL);
        for (unsigned i = 0; i < nw; i++) {
            pthread_join(u->workers[i].thread, NULL);
            sem_destroy(&u->workers[i].wake);
        }
        atomic_store(&u->workers_joined, true); /* the queue threads commit their replies */
        for (unsigned i = 0; i < u->nq; i++) {
            uint64_t one = 1;
            if (u->qs[i].efd >= 0 && write(u->qs[i].efd, &one, sizeof(one)) < 0)
                fuse_log(FUSE_LOG_ERR, "lsmfs: uring: cannot stop queue %u\n", i);
            pthread_join(u->qs[i].thread, NULL);
        }
        for (unsigned i = 0; i < u->nq; i++) {
            queue_free(&u->qs[i]);
            if (u->qs[i].efd >= 0)
                close(u->qs[i].efd);
            pthread_mutex_destroy(&u->qs[i].mu);
        }
    }
    for (unsigned i = 0; i < MAX_TRANSPORTS; i++) {
        struct uring *me = u;
        atomic_compare_exchange_strong(&transports[i], &me, NULL);
    }
    free(u->qs);
    free(u->work);
    free(u->workers);
    free(u->idlers);
    pthread_cond_destroy(&u->watch_cv);
    pthread_cond_destroy(&u->cv);
    pthread_mutex_destroy(&u->mu);
    free(u);
}
