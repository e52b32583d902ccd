/*
 * clock.h -- the wall clock in milliseconds since the epoch, read without a Python call.
 *
 * A record appended without a timestamp takes the time it is appended at, as Kafka's producer takes
 * System.currentTimeMillis().  Python's time.time() reads the same clock (CLOCK_REALTIME), but calling
 * it from the builder costs more than encoding the record does; clock_gettime() through the vDSO costs
 * a few tens of nanoseconds.  Where there is no clock_gettime (Windows), kx_now_ms() returns -1 and the
 * caller asks time.time().
 */
#ifndef KAFKATX_CLOCK_H
#define KAFKATX_CLOCK_H

#include <stdint.h>

#if defined(__unix__) || defined(__APPLE__)
#  include <time.h>
#endif

static inline int64_t kx_now_ms(void)
{
#if (defined(__unix__) || defined(__APPLE__)) && defined(CLOCK_REALTIME)
    struct timespec t;
    if (clock_gettime(CLOCK_REALTIME, &t) != 0 || t.tv_sec < 0)
        return -1;
    return (int64_t)t.tv_sec * 1000 + (int64_t)(t.tv_nsec / 1000000);
#else
    return -1;
#endif
}

#endif /* KAFKATX_CLOCK_H */
