/* paths.c: where luxec finds its own Lua code, and a module search path without "./". */
#include "luxec.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int has_init(const char *dir) {
  char probe[PATH_MAX];
  int n = snprintf(probe, sizeof probe, "%s/luxec/init.lua", dir);
  return n > 0 && (size_t)n < sizeof probe && access(probe, R_OK) == 0;
}

/* LUXEC_LUA_DIR (unless -E), else ../share/luxec/lua beside the executable (true both in the
 * build tree and after install), else the compile-time prefix. */
void luxec_find_lua_dir(char *out, size_t size, int ignore_env) {
  const char *env = ignore_env ? NULL : getenv("LUXEC_LUA_DIR");
  if (env != NULL && env[0] != '\0') {
    snprintf(out, size, "%s", env);
    return;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) {
      *slash = '\0';
      char candidate[PATH_MAX * 2];
      char resolved[PATH_MAX];
      snprintf(candidate, sizeof candidate, "%s/%s", exe, LUXEC_REL_LUA_DIR);
      if (realpath(candidate, resolved) != NULL && has_init(resolved)) {
        snprintf(out, size, "%s", resolved);
        return;
      }
    }
  }
  snprintf(out, size, "%s", LUXEC_DEFAULT_LUA_DIR);
}

/* The entries Lua's defaults add for the working directory. A user's own relative entries
 * (from LUA_PATH) are theirs to keep. */
static int is_cwd_entry(const char *entry, size_t len) {
  static const char *const cwd_entries[] = {"./?.lua", "./?/init.lua", "./?.so", NULL};
  for (int i = 0; cwd_entries[i] != NULL; i++)
    if (strlen(cwd_entries[i]) == len && memcmp(entry, cwd_entries[i], len) == 0) return 1;
  return 0;
}

/* Rebuild package[field] without the working-directory entries; prefix goes
 * first. luxec runs inside untrusted directories, so "./?.lua" must never load code. */
static void filter_path(lua_State *L, const char *field, const char *prefix) {
  luaL_Buffer b;
  lua_getglobal(L, "package");                 /* package */
  lua_getfield(L, -1, field);                  /* package path */
  const char *path = lua_tostring(L, -1);
  luaL_buffinit(L, &b);
  luaL_addstring(&b, prefix);
  while (path != NULL && *path != '\0') {
    const char *end = strchr(path, ';');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    if (len > 0 && !is_cwd_entry(path, len)) {
      if (luaL_bufflen(&b) > 0) luaL_addchar(&b, ';');
      luaL_addlstring(&b, path, len);
    }
    path += len + (end ? 1 : 0);
  }
  luaL_pushresult(&b);                         /* package path newpath */
  lua_setfield(L, -3, field);                  /* package path */
  lua_pop(L, 2);
}

void luxec_set_paths(lua_State *L, const char *lua_dir) {
  char prefix[PATH_MAX * 2 + 32];
  snprintf(prefix, sizeof prefix, "%s/?.lua;%s/?/init.lua", lua_dir, lua_dir);
  filter_path(L, "path", prefix);
  filter_path(L, "cpath", "");
}
