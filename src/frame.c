/* frame.c: the binary framing of the exec-server protocol (luxec's extension, asked for at
 * `initialize`): every message is a frame, a 5-byte header (a kind, then the length of the
 * body, big-endian) and the body. Output and input bytes travel raw, never as base64 in JSON.
 *   kind 1  a JSON message: the body is its text
 *   kind 2  process output: seq u64, offset u64, stream u8, id length u8, id, the bytes
 *   kind 3  a process/write request: request id u64, id length u8, id, the bytes
 * Lua:
 *   core.framer(max) -> f          a decoder; bodies over `max` bytes are an error
 *   f:feed(data)                   bytes as they arrive (kept until a frame is whole)
 *   f:next() -> "json", text | "output", id, seq, stream, offset, data
 *             | "write", request_id, id, data | "error", message | nil (no whole frame yet)
 *   f:buffered() -> bytes held
 *   core.frame_json(text) -> the frame
 *   core.frame_output(id, seq, stream, offset, length) -> the header (the bytes follow it)
 *   core.frame_write(request_id, id, length) -> the header (the bytes follow it)
 * The encoders return only headers for the bulk kinds, so that a writer sends header and bytes
 * as two buffers of one write (no copy of the bytes). */
#include "luxec.h"

#include <stdlib.h>
#include <string.h>

#define FRAMER_MT "luxec.framer"
#define HEADER 5

enum { KIND_JSON = 1, KIND_OUTPUT = 2, KIND_WRITE = 3 };

