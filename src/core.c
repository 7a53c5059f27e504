/* core.c: the luxec.core module table. Each native object adds its functions here. */
#include "luxec.h"
#include "proc.h"
#include "cgroup.h"

#include <stdio.h>

void luxec_open_base64(lua_State *L);   /* base64.c */
void luxec_open_peercred(lua_State *L); /* peercred.c */

/* core.report_error(msg [, where]): report an error that happened outside the main chunk (a task, a
 * callback run from Lua) the way loop-callback errors are reported, and count it for the
 * exit status. */
static int core_report_error(lua_State *L) {
  const char *where = luaL_optstring(L, 2, "task");
  luxec_report_callback_error(L, where, luaL_tolstring(L, 1, NULL));
  return 0;
}

/* core.callback_errors() -> how many errors loop callbacks and tasks raised so far. */
static int core_callback_errors(lua_State *L) {
  luxec_host *h = luxec_gethost(L);
  lua_pushinteger(L, h ? h->callback_errors : 0);
  return 1;
}

static void count_handle(uv_handle_t *handle, void *arg) {
  lua_State *L = arg;
  if (uv_is_closing(handle) || !uv_is_active(handle) || !uv_has_ref(handle)) return;
  lua_pushstring(L, uv_handle_type_name(uv_handle_get_type(handle)));
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
}

/* core.active_handles() -> {"timer", "pipe", ...}: the handles that keep the loop alive.
 * Safe with every kind of handle on the loop (luv's uv.walk is not: it assumes all are its). */
static int core_active_handles(lua_State *L) {
  lua_newtable(L);
  uv_walk(&luxec_gethost(L)->loop, count_handle, L);
  return 1;
}

static const luaL_Reg core_functions[] = {{"active_handles", core_active_handles},
                                          {"callback_errors", core_callback_errors},
                                          {"report_error", core_report_error},
                                          {NULL, NULL}};

void luxec_core_shutdown(lua_State *L) {
  (void)L;
  luxec_procs_shutdown();
  proc_wait_shutdown();
  luxec_streams_shutdown();
  cg_shutdown();
}

/* The module table (the host preloads it as luxec.core; module.c's luaopen_luxec_core returns
 * it from a plain Lua interpreter). */
int luxec_open_core(lua_State *L) {
  luaL_newlib(L, core_functions);
  luxec_open_proc(L);
  luxec_open_outbuf(L);
  luxec_open_http(L);
  luxec_open_stream(L);
  luxec_open_relay(L);
  luxec_open_base64(L);
  luxec_open_peercred(L);
  luxec_open_frame(L);
  lua_pushstring(L, LUXEC_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushstring(L, LUA_RELEASE);
  lua_setfield(L, -2, "lua_version");
  lua_pushstring(L, uv_version_string());
  lua_setfield(L, -2, "uv_version");
  return 1;
}
