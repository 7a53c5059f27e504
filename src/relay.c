/* relay.c: core.relay(a, b, cb): move the bytes between two connected TCP sockets until both
 * directions have ended, in C (the network-by-name proxy hands a connection over once it has
 * decided where it goes; lua/luxec/sandbox/proxy.lua). a and b are luv tcp handles: the relay
 * takes duplicates of their descriptors (the caller closes the handles) and moves the bytes
 * with splice(2) through a pipe per direction, never through memory of its own. A direction
 * reads only while its pipe is empty, so a slow reader on one side stops the other side's
 * reading (backpressure both ways); the end of one direction (EOF) is passed on as a
 * shutdown(SHUT_WR) of the other socket, and the other direction goes on (half-close). Any
 * error ends both. cb(err, a_to_b, b_to_a) is called once at the end, with nil or the error
 * ("ECONNRESET", "closed") and the bytes moved each way. */
#include "luxec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_MT "luxec.relay"
#define PIPE_SIZE (1024 * 1024)    /* asked of each pipe (the kernel may give less) */
#define TURN_MAX (8 * 1024 * 1024) /* bytes one direction moves per wake-up (fairness) */

typedef struct {
  int pipe[2];
  size_t inpipe; /* bytes read from the source not yet written to the destination */
  int eof, shut; /* the source ended; the destination was told (shutdown) */
  uint64_t total;
} relay_dir;

typedef struct {
  lua_State *L;
  int cb_ref, self_ref;
  int fd[2];
  uv_poll_t poll[2];
  int events[2];  /* what each poll handle waits for now (-1: not started) */
  relay_dir d[2]; /* d[i]: fd[i] -> fd[1 - i] */
  int open_polls; /* poll handles not yet closed */
  int done;
  char err[48];
} relay;

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void relay_free_fds(relay *r) {
  for (int i = 0; i < 2; i++) {
    close_fd(&r->fd[i]);
    close_fd(&r->d[i].pipe[0]);
    close_fd(&r->d[i].pipe[1]);
  }
}

static void on_closed(uv_handle_t *h) {
  relay *r = h->data;
  if (--r->open_polls > 0) return;
  relay_free_fds(r);
  lua_State *L = r->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, r->cb_ref);
  if (r->err[0])
    lua_pushstring(L, r->err);
  else
    lua_pushnil(L);
  lua_pushinteger(L, (lua_Integer)r->d[0].total);
  lua_pushinteger(L, (lua_Integer)r->d[1].total);
  luaL_unref(L, LUA_REGISTRYINDEX, r->cb_ref);
  luaL_unref(L, LUA_REGISTRYINDEX, r->self_ref); /* (collectable once Lua drops it too) */
  r->cb_ref = r->self_ref = LUA_NOREF;
  luxec_callback_pcall(L, 3, 0, 0);
}

/* End the relay (once): stop and close the poll handles; the rest in on_closed. */
static void finish(relay *r, const char *err) {
  if (r->done) return;
  r->done = 1;
  if (err) snprintf(r->err, sizeof r->err, "%s", err);
  /* (the host's close closes every handle whose data is set before the Lua state goes: a
   * relay ended from a __gc then finds its polls closing, and nothing is called back) */
  if (uv_is_closing((uv_handle_t *)&r->poll[0])) return;
  for (int i = 0; i < 2; i++) uv_close((uv_handle_t *)&r->poll[i], on_closed);
}

static const char *errname(int e) {
  return luxec_err_name(e);
}

/* Move what can be moved now in direction i; 0, or -errno. Sets what it waits for. */
static int pump(relay *r, int i, int *want_read, int *want_write) {
  relay_dir *d = &r->d[i];
  int src = r->fd[i], dst = r->fd[1 - i];
  size_t moved = 0;
  *want_read = *want_write = 0;
  while (moved < TURN_MAX) {
    if (d->inpipe > 0) {
      ssize_t n = splice(d->pipe[0], NULL, dst, NULL, d->inpipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          *want_write = 1;
          return 0;
        }
        return -errno;
      }
      d->inpipe -= (size_t)n;
      d->total += (uint64_t)n;
      moved += (size_t)n;
      continue;
    }
    if (d->eof) break;
    ssize_t n = splice(src, NULL, d->pipe[1], NULL, PIPE_SIZE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        *want_read = 1;
        return 0;
      }
      return -errno;
    }
    if (n == 0) d->eof = 1;
    d->inpipe += (size_t)n;
  }
  if (d->inpipe > 0 || !d->eof) { /* (a full turn) more to do: come back on the next one */
    *want_write = d->inpipe > 0;
    *want_read = d->inpipe == 0;
    return 0;
  }
  if (!d->shut) {
    d->shut = 1;
    if (shutdown(dst, SHUT_WR) < 0 && errno != ENOTCONN) return -errno;
  }
  return 0;
}

