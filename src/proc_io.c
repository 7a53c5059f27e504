/* proc_io.c: a session's bytes. Output is drained from the loop into each stream's outbuf as
 * soon as it arrives (the child never blocks on a full pipe because nobody reads); input is
 * written without ever blocking the loop, the rest queued in order. */
#include "proc.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define READ_CHUNK (256 * 1024)
#define READS_PER_TURN 16 /* then let other handles have the loop */
/* A read shorter than this drained what a program wrote in one go (a prompt, a line): back
 * to the loop without a read that would only say EAGAIN. A longer one is likely a stream
 * still being written (a PTY hands it over a few KiB at a time): read on while it lasts. */
#define SMALL_READ 4000

static char read_buf[READ_CHUNK];

/* Every session's output descriptors are watched through one epoll set of the host's, itself
 * one handle on the loop (as the exits are, proc.c): a descriptor is added once when its
 * session starts and removed at its EOF or close (two system calls, where a loop handle per
 * descriptor costs six: libuv's check that it can be polled, an add and a delete, a
 * non-blocking switch, a delete that fails, then the add). The handle keeps the loop alive
 * while a referenced session has a stream in the set. */
static int outs_fd = -1;
static uv_poll_t outs_poll;
static int outs_refs;
static unsigned long outs_removed; /* streams taken out of the set so far */

static void outs_ref(int delta) {
  outs_refs += delta;
  if (outs_refs > 0)
    uv_ref((uv_handle_t *)&outs_poll);
  else
    uv_unref((uv_handle_t *)&outs_poll);
}

/* p's streams in the set keep the loop alive (delta 1) or no more (-1): p:ref */
void proc_io_ref(proc *p, int delta) {
  for (int i = 0; i < p->nout; i++)
    if (p->out[i].poll_open) outs_ref(delta);
}

static void stream_unwatch(proc *p, pstream *s) {
  if (!s->poll_open) return;
  s->poll_open = 0;
  outs_removed++;
  epoll_ctl(outs_fd, EPOLL_CTL_DEL, s->fd, NULL);
  if (p->referenced) outs_ref(-1);
}

/* The stream's descriptor out of the set and closed (at its EOF, or when p closes). */
void proc_io_close_stream(proc *p, pstream *s) {
  stream_unwatch(p, s);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

static void stream_eof(proc *p, pstream *s) {
  s->eof = 1;
  if (p->tty && p->in_fd >= 0) { /* the PTY's input ends with it (the descriptor is shared) */
    if (p->wq.head != NULL) p->in_err = EIO;
    proc_io_free_queue(p);
    p->in_fd = -1;
    p->in_polling = 0;
  }
  if (p->tty && !p->reaped) {
    /* Closing the master now would hang up a program that closed its terminal and has not
     * exited yet (SIGHUP): it is closed at the exit (proc_io_exited). */
    stream_unwatch(p, s);
    return;
  }
  proc_io_close_stream(p, s);
}

static void drain_queue(proc *p);
static void in_cb(uv_poll_t *h, int status, int events);

static int set_nonblock(int fd) {
  int on = 1;
  return ioctl(fd, FIONBIO, &on);
}

static void stream_ready(proc *p, pstream *s, uint32_t events) {
  int idx = (int)(s - p->out) + 1;
  size_t got = 0;
  int eof = 0;
  if ((events & EPOLLOUT) && p->in_polling) drain_queue(p); /* a PTY's input */
  if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) || !s->poll_open) return;
  for (int i = 0; i < READS_PER_TURN && !eof; i++) {
    ssize_t n = read(s->fd, read_buf, READ_CHUNK);
    if (n > 0) {
      outbuf_push(&s->buf, read_buf, (size_t)n);
      got += (size_t)n;
      if ((size_t)n < SMALL_READ) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = 1; /* 0 from a pipe, EIO from a PTY master once no slave is open */
  }
  if (eof) stream_eof(p, s);
  if (got > 0 && p->want_output) proc_emit(p, "output", idx, (lua_Integer)got);
  if (eof && !p->closed) {
    proc_emit(p, "eof", idx, 0);
    if (!p->closed) proc_maybe_release(p);
  }
}

