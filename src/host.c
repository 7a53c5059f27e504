/* host.c: one Lua state on one libuv loop, shared with luv; errors in callbacks are
 * reported with a traceback and counted, never fatal. */
#include "luxec.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lualib.h>
#include <luv/luv.h>

static const char HOST_KEY = 'h'; /* registry key: its address */

luxec_host *luxec_gethost(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &HOST_KEY);
  luxec_host *h = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return h;
}

const char *luxec_err_name(int err) {
  if (err > 0) err = uv_translate_sys_error(err);
  static char buf[64];
  /* libuv names the errors it knows; the C library every other errno (ENOEXEC, ENOTBLK...):
   * never "Unknown system error" for an error the system has a name for */
  if (strncmp(uv_err_name_r(err, buf, sizeof buf), "Unknown", 7) != 0) return buf;
  const char *n = err < 0 ? strerrorname_np(-err) : NULL;
  if (n != NULL) return n;
  snprintf(buf, sizeof buf, "E%d", err < 0 ? -err : err);
  return buf;
}

const char *luxec_strerror(int err) {
  if (err > 0) err = uv_translate_sys_error(err);
  static char buf[128];
  if (strncmp(uv_strerror_r(err, buf, sizeof buf), "Unknown", 7) != 0) return buf;
  return err < 0 ? strerror(-err) : "unknown error";
}

int luxec_push_error(lua_State *L, int err) {
  lua_pushnil(L);
  const char *name = luxec_err_name(err);
  lua_pushstring(L, name); /* (the name's buffer is reused by the message's) */
  lua_pushfstring(L, "%s: %s", name, luxec_strerror(err));
  lua_pushvalue(L, -2);
  lua_remove(L, -3);
  return 3;
}

/* Message handler: the error message with a traceback appended (lua.c's msghandler). */
int luxec_traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* The host's one handler of SIGINT, SIGTERM and SIGHUP (installed with sigaction). SIGINT
 * while top-level Lua code runs stops that code at its next instruction (lua.c's laction)
 * and wakes the loop in case the code waits in it; a second SIGINT before that, or any of
 * them outside Lua code, ends the host with its sessions. */
static lua_State *interrupt_L = NULL;
static uv_async_t *interrupt_wake = NULL;
static volatile sig_atomic_t interrupt_pending = 0;

static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  interrupt_pending = 0;
  luaL_error(L, "interrupted!");
}

static void set_handler(int sig, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, NULL);
}

static void host_signal(int sig) {
  if (sig == SIGINT && interrupt_L != NULL && !interrupt_pending) {
    int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
    interrupt_pending = 1;
    lua_sethook(interrupt_L, lstop, flag, 1);
    if (interrupt_wake != NULL) uv_async_send(interrupt_wake);
    return;
  }
  luxec_procs_kill_all(); /* the watchdog finishes what this cannot reach */
  luxec_term_restore();   /* a person attached to a session gets their terminal back */
  set_handler(sig, SIG_DFL);
  raise(sig); /* delivered once the handler returns: the host ends by this signal */
}

/* Call a function of the main chunk, the REPL or the command line with a traceback handler;
 * SIGINT interrupts it. */
int luxec_docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  luxec_host *h = luxec_gethost(L);
  lua_State *saved_L = interrupt_L;
  uv_async_t *saved_wake = interrupt_wake;
  interrupt_wake = h != NULL ? &h->wake : NULL;
  interrupt_L = L;
  lua_pushcfunction(L, luxec_traceback);
  lua_insert(L, base);
  int status = lua_pcall(L, narg, nres, base);
  interrupt_L = saved_L;
  interrupt_wake = saved_wake;
  if (interrupt_pending && saved_L == NULL) { /* came after the code was done */
    lua_sethook(L, NULL, 0, 0);
    interrupt_pending = 0;
  }
  lua_remove(L, base);
  return status;
}

/* Print the error on top of the stack (if any) as lua.c does; returns status. */
int luxec_report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "luxec: %s\n", msg ? msg : "(error object is not a string)");
    fflush(stderr);
    lua_pop(L, 1);
  }
  return status;
}

void luxec_report_callback_error(lua_State *L, const char *where, const char *msg) {
  luxec_host *h = luxec_gethost(L);
  if (h != NULL) h->callback_errors++;
  fprintf(stderr, "luxec: error in %s: %s\n", where, msg ? msg : "(error object is not a string)");
  fflush(stderr);
}

/* Installed with luv_set_callback: the same contract as luv's luv_cfpcall (pops the
 * function and its arguments, leaves nresults values or returns -status), but an error is
 * reported and counted and the loop keeps serving the other callbacks. */
int luxec_callback_pcall(lua_State *L, int nargs, int nresults, int flags) {
  int base = lua_gettop(L) - nargs; /* index of the function */
  lua_pushcfunction(L, luxec_traceback);
  lua_insert(L, base);
  int status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (status == LUA_OK) {
    return nresults == LUA_MULTRET ? lua_gettop(L) - base + 1 : nresults;
  }
  if ((flags & LUVF_CALLBACK_NOERRMSG) == 0) {
    luxec_report_callback_error(L, "callback", lua_tostring(L, -1));
  } else {
    luxec_gethost(L)->callback_errors++;
  }
  lua_pop(L, 1);
  return -status;
}

/* An exit() that skips the orderly close must not leave sessions behind. */
static void kill_sessions_at_exit(void) {
  luxec_procs_kill_all();
}

