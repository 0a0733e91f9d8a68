/* bench_cores: the round trip of a cache line between the CPUs this process may run on
 * (benchmarks/micro/core_rtt.h), which says how far apart the host put them.
 *
 *   bench_cores [--watch SECONDS] [--exchanges 20000]
 *
 * Prints one JSON object per pair of CPUs (the first 8 CPUs at most): {"cpu_a", "cpu_b",
 * "round_trip_ns"}. With --watch, the first pair again every half second for that long, one
 * object per reading with its time ("t_s"): on a virtual machine the host may move the vCPUs
 * between cores near each other and cores on different chiplets while a run goes on, and a
 * two-thread training step is then 15–30 % slower (docs/log/2026-12-04.md). Exit status 77 with a
 * message when fewer than two CPUs are available. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core_rtt.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    double watch = 0;
    long exchanges = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--watch") && i + 1 < argc)
            watch = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--exchanges") && i + 1 < argc)
            exchanges = strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_cores [--watch SECONDS] [--exchanges 20000]\n");
            return 2;
        }
    }
    if (exchanges < 100) exchanges = 100;
    int cpus[8];
    const int n = core_rtt_cpus(cpus, 8);
    if (n < 2) {
        printf("bench_cores: fewer than two CPUs to run on\n");
        return 77;
    }
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++)
            printf("{\"cpu_a\": %d, \"cpu_b\": %d, \"round_trip_ns\": %.1f}\n", cpus[i], cpus[k],
                   core_rtt_ns(cpus[i], cpus[k], exchanges));
    const double t0 = now();
    while (now() - t0 < watch) {
        struct timespec half = {0, 500 * 1000 * 1000};
        nanosleep(&half, NULL);
        printf("{\"t_s\": %.1f, \"cpu_a\": %d, \"cpu_b\": %d, \"round_trip_ns\": %.1f}\n",
               now() - t0, cpus[0], cpus[1], core_rtt_ns(cpus[0], cpus[1], exchanges));
        fflush(stdout);
    }
    return 0;
}
