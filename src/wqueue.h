/* wqueue.h: bytes a non-blocking descriptor did not take yet, in order: what a write cannot
 * hand over at once waits here and is written when the descriptor is writable again. The
 * owner keeps the count of bytes waiting (its callers read it); every call here updates it. */
#ifndef LUXEC_WQUEUE_H
#define LUXEC_WQUEUE_H

#include <stddef.h>
#include <sys/types.h>

typedef struct wchunk {
  struct wchunk *next;
  size_t len, off;
  char data[];
} wchunk;

typedef struct wqueue {
  wchunk *head, *tail; /* both NULL when empty (a zeroed wqueue is an empty one) */
} wqueue;

/* Writes what fd takes now without blocking: bytes taken, 0 when it is full, or -errno. */
typedef ssize_t (*wqueue_writer)(int fd, const char *data, size_t len);

/* data[0..len) at the back; *bytes grows by len. 0, or -ENOMEM. */
int wqueue_push(wqueue *q, size_t *bytes, const char *data, size_t len);
/* Everything dropped; *bytes becomes 0. */
void wqueue_clear(wqueue *q, size_t *bytes);
/* Write from the front while fd takes it (after a short write it waits for the next writable
 * event); *bytes drops by what it took. 1 once the queue is empty, 0 while fd is full, or the
 * -errno of a failed write (the rest stays queued). */
int wqueue_flush(wqueue *q, size_t *bytes, int fd, wqueue_writer write_fn);

#endif
