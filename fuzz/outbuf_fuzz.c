/* outbuf_fuzz.c: libFuzzer target for src/outbuf.c. The input is a stream of operations on
 * one buffer (pushes, views, read_range, snapshots, a log opened part-way) and every answer
 * is checked against a model that only counts: which bytes are held follows from the caps
 * and the total, and what each byte is follows from its offset (see word_at). Any mismatch
 * prints what differed and aborts.
 *
 * Input: head cap, tail cap, seed, then operations, op % 8: 0-1 push op >> 3 bytes, 2 push
 * 4 * next byte, 3 push a 16-bit count, 4 view_from, 5 read_range, 6 snapshot, 7 open the log
 * (op & 8: a log_max byte; then how many bytes an earlier stream left in the file). */
#include "outbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OPS 512
#define MAX_TOTAL (256u << 10) /* bytes pushed per input: keeps an input fast */
#define MAX_PUSH 65536

typedef struct {
  const uint8_t *p;
  size_t n;
} input;

static uint8_t take(input *in) {
  if (in->n == 0) return 0;
  in->n--;
  return *in->p++;
}

static uint32_t take16(input *in) {
  uint32_t lo = take(in);
  return lo | (uint32_t)take(in) << 8;
}

/* The stream's bytes are a function of their offset (and a per-input seed), so the model
 * needs no copy of them, and a byte read from the wrong offset shows (it matches by chance
 * one time in 256). One hash makes 8 of them. */
static uint64_t word_at(uint64_t word, uint8_t seed) {
  uint64_t x = (word + 1) * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

/* What the buffer should hold: the first head_cap bytes, and of the rest the last tail_cap. */
typedef struct {
  uint64_t total;
  size_t head_cap, tail_cap;
  uint8_t seed;
  int log_open;
  uint64_t log_from, log_len, log_max;
} model;

static uint64_t m_head(const model *m) {
  return m->total < m->head_cap ? m->total : m->head_cap;
}

static uint64_t m_tail(const model *m) {
  uint64_t rest = m->total - m_head(m);
  return rest < m->tail_cap ? rest : m->tail_cap;
}

static uint64_t m_tail_start(const model *m) {
  return m->total - m_tail(m);
}

/* The byte loops of the model are not instrumented: libFuzzer learns nothing from them, and
 * tracing their comparisons would take most of the time. */
#define NO_COVERAGE __attribute__((no_sanitize("coverage"), noinline))

NO_COVERAGE static void fill(char *dst, size_t len, uint64_t off, uint8_t seed) {
  uint64_t w = word_at(off >> 3, seed);
  for (size_t i = 0; i < len; i++) {
    uint64_t at = off + i;
    if ((at & 7) == 0) w = word_at(at >> 3, seed);
    dst[i] = (char)(w >> ((at & 7) * 8));
  }
}

/* The index of the first byte of got that is not the stream's at off, or len. */
NO_COVERAGE static size_t mismatch(const char *got, size_t len, uint64_t off, uint8_t seed) {
  uint64_t w = word_at(off >> 3, seed);
  for (size_t i = 0; i < len; i++) {
    uint64_t at = off + i;
    if ((at & 7) == 0) w = word_at(at >> 3, seed);
    if ((uint8_t)got[i] != (uint8_t)(w >> ((at & 7) * 8))) return i;
  }
  return len;
}

static const char *op_name = "init";
static void remove_log_dir(void);

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "fuzz_outbuf: %s: check failed: %s: ", op_name, #cond); \
      fprintf(stderr, __VA_ARGS__);                                           \
      fputc('\n', stderr);                                                    \
      remove_log_dir(); /* abort() skips atexit */                            \
      abort();                                                                \
    }                                                                         \
  } while (0)

static void check_bytes(const model *m, const char *got, size_t len, uint64_t off) {
  size_t i = mismatch(got, len, off, m->seed);
  CHECK(i == len, "byte at stream offset %" PRIu64 " (index %zu of %zu) is wrong", off + i, i, len);
}

static void check_state(const outbuf *ob, const model *m) {
  CHECK(ob->total == m->total, "total %" PRIu64 ", model %" PRIu64, ob->total, m->total);
  CHECK(ob->head_len == m_head(m), "head_len %zu, model %" PRIu64, ob->head_len, m_head(m));
  CHECK(ob->tail_len == m_tail(m), "tail_len %zu, model %" PRIu64, ob->tail_len, m_tail(m));
  uint64_t dropped = m->total - m_head(m) - m_tail(m);
  CHECK(outbuf_dropped(ob) == dropped, "dropped %" PRIu64 ", model %" PRIu64, outbuf_dropped(ob),
        dropped);
}

