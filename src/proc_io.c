/* proc_io.c: a session's bytes. Output is drained from the loop into each stream's outbuf as
 * soon as it arrives (the child never blocks on a full pipe because nobody reads); input is
 * written without ever blocking the loop, the rest queued in order. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#define READ_CHUNK (256 * 1024)
#define READS_PER_TURN 16 /* then let other handles have the loop */
/* A read shorter than this drained what a program wrote in one go (a prompt, a line): back
 * to the loop without a read that would only say EAGAIN. A longer one is likely a stream
 * still being written (a PTY hands it over a few KiB at a time): read on while it lasts. */
#define SMALL_READ 4000

static char read_buf[READ_CHUNK];

/* A pipe's default capacity: a read that takes that much found it full (a fast writer). */
#define PIPE_DEFAULT (64 * 1024)

/* A larger pipe lets a fast writer run ahead of the loop: fewer, larger reads. Made at the
 * first full read, not at the spawn: most programs never fill the default one. Pages are only
 * used while data waits in it; refused above pipe-max-size, which is fine. */
static void grow_pipe(pstream *s) {
  s->grown = 1;
  fcntl(s->fd, F_SETPIPE_SZ, 1 << 20);
}

static void stream_eof(proc *p, pstream *s) {
  s->eof = 1;
  if (p->tty && p->in_fd >= 0) { /* the PTY's input ends with it (the descriptor is shared) */
    /* Nobody reads the terminal any more: a write gets EPIPE, as on a pipe whose reader left.
     * (A terminal whose close_stdin() was done keeps refusing writes as misuse.) */
    if (!p->in_err && (p->wq.head != NULL || !p->stdin_closed)) p->in_err = EPIPE;
    proc_io_free_queue(p);
    p->in_fd = -1;
    p->in_polling = 0;
  }
  if (p->tty && !p->reaped && s->poll_open) {
    /* Closing the master now would hang up a program that closed its terminal and has not
     * exited yet (SIGHUP): it is closed at the exit (proc_io_exited). */
    uv_poll_stop(&s->poll);
    return;
  }
  if (s->poll_open) {
    s->poll_open = 0;
    proc_close_handle(p, (uv_handle_t *)&s->poll); /* closes the fd when done */
  }
}

static void drain_queue(proc *p);
static void in_cb(uv_poll_t *h, int status, int events);

/* Whether every output stream is at EOF, s counted as one (it is reaching it now). */
static int streams_ended(const proc *p, const pstream *s) {
  for (int i = 0; i < p->nout; i++)
    if (!p->out[i].eof && &p->out[i] != s) return 0;
  return 1;
}

static void input_failed(proc *p, int err);

/* A finished pipe session (reaped, every output at EOF) whose stdin nobody can read any more
 * (no process holds its read end: the write end polls as an error) lets the descriptor go:
 * a write gets the EPIPE it would get anyway, and a script that keeps many finished
 * sessions does not keep a descriptor for each. One still read (a background reader that
 * outlived the program) keeps it. */
static void input_gone_if_unread(proc *p) {
  if (p->tty || p->in_fd < 0 || p->in_err || !p->reaped || !streams_ended(p, NULL)) return;
  struct pollfd pf = {.fd = p->in_fd, .events = POLLOUT};
  if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLERR)) input_failed(p, EPIPE);
}

