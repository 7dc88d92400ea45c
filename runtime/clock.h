/* Monotonic time for durations and deadlines inside the runtime. */
#ifndef MJ_CLOCK_H
#define MJ_CLOCK_H

#include <time.h>

static inline double mj_monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif /* MJ_CLOCK_H */