static void poll_cb(uv_poll_t *h, int status, int events);

/* Run both directions, then wait for what they need. */
static void step(relay *r) {
  int rd[2], wr[2];
  for (int i = 0; i < 2; i++) {
    int rc = pump(r, i, &rd[i], &wr[i]);
    if (rc < 0) {
      finish(r, errname(-rc));
      return;
    }
  }
  if (r->d[0].shut && r->d[1].shut) {
    finish(r, NULL);
    return;
  }
  for (int k = 0; k < 2; k++) { /* fd[k] is the source of d[k], the destination of d[1-k] */
    int ev = (rd[k] ? UV_READABLE : 0) | (wr[1 - k] ? UV_WRITABLE : 0);
    if (ev == r->events[k]) continue;
    r->events[k] = ev;
    int rc = ev ? uv_poll_start(&r->poll[k], ev, poll_cb) : uv_poll_stop(&r->poll[k]);
    if (rc < 0) {
      finish(r, luxec_err_name(rc));
      return;
    }
  }
}

static void poll_cb(uv_poll_t *h, int status, int events) {
  relay *r = h->data;
  (void)events;
  if (r->done) return;
  if (status < 0) {
    finish(r, luxec_err_name(status));
    return;
  }
  step(r);
}

/* The descriptor of a luv stream handle, through luv's own uv.fileno (never given to Lua). */
static int handle_fd(lua_State *L, int idx) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "luv") != LUA_TTABLE) return luaL_error(L, "luv is not loaded");
  lua_getfield(L, -1, "fileno");
  lua_pushvalue(L, idx);
  lua_call(L, 1, 2);
  if (!lua_isinteger(L, -2))
    return luaL_error(L, "relay: argument #%d is no open stream (%s)", idx,
                      luaL_optstring(L, -1, "?"));
  int fd = (int)lua_tointeger(L, -2);
  lua_pop(L, 4);
  return fd;
}

/* core.relay(a, b, cb) -> relay */
static int relay_new(lua_State *L) {
  int fa = handle_fd(L, 1), fb = handle_fd(L, 2);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  relay *r = lua_newuserdatauv(L, sizeof *r, 0);
  memset(r, 0, sizeof *r);
  r->L = luxec_gethost(L)->L;
  r->cb_ref = r->self_ref = LUA_NOREF;
  r->fd[0] = r->fd[1] = -1;
  r->done = 1; /* (until it runs: nothing to close) */
  for (int i = 0; i < 2; i++) r->d[i].pipe[0] = r->d[i].pipe[1] = -1;
  luaL_setmetatable(L, RELAY_MT);
  int src[2] = {fa, fb};
  for (int i = 0; i < 2; i++) {
    r->fd[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 0);
    if (r->fd[i] < 0 || pipe2(r->d[i].pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
      int e = errno;
      relay_free_fds(r);
      return luaL_error(L, "relay: %s", strerror(e));
    }
    fcntl(r->d[i].pipe[1], F_SETPIPE_SZ, PIPE_SIZE); /* (best effort: a smaller pipe works) */
  }
  uv_loop_t *loop = &luxec_gethost(L)->loop;
  for (int i = 0; i < 2; i++) {
    int rc = uv_poll_init(loop, &r->poll[i], r->fd[i]);
    if (rc < 0) {
      if (i == 1) uv_close((uv_handle_t *)&r->poll[0], NULL); /* (userdata kept by the ref) */
      relay_free_fds(r);
      return luaL_error(L, "relay: %s", uv_strerror(rc));
    }
    uv_unref((uv_handle_t *)&r->poll[i]); /* (the session keeps the host alive, not a relay) */
    r->poll[i].data = r;
    r->events[i] = -1;
  }
  r->open_polls = 2;
  r->done = 0;
  lua_pushvalue(L, 3);
  r->cb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, -1);
  r->self_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* alive until cb is called */
  step(r);
  return 1;
}

/* relay:close(): end it now (cb is called with "closed"); nothing when it has ended */
static int relay_close(lua_State *L) {
  relay *r = luaL_checkudata(L, 1, RELAY_MT);
  finish(r, "closed");
  return 0;
}

/* relay:counts() -> bytes moved a to b, b to a so far */
static int relay_counts(lua_State *L) {
  relay *r = luaL_checkudata(L, 1, RELAY_MT);
  lua_pushinteger(L, (lua_Integer)r->d[0].total);
  lua_pushinteger(L, (lua_Integer)r->d[1].total);
  return 2;
}

static const luaL_Reg relay_methods[] = {
    {"close", relay_close}, {"counts", relay_counts}, {NULL, NULL}};

void luxec_open_relay(lua_State *L) {
  if (luaL_newmetatable(L, RELAY_MT)) {
    luaL_newlib(L, relay_methods);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, relay_new);
  lua_setfield(L, -2, "relay");
}
