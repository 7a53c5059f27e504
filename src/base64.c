/* base64.c: standard base64 (RFC 4648, padded) for the byte chunks of the exec-server
 * protocol (luxec serve, luxec.remote): core.base64_encode(s) and core.base64_decode(t) ->
 * bytes | nil, message saying what is wrong and where. */
#include "luxec.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_encode(lua_State *L) {
  size_t len;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 1, &len);
  size_t out_len = (len + 2) / 3 * 4;
  luaL_Buffer b;
  char *o = luaL_buffinitsize(L, &b, out_len);
  size_t i = 0, k = 0;
  for (; i + 2 < len; i += 3) {
    uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
    o[k++] = alphabet[v >> 18];
    o[k++] = alphabet[(v >> 12) & 63];
    o[k++] = alphabet[(v >> 6) & 63];
    o[k++] = alphabet[v & 63];
  }
  if (i < len) {
    uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < len ? (uint32_t)s[i + 1] << 8 : 0);
    o[k++] = alphabet[v >> 18];
    o[k++] = alphabet[(v >> 12) & 63];
    o[k++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
    o[k++] = '=';
  }
  luaL_pushresultsize(&b, k);
  return 1;
}

static signed char values[256];

static void init_values(void) {
  static int done = 0;
  if (done) return;
  for (int i = 0; i < 256; i++) values[i] = -1;
  for (int i = 0; i < 64; i++) values[(unsigned char)alphabet[i]] = (signed char)i;
  done = 1;
}

static int b64_fail(lua_State *L, const char *fmt, lua_Integer n) {
  lua_pushnil(L);
  lua_pushfstring(L, fmt, n);
  return 2;
}

static int b64_decode(lua_State *L) {
  size_t len;
  const unsigned char *t = (const unsigned char *)luaL_checklstring(L, 1, &len);
  if (len % 4 != 0)
    return b64_fail(L, "not base64 (its length %I is not a multiple of 4)", (lua_Integer)len);
  init_values();
  luaL_Buffer b;
  char *o = luaL_buffinitsize(L, &b, len / 4 * 3);
  size_t k = 0;
  for (size_t i = 0; i < len; i += 4) {
    int a = values[t[i]], c1 = values[t[i + 1]], c2 = values[t[i + 2]], c3 = values[t[i + 3]];
    int last = i + 4 == len;
    int pad2 = last && t[i + 2] == '=' && t[i + 3] == '=';
    int pad1 = last && !pad2 && t[i + 3] == '=';
    int bad = a < 0 ? 1 : c1 < 0 ? 2 : (c2 < 0 && !pad2) ? 3 : (c3 < 0 && !pad1 && !pad2) ? 4 : 0;
    if (bad) {
      lua_settop(L, 1); /* drop the buffer */
      return b64_fail(L, "not base64 (a bad character at %I)", (lua_Integer)(i + bad));
    }
    uint32_t v = (uint32_t)a << 18 | (uint32_t)c1 << 12;
    if (!pad2) v |= (uint32_t)c2 << 6;
    if (!pad1 && !pad2) v |= (uint32_t)c3;
    o[k++] = (char)(v >> 16);
    if (!pad2) o[k++] = (char)((v >> 8) & 255);
    if (!pad1 && !pad2) o[k++] = (char)(v & 255);
  }
  luaL_pushresultsize(&b, k);
  return 1;
}

void luxec_open_base64(lua_State *L) {
  lua_pushcfunction(L, b64_encode);
  lua_setfield(L, -2, "base64_encode");
  lua_pushcfunction(L, b64_decode);
  lua_setfield(L, -2, "base64_decode");
}
