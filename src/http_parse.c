/* http_parse.c: core.http_parser(max_header_bytes), an HTTP/1.x request parser for Lua on
 * top of the http-parser library (libhttp-parser). It only cuts bytes into events; what a
 * request may be (methods, limits on the body, timeouts) is decided in Lua
 * (luxec.mcp.http_conn).
 *
 *   p = core.http_parser(16384)
 *   consumed, events, err_name, err_text = p:feed(bytes)
 *
 * events is an array of {kind, ...}: {"begin"}, {"url", s}, {"field", s}, {"value", s}
 * (a header's name and value may each come in several pieces), {"head", method, major, minor,
 * content_length (-1: none), chunked, upgrade}, {"body", s}, {"done", keep_alive}. The
 * parser stops after each complete request ("done"): `consumed` says how many bytes it
 * took, and the rest is fed again once the request is answered. A malformed request gives
 * err_name (http-parser's, such as "HPE_INVALID_METHOD" or "HPE_HEADER_OVERFLOW") and
 * err_text; the parser is unusable after that. */
#include "luxec.h"

#include <http_parser.h>

#include "dynlib.h"
#include <stdint.h>
#include <string.h>

/* libhttp_parser, loaded by the first parser (dynlib.h): a host that serves no HTTP does not
 * map it */
static struct {
  __typeof__(http_method_str) *http_method_str;
  __typeof__(http_should_keep_alive) *http_should_keep_alive;
  __typeof__(http_parser_pause) *http_parser_pause;
  __typeof__(http_parser_execute) *http_parser_execute;
  __typeof__(http_errno_name) *http_errno_name;
  __typeof__(http_errno_description) *http_errno_description;
  __typeof__(http_parser_set_max_header_size) *http_parser_set_max_header_size;
  __typeof__(http_parser_init) *http_parser_init;
} hp;

static const dynlib_sym hp_syms[] = {
    {"http_method_str", (void **)&hp.http_method_str},
    {"http_should_keep_alive", (void **)&hp.http_should_keep_alive},
    {"http_parser_pause", (void **)&hp.http_parser_pause},
    {"http_parser_execute", (void **)&hp.http_parser_execute},
    {"http_errno_name", (void **)&hp.http_errno_name},
    {"http_errno_description", (void **)&hp.http_errno_description},
    {"http_parser_set_max_header_size", (void **)&hp.http_parser_set_max_header_size},
    {"http_parser_init", (void **)&hp.http_parser_init},
};

static dynlib hp_lib = {
    "libhttp_parser.so.2.9", hp_syms, sizeof hp_syms / sizeof hp_syms[0], NULL, {0}};

#define PARSER_MT "luxec.http_parser"

typedef struct {
  http_parser p;
  lua_State *L; /* set during feed: the events table is on top of its stack */
  int n;        /* events so far in this feed */
} parser_t;

static parser_t *from(http_parser *p) {
  return (parser_t *)((char *)p - offsetof(parser_t, p));
}

/* Start an event {kind, ...}: the new table is left on top of the stack. */
static void event(parser_t *ps, const char *kind) {
  lua_State *L = ps->L;
  lua_createtable(L, 4, 0);
  lua_pushstring(L, kind);
  lua_rawseti(L, -2, 1);
}

static void commit(parser_t *ps) {
  lua_rawseti(ps->L, -2, ++ps->n);
}

static int ev_plain(http_parser *p, const char *kind) {
  parser_t *ps = from(p);
  event(ps, kind);
  commit(ps);
  return 0;
}

static int ev_data(http_parser *p, const char *kind, const char *at, size_t len) {
  parser_t *ps = from(p);
  event(ps, kind);
  lua_pushlstring(ps->L, at, len);
  lua_rawseti(ps->L, -2, 2);
  commit(ps);
  return 0;
}

