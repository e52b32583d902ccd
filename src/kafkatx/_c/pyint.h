/*
 * pyint.h -- the value of a small exact int without a call into CPython.
 *
 * BatchBuilder.append reads a timestamp (~1.7e12 ms: two 30-bit digits) and maybe an offset from each
 * record's arguments; PyLong_AsLongLongAndOverflow takes ~55 instructions a call for what is two loads and a
 * shift.  kx_small_long reads an exact int of at most two digits from the object's own digits on the CPython
 * versions whose layout it knows (3.11 and before: the signed digit count in ob_size), one compact digit on
 * 3.12 and later (PyUnstable_Long_IsCompact), and returns 0 for anything else, which the caller then reads
 * the usual way.  The caller has checked that the object is an exact int.
 */
#ifndef KAFKATX_PYINT_H
#define KAFKATX_PYINT_H

#include <Python.h>
#include <stdint.h>

static inline int kx_small_long(PyObject *o, int64_t *out)
{
#if !defined(PYPY_VERSION) && !defined(Py_LIMITED_API) && PY_VERSION_HEX < 0x030C0000
    const digit *d = ((PyLongObject *)o)->ob_digit;
    switch (Py_SIZE(o)) {
    case 0:
        *out = 0;
        return 1;
    case 1:
        *out = (int64_t)d[0];
        return 1;
    case -1:
        *out = -(int64_t)d[0];
        return 1;
    case 2:
        *out = (int64_t)(((uint64_t)d[1] << PyLong_SHIFT) | d[0]);
        return 1;
    case -2:
        *out = -(int64_t)(((uint64_t)d[1] << PyLong_SHIFT) | d[0]);
        return 1;
    default:
        return 0;
    }
#elif !defined(PYPY_VERSION) && !defined(Py_LIMITED_API)
    if (PyUnstable_Long_IsCompact((PyLongObject *)o)) {
        *out = (int64_t)PyUnstable_Long_CompactValue((PyLongObject *)o);
        return 1;
    }
    return 0;
#else
    (void)o;
    (void)out;
    return 0;
#endif
}

#endif /* KAFKATX_PYINT_H */
