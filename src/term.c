/* term.c: luxec.term, the host's own terminal for a person taking over a session (interact,
 * the REPL's :attach): raw mode and its restore, keys read on the shared loop, the window
 * size and SIGWINCH. Mechanism only: the escape key, what to forward and when to stop are
 * the Lua side's. */
#include "luxec.h"
#include "wqueue.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define TERM_MT "luxec.term"
#define KEY_CHUNK 4096

typedef struct term {
  uv_poll_t poll;  /* on in_fd; data NULL: found with container_of */
  uv_poll_t wpoll; /* on wfd while output waits for the terminal to take it */
  uv_signal_t winch;
  lua_State *L;
  int cb_ref; /* fn(kind, ...) told about "input", "resize" and "eof" */
  int in_fd, out_fd;
  int fl_saved; /* in_fd's file status flags before the poll made it non-blocking */
  int wfd;      /* out_fd, or a dup of it when it is in_fd (one poll per number) */
  wqueue wq;    /* output not yet taken, in order */
  size_t wq_bytes;
  int werr; /* sticky errno of a failed write */
  int poll_open, winch_open, wpoll_open;
  int pending_closes;
  int closed; /* the Lua object let go of it: freed once the handles closed */
} term;

typedef struct tbox {
  term *t;
} tbox;

/* One terminal mode is saved at a time, process-wide, so an exit that skips the Lua side
 * (os.exit, an error) still gives the person their terminal back. */
static struct termios raw_saved;
static int raw_fd = -1;
static int atexit_done = 0;

static void restore_mode(void) {
  if (raw_fd < 0) return;
  tcsetattr(raw_fd, TCSAFLUSH, &raw_saved);
  raw_fd = -1;
}

void luxec_term_restore(void) {
  restore_mode();
}

static term *check_term(lua_State *L, int idx) {
  tbox *b = luaL_checkudata(L, idx, TERM_MT);
  if (b->t == NULL) luaL_error(L, "attempt to use a closed terminal");
  return b->t;
}

static void free_if_done(term *t) {
  if (!t->closed || t->pending_closes > 0 || t->poll_open || t->winch_open || t->wpoll_open) return;
  if (t->wfd >= 0 && t->wfd != t->out_fd) close(t->wfd);
  wqueue_clear(&t->wq, &t->wq_bytes);
  free(t);
}

static void poll_closed(uv_handle_t *h) {
  term *t = container_of((uv_poll_t *)h, term, poll);
  t->pending_closes--;
  free_if_done(t);
}

static void wpoll_closed(uv_handle_t *h) {
  term *t = container_of((uv_poll_t *)h, term, wpoll);
  t->pending_closes--;
  free_if_done(t);
}

static void winch_closed(uv_handle_t *h) {
  term *t = container_of((uv_signal_t *)h, term, winch);
  t->pending_closes--;
  free_if_done(t);
}

static void emit(term *t, const char *kind, const char *data, size_t len, int nextra,
                 const int *extra) {
  if (t->cb_ref == LUA_NOREF) return;
  lua_State *L = t->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->cb_ref);
  lua_pushstring(L, kind);
  if (data != NULL) lua_pushlstring(L, data, len);
  for (int i = 0; i < nextra; i++) lua_pushinteger(L, extra[i]);
  luxec_callback_pcall(L, 1 + (data != NULL) + nextra, 0, 0);
}

static int get_size(term *t, int *rows, int *cols) {
  struct winsize ws = {0};
  int rc = ioctl(t->out_fd, TIOCGWINSZ, &ws);
  if (rc < 0) rc = ioctl(t->in_fd, TIOCGWINSZ, &ws);
  *rows = ws.ws_row;
  *cols = ws.ws_col;
  return rc < 0 ? -errno : 0;
}

static void stop_reading(term *t) {
  if (t->poll_open) {
    t->poll_open = 0;
    t->pending_closes++;
    uv_close((uv_handle_t *)&t->poll, poll_closed);
    if (t->fl_saved >= 0) fcntl(t->in_fd, F_SETFL, t->fl_saved);
  }
  if (t->winch_open) {
    t->winch_open = 0;
    t->pending_closes++;
    uv_close((uv_handle_t *)&t->winch, winch_closed);
  }
  if (t->cb_ref != LUA_NOREF) {
    luaL_unref(t->L, LUA_REGISTRYINDEX, t->cb_ref);
    t->cb_ref = LUA_NOREF;
  }
}

static void poll_cb(uv_poll_t *h, int status, int events) {
  term *t = container_of(h, term, poll);
  char buf[KEY_CHUNK];
  (void)events;
  ssize_t n = -1;
  if (status == 0) {
    do n = read(t->in_fd, buf, sizeof buf);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  }
  if (n > 0) {
    emit(t, "input", buf, (size_t)n, 0, NULL);
    return;
  }
  uv_poll_stop(h);
  emit(t, "eof", NULL, 0, 0, NULL);
}

