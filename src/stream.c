/* stream.c: core.stream_open, a session over a descriptor that no child of ours owns: a
 * serial device or terminal, a FIFO, a unix or TCP socket, or a descriptor the host
 * inherited. What arrives goes into the same output buffer a spawned session's does, input
 * goes through the same write queue, and the Lua side is told "output", "eof" and (for a
 * connect still under way) "connect" events the same way. There is no process: nothing to
 * signal, reap or resize. Which target, how long to wait for a connect: the Lua layer's. */
#include "stream.h"
#include "outbuf.h"
#include "wqueue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#define STREAM_MT "luxec.stream"
#define READ_CHUNK (64 * 1024)
#define READS_PER_TURN 16

typedef struct lstream {
  struct lstream *next, *prev; /* every stream not yet freed (the host's shutdown walks it) */
  struct sbox *box;
  lua_State *L;
  int fd;         /* -1 once closed */
  uv_poll_t poll; /* data NULL: found with container_of */
  int poll_open, poll_events;
  int readable, writable, socket, tty;
  int connecting; /* a non-blocking connect is under way */
  int eof, closed, referenced, want_output, self_ref;
  int in_err;             /* sticky errno of a failed write */
  int shut_pending, shut; /* close_stdin: the write side ends once the queue drained */
  outbuf buf;
  wqueue wq;
  size_t wq_bytes;
  char kind[8];
  char name[256];
} lstream;

typedef struct sbox {
  lstream *s;
} sbox;

static lstream *live = NULL;
static const char LIVE_KEY = 's'; /* registry: a weak table from each stream to its handle */
static char read_buf[READ_CHUNK];

static void live_remove(lstream *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    live = s->next;
  if (s->next) s->next->prev = s->prev;
}

static int push_handle(lstream *s) {
  lua_State *L = s->L;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LIVE_KEY) != LUA_TTABLE || s->box == NULL) {
    lua_pop(L, 1);
    return 0;
  }
  lua_rawgetp(L, -1, s);
  lua_remove(L, -2);
  sbox *b = lua_touserdata(L, -1);
  if (b == NULL || b != s->box || b->s != s) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

static void emit(lstream *s, const char *event, lua_Integer a, lua_Integer b) {
  if (s->closed || !push_handle(s)) return;
  lua_State *L = s->L;
  int t = lua_getiuservalue(L, -1, 1);
  lua_remove(L, -2);
  if (t != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return;
  }
  lua_pushstring(L, event);
  lua_pushinteger(L, a);
  lua_pushinteger(L, b);
  luxec_callback_pcall(L, 3, 0, 0);
}

/* Anchored (kept from the collector) while something holds it and it can still say something. */
static void anchor(lstream *s) {
  int want = s->referenced && !s->closed && !s->eof;
  if (want && s->self_ref == LUA_NOREF) {
    if (push_handle(s)) s->self_ref = luaL_ref(s->L, LUA_REGISTRYINDEX);
  } else if (!want && s->self_ref != LUA_NOREF) {
    luaL_unref(s->L, LUA_REGISTRYINDEX, s->self_ref);
    s->self_ref = LUA_NOREF;
  }
}

static void poll_closed(uv_handle_t *h) {
  lstream *s = container_of((uv_poll_t *)h, lstream, poll);
  s->poll_open = 0;
  if (s->closed) {
    live_remove(s);
    outbuf_free(&s->buf);
    free(s);
  }
}

/* The descriptor goes now (libuv lets it go right after uv_close); the memory once the
 * poll's close callback ran, if the handle is closed by then. */
static void release_fd(lstream *s) {
  if (s->poll_open && !uv_is_closing((uv_handle_t *)&s->poll))
    uv_close((uv_handle_t *)&s->poll, poll_closed);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  wqueue_clear(&s->wq, &s->wq_bytes);
}

static void poll_cb(uv_poll_t *h, int status, int events);

static void set_poll(lstream *s) {
  if (!s->poll_open || uv_is_closing((uv_handle_t *)&s->poll)) return;
  int ev = 0;
  if (s->connecting || s->wq.head != NULL) ev |= UV_WRITABLE;
  if (!s->connecting && s->readable && !s->eof) ev |= UV_READABLE | UV_DISCONNECT;
  if (ev == s->poll_events) return;
  s->poll_events = ev;
  if (ev)
    uv_poll_start(&s->poll, ev, poll_cb);
  else
    uv_poll_stop(&s->poll);
}

static ssize_t write_some(int fd, const char *data, size_t len) {
  ssize_t n;
  do n = write(fd, data, len);
  while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  return n;
}

static void write_failed(lstream *s, int err) {
  s->in_err = err;
  s->writable = 0;
  wqueue_clear(&s->wq, &s->wq_bytes);
}

