/* repl.c: the interactive prompt's terminal side. It reads input from the shared loop
 * (libedit's readline callback interface on a terminal, plain lines otherwise), so timers and
 * sessions keep running while it waits; each complete chunk runs as top-level code, outside
 * the loop, as lua.c's do. What a line means, prompts, evaluation, printing, history and
 * completion are luxec.cli.repl's (lua/luxec/cli/repl.lua): R.start(native), R.line(line) -> ready,
 * R.run(), R.prompt(), R.cancel(), R.complete(text, line, start) -> {candidates}, R.leave(). */
#include "luxec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>
#include <editline/readline.h>

/* libedit is loaded when a prompt opens on a terminal, not with the host: a script or a
 * server never maps it, nor libtinfo, libbsd and libmd that come with it (~370 KiB of the
 * resident memory of every host). Its names below go through this table. */
static struct editline {
  void *lib;
  int (*add_history)(const char *);
  void (*clear_history)(void);
  void (*callback_read_char)(void);
  void (*callback_handler_install)(const char *, rl_vcpfunc_t *);
  void (*callback_handler_remove)(void);
  char **(*completion_matches)(const char *, rl_compentry_func_t *);
  void (*forced_update_display)(void);
  void (*replace_line)(const char *, int);
  void (*free_line_state)(void);
  const char **readline_name;
  char **line_buffer;
  const char **basic_word_break_characters;
  char **completer_word_break_characters;
  rl_completion_func_t **attempted_completion_function;
  int *attempted_completion_over;
  int *completion_append_character;
} ed;

/* Load libedit (once); 0, or -1 after saying why on stderr. */
static int editline_load(void) {
  if (ed.lib != NULL) return 0;
  static const char soname[] = "libedit.so.2";
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "luxec: no line editing (%s)\n", dlerror());
    return -1;
  }
  struct {
    const char *name;
    void **slot;
  } syms[] = {
      {"add_history", (void **)&ed.add_history},
      {"clear_history", (void **)&ed.clear_history},
      {"rl_callback_read_char", (void **)&ed.callback_read_char},
      {"rl_callback_handler_install", (void **)&ed.callback_handler_install},
      {"rl_callback_handler_remove", (void **)&ed.callback_handler_remove},
      {"rl_completion_matches", (void **)&ed.completion_matches},
      {"rl_forced_update_display", (void **)&ed.forced_update_display},
      {"rl_replace_line", (void **)&ed.replace_line},
      {"rl_free_line_state", (void **)&ed.free_line_state},
      {"rl_readline_name", (void **)&ed.readline_name},
      {"rl_line_buffer", (void **)&ed.line_buffer},
      {"rl_basic_word_break_characters", (void **)&ed.basic_word_break_characters},
      {"rl_completer_word_break_characters", (void **)&ed.completer_word_break_characters},
      {"rl_attempted_completion_function", (void **)&ed.attempted_completion_function},
      {"rl_attempted_completion_over", (void **)&ed.attempted_completion_over},
      {"rl_completion_append_character", (void **)&ed.completion_append_character},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    if ((*syms[i].slot = dlsym(lib, syms[i].name)) == NULL) {
      fprintf(stderr, "luxec: no line editing (%s has no %s)\n", soname, syms[i].name);
      dlclose(lib);
      memset(&ed, 0, sizeof ed);
      return -1;
    }
  }
  ed.lib = lib;
  return 0;
}

#define add_history ed.add_history
#define clear_history ed.clear_history
#define rl_callback_read_char ed.callback_read_char
#define rl_callback_handler_install ed.callback_handler_install
#define rl_callback_handler_remove ed.callback_handler_remove
#define rl_completion_matches ed.completion_matches
#define rl_forced_update_display ed.forced_update_display
#define rl_replace_line ed.replace_line
#define rl_free_line_state ed.free_line_state
#define rl_readline_name (*ed.readline_name)
#define rl_line_buffer (*ed.line_buffer)
#define rl_basic_word_break_characters (*ed.basic_word_break_characters)
#define rl_completer_word_break_characters (*ed.completer_word_break_characters)
#define rl_attempted_completion_function (*ed.attempted_completion_function)
#define rl_attempted_completion_over (*ed.attempted_completion_over)
#define rl_completion_append_character (*ed.completion_append_character)