static int on_begin(http_parser *p) {
  return ev_plain(p, "begin");
}
static int on_url(http_parser *p, const char *at, size_t len) {
  return ev_data(p, "url", at, len);
}
static int on_field(http_parser *p, const char *at, size_t len) {
  return ev_data(p, "field", at, len);
}
static int on_value(http_parser *p, const char *at, size_t len) {
  return ev_data(p, "value", at, len);
}
static int on_body(http_parser *p, const char *at, size_t len) {
  return ev_data(p, "body", at, len);
}

static int on_head(http_parser *p) {
  parser_t *ps = from(p);
  lua_State *L = ps->L;
  event(ps, "head");
  lua_pushstring(L, hp.http_method_str((enum http_method)p->method));
  lua_rawseti(L, -2, 2);
  lua_pushinteger(L, p->http_major);
  lua_rawseti(L, -2, 3);
  lua_pushinteger(L, p->http_minor);
  lua_rawseti(L, -2, 4);
  /* no Content-Length: the library's "unknown" (all ones) */
  if (p->content_length == UINT64_MAX || p->content_length > (uint64_t)INT64_MAX)
    lua_pushinteger(L, -1);
  else
    lua_pushinteger(L, (lua_Integer)p->content_length);
  lua_rawseti(L, -2, 5);
  lua_pushboolean(L, (p->flags & F_CHUNKED) != 0);
  lua_rawseti(L, -2, 6);
  lua_pushboolean(L, p->upgrade);
  lua_rawseti(L, -2, 7);
  commit(ps);
  return 0;
}

static int on_done(http_parser *p) {
  parser_t *ps = from(p);
  event(ps, "done");
  lua_pushboolean(ps->L, hp.http_should_keep_alive(p));
  lua_rawseti(ps->L, -2, 2);
  commit(ps);
  hp.http_parser_pause(p, 1); /* one request at a time */
  return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_begin,
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_head,
    .on_body = on_body,
    .on_message_complete = on_done,
};

static int hp_feed(lua_State *L) {
  parser_t *ps = luaL_checkudata(L, 1, PARSER_MT);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  if (len == 0) return luaL_argerror(L, 2, "no bytes to parse");
  if (ps->L) return luaL_error(L, "http parser: feed called from inside feed");
  lua_settop(L, 2);
  lua_newtable(L); /* 3: the events */
  ps->L = L;
  ps->n = 0;
  hp.http_parser_pause(&ps->p, 0);
  size_t used = hp.http_parser_execute(&ps->p, &settings, data, len);
  ps->L = NULL;
  enum http_errno err = HTTP_PARSER_ERRNO(&ps->p);
  lua_pushinteger(L, (lua_Integer)used);
  lua_pushvalue(L, 3);
  if (err == HPE_OK || err == HPE_PAUSED) return 2;
  lua_pushstring(L, hp.http_errno_name(err));
  lua_pushstring(L, hp.http_errno_description(err));
  return 4;
}

/* core.http_parser(max_header_bytes): a request parser; the limit applies to the request
 * line and headers together (HPE_HEADER_OVERFLOW past it). */
static int core_http_parser(lua_State *L) {
  lua_Integer max = luaL_checkinteger(L, 1);
  luaL_argcheck(L, max >= 256 && max <= (lua_Integer)UINT32_MAX, 1,
                "max_header_bytes must be between 256 and 2^32-1");
  if (dynlib_load(&hp_lib) != 0) return luaL_error(L, "http parser: %s", hp_lib.why);
  /* the library keeps this limit process-wide: every parser of this process shares it */
  hp.http_parser_set_max_header_size((uint32_t)max);
  parser_t *ps = lua_newuserdatauv(L, sizeof *ps, 0);
  memset(ps, 0, sizeof *ps);
  hp.http_parser_init(&ps->p, HTTP_REQUEST);
  luaL_setmetatable(L, PARSER_MT);
  return 1;
}

void luxec_open_http(lua_State *L) {
  static const luaL_Reg methods[] = {{"feed", hp_feed}, {NULL, NULL}};
  if (luaL_newmetatable(L, PARSER_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, core_http_parser);
  lua_setfield(L, -2, "http_parser");
}
