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

/* Where the search looked, for the message when luxec's modules are not there. */
static int lua_dir_from_env = 0;
static char lua_dir_beside[PATH_MAX * 2];

/* The directory beside the executable, as a person would write it: /opt/x/bin/luxec gives
 * /opt/x/share/luxec/lua (not /opt/x/bin/../share/luxec/lua). */
static void beside_executable(const char *exe_dir, char *out, size_t size) {
  const char *rel = LUXEC_REL_LUA_DIR;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", exe_dir);
  while (strncmp(rel, "../", 3) == 0) {
    char *slash = strrchr(dir, '/');
    if (slash == NULL) break;
    *slash = '\0';
    rel += 3;
  }
  snprintf(out, size, "%s/%s", dir, rel);
}

/* LUXEC_LUA_DIR (unless -E), else ../share/luxec/lua beside the executable (true both in the
 * build tree and after install), else the compile-time prefix. */
void luxec_find_lua_dir(char *out, size_t size, int ignore_env) {
  const char *env = ignore_env ? NULL : getenv("LUXEC_LUA_DIR");
  lua_dir_from_env = env != NULL && env[0] != '\0';
  lua_dir_beside[0] = '\0';
  if (lua_dir_from_env) {
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
      beside_executable(exe, lua_dir_beside, sizeof lua_dir_beside);
      if (realpath(candidate, resolved) != NULL && has_init(resolved)) {
        snprintf(out, size, "%s", resolved);
        return;
      }
    }
  }
  snprintf(out, size, "%s", LUXEC_DEFAULT_LUA_DIR);
}

/* The last of package.searchers while luxec's own modules are missing: for luxec and
 * luxec.* it adds to require's "module not found" message where luxec looked and how to
 * fix it (upvalue 1). */
static int missing_modules_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (strcmp(name, "luxec") != 0 && strncmp(name, "luxec.", 6) != 0) return 0;
  lua_pushvalue(L, lua_upvalueindex(1));
  return 1;
}

static void add_missing_modules_hint(lua_State *L, const char *lua_dir) {
  if (lua_dir_from_env)
    lua_pushfstring(L,
                    "luxec's own Lua modules are not where LUXEC_LUA_DIR points: no "
                    "luxec/init.lua in %s. Set LUXEC_LUA_DIR to the directory that holds "
                    "luxec/init.lua (the lua/ folder of luxec's source, or "
                    "PREFIX/share/luxec/lua of an install), or unset it.",
                    lua_dir);
  else
    lua_pushfstring(L,
                    "luxec's own Lua modules are missing: no luxec/init.lua in %s (beside "
                    "the executable) nor in %s (the prefix it was built for). Install luxec "
                    "with its modules (cmake --install build --prefix PREFIX puts them in "
                    "PREFIX/share/luxec/lua), or set LUXEC_LUA_DIR to the directory that "
                    "holds luxec/init.lua.",
                    lua_dir_beside[0] ? lua_dir_beside
                                      : "(the executable's own path is "
                                        "unknown)",
                    lua_dir);
  lua_pushcclosure(L, missing_modules_searcher, 1); /* searcher */
  lua_getglobal(L, "package");                      /* searcher package */
  lua_getfield(L, -1, "searchers");                 /* searcher package searchers */
  lua_rotate(L, -3, -1);                            /* package searchers searcher */
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  lua_pop(L, 2);
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
  lua_getglobal(L, "package"); /* package */
  lua_getfield(L, -1, field);  /* package path */
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
  luaL_pushresult(&b);        /* package path newpath */
  lua_setfield(L, -3, field); /* package path */
  lua_pop(L, 2);
}

void luxec_set_paths(lua_State *L, const char *lua_dir) {
  char prefix[PATH_MAX * 2 + 32];
  snprintf(prefix, sizeof prefix, "%s/?.lua;%s/?/init.lua", lua_dir, lua_dir);
  filter_path(L, "path", prefix);
  filter_path(L, "cpath", "");
  if (!has_init(lua_dir)) add_missing_modules_hint(L, lua_dir);
}