/* The write side ends: a socket's peer reads EOF (the read side stays open). */
static void finish_shutdown(lstream *s) {
  s->shut_pending = 0;
  s->shut = 1;
  if (s->fd < 0) return;
  if (s->socket) shutdown(s->fd, SHUT_WR);
}

static void drain(lstream *s) {
  if (s->fd >= 0 && s->wq.head != NULL) {
    int rc = wqueue_flush(&s->wq, &s->wq_bytes, s->fd, write_some);
    if (rc < 0)
      write_failed(s, -rc);
    else if (rc == 0)
      return;
  }
  if (s->shut_pending) finish_shutdown(s);
  set_poll(s);
}

static void reached_eof(lstream *s) {
  s->eof = 1;
  set_poll(s);
  if (!s->socket || s->shut || s->in_err) release_fd(s); /* (a socket may still be written) */
}

static void poll_cb(uv_poll_t *h, int status, int events) {
  lstream *s = container_of(h, lstream, poll);
  if (s->connecting) {
    int err = 0;
    socklen_t len = sizeof err;
    if (status < 0)
      err = ECONNREFUSED;
    else if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
      err = errno;
    s->connecting = 0;
    if (err) {
      s->eof = 1;
      release_fd(s);
    } else {
      set_poll(s);
    }
    emit(s, "connect", err, 0);
    if (!s->closed) anchor(s);
    return;
  }
  if (status == 0 && (events & UV_WRITABLE)) drain(s);
  if (s->fd < 0 || s->eof) return;
  int eof = status < 0 && !(events & UV_READABLE);
  size_t got = 0;
  if (status < 0 || (events & (UV_READABLE | UV_DISCONNECT))) {
    for (int i = 0; i < READS_PER_TURN && !eof; i++) {
      ssize_t n = read(s->fd, read_buf, READ_CHUNK);
      if (n > 0) {
        outbuf_push(&s->buf, read_buf, (size_t)n);
        got += (size_t)n;
        if ((size_t)n < READ_CHUNK) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = 1; /* 0: the peer closed; EIO: a terminal hung up; ECONNRESET */
    }
  }
  if (eof) reached_eof(s);
  if (got > 0 && s->want_output) emit(s, "output", 1, (lua_Integer)got);
  if (eof && !s->closed) {
    emit(s, "eof", 1, 0);
    if (!s->closed) anchor(s);
  }
}

static void close_stream(lstream *s) {
  if (s->closed) return;
  s->closed = 1;
  if (s->box) s->box->s = NULL;
  s->box = NULL;
  if (s->self_ref != LUA_NOREF) luaL_unref(s->L, LUA_REGISTRYINDEX, s->self_ref);
  s->self_ref = LUA_NOREF;
  release_fd(s);
  if (!s->poll_open) poll_closed((uv_handle_t *)&s->poll);
}

static lstream *check(lua_State *L) {
  sbox *b = luaL_checkudata(L, 1, STREAM_MT);
  if (b->s == NULL) luaL_error(L, "attempt to use a closed stream handle");
  return b->s;
}

static int st_close(lua_State *L) {
  sbox *b = luaL_checkudata(L, 1, STREAM_MT);
  if (b->s) close_stream(b->s);
  return 0;
}

static int st_tostring(lua_State *L) {
  sbox *b = luaL_checkudata(L, 1, STREAM_MT);
  if (b->s == NULL)
    lua_pushliteral(L, "luxec.stream (closed)");
  else
    lua_pushfstring(L, "luxec.stream (%s %s, %s)", b->s->kind, b->s->name,
                    b->s->eof ? "eof" : "open");
  return 1;
}

/* h:ref(keep): whether the stream keeps the loop (and its handle) alive. */
static int st_ref(lua_State *L) {
  lstream *s = check(L);
  s->referenced = lua_toboolean(L, 2);
  if (s->poll_open && !uv_is_closing((uv_handle_t *)&s->poll)) {
    if (s->referenced)
      uv_ref((uv_handle_t *)&s->poll);
    else
      uv_unref((uv_handle_t *)&s->poll);
  }
  anchor(s);
  return 0;
}

static int st_want_output(lua_State *L) {
  check(L)->want_output = lua_toboolean(L, 2);
  return 0;
}

/* h:status() -> {kind, name, eof, running, exited, tty, write_queued, stdin_error} */
static int st_status(lua_State *L) {
  lstream *s = check(L);
  lua_createtable(L, 0, 9);
  lua_pushstring(L, s->kind);
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, s->name);
  lua_setfield(L, -2, "name");
  lua_pushboolean(L, s->eof);
  lua_setfield(L, -2, "eof");
  lua_pushboolean(L, !s->eof);
  lua_setfield(L, -2, "running");
  lua_pushboolean(L, s->eof); /* a stream's session ends with its input */
  lua_setfield(L, -2, "exited");
  lua_pushboolean(L, s->tty);
  lua_setfield(L, -2, "tty");
  lua_pushboolean(L, s->connecting);
  lua_setfield(L, -2, "connecting");
  lua_pushinteger(L, (lua_Integer)s->wq_bytes);
  lua_setfield(L, -2, "write_queued");
  if (s->in_err) {
    lua_pushstring(L, luxec_err_name(s->in_err));
    lua_setfield(L, -2, "stdin_error");
  }
  return 1;
}

