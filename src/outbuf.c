/* outbuf.c: head + tail ring with exact accounting of what falls between. */
#include "outbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int outbuf_init(outbuf *ob, size_t head_cap, size_t tail_cap) {
  memset(ob, 0, sizeof *ob);
  ob->log_fd = -1;
  ob->head_cap = head_cap;
  ob->tail_cap = tail_cap;
  /* The head fills at once; the ring is allocated on first use so a quiet session costs
   * little. */
  return 0;
}

void outbuf_free(outbuf *ob) {
  free(ob->head);
  free(ob->tail);
  ob->head = ob->tail = NULL;
  if (ob->log_fd >= 0) close(ob->log_fd);
  ob->log_fd = -1;
}

static void log_append(outbuf *ob, const char *data, size_t len) {
  while (len > 0 && ob->log_errno == 0) {
    ssize_t n = write(ob->log_fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      ob->log_errno = errno;
      return;
    }
    data += n;
    len -= (size_t)n;
  }
}

/* Grow a buffer geometrically up to cap so small outputs need small allocations. */
static int reserve(char **buf, size_t *have, size_t need, size_t cap) {
  if (need <= *have) return 0;
  size_t want = *have ? *have : 4096;
  while (want < need) want *= 2;
  if (want > cap) want = cap;
  char *p = realloc(*buf, want);
  if (p == NULL) return -1;
  *buf = p;
  *have = want;
  return 0;
}

void outbuf_push(outbuf *ob, const char *data, size_t len) {
  if (len == 0) return;
  if (ob->log_fd >= 0) {
    size_t n = len;
    if (ob->log_max && ob->log_len + n > ob->log_max) n = (size_t)(ob->log_max - ob->log_len);
    if (n > 0) log_append(ob, data, n);
    ob->log_len += n;
  }
  ob->total += len;
  if (ob->head_len < ob->head_cap) {
    size_t n = ob->head_cap - ob->head_len;
    if (n > len) n = len;
    if (reserve(&ob->head, &ob->head_alloc, ob->head_len + n, ob->head_cap) == 0) {
      memcpy(ob->head + ob->head_len, data, n);
      ob->head_len += n;
    } else {
      ob->head_cap = ob->head_len; /* out of memory: the rest is counted as dropped */
    }
    data += n;
    len -= n;
  }
  if (len == 0 || ob->tail_cap == 0) return;
  if (ob->tail == NULL) {
    ob->tail = malloc(ob->tail_cap);
    if (ob->tail == NULL) return; /* counted as dropped */
  }
  if (len >= ob->tail_cap) { /* only the last tail_cap bytes can stay */
    memcpy(ob->tail, data + len - ob->tail_cap, ob->tail_cap);
    ob->tail_pos = 0;
    ob->tail_len = ob->tail_cap;
    return;
  }
  size_t first = ob->tail_cap - ob->tail_pos;
  if (first > len) first = len;
  memcpy(ob->tail + ob->tail_pos, data, first);
  memcpy(ob->tail, data + first, len - first);
  ob->tail_pos = (ob->tail_pos + len) % ob->tail_cap;
  ob->tail_len = ob->tail_len + len > ob->tail_cap ? ob->tail_cap : ob->tail_len + len;
}

uint64_t outbuf_dropped(const outbuf *ob) {
  return ob->total - ob->head_len - ob->tail_len;
}

void outbuf_view_from(const outbuf *ob, uint64_t from, outbuf_view *v) {
  memset(v, 0, sizeof *v);
  v->end = ob->total;
  if (from >= ob->total) return;
  int k = 0;
  size_t got = 0;
  if (from < ob->head_len) {
    v->seg[k] = ob->head + from;
    v->len[k] = ob->head_len - (size_t)from;
    got += v->len[k++];
    from = ob->head_len;
  }
  uint64_t tail_start = ob->total - ob->tail_len;
  if (from < tail_start) {
    v->dropped = tail_start - from;
    from = tail_start;
  }
  v->gap_at = got;
  size_t skip = (size_t)(from - tail_start); /* bytes of the ring already read */
  size_t n = ob->tail_len - skip;
  if (n == 0) return;
  /* the oldest held tail byte sits at tail_pos - tail_len (mod cap) */
  size_t start = (ob->tail_pos + ob->tail_cap - ob->tail_len + skip) % ob->tail_cap;
  size_t first = ob->tail_cap - start;
  if (first > n) first = n;
  v->seg[k] = ob->tail + start;
  v->len[k++] = first;
  if (n > first) {
    v->seg[k] = ob->tail;
    v->len[k] = n - first;
  }
}

int outbuf_open_log(outbuf *ob, const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  if (ob->log_fd >= 0) close(ob->log_fd);
  ob->log_fd = fd;
  ob->log_base = (uint64_t)st.st_size;
  ob->log_from = ob->total;
  ob->log_errno = 0;
  return 0;
}

int64_t outbuf_read_range(const outbuf *ob, uint64_t offset, size_t len, char *dst) {
  if (offset >= ob->total) return 0;
  if (len > ob->total - offset) len = (size_t)(ob->total - offset);
  if (ob->log_fd >= 0 && ob->log_errno == 0 && offset >= ob->log_from &&
      offset + len <= ob->log_from + ob->log_len) {
    size_t done = 0;
    while (done < len) {
      ssize_t n = pread(ob->log_fd, dst + done, len - done,
                        (off_t)(ob->log_base + (offset - ob->log_from) + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return -errno;
      if (n == 0) break;
      done += (size_t)n;
    }
    if (done == len) return (int64_t)done;
  }
  /* From what is held: the range must not touch the dropped middle [head_len, tail_start).
   * One that runs from the head into the tail is whole when nothing was dropped. */
  uint64_t tail_start = ob->total - ob->tail_len;
  uint64_t gap_lo = offset > ob->head_len ? offset : ob->head_len;
  uint64_t gap_hi = offset + len < tail_start ? offset + len : tail_start;
  if (gap_lo < gap_hi) return -ERANGE;
  outbuf_view v;
  outbuf_view_from(ob, offset, &v);
  size_t done = 0;
  for (int i = 0; i < 3 && done < len; i++) {
    size_t n = v.len[i] < len - done ? v.len[i] : len - done;
    if (n) memcpy(dst + done, v.seg[i], n);
    done += n;
  }
  return (int64_t)done;
}
