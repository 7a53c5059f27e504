/* proc_limits.c: a session's resource limits between Lua and the core: the numbers the policy
 * computed (sandbox.limits of spawn), and what status() says about them. */
#include "proc.h"

#include <string.h>

static long long field_int(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int ok = 0;
  lua_Integer v = lua_isnil(L, -1) ? 0 : lua_tointegerx(L, -1, &ok);
  if (!lua_isnil(L, -1) && (!ok || v <= 0))
    luaL_error(L, "bad sandbox field 'limits.%s' to 'spawn' (positive integer expected)", k);
  lua_pop(L, 1);
  return (long long)v;
}

int proc_limits_parse(lua_State *L, int opts, cg_limits *out) {
  memset(out, 0, sizeof *out);
  lua_getfield(L, opts, "sandbox"); /* sandbox */
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  lua_getfield(L, -1, "best_effort"); /* sandbox best_effort */
  out->best_effort = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, -1, "limits"); /* sandbox limits */
  if (!lua_isnil(L, -1)) {
    luaL_checktype(L, -1, LUA_TTABLE);
    int t = lua_gettop(L);
    out->memory = field_int(L, t, "memory");
    out->pids = field_int(L, t, "pids");
    out->cpu_quota_us = field_int(L, t, "cpu_quota_us");
    out->cpu_period_us = field_int(L, t, "cpu_period_us");
    if ((out->cpu_quota_us > 0) != (out->cpu_period_us > 0))
      luaL_error(L,
                 "bad sandbox field 'limits' to 'spawn' (cpu_quota_us and cpu_period_us go "
                 "together)");
  }
  lua_pop(L, 2);
  return out->memory > 0 || out->pids > 0 || out->cpu_quota_us > 0;
}

static void set_int(lua_State *L, const char *k, long long v) {
  if (v < 0) return; /* the kernel does not say */
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static const char *via_name(int via) {
  return via == CGL_CGROUP2   ? "cgroup2"
         : via == CGL_CGROUP1 ? "cgroup1"
         : via == CGL_RLIMIT  ? "rlimit"
                              : "none";
}

/* report.limits = {memory = {max, via, hits, oom, oom_kills, peak, current}, pids = {max, via,
 * hits, peak, current}, cpu = {max, quota_us, period_us, via, periods, throttled,
 * throttled_usec}}, read now; a limit that is weaker than asked adds a line to
 * report.degraded. */
void proc_limits_report(lua_State *L, proc *p, int report) {
  if (!p->limited) return;
  const cg_limits_state *st = p->lim;
  const cg_limits *w = &st->want;
  cg_limits_stats s;
  cgl_read(st, &p->cg, &s);
  lua_createtable(L, 0, 3); /* limits */
  if (w->memory > 0) {
    lua_createtable(L, 0, 8);
    set_int(L, "max", w->memory);
    lua_pushstring(L, via_name(st->via[CGL_MEMORY]));
    lua_setfield(L, -2, "via");
    if (st->via[CGL_MEMORY] == CGL_RLIMIT) {
      lua_pushliteral(L, "RLIMIT_DATA");
      lua_setfield(L, -2, "rlimit");
    }
    set_int(L, "hits", s.mem_hits);
    set_int(L, "oom", s.mem_oom);
    set_int(L, "oom_kills", s.mem_oom_kills);
    set_int(L, "peak", s.mem_peak);
    set_int(L, "current", s.mem_current);
    lua_setfield(L, -2, "memory");
  }
  if (w->pids > 0) {
    lua_createtable(L, 0, 5);
    set_int(L, "max", w->pids);
    lua_pushstring(L, via_name(st->via[CGL_PIDS]));
    lua_setfield(L, -2, "via");
    set_int(L, "hits", s.pids_hits);
    set_int(L, "peak", s.pids_peak);
    set_int(L, "current", s.pids_current);
    lua_setfield(L, -2, "pids");
  }
  if (w->cpu_quota_us > 0) {
    lua_createtable(L, 0, 7);
    lua_pushnumber(L, (lua_Number)w->cpu_quota_us / (lua_Number)w->cpu_period_us);
    lua_setfield(L, -2, "max");
    set_int(L, "quota_us", w->cpu_quota_us);
    set_int(L, "period_us", w->cpu_period_us);
    lua_pushstring(L, via_name(st->via[CGL_CPU]));
    lua_setfield(L, -2, "via");
    set_int(L, "periods", s.cpu_periods);
    set_int(L, "throttled", s.cpu_throttled);
    set_int(L, "throttled_usec", s.cpu_throttled_usec);
    lua_setfield(L, -2, "cpu");
  }
  lua_setfield(L, report, "limits");
  lua_getfield(L, report, "degraded"); /* degraded */
  if (lua_istable(L, -1)) {
    for (int i = 0; i < CGL_N; i++) {
      if (st->degraded[i][0] == '\0') continue;
      lua_pushstring(L, st->degraded[i]);
      lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
    }
  }
  lua_pop(L, 1);
}