static void winch_cb(uv_signal_t *h, int signum) {
  term *t = container_of(h, term, winch);
  int size[2];
  (void)signum;
  if (get_size(t, &size[0], &size[1]) == 0) emit(t, "resize", NULL, 0, 2, size);
}

/* term.open([in_fd [, out_fd]]) -> the terminal on those descriptors (0 and 1) */
static int term_open(lua_State *L) {
  lua_Integer in = luaL_optinteger(L, 1, STDIN_FILENO), out = luaL_optinteger(L, 2, STDOUT_FILENO);
  luaL_argcheck(L, in >= 0 && in <= INT_MAX, 1, "bad descriptor");
  luaL_argcheck(L, out >= 0 && out <= INT_MAX, 2, "bad descriptor");
  tbox *b = lua_newuserdatauv(L, sizeof *b, 0); /* created closed */
  b->t = NULL;
  luaL_setmetatable(L, TERM_MT);
  term *t = calloc(1, sizeof *t);
  if (t == NULL) return luaL_error(L, "not enough memory");
  t->L = luxec_gethost(L)->L;
  t->cb_ref = LUA_NOREF;
  t->in_fd = (int)in;
  t->out_fd = (int)out;
  t->fl_saved = -1;
  t->wfd = -1;
  b->t = t;
  return 1;
}

/* term.isatty(fd) -> whether fd is a terminal */
static int term_isatty(lua_State *L) {
  lua_pushboolean(L, isatty((int)luaL_checkinteger(L, 1)));
  return 1;
}

/* t:raw() -> true | nil, msg, code: no echo, no line editing, no signals from keys (Ctrl-C
 * is a byte for the program), output untouched. t:restore() undoes it. */
static int term_raw(lua_State *L) {
  term *t = check_term(L, 1);
  struct termios tio;
  if (raw_fd >= 0) return luaL_error(L, "raw: the terminal is already in raw mode");
  if (tcgetattr(t->in_fd, &tio) < 0) return luxec_push_error(L, errno);
  raw_saved = tio;
  cfmakeraw(&tio);
  tio.c_cc[VMIN] = 1;
  tio.c_cc[VTIME] = 0;
  if (tcsetattr(t->in_fd, TCSADRAIN, &tio) < 0) return luxec_push_error(L, errno);
  raw_fd = t->in_fd;
  if (!atexit_done) atexit_done = atexit(restore_mode) == 0;
  lua_pushboolean(L, 1);
  return 1;
}

static int term_restore(lua_State *L) {
  check_term(L, 1);
  restore_mode();
  return 0;
}

/* t:size() -> rows, cols | nil, msg, code */
static int term_size(lua_State *L) {
  term *t = check_term(L, 1);
  int rows, cols;
  int rc = get_size(t, &rows, &cols);
  if (rc < 0) return luxec_push_error(L, -rc);
  lua_pushinteger(L, rows);
  lua_pushinteger(L, cols);
  return 2;
}

/* t:start(fn) -> true | nil, msg, code: read keys on the loop; fn("input", bytes),
 * fn("resize", rows, cols) on SIGWINCH, fn("eof") once input ends. While it reads, the
 * terminal keeps the loop alive. */
static int term_start(lua_State *L) {
  term *t = check_term(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (t->poll_open || t->pending_closes > 0)
    return luaL_error(L, "start: the terminal is already being read");
  uv_loop_t *loop = &luxec_gethost(L)->loop;
  int fl = fcntl(t->in_fd, F_GETFL);
  int rc = uv_poll_init(loop, &t->poll, t->in_fd);
  if (rc < 0) return luxec_push_error(L, rc);
  t->poll.data = NULL;
  t->poll_open = 1;
  t->fl_saved = fl;
  rc = uv_poll_start(&t->poll, UV_READABLE, poll_cb);
  if (rc == 0 && (rc = uv_signal_init(loop, &t->winch)) == 0) {
    t->winch.data = NULL;
    t->winch_open = 1;
    rc = uv_signal_start(&t->winch, winch_cb, SIGWINCH);
  }
  if (rc < 0) {
    stop_reading(t);
    return luxec_push_error(L, rc);
  }
  lua_pushvalue(L, 2);
  t->cb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushboolean(L, 1);
  return 1;
}

/* t:stop(): no more keys or resizes (the handles close on the next turn of the loop) */
static int term_stop(lua_State *L) {
  stop_reading(check_term(L, 1));
  return 0;
}

/* Write without blocking, whatever the descriptor's mode (it is often the person's terminal,
 * shared with other programs: its mode is left as found). Bytes taken, or -errno. */
static ssize_t write_now(int fd, const char *data, size_t len) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  ssize_t n;
  do n = write(fd, data, len);
  while (n < 0 && errno == EINTR);
  int e = errno;
  if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl);
  if (n < 0) return e == EAGAIN || e == EWOULDBLOCK ? 0 : -e;
  return n;
}