static void outs_cb(uv_poll_t *h, int status, int events) {
  (void)h;
  (void)status;
  (void)events;
  /* Many ready at a time; but once a callback took streams out of the set (a listener closed
   * a session) the rest of the batch may name streams that are gone: the set, still
   * readable, names the others again on the next turn of the loop. */
  struct epoll_event evs[64];
  int n = epoll_wait(outs_fd, evs, 64, 0);
  unsigned long removed = outs_removed;
  for (int i = 0; i < n && outs_removed == removed; i++) {
    pstream *s = evs[i].data.ptr;
    proc *p = s->proc;
    p->pending_closes++; /* (p stays while its listeners run, even if one closes it) */
    stream_ready(p, s, evs[i].events);
    p->pending_closes--;
    if (p->closed) proc_free_if_done(p);
  }
}

static void outs_closed(uv_handle_t *h) {
  (void)h;
  close(outs_fd);
  outs_fd = -1;
}

void proc_io_shutdown(void) {
  if (outs_fd >= 0 && !uv_is_closing((uv_handle_t *)&outs_poll))
    uv_close((uv_handle_t *)&outs_poll, outs_closed);
}

static int outs_ready(uv_loop_t *loop) {
  if (outs_fd >= 0) return 0;
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return errno;
  int rc = uv_poll_init(loop, &outs_poll, fd);
  if (rc != 0) {
    close(fd);
    return -rc;
  }
  outs_fd = fd;
  outs_poll.data = NULL;
  outs_refs = 0;
  uv_poll_start(&outs_poll, UV_READABLE, outs_cb);
  uv_unref((uv_handle_t *)&outs_poll);
  return 0;
}

static void stream_events(pstream *s, uint32_t extra) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | extra, .data.ptr = s};
  epoll_ctl(outs_fd, EPOLL_CTL_MOD, s->fd, &ev);
}

/* The program was reaped: a PTY master kept open past its EOF can go now. */
void proc_io_exited(proc *p) {
  pstream *s = &p->out[0];
  if (p->tty && s->eof) proc_io_close_stream(p, s);
}

void proc_io_start(proc *p) {
  if (outs_ready(&luxec_gethost(p->L)->loop) != 0) return;
  for (int i = 0; i < p->nout; i++) {
    pstream *s = &p->out[i];
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = s};
    /* (a PTY's master is made non-blocking when it is opened; a pipe's read end here) */
    if ((p->tty || set_nonblock(s->fd) == 0) &&
        epoll_ctl(outs_fd, EPOLL_CTL_ADD, s->fd, &ev) == 0) {
      s->poll_open = 1;
      if (p->referenced) outs_ref(1);
    }
  }
}

/* The stdin poll is made the first time a write does not go through at once. */
static int ensure_in_poll(proc *p) {
  if (p->tty) return p->out[0].poll_open; /* the master's one poll, which also reads */
  if (p->in_poll_open) return 1;
  if (p->in_fd < 0 || uv_poll_init(&luxec_gethost(p->L)->loop, &p->in_poll, p->in_fd) != 0)
    return 0;
  p->in_poll.data = NULL;
  p->in_poll_open = 1;
  uv_unref((uv_handle_t *)&p->in_poll); /* pending input alone does not keep the host */
  return 1;
}

void proc_io_free_queue(proc *p) {
  wqueue_clear(&p->wq, &p->wq_bytes);
}

static void poll_writable(proc *p, int on) {
  p->in_polling = on;
  if (p->tty) {
    if (p->out[0].poll_open) stream_events(&p->out[0], on ? EPOLLOUT : 0);
  } else if (on) {
    uv_poll_start(&p->in_poll, UV_WRITABLE, in_cb);
  } else {
    uv_poll_stop(&p->in_poll);
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
    proc_close_handle(p, (uv_handle_t *)&p->in_poll); /* closes in_fd when done */
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
  p->in_err = err;
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
    if (p->in_fd >= 0 && write_some(p->in_fd, &eof, 1) < 0) p->in_err = errno;
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
  proc *p = container_of(h, proc, in_poll);
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
      return luxec_push_error(L, (int)-n);
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

/* p:close_stdin(): EOF for the child once everything queued is written. */
static int proc_close_stdin(lua_State *L) {
  proc *p = proc_check(L, 1);
  if (p->stdin_closed || p->close_in_pending || p->in_fd < 0) {
    lua_pushboolean(L, 1);
    return 1;
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
