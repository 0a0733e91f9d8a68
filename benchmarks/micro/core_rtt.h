/* The round trip of one cache line between two CPUs (benchmarks only): a thread on each passes a
 * counter back and forth through one atomic word, and the time per exchange is what a write on
 * one core costs the other core's next read, and back. It says where the host put the cores a
 * run got: on one Zen 4 virtual machine of two vCPUs the round trip read ~55–90 ns or ~330–380
 * ns, switching between the two every few seconds to minutes (cores in one core complex
 * against cores on two chiplets; the guest cannot tell otherwise, and sees one L3 either way),
 * and a two-thread training step was 15–30 % slower in the second state (docs/log/2026-12-04.md).
 * The benchmarks print it beside their times so that each reading can be told apart. */
#ifndef TG_BENCH_CORE_RTT_H
#define TG_BENCH_CORE_RTT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    _Alignas(64) atomic_long turn; /* odd: the partner's move; even: the caller's */
    _Alignas(64) atomic_int ready; /* the partner is on its CPU (or could not be put there) */
    long exchanges;
    int cpu;
    int pinned; /* the partner could be bound to cpu */
} core_rtt_job;

static inline void core_rtt_pin(int cpu, int *ok) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    *ok = pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0;
}

static inline void *core_rtt_partner(void *arg) {
    core_rtt_job *j = arg;
    core_rtt_pin(j->cpu, &j->pinned);
    atomic_store_explicit(&j->ready, 1, memory_order_release);
    for (long i = 0; i < j->exchanges; i++) {
        while (atomic_load_explicit(&j->turn, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&j->turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static inline int core_rtt_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nanoseconds per round trip between CPUs a and b: the median of 5 batches of `exchanges`;
 * -1 when either CPU cannot be used (the caller's own affinity is restored afterwards). Each
 * batch takes exchanges × (0.05–0.4) µs: 20,000 is a few milliseconds. */
static inline double core_rtt_ns(int a, int b, long exchanges) {
    cpu_set_t old;
    if (a == b || pthread_getaffinity_np(pthread_self(), sizeof old, &old)) return -1.0;
    if (!CPU_ISSET(a, &old) || !CPU_ISSET(b, &old)) return -1.0;
    int ok;
    core_rtt_pin(a, &ok);
    double t[5];
    int got = 0;
    for (int batch = 0; ok && batch < 5; batch++) {
        core_rtt_job j = {.exchanges = exchanges, .cpu = b};
        atomic_init(&j.turn, 0);
        atomic_init(&j.ready, 0);
        pthread_t th;
        if (pthread_create(&th, NULL, core_rtt_partner, &j)) break;
        /* timed from when the partner is on its own CPU: before, it may share the caller's */
        while (!atomic_load_explicit(&j.ready, memory_order_acquire)) {
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < exchanges; i++) {
            atomic_store_explicit(&j.turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&j.turn, memory_order_acquire) != 2 * i + 2) {
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        pthread_join(th, NULL);
        if (!j.pinned) break;
        t[got++] = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
                   (double)exchanges;
    }
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    if (got < 5) return -1.0;
    qsort(t, 5, sizeof t[0], core_rtt_cmp);
    return t[2];
}

/* The first `most` CPUs this thread may run on, into cpus; returns how many there are. */
static inline int core_rtt_cpus(int *cpus, int most) {
    cpu_set_t s;
    if (pthread_getaffinity_np(pthread_self(), sizeof s, &s)) return 0;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < most; c++)
        if (CPU_ISSET(c, &s)) cpus[n++] = c;
    return n;
}

#endif