static int refuse_write(lua_State *L, lstream *s, const char *what) {
  if (s->in_err) return luxec_push_error(L, s->in_err);
  if (s->shut || s->shut_pending)
    return luaL_error(L, "%s: the write side of %s was closed with close_stdin()", what, s->name);
  if (!s->writable)
    return luaL_error(L, "%s: %s was opened for reading only (read_only)", what, s->name);
  lua_pushnil(L);
  lua_pushfstring(L, "EPIPE: %s reached EOF (the peer closed it)", s->name);
  lua_pushliteral(L, "EPIPE");
  return 3;
}

/* h:write(data) -> bytes accepted (what the descriptor does not take now is queued) */
static int st_write(lua_State *L) {
  lstream *s = check(L);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  if (s->fd < 0 || !s->writable || s->in_err || s->shut || s->shut_pending)
    return refuse_write(L, s, "write");
  size_t done = 0;
  if (s->wq.head == NULL && !s->connecting) {
    ssize_t n = write_some(s->fd, data, len);
    if (n < 0) {
      write_failed(s, (int)-n);
      return luxec_push_error(L, (int)-n);
    }
    done = (size_t)n;
  }
  if (done < len) {
    if (wqueue_push(&s->wq, &s->wq_bytes, data + done, len - done) < 0)
      return luxec_push_error(L, ENOMEM);
    set_poll(s);
  }
  lua_pushinteger(L, (lua_Integer)len);
  return 1;
}

/* h:close_stdin(): a socket's write side is shut down once the queue drained (the peer
 * reads EOF, the answer still arrives); other descriptors have no write side of their own. */