static void stop_writing(term *t) {
  if (!t->wpoll_open) return;
  t->wpoll_open = 0;
  t->pending_closes++;
  uv_close((uv_handle_t *)&t->wpoll, wpoll_closed);
}

static void wpoll_cb(uv_poll_t *h, int status, int events) {
  term *t = container_of(h, term, wpoll);
  (void)events;
  if (status == 0) {
    status = wqueue_flush(&t->wq, &t->wq_bytes, t->wfd, write_now);
    if (status == 0) return; /* full again */
  }
  if (status < 0) { /* the terminal is gone: what is queued cannot be written */
    t->werr = -status;
    wqueue_clear(&t->wq, &t->wq_bytes);
  }
  stop_writing(t);
}

/* Poll the output descriptor until the queue is written; it keeps the loop (and the host)
 * alive meanwhile, as output a person should see. */
static int start_writing(term *t) {
  if (t->wpoll_open) return 0;
  if (t->wfd < 0) t->wfd = t->out_fd == t->in_fd ? fcntl(t->out_fd, F_DUPFD_CLOEXEC, 3) : t->out_fd;
  if (t->wfd < 0) return -errno;
  int fl = fcntl(t->wfd, F_GETFL);
  int rc = uv_poll_init(&luxec_gethost(t->L)->loop, &t->wpoll, t->wfd);
  if (fl >= 0) fcntl(t->wfd, F_SETFL, fl); /* uv_poll_init made it non-blocking */
  if (rc < 0) return rc;
  t->wpoll.data = NULL;
  t->wpoll_open = 1;
  return uv_poll_start(&t->wpoll, UV_WRITABLE, wpoll_cb);
}

/* t:write(bytes) -> true | nil, msg, code: what the terminal does not take now is queued and
 * written, in order, once it does (a stopped terminal, Ctrl-S, never blocks the loop). The
 * error of an earlier queued write is returned by the next call. */
static int term_write(lua_State *L) {
  term *t = check_term(L, 1);
  size_t len, off = 0;
  const char *data = luaL_checklstring(L, 2, &len);
  if (t->werr) return luxec_push_error(L, t->werr);
  if (t->wq.head == NULL) {
    ssize_t n = write_now(t->out_fd, data, len);
    if (n < 0) return luxec_push_error(L, (int)-n);
    off = (size_t)n;
  }
  if (off < len) {
    if (wqueue_push(&t->wq, &t->wq_bytes, data + off, len - off) < 0)
      return luxec_push_error(L, ENOMEM);
    int rc = start_writing(t);
    if (rc < 0) return luxec_push_error(L, rc);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* t:queued() -> bytes written with t:write that the terminal has not taken yet */
static int term_queued(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_term(L, 1)->wq_bytes);
  return 1;
}

static int term_close(lua_State *L) {
  tbox *b = luaL_checkudata(L, 1, TERM_MT);
  term *t = b->t;
  if (t != NULL) {
    b->t = NULL;
    t->closed = 1;
    if (raw_fd == t->in_fd) restore_mode();
    stop_reading(t);
    free_if_done(t);
  }
  return 0;
}

static int term_tostring(lua_State *L) {
  tbox *b = luaL_checkudata(L, 1, TERM_MT);
  if (b->t == NULL)
    lua_pushliteral(L, "luxec.term (closed)");
  else
    lua_pushfstring(L, "luxec.term (fd %d%s)", b->t->in_fd, b->t->poll_open ? ", reading" : "");
  return 1;
}

static const luaL_Reg term_methods[] = {
    {"close", term_close},     {"queued", term_queued}, {"raw", term_raw},
    {"restore", term_restore}, {"size", term_size},     {"start", term_start},
    {"stop", term_stop},       {"write", term_write},   {NULL, NULL}};

static const luaL_Reg term_meta[] = {
    {"__close", term_close}, {"__gc", term_close}, {"__tostring", term_tostring}, {NULL, NULL}};

static const luaL_Reg term_functions[] = {
    {"isatty", term_isatty}, {"open", term_open}, {NULL, NULL}};

int luaopen_luxec_term(lua_State *L) {
  if (luaL_newmetatable(L, TERM_MT)) { /* mt */
    luaL_setfuncs(L, term_meta, 0);
    luaL_newlib(L, term_methods);   /* mt methods */
    lua_setfield(L, -2, "__index"); /* mt */
  }
  lua_pop(L, 1);
  luaL_newlib(L, term_functions);
  return 1;
}
