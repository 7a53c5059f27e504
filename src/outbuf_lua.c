/* outbuf_lua.c: core.outbuf(head, tail), the output buffer on its own, so its accounting can
 * be checked (and fuzzed) against a model without a process in between. */
#include "luxec.h"
#include "outbuf.h"

#include <errno.h>
#include <string.h>

#define OUTBUF_MT "luxec.outbuf"

static outbuf *check(lua_State *L) {
  return luaL_checkudata(L, 1, OUTBUF_MT);
}

static int ob_push(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  outbuf_push(check(L), s, len);
  return 0;
}

static void push_view(lua_State *L, const outbuf_view *v) {
  int parts = (v->len[0] != 0) + (v->len[1] != 0) + (v->len[2] != 0);
  if (parts <= 1) { /* the common case (nothing, or one piece): no buffer in between */
    for (int i = 0; i < 3; i++)
      if (v->len[i]) {
        lua_pushlstring(L, v->seg[i], v->len[i]);
        return;
      }
    lua_pushliteral(L, "");
    return;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < 3; i++)
    if (v->len[i]) luaL_addlstring(&b, v->seg[i], v->len[i]);
  luaL_pushresult(&b);
}

int luxec_push_read(lua_State *L, const outbuf *ob, uint64_t from) {
  outbuf_view v;
  outbuf_view_from(ob, from, &v);
  push_view(L, &v);
  lua_pushinteger(L, (lua_Integer)v.end);
  lua_pushinteger(L, (lua_Integer)v.dropped);
  lua_pushinteger(L, (lua_Integer)v.gap_at);
  return 4;
}

int luxec_push_snapshot(lua_State *L, const outbuf *ob) {
  lua_pushlstring(L, ob->head ? ob->head : "", ob->head_len);
  outbuf_view v;
  outbuf_view_from(ob, ob->total - ob->tail_len, &v);
  push_view(L, &v);
  lua_pushinteger(L, (lua_Integer)outbuf_dropped(ob));
  lua_pushinteger(L, (lua_Integer)ob->total);
  return 4;
}

/* ob:read(cursor) -> data, next_cursor, dropped, gap_at */
static int ob_read(lua_State *L) {
  outbuf *ob = check(L);
  lua_Integer from = luaL_checkinteger(L, 2);
  luaL_argcheck(L, from >= 0, 2, "cursor must be >= 0");
  return luxec_push_read(L, ob, (uint64_t)from);
}

/* ob:snapshot() -> head, tail, dropped, total */
static int ob_snapshot(lua_State *L) {
  return luxec_push_snapshot(L, check(L));
}

/* ob:read_range(offset, length) -> bytes | nil, "ERANGE" (p:read_range without a log) */
static int ob_read_range(lua_State *L) {
  outbuf *ob = check(L);
  lua_Integer off = luaL_checkinteger(L, 2), len = luaL_checkinteger(L, 3);
  luaL_argcheck(L, off >= 0, 2, "offset must be >= 0");
  luaL_argcheck(L, len >= 0 && len <= (1 << 30), 3, "length must be 0..1 GiB");
  luaL_Buffer b;
  char *dst = luaL_buffinitsize(L, &b, (size_t)len);
  int64_t n = outbuf_read_range(ob, (uint64_t)off, (size_t)len, dst);
  if (n < 0) {
    lua_pushnil(L);
    lua_pushstring(L, n == -ERANGE ? "ERANGE" : strerror((int)-n));
    return 2;
  }
  luaL_pushresultsize(&b, (size_t)n);
  return 1;
}

static int ob_gc(lua_State *L) {
  outbuf_free(check(L));
  return 0;
}

static int core_outbuf(lua_State *L) {
  lua_Integer head = luaL_checkinteger(L, 1), tail = luaL_checkinteger(L, 2);
  luaL_argcheck(L, head >= 0, 1, "head must be >= 0");
  luaL_argcheck(L, tail >= 0, 2, "tail must be >= 0");
  outbuf *ob = lua_newuserdatauv(L, sizeof *ob, 0);
  outbuf_init(ob, (size_t)head, (size_t)tail);
  luaL_setmetatable(L, OUTBUF_MT);
  return 1;
}

static const luaL_Reg ob_methods[] = {{"push", ob_push},
                                      {"read", ob_read},
                                      {"read_range", ob_read_range},
                                      {"snapshot", ob_snapshot},
                                      {NULL, NULL}};

void luxec_open_outbuf(lua_State *L) {
  if (luaL_newmetatable(L, OUTBUF_MT)) {
    lua_pushcfunction(L, ob_gc);
    lua_setfield(L, -2, "__gc");
    luaL_newlib(L, ob_methods);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, core_outbuf);
  lua_setfield(L, -2, "outbuf");
}