static int st_close_stdin(lua_State *L) {
  lstream *s = check(L);
  if (!s->socket) {
    lua_pushnil(L);
    lua_pushfstring(L,
                    "ENOTSUP: %s %s has no write side to close apart (close() it, or send "
                    "the EOF character a terminal expects)",
                    s->kind, s->name);
    lua_pushliteral(L, "ENOTSUP");
    return 3;
  }
  if (!s->shut && !s->shut_pending) {
    s->shut_pending = 1;
    if (s->wq.head == NULL && !s->connecting) finish_shutdown(s);
    if (s->eof && s->shut) release_fd(s);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static void check_stream_arg(lua_State *L, int idx) {
  lua_Integer i = luaL_optinteger(L, idx, 1);
  luaL_argcheck(L, i == 1, idx, "a stream has one output stream (1)");
}

static int st_read(lua_State *L) {
  lstream *s = check(L);
  check_stream_arg(L, 2);
  lua_Integer from = luaL_optinteger(L, 3, 0);
  luaL_argcheck(L, from >= 0, 3, "cursor must be >= 0");
  return luxec_push_read(L, &s->buf, (uint64_t)from);
}

static int st_snapshot(lua_State *L) {
  lstream *s = check(L);
  check_stream_arg(L, 2);
  return luxec_push_snapshot(L, &s->buf);
}

static int st_read_range(lua_State *L) {
  lstream *s = check(L);
  check_stream_arg(L, 2);
  lua_Integer off = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
  luaL_argcheck(L, off >= 0, 3, "offset must be >= 0");
  luaL_argcheck(L, len >= 0 && len <= (1 << 30), 4, "length must be 0..1 GiB");
  char *dst = lua_newuserdatauv(L, (size_t)len + 1, 0);
  int64_t n = outbuf_read_range(&s->buf, (uint64_t)off, (size_t)len, dst);
  if (n < 0) return luxec_push_error(L, (int)-n);
  lua_pushlstring(L, dst, (size_t)n);
  return 1;
}

static int st_log_error(lua_State *L) {
  lstream *s = check(L);
  if (s->buf.log_errno) return luxec_push_error(L, s->buf.log_errno) - 1;
  lua_pushnil(L);
  return 1;
}

/* h:tty_echo([on]) -> whether the terminal echoes (after setting it) | nil, "ENOTTY..." */
static int st_tty_echo(lua_State *L) {
  lstream *s = check(L);
  struct termios t;
  if (!s->tty || s->fd < 0 || tcgetattr(s->fd, &t) < 0) return luxec_push_error(L, ENOTTY);
  if (!lua_isnoneornil(L, 2)) {
    if (lua_toboolean(L, 2))
      t.c_lflag |= ECHO;
    else
      t.c_lflag &= ~(tcflag_t)ECHO;
    if (tcsetattr(s->fd, TCSANOW, &t) < 0) return luxec_push_error(L, errno);
  }
  lua_pushboolean(L, (t.c_lflag & ECHO) != 0);
  return 1;
}

static const luaL_Reg stream_methods[] = {
    {"close", st_close},           {"close_stdin", st_close_stdin},
    {"log_error", st_log_error},   {"read", st_read},
    {"read_range", st_read_range}, {"ref", st_ref},
    {"snapshot", st_snapshot},     {"status", st_status},
    {"tty_echo", st_tty_echo},     {"want_output", st_want_output},
    {"write", st_write},           {NULL, NULL}};

static const luaL_Reg stream_meta[] = {
    {"__close", st_close}, {"__gc", st_close}, {"__tostring", st_tostring}, {NULL, NULL}};

/* core.stream_open{path=|unix=|tcp=, port=|fd=, name, read_only, head, tail, log, log_max,
 * on_event} -> handle, kind, connecting | nil, "ENOENT: ...", "ENOENT" */
static int core_stream_open(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "name");
  const char *name = luaL_checkstring(L, -1);
  lua_getfield(L, 1, "on_event");
  luaL_checktype(L, -1, LUA_TFUNCTION);
  lua_getfield(L, 1, "head");
  lua_getfield(L, 1, "tail");
  lua_Integer head = luaL_checkinteger(L, -2), tail = luaL_checkinteger(L, -1);
  lua_getfield(L, 1, "log");
  const char *log = lua_tostring(L, -1);
  lua_getfield(L, 1, "log_max");
  lua_Integer log_max = luaL_optinteger(L, -1, 0);
  lua_getfield(L, 1, "read_only");
  int rdonly = lua_toboolean(L, -1);
  lua_pop(L, 5); /* name and on_event stay: 2, 3 */
  luaL_argcheck(L, head >= 0 && tail >= 0, 1, "head and tail must be >= 0");

  sbox *b = lua_newuserdatauv(L, sizeof *b, 1); /* 4 */
  b->s = NULL;
  luaL_setmetatable(L, STREAM_MT);
  lstream *s = calloc(1, sizeof *s);
  if (s == NULL) return luxec_push_error(L, ENOMEM);
  int connecting = 0;
  int fd = stream_open_target(L, &connecting, &rdonly);
  if (fd < 0) {
    free(s);
    return luxec_push_error(L, -fd);
  }
  s->fd = fd;
  s->L = L;
  s->self_ref = LUA_NOREF;
  s->readable = 1;
  s->writable = !rdonly;
  s->connecting = connecting;
  snprintf(s->name, sizeof s->name, "%s", name);
  stream_describe(fd, &s->socket, &s->tty, s->kind);
  int rc = outbuf_init(&s->buf, (size_t)head, (size_t)tail);
  s->buf.log_max = (uint64_t)log_max;
  if (rc == 0 && log) rc = outbuf_open_log(&s->buf, log);
  if (rc == 0) rc = uv_poll_init(&luxec_gethost(L)->loop, &s->poll, fd);
  if (rc != 0) {
    close(fd);
    outbuf_free(&s->buf);
    free(s);
    return luxec_push_error(L, rc);
  }
  s->poll.data = NULL;
  s->poll_open = 1;
  uv_unref((uv_handle_t *)&s->poll);
  s->next = live;
  if (live) live->prev = s;
  live = s;
  b->s = s;
  s->box = b;
  lua_pushvalue(L, 3);
  lua_setiuservalue(L, 4, 1);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LIVE_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 0);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &LIVE_KEY);
  }
  lua_pushvalue(L, 4);
  lua_rawsetp(L, -2, s);
  lua_pop(L, 1);
  set_poll(s);
  lua_pushvalue(L, 4);
  lua_pushstring(L, s->kind);
  lua_pushboolean(L, connecting);
  return 3;
}

/* The host is closing: every stream's descriptor and handle go. */
void luxec_streams_shutdown(void) {
  for (lstream *s = live, *next; s != NULL; s = next) {
    next = s->next;
    close_stream(s);
  }
}

void luxec_open_stream(lua_State *L) {
  if (luaL_newmetatable(L, STREAM_MT)) {
    luaL_setfuncs(L, stream_meta, 0);
    luaL_newlib(L, stream_methods);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, core_stream_open);
  lua_setfield(L, -2, "stream_open");
}
