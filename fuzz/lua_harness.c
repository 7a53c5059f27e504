/* lua_harness.c: the libFuzzer harness of the Lua targets (fuzz_truncate, fuzz_mcp_line,
 * fuzz_config; FUZZ_TARGET names which). One Lua 5.4 state lives as long as the process; it
 * loads fuzz/lua/<target>.lua once, which returns the function that runs one input and checks
 * the properties. An error out of it is a failed property (or a Lua error that escaped the
 * product): it is printed with a traceback and the harness aborts, which libFuzzer reports as
 * a crash with the input saved.
 *
 * libFuzzer sees only the C it instrumented, and the product here is Lua run by an
 * uninstrumented interpreter, so a line hook feeds Lua's own coverage into libFuzzer's extra
 * counters: each (previous line, line) pair bumps a counter. The checkers run their own code
 * with lines off (fuzz.trace, fuzz/lua/lib/traced.lua), and only lines of luxec's modules
 * count (not a config file's, not a fake's), so what counts is the product's.
 * A count hook bounds the instructions one input may take (a config file is Lua, and may
 * loop), and the allocator bounds the Lua heap; both surface as Lua errors. */
#include "luxec.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lualib.h>
#include <luv/luv.h>

#ifndef FUZZ_TARGET
#error "define FUZZ_TARGET (truncate, mcp_line or config)"
#endif

#define NCOUNTERS (1 << 16)
#define HOOK_COUNT 1000                    /* instructions between two count hooks */
#define DEFAULT_BUDGET (200 * 1000 * 1000) /* instructions one input may take */
#define HEAP_LIMIT ((size_t)512 << 20)
/* The chunk names of luxec's modules. A config file is Lua too, and its own lines (or a
 * checker's) are no coverage of the product: counted, they would make the fuzzer collect
 * inputs for having many distinct lines. */
#define PRODUCT_SOURCE "@" FUZZ_SOURCE_DIR "/lua/luxec/"

/* libFuzzer reads this section as coverage, like the counters of instrumented C. */
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t lua_counters[NCOUNTERS];

/* The harness's own functions that run for every Lua line or allocation are left out of the
 * coverage instrumentation: their branches are not the product's, and they would cost a third
 * of the run time. */
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))

static lua_State *L;
static int run_ref = LUA_NOREF;
static uint32_t prev_loc, last_src;
static const lua_State *last_thread; /* the call frame last_src is the chunk name of */
static const void *last_ci;
static int last_counts; /* whether last_src is a luxec module (only their lines count) */
static uint64_t steps, budget = DEFAULT_BUDGET;
static int exceeded;
static size_t heap_used;
static char tmp_dir[PATH_MAX];

/* The Lua heap, bounded: a request past the limit fails as Lua's "not enough memory". */
NO_COVERAGE static void *fuzz_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  if (ptr == NULL) osize = 0; /* then osize only tells the kind of object */
  if (nsize == 0) {
    free(ptr);
    heap_used -= osize;
    return NULL;
  }
  if (nsize > osize && heap_used + (nsize - osize) > HEAP_LIMIT) return NULL;
  void *p = realloc(ptr, nsize);
  if (p == NULL) return NULL;
  heap_used = heap_used - osize + nsize;
  return p;
}

/* A short hash of a chunk's name: its tail, where the file names differ. The pointer would
 * do within one process, but a config file loaded anew each input gets a new string. */