/* SIGTERM, SIGHUP and SIGINT: host_signal, also after something else took them over for a
 * while (the prompt's SIGINT). */
void luxec_host_signals(void) {
  set_handler(SIGTERM, host_signal);
  set_handler(SIGHUP, host_signal);
  set_handler(SIGINT, host_signal);
}

static void wake_cb(uv_async_t *handle) {
  (void)handle; /* returning from the poll is all a wake-up is for */
}

/* Every session costs the host a few descriptors: raise the soft limit on open files to the
 * hard one (children get the original back before exec, see launch.c). */
struct rlimit luxec_nofile_original;
int luxec_nofile_raised = 0;

static void raise_nofile(void) {
  if (getrlimit(RLIMIT_NOFILE, &luxec_nofile_original) != 0) return;
  struct rlimit more = luxec_nofile_original;
  if (more.rlim_cur >= more.rlim_max) return;
  more.rlim_cur = more.rlim_max;
  luxec_nofile_raised = setrlimit(RLIMIT_NOFILE, &more) == 0;
}

/* What a host sets up once per process: SIGPIPE ignored (a write to a closed pipe is an EPIPE
 * result), the open-file limit raised, SIGTERM and SIGHUP (and SIGINT when `sigint`) ending
 * the sessions with the host, and an exit() that skips the orderly close ending them too. */
void luxec_host_process_setup(int sigint) {
  set_handler(SIGPIPE, SIG_IGN);
  raise_nofile();
  set_handler(SIGTERM, host_signal);
  set_handler(SIGHUP, host_signal);
  if (sigint) set_handler(SIGINT, host_signal);
  atexit(kill_sessions_at_exit);
}

int luxec_host_loop_init(luxec_host *h) {
  int rc = uv_loop_init(&h->loop);
  if (rc < 0) {
    fprintf(stderr, "luxec: cannot create the event loop: %s\n", uv_strerror(rc));
    return -1;
  }
  uv_async_init(&h->loop, &h->wake, wake_cb);
  uv_unref((uv_handle_t *)&h->wake);
  return 0;
}

/* L (the main thread) is the host's: luxec_gethost finds h, luv runs on h's loop (set before
 * luaopen_luv) and reports callback errors instead of exiting, the native modules are
 * preloaded. */
void luxec_host_attach(luxec_host *h, lua_State *L) {
  h->L = L;
  lua_pushlightuserdata(L, h);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &HOST_KEY);
  luv_set_loop(L, &h->loop);
  luv_set_callback(L, luxec_callback_pcall);
  h->luv = luv_context(L); /* (made by luv_set_loop; looked up once, not per turn) */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE); /* preload */
  lua_pushcfunction(L, luxec_open_core);
  lua_setfield(L, -2, "luxec.core");
  lua_pushcfunction(L, luaopen_luxec_screen);
  lua_setfield(L, -2, "luxec.screen_native");
  lua_pushcfunction(L, luaopen_luxec_term);
  lua_setfield(L, -2, "luxec.term");
  lua_pop(L, 1);
}

int luxec_host_init(luxec_host *h, int ignore_env) {
  memset(h, 0, sizeof *h);
  h->ignore_env = ignore_env;
  luxec_host_process_setup(1);
  if (luxec_host_loop_init(h) != 0) return -1;

  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "luxec: cannot create the Lua state: not enough memory\n");
    return -1;
  }
  if (ignore_env) { /* the package library reads this before LUA_PATH (lua.c's -E) */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  luxec_find_lua_dir(h->lua_dir, sizeof h->lua_dir, ignore_env);
  luxec_set_paths(L, h->lua_dir);
  luxec_host_attach(h, L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE); /* loaded */
  luaopen_luv(L);                                           /* loaded luv */
  lua_setfield(L, -2, "luv");                               /* loaded */
  lua_pop(L, 1);
  return 0;
}

/* Run the loop the way luv's uv.run does, so Lua code can tell (uv.loop_mode()) that it is
 * inside a loop callback and must not drive the loop itself. */
int luxec_host_run(luxec_host *h, uv_run_mode mode) {
  luv_ctx_t *ctx = h->luv != NULL ? h->luv : luv_context(h->L);
  int saved = ctx->mode;
  ctx->mode = (int)mode;
  int alive = uv_run(&h->loop, mode);
  ctx->mode = saved;
  return alive;
}

/* luv's handles carry their luv_handle_t in data; the core's own handles and the host's keep
 * data NULL (they are found with container_of) and are closed by their owners. */
static void close_walk_cb(uv_handle_t *handle, void *arg) {
  (void)arg;
  if (handle->data != NULL && !uv_is_closing(handle)) uv_close(handle, NULL);
}

/* End every session, close every handle while the Lua state can still serve close callbacks,
 * then close the state (luv's __gc finds its handles closed), then the loop. */
void luxec_host_close(luxec_host *h) {
  if (h->L != NULL) {
    luxec_core_shutdown(h->L);
    uv_walk(&h->loop, close_walk_cb, NULL);
    if (!uv_is_closing((uv_handle_t *)&h->wake)) uv_close((uv_handle_t *)&h->wake, NULL);
    luxec_host_run(h, UV_RUN_DEFAULT);
    lua_close(h->L);
    h->L = NULL;
  }
  while (uv_loop_close(&h->loop) == UV_EBUSY) uv_run(&h->loop, UV_RUN_NOWAIT);
}