/* The host's own C modules that luxec's Lua code loads by name (see luxec.screen). */

typedef struct repl {
  uv_poll_t poll; /* first member: callbacks get the repl back by a cast */
  uv_signal_t sigint;
  luxec_host *h;
  int mod_ref; /* the luxec.cli.repl module */
  int tty;     /* readline on a terminal, else plain lines */
  int pollable;
  int eof;
  int ready;     /* luxec.cli.repl holds a complete chunk to run */
  int waiting;   /* the line editor shows a line being typed while the loop runs */
  char in[4096]; /* plain mode: bytes read but not yet split into lines */
  size_t in_len;
} repl;

static repl *active = NULL;      /* readline's handlers take no user data */
static char **candidates = NULL; /* completion: what luxec.cli.repl offered, for the generator */
static size_t ncandidates = 0, next_candidate = 0;

/* Call R[name] with the nargs values on the stack; leaves nres results, or returns -1 after
 * reporting an error (a bug in luxec.cli.repl: the prompt keeps going). */
static int rcall(repl *r, const char *name, int nargs, int nres) {
  lua_State *L = r->h->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, luxec_traceback);         /* args handler */
  lua_rawgeti(L, LUA_REGISTRYINDEX, r->mod_ref); /* args handler R */
  lua_getfield(L, -1, name);                     /* args handler R fn */
  lua_remove(L, -2);                             /* args handler fn */
  lua_insert(L, base + 1);                       /* fn args handler */
  lua_insert(L, base + 1);                       /* handler fn args */
  int status = lua_pcall(L, nargs, nres, base + 1);
  lua_remove(L, base + 1);
  if (status != LUA_OK) {
    fprintf(stderr, "luxec: repl: %s\n", lua_tostring(L, -1));
    fflush(stderr);
    lua_settop(L, base);
    return -1;
  }
  return 0;
}

static char *prompt_copy(repl *r) {
  static char buf[256];
  snprintf(buf, sizeof buf, "> ");
  if (rcall(r, "prompt", 0, 1) == 0) {
    const char *p = lua_tostring(r->h->L, -1);
    if (p != NULL) snprintf(buf, sizeof buf, "%s", p);
    lua_pop(r->h->L, 1);
  }
  return buf;
}

/* One line of input: luxec.cli.repl completes its pending chunk or keeps waiting for more. */
static void take_line(repl *r, const char *line) {
  lua_pushstring(r->h->L, line);
  if (rcall(r, "line", 1, 1) == 0) {
    r->ready = lua_toboolean(r->h->L, -1);
    lua_pop(r->h->L, 1);
  }
}

static void readline_cb(char *line) {
  repl *r = active;
  if (line == NULL) {
    r->eof = 1;
  } else {
    take_line(r, line);
    free(line);
  }
  rl_callback_handler_remove();
  if (!r->eof && !r->ready) rl_callback_handler_install(prompt_copy(r), readline_cb);
}

static char *candidate_generator(const char *text, int state) {
  (void)text;
  if (state == 0) next_candidate = 0;
  if (next_candidate >= ncandidates) return NULL;
  return strdup(candidates[next_candidate++]);
}

static void free_candidates(void) {
  for (size_t i = 0; i < ncandidates; i++) free(candidates[i]);
  free(candidates);
  candidates = NULL;
  ncandidates = 0;
}