NO_COVERAGE static uint32_t source_hash(const char *s, size_t len) {
  size_t from = len > 32 ? len - 32 : 0;
  uint32_t h = 2166136261u;
  for (size_t i = from; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

NO_COVERAGE static void hook(lua_State *l, lua_Debug *ar) {
  if (ar->event == LUA_HOOKCOUNT) {
    steps += HOOK_COUNT;
    /* once per budget spent: the checker that sees the error must be able to go on */
    if (steps > (uint64_t)(exceeded + 1) * budget) {
      exceeded++;
      luaL_error(l, "fuzz: instruction budget exceeded (%d M)", (int)(budget / 1000000));
    }
    return;
  }
  /* lua_getinfo costs as much as the rest of the hook: ask it only when the line is in
   * another call frame (i_ci, lua_Debug's private part) than the last one. A frame reused by
   * a call made on the line a call returned to keeps the first callee's name: the counters
   * stay deterministic, which is what libFuzzer needs of them. */
  if (l != last_thread || ar->i_ci != last_ci) {
    if (!lua_getinfo(l, "S", ar)) return;
    last_src = source_hash(ar->source, ar->srclen);
    last_counts = ar->srclen > sizeof PRODUCT_SOURCE - 1 &&
                  memcmp(ar->source, PRODUCT_SOURCE, sizeof PRODUCT_SOURCE - 1) == 0;
    last_thread = l;
    last_ci = ar->i_ci;
  }
  if (!last_counts) return;
  uint32_t loc = last_src ^ ((uint32_t)ar->currentline * 2654435761u);
  uint8_t *c = &lua_counters[(loc ^ prev_loc) % NCOUNTERS];
  if (*c != UINT8_MAX) (*c)++;
  prev_loc = loc >> 1;
}

static int traceback(lua_State *l) {
  const char *msg = lua_tostring(l, 1);
  if (msg == NULL) msg = lua_pushfstring(l, "(error object is a %s value)", luaL_typename(l, 1));
  luaL_traceback(l, l, msg, 1);
  return 1;
}

static int panic(lua_State *l) {
  fprintf(stderr, "fuzz_%s: Lua panic: %s\n", FUZZ_TARGET, lua_tostring(l, -1));
  abort();
}

/* luv's callbacks: an error in one is a bug here (nothing of a fuzz input runs on the loop
 * unless the product put it there), so report it and stop. */
static int callback_pcall(lua_State *l, int nargs, int nresults, int flags) {
  (void)flags;
  int base = lua_gettop(l) - nargs;
  lua_pushcfunction(l, traceback);
  lua_insert(l, base);
  if (lua_pcall(l, nargs, nresults, base) != LUA_OK) {
    fprintf(stderr, "fuzz_%s: error in a loop callback: %s\n", FUZZ_TARGET, lua_tostring(l, -1));
    abort();
  }
  lua_remove(l, base);
  return nresults == LUA_MULTRET ? lua_gettop(l) - base + 1 : nresults;
}

static int open_luv(lua_State *l) {
  luv_set_callback(l, callback_pcall);
  return luaopen_luv(l);
}

/* fuzz.exceeded() -> whether this input ran out of its instruction budget. */
static int f_exceeded(lua_State *l) {
  lua_pushboolean(l, exceeded);
  return 1;
}

/* fuzz.set_budget(n): instructions one input may take (a target's own measure). */
static int f_set_budget(lua_State *l) {
  budget = (uint64_t)luaL_checkinteger(l, 1);
  return 0;
}

/* fuzz.trace(on): whether lines count as coverage (on by default). A checker turns it off for
 * its own code: its loops cost the line hook's time and tell nothing about the product. */
static int f_trace(lua_State *l) {
  int mask = lua_toboolean(l, 1) ? LUA_MASKLINE | LUA_MASKCOUNT : LUA_MASKCOUNT;
  lua_sethook(l, hook, mask, HOOK_COUNT);
  return 0;
}

static const luaL_Reg native_functions[] = {
    {"exceeded", f_exceeded}, {"set_budget", f_set_budget}, {"trace", f_trace}, {NULL, NULL}};

/* require("fuzz.native"): what the checkers get from C. */
static int open_native(lua_State *l) {
  luaL_newlib(l, native_functions);
  luxec_open_outbuf(l);       /* .outbuf(head, tail): src/outbuf.c, as core.outbuf */
  luxec_open_frame(l);        /* .framer, .frame_json, ...: src/frame.c, as in core */
  lua_pushstring(l, tmp_dir); /* .tmpdir: for the files a target writes */
  lua_setfield(l, -2, "tmpdir");
  return 1;
}

/* A directory of this process's own for the files a target writes; gone at exit. */
static void remove_tmp_dir(void) {
  DIR *d = opendir(tmp_dir);
  if (d == NULL) return;
  struct dirent *e;
  char path[PATH_MAX + 256];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", tmp_dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(tmp_dir);
}

static void die(const char *what) {
  const char *why = L != NULL ? lua_tostring(L, -1) : strerror(errno);
  fprintf(stderr, "fuzz_%s: %s: %s\n", FUZZ_TARGET, what, why ? why : "?");
  abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/luxec-fuzz-%s-XXXXXX", FUZZ_TARGET);
  if (mkdtemp(tmp_dir) == NULL) die("mkdtemp");
  atexit(remove_tmp_dir);

  L = lua_newstate(fuzz_alloc, NULL);
  if (L == NULL) die("lua_newstate");
  lua_atpanic(L, panic);
  lua_pushboolean(L, 1); /* LUA_PATH and LUA_CPATH of the environment do not count */
  lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  luaL_openlibs(L);

  lua_getglobal(L, "package");                      /* package */
  lua_pushstring(L, FUZZ_SOURCE_DIR "/lua/?.lua;"); /* luxec's modules, then the checkers' */
  lua_pushstring(L, FUZZ_SOURCE_DIR "/lua/?/init.lua;");
  lua_pushstring(L, FUZZ_SOURCE_DIR "/fuzz/lua/?.lua");
  lua_concat(L, 3);
  lua_setfield(L, -2, "path");
  lua_getfield(L, -1, "preload"); /* package preload */
  lua_pushcfunction(L, open_luv);
  lua_setfield(L, -2, "luv");
  lua_pushcfunction(L, open_native);
  lua_setfield(L, -2, "fuzz.native");
  lua_pop(L, 2);

  lua_sethook(L, hook, LUA_MASKLINE | LUA_MASKCOUNT, HOOK_COUNT);
  lua_pushcfunction(L, traceback);
  if (luaL_loadfile(L, FUZZ_SOURCE_DIR "/fuzz/lua/" FUZZ_TARGET ".lua") != LUA_OK) {
    die("cannot load the checker");
  }
  if (lua_pcall(L, 0, 1, 1) != LUA_OK) die("the checker failed to start");
  if (!lua_isfunction(L, -1)) {
    lua_pushstring(L, "it must return the function that runs one input");
    die("fuzz/lua/" FUZZ_TARGET ".lua");
  }
  run_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, 0);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  steps = 0;
  exceeded = 0;
  prev_loc = 0;
  last_thread = NULL;
  lua_pushcfunction(L, traceback);              /* tb */
  lua_rawgeti(L, LUA_REGISTRYINDEX, run_ref);   /* tb run */
  lua_pushlstring(L, (const char *)data, size); /* tb run input */
  if (lua_pcall(L, 1, 0, 1) != LUA_OK) {
    fprintf(stderr, "fuzz_%s: %s\n", FUZZ_TARGET, lua_tostring(L, -1));
    remove_tmp_dir(); /* abort() skips atexit */
    abort();
  }
  lua_settop(L, 0);
  /* Finalizers (a session's __gc, say) run within the input that made the garbage, so the
   * coverage an input shows does not depend on the inputs before it. */
  lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