/* view_from(from): the head part [from, head), then the dropped gap, then the tail part. */
static void check_view(const outbuf *ob, const model *m, uint64_t from) {
  outbuf_view v;
  memset(&v, 0xAB, sizeof v); /* every field must be set, whatever the case */
  outbuf_view_from(ob, from, &v);
  CHECK(v.end == m->total, "end %" PRIu64 ", total %" PRIu64, v.end, m->total);
  uint64_t head = m_head(m), tail_start = m_tail_start(m);
  uint64_t head_part = 0, dropped = 0, tail_from = m->total;
  if (from < m->total) {
    head_part = from < head ? head - from : 0;
    uint64_t after_head = from > head ? from : head;
    dropped = after_head < tail_start ? tail_start - after_head : 0;
    tail_from = after_head > tail_start ? after_head : tail_start;
  }
  CHECK(v.dropped == dropped, "from %" PRIu64 ": dropped %" PRIu64 ", model %" PRIu64, from,
        v.dropped, dropped);
  if (dropped > 0) {
    CHECK(v.gap_at == head_part, "from %" PRIu64 ": gap_at %zu, model %" PRIu64, from, v.gap_at,
          head_part);
  }
  uint64_t want = head_part + (m->total - tail_from), got = 0;
  for (int i = 0; i < 3; i++) {
    CHECK(v.len[i] == 0 || v.seg[i] != NULL, "segment %d has %zu bytes and no pointer", i,
          v.len[i]);
    CHECK(got + v.len[i] <= want, "from %" PRIu64 ": more than the %" PRIu64 " bytes held", from,
          want);
    if (v.len[i] == 0) continue;
    /* a segment may run from the head part into the tail part of the expected bytes */
    size_t in_head = got < head_part ? (size_t)(head_part - got) : 0;
    if (in_head > v.len[i]) in_head = v.len[i];
    check_bytes(m, v.seg[i], in_head, from + got);
    if (v.len[i] > in_head) {
      check_bytes(m, v.seg[i] + in_head, v.len[i] - in_head, tail_from + got + in_head - head_part);
    }
    got += v.len[i];
  }
  CHECK(got == want, "from %" PRIu64 ": %" PRIu64 " bytes in the segments, model %" PRIu64, from,
        got, want);
}

/* head = the first head_cap bytes, tail = the last tail_cap of the rest (a snapshot). */
static void check_snapshot(const outbuf *ob, const model *m) {
  check_state(ob, m);
  check_bytes(m, ob->head, ob->head_len, 0);
  check_view(ob, m, m_tail_start(m));
}

/* read_range: the exact bytes (from the log where it has them all, else from what is held),
 * short only at the end of the stream, -ERANGE exactly when the range touches the gap. */
static void check_read_range(const outbuf *ob, const model *m, uint64_t off, size_t len) {
  uint64_t avail = off < m->total ? m->total - off : 0;
  size_t n = len < avail ? len : (size_t)avail;
  char *dst = malloc(n ? n : 1); /* exactly what may be written: ASan sees an overrun */
  CHECK(dst != NULL, "out of memory");
  int64_t r = outbuf_read_range(ob, off, len, dst);
  uint64_t head = m_head(m), tail_start = m_tail_start(m);
  int in_log = m->log_open && off >= m->log_from && off + n <= m->log_from + m->log_len;
  uint64_t lo = off > head ? off : head, hi = off + n < tail_start ? off + n : tail_start;
  int touches_gap = lo < hi; /* [off, off+n) and the gap [head, tail_start) overlap */
  if (!in_log && touches_gap) {
    CHECK(r == -ERANGE,
          "[%" PRIu64 ", +%zu) touches the gap [%" PRIu64 ", %" PRIu64 "): got %" PRId64
          ", not -ERANGE",
          off, n, head, tail_start, r);
  } else {
    CHECK(r == (int64_t)n,
          "[%" PRIu64 ", +%zu) of %" PRIu64 " (held [0,%" PRIu64 ") and [%" PRIu64 ",%" PRIu64
          "), log %d [%" PRIu64 ",+%" PRIu64 ")): got %" PRId64,
          off, len, m->total, head, tail_start, m->total, m->log_open, m->log_from, m->log_len, r);
    check_bytes(m, dst, n, off);
  }
  free(dst);
}

