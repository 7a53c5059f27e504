/* outbuf.h: a session's output, every byte at an absolute offset; the first head_cap and the
 * last tail_cap bytes are held, what falls between is counted, and the whole stream can also
 * be appended to a log file to page back through later. */
#ifndef LUXEC_OUTBUF_H
#define LUXEC_OUTBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct outbuf {
  uint64_t total; /* bytes pushed: the absolute offset of the next byte */
  size_t head_cap, tail_cap;
  size_t head_len;   /* bytes [0, head_len) are held in head */
  size_t head_alloc; /* head grows in doubling steps up to head_cap */
  size_t tail_len;   /* bytes [total - tail_len, total) are held in the tail ring */
  size_t tail_pos;   /* ring index where the next tail byte goes */
  char *head, *tail;
  int log_fd;        /* -1 without a log */
  uint64_t log_base; /* the log file's size when this stream started appending to it */
  uint64_t log_from; /* the stream offset at which it started */
  int log_errno;     /* first failed append to the log, 0 if none */
  uint64_t log_max;  /* stop appending after this many bytes (0: no limit) */
  uint64_t log_len;  /* bytes this stream appended */
} outbuf;

/* What a reader gets from `from` on: up to three segments in order (head part, then the tail
 * ring in at most two pieces), `dropped` bytes that are no longer held, lying at byte `gap_at`
 * of the concatenated segments, and `end`, the offset to resume from. */
typedef struct outbuf_view {
  const char *seg[3];
  size_t len[3];
  uint64_t dropped;
  size_t gap_at;
  uint64_t end;
} outbuf_view;

int outbuf_init(outbuf *ob, size_t head_cap, size_t tail_cap); /* 0 or -errno */
void outbuf_free(outbuf *ob);
void outbuf_push(outbuf *ob, const char *data, size_t len);
void outbuf_view_from(const outbuf *ob, uint64_t from, outbuf_view *v);
uint64_t outbuf_dropped(const outbuf *ob); /* bytes pushed and not held */
/* Open (append, create) a log file for the rest of the stream; 0 or -errno. */
int outbuf_open_log(outbuf *ob, const char *path);
/* Copy [offset, offset+len) of the stream into dst from the log, else from what is held;
 * returns the bytes copied (short at the end of the stream), or -errno (-ERANGE: not held). */
int64_t outbuf_read_range(const outbuf *ob, uint64_t offset, size_t len, char *dst);

#endif
