/* module.c: luxec.core as a C module (luxec/core.so) for a Lua 5.4 interpreter that is not
 * luxec, such as lua5.4 with luv: require("luxec") in any Lua program. On the first require
 * it sets up what the luxec binary sets up at start: the host (one per process) and its loop,
 * which luv then runs on, the handlers that end the sessions with the process (SIGTERM,
 * SIGHUP, exit), and an end of every session when the Lua state closes. The watchdog, the
 * orphan reaper and the cgroups start with the first session, as in the binary.
 *
 * SIGINT stays the interpreter's (lua.c turns it into an "interrupted!" error), with a wake-up
 * of the loop so that a blocked wait sees it; a second one kills the interpreter, and the
 * watchdog then ends what its sessions left running. */
#include "luxec.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <luv/luv.h>
#include <luv/lhandle.h>

static luxec_host *module_host = NULL; /* one per process, as the binary's */

static void count_handle(uv_handle_t *handle, void *arg) {
  (void)handle;
  (*(int *)arg)++;
}

/* luv's handles carry their luv_handle_t in data; the core's keep data NULL (see host.c). */
static void close_walk_cb(uv_handle_t *handle, void *arg) {
  (void)arg;
  if (handle->data != NULL && !uv_is_closing(handle)) uv_close(handle, NULL);
}

static volatile sig_atomic_t wake_open = 0; /* whether a signal handler may wake the loop */

/* The Lua state closes (lua.c does at the end of the script): every session ends, every
 * handle closes, then the loop. Called by the first of luv's handles to be finalized (see
 * luv_gc_guard), else by the host's own finalizer. */
static int host_gc(lua_State *L) {
  (void)L;
  luxec_host *h = module_host;
  if (h == NULL || h->L == NULL) return 0;
  luxec_core_shutdown(h->L);
  uv_walk(&h->loop, close_walk_cb, NULL);
  wake_open = 0;
  if (!uv_is_closing((uv_handle_t *)&h->wake)) uv_close((uv_handle_t *)&h->wake, NULL);
  luxec_host_run(h, UV_RUN_DEFAULT);
  while (uv_loop_close(&h->loop) == UV_EBUSY) uv_run(&h->loop, UV_RUN_NOWAIT);
  h->L = NULL;
  return 0;
}

/* luv's handle finalizer frees a handle that is still closing (handle:close() with no loop
 * run after it), and the loop's next run then writes to freed memory. Until its close is
 * done luv holds a reference to the handle's userdata in the registry (luv_handle_t.ref), so
 * a collection never finalizes such a handle: one finalized while the registry still holds
 * it means the state is closing. The host then closes first, running the loop until every
 * close is done. */
static int luv_gc_guard(lua_State *L) {
  void **udata = lua_touserdata(L, 1);
  uv_handle_t *handle = udata != NULL ? *udata : NULL;
  luv_handle_t *data = handle != NULL ? handle->data : NULL;
  if (data != NULL && data->ref > 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, data->ref); /* (a released ref is another value) */
    int held = lua_touserdata(L, -1) == (void *)udata;
    lua_pop(L, 1);
    if (held) host_gc(L);
  }
  lua_pushvalue(L, lua_upvalueindex(1)); /* luv's own __gc */
  lua_pushvalue(L, 1);
  lua_call(L, 1, 0);
  return 0;
}

/* Load luv (on the host's loop) and put the guard in front of its handles' __gc. */
static void guard_luv(lua_State *L) {
  int top = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luv");
  lua_call(L, 1, 0);
  if (lua_getfield(L, LUA_REGISTRYINDEX, "uv_handle") == LUA_TTABLE) { /* {[mt] = true} */
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
      lua_pop(L, 1);
      if (!lua_istable(L, -1)) continue;
      if (lua_getfield(L, -1, "__gc") == LUA_TFUNCTION) {
        lua_pushcclosure(L, luv_gc_guard, 1);
        lua_setfield(L, -2, "__gc");
      } else {
        lua_pop(L, 1);
      }
    }
  }
  lua_settop(L, top);
}

/* SIGINT: the interpreter's own handler (lua.c's turns it into an "interrupted!" error at the
 * next Lua instruction), and a wake-up of the loop, so that a wait blocked in it returns and
 * that instruction comes. Where SIGINT had its default action, the sessions end with the
 * process, as with SIGTERM. */