static void out_cb(uv_poll_t *h, int status, int events) {
  pstream *s = container_of(h, pstream, poll);
  proc *p = s->proc;
  int idx = (int)(s - p->out) + 1;
  size_t got = 0;
  int eof = status < 0;
  if (status == 0 && (events & UV_WRITABLE) && p->in_polling) drain_queue(p); /* a PTY's input */
  if (status == 0 && !(events & (UV_READABLE | UV_DISCONNECT))) return;
  for (int i = 0; i < READS_PER_TURN && !eof; i++) {
    ssize_t n = read(s->fd, read_buf, READ_CHUNK);
    if (n > 0) {
      if (!s->grown && !p->tty && (size_t)n >= PIPE_DEFAULT) grow_pipe(s);
      outbuf_push(&s->buf, read_buf, (size_t)n);
      got += (size_t)n;
      if ((size_t)n < SMALL_READ) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = 1; /* 0 from a pipe, EIO from a PTY master once no slave is open */
  }
  /* The last EOF of a program that has exited (its end closed them): reaped now, and its
   * exit event tells both. */
  int reaped = eof && !p->reaped && streams_ended(p, s) && proc_reap(p, 0);
  if (eof) stream_eof(p, s);
  if (got > 0 && p->want_output) proc_emit(p, "output", idx, (lua_Integer)got);
  if (reaped) {
    input_gone_if_unread(p);
    proc_exit_reaped(p);
  } else if (eof && !p->closed) {
    input_gone_if_unread(p);
    proc_emit(p, "eof", idx, 0);
    if (!p->closed) proc_maybe_release(p);
  }
}

/* The program was reaped. Its streams are read now: where its end was theirs (nothing else
 * holds them open) their EOF is known at once, and the exit event tells it (a stream that
 * ended while another goes on is told with its own "eof"). A PTY master kept open past its
 * EOF can go now. */
void proc_io_exited(proc *p) {
  int ended[2] = {0, 0};
  for (int i = 0; i < p->nout && !p->closed; i++) {
    pstream *s = &p->out[i];
    if (s->eof || !s->poll_open || s->fd < 0) continue;
    size_t got = 0;
    int eof = 0;
    for (int k = 0; k < READS_PER_TURN && !eof; k++) {
      ssize_t n = read(s->fd, read_buf, READ_CHUNK);
      if (n > 0) {
        outbuf_push(&s->buf, read_buf, (size_t)n);
        got += (size_t)n;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        eof = 1;
      }
    }
    if (eof) {
      stream_eof(p, s);
      ended[i] = 1;
    }
    if (got > 0 && p->want_output) proc_emit(p, "output", i + 1, (lua_Integer)got);
  }
  pstream *s = &p->out[0];
  if (p->tty && s->eof && s->poll_open) {
    s->poll_open = 0;
    proc_close_handle(p, (uv_handle_t *)&s->poll);
  }
  if (streams_ended(p, NULL)) { /* the exit event tells it */
    input_gone_if_unread(p);
    return;
  }
  for (int i = 0; i < p->nout && !p->closed; i++)
    if (ended[i]) proc_emit(p, "eof", i + 1, 0);
}

void proc_io_start(proc *p) {
  uv_loop_t *loop = &luxec_gethost(p->L)->loop;
  for (int i = 0; i < p->nout; i++) {
    pstream *s = &p->out[i];
    if (uv_poll_init(loop, &s->poll, s->fd) == 0) {
      s->poll.data = NULL;
      s->poll_open = 1;
      uv_poll_start(&s->poll, UV_READABLE | UV_DISCONNECT, out_cb);
      if (!p->referenced) uv_unref((uv_handle_t *)&s->poll);
    }
  }
}

/* The stdin poll is made (and allocated: most sessions never need one) the first time a
 * write does not go through at once; freed by its close callback (proc.c). */
static int ensure_in_poll(proc *p) {
  if (p->tty) return p->out[0].poll_open; /* the master's one poll, which also reads */
  if (p->in_poll_open) return 1;
  if (p->in_fd < 0) return 0;
  uv_poll_t *h = malloc(sizeof *h);
  if (h == NULL) return 0;
  if (uv_poll_init(&luxec_gethost(p->L)->loop, h, p->in_fd) != 0) {
    free(h);
    return 0;
  }
  h->data = p;
  p->in_poll = h;
  p->in_poll_open = 1;
  uv_unref((uv_handle_t *)h); /* pending input alone does not keep the host */
  return 1;
}

void proc_io_free_queue(proc *p) {
  p->in_dropped += p->wq_bytes; /* (never taken by the program: counted, not lost silently) */
  wqueue_clear(&p->wq, &p->wq_bytes);
}

static void poll_writable(proc *p, int on) {
  p->in_polling = on;
  if (p->tty) {
    if (p->out[0].poll_open)
      uv_poll_start(&p->out[0].poll, UV_READABLE | UV_DISCONNECT | (on ? UV_WRITABLE : 0), out_cb);
  } else if (p->in_poll == NULL) {
    return; /* (never made: nothing to start or stop) */
  } else if (on) {
    uv_poll_start(p->in_poll, UV_WRITABLE, in_cb);
  } else {
    uv_poll_stop(p->in_poll);
  }
}

/* Stop writing for good: drop the queue and close our end (the child sees EOF). A PTY's
 * master stays open for reading: it is the output stream's to close. */
void proc_io_stop_input(proc *p) {
  proc_io_free_queue(p);
  if (p->tty) {
    if (p->in_polling) poll_writable(p, 0);
    p->in_fd = -1;
    return;
  }
  if (p->in_poll_open) {
    p->in_poll_open = 0;
    p->in_polling = 0;
    proc_close_handle(p, (uv_handle_t *)p->in_poll); /* closes in_fd when done */
  } else if (p->in_fd >= 0) {
    close(p->in_fd);
    p->in_fd = -1;
  }
}

/* Write as much as the descriptor takes now; -errno on a hard failure. */
static ssize_t write_some(int fd, const char *data, size_t len) {
  ssize_t n;
  do n = write(fd, data, len);
  while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  return n;
}

static void input_failed(proc *p, int err) {
  /* A terminal's master refuses writes with EIO once nothing has the terminal open: the
   * caller gets the broken pipe a pipe's reader leaving gives. */
  p->in_err = p->tty && err == EIO ? EPIPE : err;
  int unread = 0; /* what the pipe held when its reader left never reached the program */
  if (!p->tty && p->in_fd >= 0 && ioctl(p->in_fd, FIONREAD, &unread) == 0 && unread > 0)
    p->in_dropped += (uint64_t)unread;
  proc_io_stop_input(p);
}

/* After the queue drains: close stdin if asked (a PTY gets its EOF character instead). */
static void finish_close_stdin(proc *p) {
  p->close_in_pending = 0;
  p->stdin_closed = 1;
  if (p->tty) {
    struct termios tio;
    char eof = 4;
    if (p->out[0].fd >= 0 && tcgetattr(p->out[0].fd, &tio) == 0) eof = (char)tio.c_cc[VEOF];
    ssize_t n = p->in_fd >= 0 ? write_some(p->in_fd, &eof, 1) : 0;
    if (n < 0) input_failed(p, (int)-n);
    return;
  }
  proc_io_stop_input(p);
}

/* Write what is queued while the descriptor takes it; stop polling once it is empty. */
static void drain_queue(proc *p) {
  if (p->in_fd >= 0) {
    int rc = wqueue_flush(&p->wq, &p->wq_bytes, p->in_fd, write_some);
    if (rc < 0) {
      input_failed(p, -rc);
      return;
    }
    if (rc == 0) return; /* full again: wait for the next writable event */
  }
  poll_writable(p, 0);
  if (p->close_in_pending) finish_close_stdin(p);
}

static void in_cb(uv_poll_t *h, int status, int events) {
  proc *p = h->data;
  (void)events;
  if (status < 0) {
    input_failed(p, EPIPE);
    return;
  }
  drain_queue(p);
}

static int input_refused(lua_State *L, proc *p, const char *what) {
  if (p->in_err) return luxec_push_error(L, p->in_err);
  if (p->stdin_closed || p->close_in_pending)
    return luaL_error(L, "%s: stdin was closed with close_stdin()", what);
  return luaL_error(L, "%s: this session's stdin is /dev/null (spawn with stdin = \"pipe\")", what);
}

/* p:write(data) -> bytes accepted (all of them: what the pipe does not take now is queued)
 * | nil, "EPIPE: broken pipe", "EPIPE" once the child closed its end. */
static int proc_write(lua_State *L) {
  proc *p = proc_check(L, 1);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  if (p->in_fd < 0 || p->in_err || p->stdin_closed || p->close_in_pending)
    return input_refused(L, p, "write");
  size_t done = 0;
  if (p->wq.head == NULL) {
    ssize_t n = write_some(p->in_fd, data, len);
    if (n < 0) {
      input_failed(p, (int)-n);
      return luxec_push_error(L, p->in_err);
    }
    done = (size_t)n;
  }
  if (done < len) {
    if (wqueue_push(&p->wq, &p->wq_bytes, data + done, len - done) < 0)
      return luxec_push_error(L, ENOMEM);
    if (!p->in_polling && ensure_in_poll(p)) poll_writable(p, 1);
  }
  lua_pushinteger(L, (lua_Integer)len);
  return 1;
}

/* p:input_queued() -> the bytes written and not yet taken by the child's stdin. */
static int proc_input_queued(lua_State *L) {
  proc *p = proc_check(L, 1);
  lua_pushinteger(L, (lua_Integer)p->wq_bytes);
  return 1;
}

/* p:close_stdin(): EOF for the child once everything queued is written; true at once when
 * its input is already gone (a write failed, or its terminal ended): no more input reaches
 * it either way, and a script that ends its input after the program ended is not wrong. */
static int proc_close_stdin(lua_State *L) {
  proc *p = proc_check(L, 1);
  if (p->stdin_closed || p->close_in_pending || p->in_fd < 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  /* A terminal spawned raw, still raw, has no end of input: its EOF character is data. (A
   * program that turned canonical mode off itself, as readline does, reads it as its EOF.) */
  struct termios tio;
  if (p->raw && p->out[0].fd >= 0 && tcgetattr(p->out[0].fd, &tio) == 0 &&
      !(tio.c_lflag & ICANON)) {
    lua_pushnil(L);
    lua_pushstring(L,
                   "EINVAL: the terminal is raw (tty = {raw = true} or p:set_raw()): it has "
                   "no end of input, and its EOF character would be read as data");
    lua_pushstring(L, "EINVAL");
    return 3;
  }
  if (p->wq.head == NULL)
    finish_close_stdin(p);
  else
    p->close_in_pending = 1;
  if (p->in_err) return luxec_push_error(L, p->in_err);
  lua_pushboolean(L, 1);
  return 1;
}

static pstream *check_stream(lua_State *L, proc *p, int idx) {
  lua_Integer i = luaL_optinteger(L, idx, 1);
  luaL_argcheck(L, i >= 1 && i <= p->nout, idx,
                p->nout == 1 ? "this session has one output stream (1)" : "stream must be 1 or 2");
  return &p->out[i - 1];
}

/* p:read(stream, cursor) -> data, next_cursor, dropped, gap_at: what arrived at or after
 * cursor that is still held; dropped bytes were lost between, at byte gap_at of data. */
static int proc_read(lua_State *L) {
  proc *p = proc_check(L, 1);
  pstream *s = check_stream(L, p, 2);
  lua_Integer from = luaL_optinteger(L, 3, 0);
  luaL_argcheck(L, from >= 0, 3, "cursor must be >= 0");
  return luxec_push_read(L, &s->buf, (uint64_t)from);
}

/* p:total(stream) -> the bytes the stream carried so far (what a wait for more compares) */
static int proc_total(lua_State *L) {
  proc *p = proc_check(L, 1);
  lua_pushinteger(L, (lua_Integer)check_stream(L, p, 2)->buf.total);
  return 1;
}

/* p:snapshot(stream) -> head, tail, dropped, total (consumes nothing) */
static int proc_snapshot(lua_State *L) {
  proc *p = proc_check(L, 1);
  return luxec_push_snapshot(L, &check_stream(L, p, 2)->buf);
}

/* p:read_range(stream, offset, length) -> bytes (from the log, else from what is held)
 * | nil, message, "ERANGE" when those bytes were dropped and there is no log. */
static int proc_read_range(lua_State *L) {
  proc *p = proc_check(L, 1);
  pstream *s = check_stream(L, p, 2);
  lua_Integer off = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
  luaL_argcheck(L, off >= 0, 3, "offset must be >= 0");
  luaL_argcheck(L, len >= 0 && len <= (1 << 30), 4, "length must be 0..1 GiB");
  char *dst = lua_newuserdatauv(L, (size_t)len + 1, 0);
  int64_t n = outbuf_read_range(&s->buf, (uint64_t)off, (size_t)len, dst);
  if (n < 0) {
    luxec_push_error(L, (int)-n);
    if (n == -ERANGE) {
      lua_pushfstring(L,
                      "ERANGE: bytes %I..%I were dropped from memory and are not in the log "
                      "(spawn with log = path, and a log_max large enough, to keep them)",
                      off, off + len);
      lua_replace(L, -3);
    }
    return 3;
  }
  lua_pushlstring(L, dst, (size_t)n);
  return 1;
}

/* p:want_output(on): whether each read is told to Lua as an "output" event. Off while
 * nobody waits for output or listens to it, so bulk output costs no call into Lua. */
static int proc_want_output(lua_State *L) {
  proc *p = proc_check(L, 1);
  p->want_output = lua_toboolean(L, 2);
  return 0;
}

/* p:log_error() -> nil, or the error that stopped appending to the log */
static int proc_log_error(lua_State *L) {
  proc *p = proc_check(L, 1);
  for (int i = 0; i < p->nout; i++) {
    if (p->out[i].buf.log_errno) return luxec_push_error(L, p->out[i].buf.log_errno) - 1;
  }
  lua_pushnil(L);
  return 1;
}

const luaL_Reg proc_io_methods[] = {{"close_stdin", proc_close_stdin},
                                    {"input_queued", proc_input_queued},
                                    {"log_error", proc_log_error},
                                    {"read", proc_read},
                                    {"read_range", proc_read_range},
                                    {"snapshot", proc_snapshot},
                                    {"total", proc_total},
                                    {"want_output", proc_want_output},
                                    {"write", proc_write},
                                    {NULL, NULL}};