static char **complete_cb(const char *text, int start, int end) {
  repl *r = active;
  lua_State *L = r->h->L;
  (void)end;
  rl_attempted_completion_over = 1; /* never fall back to file names */
  rl_completion_append_character = '\0';
  free_candidates();
  lua_pushstring(L, text);
  lua_pushstring(L, rl_line_buffer);
  lua_pushinteger(L, start);
  if (rcall(r, "complete", 3, 1) != 0) return NULL;
  if (lua_istable(L, -1)) {
    size_t n = (size_t)luaL_len(L, -1);
    candidates = calloc(n + 1, sizeof *candidates);
    for (size_t i = 0; candidates != NULL && i < n; i++) {
      lua_rawgeti(L, -1, (lua_Integer)i + 1);
      const char *c = lua_tostring(L, -1);
      if (c != NULL && (candidates[ncandidates] = strdup(c)) != NULL) ncandidates++;
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (ncandidates == 0) return NULL;
  return rl_completion_matches(text, candidate_generator);
}

/* Plain mode: take every complete line that is buffered, up to the first complete chunk. */
static void split_lines(repl *r) {
  while (!r->ready) {
    char *nl = memchr(r->in, '\n', r->in_len);
    if (nl == NULL) {
      if (r->in_len == sizeof r->in - 1 || (r->eof && r->in_len > 0))
        nl = r->in + r->in_len;
      else
        return;
    }
    size_t n = (size_t)(nl - r->in);
    char line[sizeof r->in];
    memcpy(line, r->in, n);
    line[n] = '\0';
    size_t used = n < r->in_len ? n + 1 : n;
    memmove(r->in, r->in + used, r->in_len - used);
    r->in_len -= used;
    take_line(r, line);
    if (!r->ready) {
      fputs(prompt_copy(r), stdout);
      fflush(stdout);
    }
  }
}

static void read_plain(repl *r) {
  ssize_t n;
  do n = read(STDIN_FILENO, r->in + r->in_len, sizeof r->in - 1 - r->in_len);
  while (n < 0 && errno == EINTR);
  if (n <= 0) {
    if (n < 0 && errno == EAGAIN) return;
    r->eof = 1;
  } else {
    r->in_len += (size_t)n;
  }
  split_lines(r);
}

static void poll_cb(uv_poll_t *handle, int status, int events) {
  repl *r = (repl *)handle;
  (void)events;
  if (status < 0) {
    r->eof = 1;
  } else if (r->tty) {
    rl_callback_read_char();
  } else {
    read_plain(r);
  }
}

/* Ctrl-C at the prompt drops the line being typed and any pending chunk. */
static void sigint_cb(uv_signal_t *handle, int signum) {
  repl *r = container_of(handle, repl, sigint);
  (void)signum;
  rcall(r, "cancel", 0, 0);
  if (r->tty) {
    rl_free_line_state();
    rl_replace_line("", 0);
    rl_callback_handler_remove();
    fputs("^C\n", stdout);
    fflush(stdout);
    rl_callback_handler_install(prompt_copy(r), readline_cb);
  } else {
    fputs("\n", stdout);
    fputs(prompt_copy(r), stdout);
    fflush(stdout);
  }
}

/* native.add_history(entry): readline's in-memory history (luxec.cli.repl keeps the file) */
static int native_add_history(lua_State *L) {
  const char *entry = luaL_checkstring(L, 1);
  if (ed.lib != NULL) add_history(entry); /* (no line editor: no history to recall) */
  return 0;
}

static int native_clear_history(lua_State *L) {
  (void)L;
  if (ed.lib != NULL) clear_history();
  return 0;
}

/* native.hide_line() -> true when the line being typed was taken off the screen (output of
 * a background task is coming: it goes above the line, which show_line then redraws). */
static int native_hide_line(lua_State *L) {
  int hide = active != NULL && active->waiting;
  if (hide) {
    fputs("\r\033[K", stdout);
    fflush(stdout);
  }
  lua_pushboolean(L, hide);
  return 1;
}

/* native.show_line(): draw the prompt and the line being typed again. */
static int native_show_line(lua_State *L) {
  (void)L;
  if (active != NULL && active->waiting) {
    fflush(stdout);
    rl_forced_update_display();
  }
  return 0;
}

/* Load luxec.cli.repl and start it; 0, or -1 after reporting why not. */
static int start(repl *r) {
  lua_State *L = r->h->L;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luxec.cli.repl");
  if (luxec_report(L, luxec_docall(L, 1, 1)) != LUA_OK) return -1;
  r->mod_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_createtable(L, 0, 3); /* native */
  lua_pushboolean(L, r->tty);
  lua_setfield(L, -2, "tty");
  lua_pushcfunction(L, native_add_history);
  lua_setfield(L, -2, "add_history");
  lua_pushcfunction(L, native_clear_history);
  lua_setfield(L, -2, "clear_history");
  lua_pushcfunction(L, native_hide_line);
  lua_setfield(L, -2, "hide_line");
  lua_pushcfunction(L, native_show_line);
  lua_setfield(L, -2, "show_line");
  return rcall(r, "start", 1, 0);
}

void luxec_repl(luxec_host *h) {
  repl *r = calloc(1, sizeof *r);
  if (r == NULL) return;
  r->h = h;
  r->mod_ref = LUA_NOREF;
  r->tty = isatty(STDIN_FILENO) && editline_load() == 0; /* else plain lines */
  active = r;
  if (start(r) != 0) {
    if (r->mod_ref != LUA_NOREF) luaL_unref(h->L, LUA_REGISTRYINDEX, r->mod_ref);
    active = NULL;
    free(r);
    return;
  }
  /* libuv makes a polled descriptor non-blocking; on a terminal stdin and stdout are often
   * one open file, and a non-blocking stdout loses what a slow terminal does not take at
   * once (print of a long string). Reads only follow readiness, so blocking is fine. */
  int fl = fcntl(STDIN_FILENO, F_GETFL);
  r->pollable = uv_poll_init(&h->loop, &r->poll, STDIN_FILENO) == 0;
  if (r->pollable) r->poll.data = NULL;
  if (fl >= 0) fcntl(STDIN_FILENO, F_SETFL, fl);
  uv_signal_init(&h->loop, &r->sigint);
  r->sigint.data = NULL;
  if (r->tty) {
    rl_readline_name = "luxec";
    rl_attempted_completion_function = complete_cb;
    static char word_breaks[] = " \t\n\"'`@$><=;|&{(,+-*/%^~#[]";
    rl_basic_word_break_characters = word_breaks;
    rl_completer_word_break_characters = word_breaks;
    rl_callback_handler_install(prompt_copy(r), readline_cb);
  } else {
    fputs(prompt_copy(r), stdout);
    fflush(stdout);
  }
  while (!r->eof || r->ready) {
    if (!r->ready && r->pollable) {
      uv_poll_start(&r->poll, UV_READABLE, poll_cb);
      uv_signal_start(&r->sigint, sigint_cb, SIGINT);
      r->waiting = r->tty;
      while (!r->ready && !r->eof) luxec_host_run(h, UV_RUN_ONCE);
      r->waiting = 0;
      uv_poll_stop(&r->poll);
      uv_signal_stop(&r->sigint); /* libuv leaves SIGINT at SIG_DFL: the host's again */
      luxec_host_signals();
    } else if (!r->ready) {
      if (r->tty)
        rl_callback_read_char();
      else
        read_plain(r);
    }
    if (r->ready) {
      r->ready = 0;
      lua_State *L = h->L;
      lua_rawgeti(L, LUA_REGISTRYINDEX, r->mod_ref);
      lua_getfield(L, -1, "run");
      lua_remove(L, -2);
      luxec_report(L, luxec_docall(L, 0, 0)); /* Ctrl-C interrupts the chunk */
      fflush(stdout);
      if (r->tty && !r->eof) {
        rl_callback_handler_install(prompt_copy(r), readline_cb);
      } else if (!r->tty) {
        split_lines(r);
        if (!r->ready && !r->eof) {
          fputs(prompt_copy(r), stdout);
          fflush(stdout);
        }
      }
    }
  }
  if (r->tty) rl_callback_handler_remove();
  fputs("\n", stdout);
  lua_State *L = h->L; /* R.leave(): the prompt says which sessions it ends */
  lua_rawgeti(L, LUA_REGISTRYINDEX, r->mod_ref);
  lua_getfield(L, -1, "leave");
  lua_remove(L, -2);
  luxec_report(L, luxec_docall(L, 0, 0));
  fflush(stdout);
  if (r->pollable) uv_close((uv_handle_t *)&r->poll, NULL);
  uv_close((uv_handle_t *)&r->sigint, NULL);
  luxec_host_run(h, UV_RUN_NOWAIT); /* let the closes finish before r is freed */
  free_candidates();
  luaL_unref(h->L, LUA_REGISTRYINDEX, r->mod_ref);
  active = NULL;
  free(r);
}