static struct sigaction interpreter_sigint;

static void module_sigint(int sig) {
  if (wake_open) uv_async_send(&module_host->wake);
  if (interpreter_sigint.sa_handler == SIG_IGN) return;
  if (interpreter_sigint.sa_handler == SIG_DFL) {
    luxec_procs_kill_all();
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  if (interpreter_sigint.sa_flags & SA_SIGINFO) return; /* (no such handler in lua.c) */
  interpreter_sigint.sa_handler(sig);
}

static void chain_sigint(void) {
  struct sigaction sa;
  if (sigaction(SIGINT, NULL, &interpreter_sigint) != 0) return;
  if (interpreter_sigint.sa_handler == module_sigint) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = module_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, NULL);
}

/* luv was loaded before luxec and made its own loop: luxec's host takes its place, which is
 * possible only while nothing is on it. Its __gc is dropped (the host closes the loop luv
 * now runs on). */
static void take_luv_loop(lua_State *L, uv_loop_t *old) {
  int handles = 0;
  uv_walk(old, count_handle, &handles);
  if (handles > 0 || uv_loop_alive(old))
    luaL_error(L,
               "luxec.core: luv's loop already has %d handle(s): require \"luxec\" before "
               "making luv handles (luxec and luv share one loop, luxec's)",
               handles);
  int top = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "luv");
  if (lua_istable(L, -1) && lua_getfield(L, -1, "_loop") == LUA_TUSERDATA) {
    lua_pushnil(L);
    lua_setmetatable(L, -2);
  }
  lua_settop(L, top);
  int rc = uv_loop_close(old);
  if (rc != 0) luaL_error(L, "luxec.core: cannot take over luv's loop: %s", uv_strerror(rc));
}

static int start_host(lua_State *L, lua_State *main_L) {
  uv_loop_t *luv_own = luv_loop(main_L);
  if (luv_own != NULL) { /* luv was loaded first: on its own loop, or on an embedder's */
    int top = lua_gettop(L);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "luv");
    int own = lua_istable(L, -1) && lua_getfield(L, -1, "_loop") == LUA_TUSERDATA &&
              lua_touserdata(L, -1) == (void *)luv_own;
    lua_settop(L, top);
    if (!own)
      return luaL_error(L,
                        "luxec.core: luv runs on a loop this program made, and luxec needs "
                        "its own: run the program with the luxec binary instead");
  }
  if (luv_own != NULL) take_luv_loop(L, luv_own);
  luxec_host *h = calloc(1, sizeof *h);
  if (h == NULL) return luaL_error(L, "luxec.core: not enough memory");
  if (luxec_host_loop_init(h) != 0) {
    free(h);
    return luaL_error(L, "luxec.core: cannot create the event loop");
  }
  luxec_host_process_setup(0);
  chain_sigint();
  luxec_host_attach(h, main_L);
  module_host = h;
  wake_open = 1;
  /* the sessions end with the state: a userdata whose __gc closes the host, kept for ever */
  lua_newuserdatauv(L, 0, 0);
  lua_newtable(L);
  lua_pushcfunction(L, host_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "luxec.host");
  guard_luv(L);
  return 0;
}

/* The module's one exported symbol. Inside the luxec binary (which preloads its own core)
 * it is the binary's core that answers. */
__attribute__((visibility("default"))) int luaopen_luxec_core(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_CFunction preloaded =
      lua_getfield(L, -1, "luxec.core") == LUA_TFUNCTION ? lua_tocfunction(L, -1) : NULL;
  lua_pop(L, 2);
  if (preloaded != NULL && preloaded != luaopen_luxec_core && preloaded != luxec_open_core)
    return preloaded(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *main_L = lua_tothread(L, -1);
  lua_pop(L, 1);
  if (module_host != NULL && module_host->L != NULL && module_host->L != main_L)
    return luaL_error(L,
                      "luxec.core: another Lua state of this process already hosts luxec "
                      "(one host per process)");
  if (module_host == NULL || module_host->L == NULL) start_host(L, main_L);
  return luxec_open_core(L);
}