typedef struct {
  char *buf;
  size_t len, cap, pos; /* bytes held: buf[pos..len) */
  size_t max;
  int failed;
} framer;

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static void put_u64(unsigned char *p, uint64_t v) {
  put_u32(p, (uint32_t)(v >> 32));
  put_u32(p + 4, (uint32_t)v);
}

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_u64(const unsigned char *p) {
  return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

static int framer_new(lua_State *L) {
  lua_Integer max = luaL_checkinteger(L, 1);
  luaL_argcheck(L, max > 0 && max <= 0xffffffffLL, 1, "a size from 1 to 4294967295 expected");
  framer *f = lua_newuserdatauv(L, sizeof *f, 0);
  memset(f, 0, sizeof *f);
  f->max = (size_t)max;
  luaL_setmetatable(L, FRAMER_MT);
  return 1;
}

static int framer_feed(lua_State *L) {
  framer *f = luaL_checkudata(L, 1, FRAMER_MT);
  size_t n;
  const char *data = luaL_checklstring(L, 2, &n);
  if (f->pos > 0) { /* what was taken goes first */
    memmove(f->buf, f->buf + f->pos, f->len - f->pos);
    f->len -= f->pos;
    f->pos = 0;
  }
  if (f->len + n > f->cap) {
    size_t cap = f->cap ? f->cap : 65536;
    while (cap < f->len + n) cap *= 2;
    char *b = realloc(f->buf, cap);
    if (b == NULL) return luaL_error(L, "framer: out of memory (%d bytes)", (int)cap);
    f->buf = b;
    f->cap = cap;
  }
  memcpy(f->buf + f->len, data, n);
  f->len += n;
  return 0;
}

static int fail(lua_State *L, framer *f, const char *fmt, lua_Integer v) {
  f->failed = 1;
  lua_pushliteral(L, "error");
  lua_pushfstring(L, fmt, v);
  return 2;
}

static int framer_next(lua_State *L) {
  framer *f = luaL_checkudata(L, 1, FRAMER_MT);
  if (f->failed) return 0;
  size_t held = f->len - f->pos;
  if (held < HEADER) return 0;
  const unsigned char *h = (const unsigned char *)f->buf + f->pos;
  uint32_t size = get_u32(h + 1);
  if (size > f->max) return fail(L, f, "a frame of %I bytes is over the limit", (lua_Integer)size);
  if (held < HEADER + (size_t)size) return 0;
  const unsigned char *b = h + HEADER;
  const char *body = (const char *)b;
  f->pos += HEADER + (size_t)size;
  switch (h[0]) {
    case KIND_JSON:
      lua_pushliteral(L, "json");
      lua_pushlstring(L, body, size);
      return 2;
    case KIND_OUTPUT: {
      if (size < 18 || size < 18u + b[17])
        return fail(L, f, "an output frame of %I bytes is too short", (lua_Integer)size);
      size_t idlen = b[17];
      lua_pushliteral(L, "output");
      lua_pushlstring(L, body + 18, idlen);
      lua_pushinteger(L, (lua_Integer)get_u64(b));
      lua_pushinteger(L, b[16]);
      lua_pushinteger(L, (lua_Integer)get_u64(b + 8));
      lua_pushlstring(L, body + 18 + idlen, size - 18 - idlen);
      return 6;
    }
    case KIND_WRITE: {
      if (size < 9 || size < 9u + b[8])
        return fail(L, f, "a write frame of %I bytes is too short", (lua_Integer)size);
      size_t idlen = b[8];
      lua_pushliteral(L, "write");
      lua_pushinteger(L, (lua_Integer)get_u64(b));
      lua_pushlstring(L, body + 9, idlen);
      lua_pushlstring(L, body + 9 + idlen, size - 9 - idlen);
      return 4;
    }
    default: return fail(L, f, "a frame of unknown kind %I", (lua_Integer)h[0]);
  }
}

static int framer_buffered(lua_State *L) {
  framer *f = luaL_checkudata(L, 1, FRAMER_MT);
  lua_pushinteger(L, (lua_Integer)(f->len - f->pos));
  return 1;
}

static int framer_gc(lua_State *L) {
  framer *f = luaL_checkudata(L, 1, FRAMER_MT);
  free(f->buf);
  f->buf = NULL;
  f->len = f->cap = f->pos = 0;
  return 0;
}

static void check_body(lua_State *L, size_t size) {
  if (size > 0xffffffffu) luaL_error(L, "a frame of %I bytes is too big", (lua_Integer)size);
}

static int frame_json(lua_State *L) {
  size_t n;
  const char *text = luaL_checklstring(L, 1, &n);
  check_body(L, n);
  luaL_Buffer b;
  unsigned char *o = (unsigned char *)luaL_buffinitsize(L, &b, HEADER + n);
  o[0] = KIND_JSON;
  put_u32(o + 1, (uint32_t)n);
  memcpy(o + HEADER, text, n);
  luaL_pushresultsize(&b, HEADER + n);
  return 1;
}

static const char *check_id(lua_State *L, int arg, size_t *len) {
  const char *id = luaL_checklstring(L, arg, len);
  luaL_argcheck(L, *len <= 255, arg, "a process id of at most 255 bytes expected");
  return id;
}

static int frame_output(lua_State *L) {
  size_t idlen;
  const char *id = check_id(L, 1, &idlen);
  lua_Integer seq = luaL_checkinteger(L, 2), stream = luaL_checkinteger(L, 3);
  lua_Integer offset = luaL_checkinteger(L, 4), length = luaL_checkinteger(L, 5);
  luaL_argcheck(L, stream == 1 || stream == 2, 3, "1 or 2 expected");
  luaL_argcheck(L, length >= 0, 5, "a length >= 0 expected");
  check_body(L, 18 + idlen + (size_t)length);
  unsigned char o[HEADER + 18 + 255];
  o[0] = KIND_OUTPUT;
  put_u32(o + 1, (uint32_t)(18 + idlen + (size_t)length));
  put_u64(o + 5, (uint64_t)seq);
  put_u64(o + 13, (uint64_t)offset);
  o[21] = (unsigned char)stream;
  o[22] = (unsigned char)idlen;
  memcpy(o + 23, id, idlen);
  lua_pushlstring(L, (const char *)o, HEADER + 18 + idlen);
  return 1;
}

static int frame_write(lua_State *L) {
  lua_Integer req = luaL_checkinteger(L, 1);
  size_t idlen;
  const char *id = check_id(L, 2, &idlen);
  lua_Integer length = luaL_checkinteger(L, 3);
  luaL_argcheck(L, length >= 0, 3, "a length >= 0 expected");
  check_body(L, 9 + idlen + (size_t)length);
  unsigned char o[HEADER + 9 + 255];
  o[0] = KIND_WRITE;
  put_u32(o + 1, (uint32_t)(9 + idlen + (size_t)length));
  put_u64(o + 5, (uint64_t)req);
  o[13] = (unsigned char)idlen;
  memcpy(o + 14, id, idlen);
  lua_pushlstring(L, (const char *)o, HEADER + 9 + idlen);
  return 1;
}

void luxec_open_frame(lua_State *L) {
  if (luaL_newmetatable(L, FRAMER_MT)) {
    static const luaL_Reg methods[] = {
        {"feed", framer_feed}, {"next", framer_next}, {"buffered", framer_buffered}, {NULL, NULL}};
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, framer_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, framer_new);
  lua_setfield(L, -2, "framer");
  lua_pushcfunction(L, frame_json);
  lua_setfield(L, -2, "frame_json");
  lua_pushcfunction(L, frame_output);
  lua_setfield(L, -2, "frame_output");
  lua_pushcfunction(L, frame_write);
  lua_setfield(L, -2, "frame_write");
}