/* An offset near one of the interesting places: 0, the end, the head's end, the gap's end. */
static uint64_t pick_offset(input *in, const model *m) {
  uint8_t sel = take(in);
  uint64_t d = take(in) % 8, base;
  switch (sel % 8) {
    case 0: return d;
    case 1: base = m->total; break;
    case 2: return m->total + 1 + take(in);
    case 3: base = m_head(m); break;
    case 4: base = m_tail_start(m); break;
    case 5: return UINT64_MAX - d;
    default: return m->total ? take16(in) % m->total : 0;
  }
  return (sel & 8) ? base + d : (base > d ? base - d : 0);
}

static size_t pick_len(input *in) {
  uint8_t sel = take(in);
  switch (sel % 4) {
    case 0: return take(in) % 8;
    case 1: return take16(in);
    case 2: return SIZE_MAX - (sel >> 2); /* clamped to the end of the stream */
    default: return take(in);
  }
}

/* Caps from 0 (keep nothing) over a few bytes to more than the head's first 4 KiB step. */
static size_t pick_cap(uint8_t sel) {
  if (sel < 128) return sel % 33;
  if (sel < 192) return (size_t)(sel - 128) * 64;
  return 4096 + (size_t)(sel - 192) * 128;
}

/* One log file per process, in a directory of its own, made afresh for each input. */
static char log_dir[64], log_path[96];

static void remove_log_dir(void) {
  if (log_dir[0] == '\0') return;
  unlink(log_path);
  rmdir(log_dir);
}

static void fresh_log(size_t prefill) {
  if (log_dir[0] == '\0') {
    strcpy(log_dir, "/tmp/luxec-fuzz-outbuf-XXXXXX");
    CHECK(mkdtemp(log_dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(log_path, sizeof log_path, "%s/log", log_dir);
    atexit(remove_log_dir);
  }
  int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECK(fd >= 0, "open %s: %s", log_path, strerror(errno));
  /* bytes an earlier stream left in the file: reads must start past them (log_base) */
  char junk[256];
  memset(junk, '#', sizeof junk);
  CHECK(write(fd, junk, prefill) == (ssize_t)prefill, "write: %s", strerror(errno));
  close(fd);
}

static char push_buf[MAX_PUSH];

static void push(outbuf *ob, model *m, size_t len) {
  if (m->total + len > MAX_TOTAL) len = MAX_TOTAL - (size_t)m->total;
  fill(push_buf, len, m->total, m->seed);
  outbuf_push(ob, push_buf, len);
  if (m->log_open) {
    uint64_t n = len;
    if (m->log_max && m->log_len + n > m->log_max) n = m->log_max - m->log_len;
    m->log_len += n;
  }
  m->total += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  model m;
  memset(&m, 0, sizeof m);
  m.head_cap = pick_cap(take(&in));
  m.tail_cap = pick_cap(take(&in));
  m.seed = take(&in);
  outbuf ob;
  op_name = "init";
  CHECK(outbuf_init(&ob, m.head_cap, m.tail_cap) == 0, "outbuf_init failed");
  check_snapshot(&ob, &m);
  for (int ops = 0; in.n > 0 && ops < MAX_OPS; ops++) {
    uint8_t op = take(&in);
    switch (op % 8) {
      case 0:
      case 1:
        op_name = "push";
        push(&ob, &m, op >> 3);
        break;
      case 2:
        op_name = "push";
        push(&ob, &m, (size_t)take(&in) * 4);
        break;
      case 3:
        op_name = "push";
        push(&ob, &m, take16(&in) % MAX_PUSH);
        break;
      case 4:
        op_name = "view_from";
        check_view(&ob, &m, pick_offset(&in, &m));
        break;
      case 5: {
        op_name = "read_range";
        uint64_t off = pick_offset(&in, &m);
        check_read_range(&ob, &m, off, pick_len(&in));
        break;
      }
      case 6:
        op_name = "snapshot";
        check_snapshot(&ob, &m);
        break;
      default:
        if (m.log_open) break;
        op_name = "open_log";
        /* as proc_spawn.c does: log_max set before the log is opened */
        m.log_max = (op & 8) ? take(&in) : 0;
        ob.log_max = m.log_max;
        fresh_log(take(&in));
        CHECK(outbuf_open_log(&ob, log_path) == 0, "outbuf_open_log: %s", strerror(errno));
        m.log_open = 1;
        m.log_from = m.total;
        m.log_len = 0;
        break;
    }
    check_state(&ob, &m);
  }
  op_name = "final";
  check_snapshot(&ob, &m);
  outbuf_free(&ob);
  return 0;
}
