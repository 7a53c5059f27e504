/* wqueue.c: the write queue of a non-blocking descriptor (a session's input, the host's
 * terminal output). */
#include "wqueue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int wqueue_push(wqueue *q, size_t *bytes, const char *data, size_t len) {
  wchunk *c = malloc(sizeof *c + len);
  if (c == NULL) return -ENOMEM;
  c->next = NULL;
  c->len = len;
  c->off = 0;
  memcpy(c->data, data, len);
  if (q->tail)
    q->tail->next = c;
  else
    q->head = c;
  q->tail = c;
  *bytes += len;
  return 0;
}

void wqueue_clear(wqueue *q, size_t *bytes) {
  while (q->head != NULL) {
    wchunk *c = q->head;
    q->head = c->next;
    free(c);
  }
  q->tail = NULL;
  *bytes = 0;
}

int wqueue_flush(wqueue *q, size_t *bytes, int fd, wqueue_writer write_fn) {
  while (q->head != NULL) {
    wchunk *c = q->head;
    ssize_t n = write_fn(fd, c->data + c->off, c->len - c->off);
    if (n < 0) return (int)n;
    if (n == 0) return 0; /* full again */
    c->off += (size_t)n;
    *bytes -= (size_t)n;
    if (c->off < c->len) return 0;
    q->head = c->next;
    if (q->head == NULL) q->tail = NULL;
    free(c);
  }
  return 1;
}
