/*
 * populate.h -- pages: map the pages of a memory-mapped file in ahead of use; read a file's batch
 * headers; ask for huge pages under a large output buffer; map in a fresh output's pages in one call.
 *
 * A page fault on a memory-mapped segment costs about as much as decoding the
 * bytes of that page, so the log reader maps the pages of a read in from a
 * background thread while the decoder works behind it.  On Linux 5.14 and
 * later MADV_POPULATE_READ does that in one call (and reads the file in if it
 * is not cached, as a fault would, reporting an error instead of raising
 * SIGBUS); elsewhere one byte of every page is read.  The caller holds a
 * buffer export for [p, p + n) and need not hold the GIL.
 */
#ifndef KAFKATX_POPULATE_H
#define KAFKATX_POPULATE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__linux__)
#  include <errno.h>
#  include <sys/mman.h>
#  include <unistd.h>
#  ifndef MADV_POPULATE_READ
#    define MADV_POPULATE_READ 22
#  endif
#  ifndef MADV_POPULATE_WRITE
#    define MADV_POPULATE_WRITE 23
#  endif
#endif

#define KX_TOUCH_STRIDE 4096

#if defined(__linux__)
/* madvise(advice) over the pages that hold [p, p + n), n > 0: 0, or -1 with errno set (EINVAL also where the
   page size is not to be had, as for an advice the kernel does not know) */
static int kx_advise_pages(const void *p, size_t n, int advice)
{
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t start;
    if (ps <= 0) {
        errno = EINVAL;
        return -1;
    }
    start = (uintptr_t)p & ~((uintptr_t)ps - 1);
    return madvise((void *)start, (size_t)((uintptr_t)p + n - start), advice);
}
#endif

/* Returns 1 if the kernel populated the range, 0 if the pages were touched instead or could not be (the
   kernel found pages past the end of a file that shrank after it was mapped, or could not read them in:
   touching those would raise SIGBUS, and reading them is the decoder's business, if it ever does). */
static int kx_populate(const unsigned char *p, size_t n)
{
    volatile unsigned char sink = 0;
    size_t i;
    if (n == 0)
        return 1;
#if defined(__linux__)
    if (kx_advise_pages(p, n, MADV_POPULATE_READ) == 0)
        return 1;
    if (errno != EINVAL)  /* EINVAL: a kernel before 5.14; EFAULT, EIO, ENOMEM: leave the pages alone */
        return 0;
#endif
    for (i = 0; i < n; i += KX_TOUCH_STRIDE)
        sink ^= p[i];
    sink ^= p[n - 1];
    (void)sink;
    return 0;
}

/*
 * Ask for transparent huge pages under the whole 2 MiB pages inside [p, p + n), before the buffer is first
 * written.  A fresh buffer of a hundred megabytes (a whole encoded log, a column) otherwise takes a page
 * fault every 4 KiB, and on virtual machines those faults cost more than filling the buffer; with
 * MADV_HUGEPAGE (Linux with THP in "madvise" mode) there is one fault per 2 MiB.  numpy does the same for
 * its arrays of 4 MiB and more.  Nothing changes for the memory's owner: the advice is a hint on the
 * mapping, and any failure is ignored.
 */
#define KX_HUGE_PAGE ((uintptr_t)2 << 20)
#define KX_HUGE_MIN ((size_t)4 << 20)

static void kx_advise_huge(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    uintptr_t start, end;
    if (n < KX_HUGE_MIN)
        return;
    start = ((uintptr_t)p + KX_HUGE_PAGE - 1) & ~(KX_HUGE_PAGE - 1);
    end = ((uintptr_t)p + n) & ~(KX_HUGE_PAGE - 1);
    if (end > start)
        (void)madvise((void *)start, (size_t)(end - start), MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

/*
 * Map in, writable, the pages under a fresh output buffer [p, p + n) that is about to be filled whole, in
 * one call (MADV_POPULATE_WRITE, Linux 5.14 and later) instead of a page fault every 4 KiB as it is
 * written.  Allocating and zeroing the pages costs the same either way; what the call saves is the trap
 * of each fault, which on virtual machines costs several times as much as copying the page
 * (BatchBuilder.build() copying a 120 KB batch into a new bytes object: 0.078-0.106 ms before,
 * 0.060-0.079 ms with it, on this project's VM, where the copy itself takes 4 us).  Below
 * KX_PREFAULT_MIN the call costs more than the faults it saves.  The pages at either end may be shared
 * with other allocations: populating them changes nothing in them.  A kernel without
 * the advice (EINVAL) is not asked again; any other failure (ENOMEM) leaves the pages to fault in as
 * they would have.
 */
#define KX_PREFAULT_MIN ((size_t)32 << 10)

static int kx_prefault_works = 1; /* 0 once the kernel has said it does not know the advice */

static void kx_prefault_write(void *p, size_t n)
{
#if defined(__linux__)
    if (n >= KX_PREFAULT_MIN && kx_prefault_works && kx_advise_pages(p, n, MADV_POPULATE_WRITE) != 0
        && errno == EINVAL)
        kx_prefault_works = 0;
#else
    (void)p;
    (void)n;
#endif
}

/*
 * Read n bytes at offset of fd (fewer only at the end of the file): the bytes read, or -errno.  For the
 * header scan of a segment file, which reads a batch header every few kilobytes and would otherwise
 * take a page fault for each.  POSIX only (the reader uses it on POSIX systems).
 */
#if defined(_WIN32)
#  include <errno.h>
static long long kx_pread(int fd, unsigned char *buf, size_t n, long long offset)
{
    (void)fd; (void)buf; (void)n; (void)offset;
    return -(long long)ENOSYS;
}
#else
#  include <errno.h>
#  include <sys/types.h>
#  include <unistd.h>
static long long kx_pread(int fd, unsigned char *buf, size_t n, long long offset)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, buf + done, n - done, (off_t)(offset + (long long)done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -(long long)errno;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    return (long long)done;
}
#endif

#endif /* KAFKATX_POPULATE_H */
