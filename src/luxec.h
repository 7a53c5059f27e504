/* luxec.h: what the host's C files share. */
#ifndef LUXEC_H
#define LUXEC_H

#include <limits.h>
#include <lua.h>
#include <lauxlib.h>
#include <uv.h>

#include <stddef.h>

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif

/* One host per process: the loop, the Lua state and what happened on the loop. */
typedef struct luxec_host {
  uv_loop_t loop;
  lua_State *L;
  uv_async_t wake;     /* woken from signal handlers so a blocked loop returns */
  int callback_errors; /* errors raised in loop callbacks and tasks */
  void *luv;           /* luv's context of L (luv_ctx_t *): how luv runs the loop */
  int ignore_env;      /* -E: LUXEC_LUA_DIR, LUA_PATH and LUA_INIT are ignored */
  char lua_dir[PATH_MAX];
} luxec_host;

/* host.c */
#include <sys/resource.h>
extern struct rlimit luxec_nofile_original; /* what children get back before exec */
extern int luxec_nofile_raised;
int luxec_host_init(luxec_host *h, int ignore_env);
void luxec_host_process_setup(int sigint);           /* signals, SIGPIPE, open-file limit, atexit */
int luxec_host_loop_init(luxec_host *h);             /* the loop and its wake-up handle */
void luxec_host_attach(luxec_host *h, lua_State *L); /* registry, luv's loop, preloads */
void luxec_host_signals(void);
void luxec_host_close(luxec_host *h);
luxec_host *luxec_gethost(lua_State *L);
int luxec_host_run(luxec_host *h, uv_run_mode mode);
int luxec_traceback(lua_State *L);
int luxec_docall(lua_State *L, int narg, int nres);
int luxec_report(lua_State *L, int status);
void luxec_report_callback_error(lua_State *L, const char *where, const char *msg);
int luxec_callback_pcall(lua_State *L, int nargs, int nresults, int flags);

/* paths.c */
void luxec_find_lua_dir(char *out, size_t size, int ignore_env);
void luxec_set_paths(lua_State *L, const char *lua_dir);

/* core.c */
int luxec_open_core(lua_State *L);    /* the luxec.core table */
void luxec_open_outbuf(lua_State *L); /* outbuf_lua.c */
void luxec_open_frame(lua_State *L);  /* frame.c */
void luxec_open_http(lua_State *L);   /* http_parse.c: core.http_parser */
/* outbuf_lua.c: what read(cursor) and snapshot() of any handle return, from its buffer:
 * data, next_cursor, dropped, gap_at / head, tail, dropped, total (4 values each) */
struct outbuf;
int luxec_push_read(lua_State *L, const struct outbuf *b, uint64_t from);
int luxec_push_snapshot(lua_State *L, const struct outbuf *b);
void luxec_open_stream(lua_State *L); /* stream.c: sessions over a descriptor */
void luxec_streams_shutdown(void);
void luxec_open_relay(lua_State *L);    /* relay.c: core.relay */
void luxec_core_shutdown(lua_State *L); /* ends every session the core started */
void luxec_procs_kill_all(void);        /* the same without Lua, for exit paths */

/* screen.c, term.c: luxec.screen_native and luxec.term, preloaded by the host */
int luaopen_luxec_screen(lua_State *L);
int luaopen_luxec_term(lua_State *L);
void luxec_term_restore(void); /* async-signal-safe: give a raw terminal back */

/* repl.c */
void luxec_repl(luxec_host *h);

/* Push nil, "ENOENT: no such file or directory", "ENOENT" for a negative uv error code or an
 * errno value; returns 3. */
int luxec_push_error(lua_State *L, int err);
/* The name ("ENOENT", "ENOEXEC") and the text of a negative uv error code or an errno value:
 * libuv's, else the C library's (an errno libuv has no name for). The result lives until the
 * next call. */
const char *luxec_err_name(int err);
const char *luxec_strerror(int err);

#endif
