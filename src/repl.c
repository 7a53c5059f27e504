/* repl.c: the interactive prompt. It reads input from the shared loop (readline's callback
 * interface on a terminal, plain lines otherwise), so timers and sessions keep running while
 * it waits; each complete chunk runs as top-level code, outside the loop, like lua.c's. */
#include "luxec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#define PROMPT "> "
#define PROMPT2 ">> "

typedef struct repl {
  uv_poll_t poll;        /* first member: callbacks get the repl back by a cast */
  uv_signal_t sigint;
  luxec_host *h;
  int tty;               /* readline on a terminal, else plain lines */
  int pollable;
  int eof;
  char *pending;         /* an incomplete chunk waiting for more lines */
  char *ready;           /* a complete chunk to run */
  char in[4096];         /* plain mode: bytes read but not yet split into lines */
  size_t in_len;
} repl;

static repl *active = NULL; /* readline's line handler takes no user data */

/* Chunk source for a line: an expression is tried as "return <line>" first (lua.c). */
static int incomplete(lua_State *L, const char *src) {
  int status = luaL_loadbuffer(L, src, strlen(src), "=stdin");
  int result = 0;
  if (status == LUA_ERRSYNTAX) {
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    static const char eof_mark[] = "<eof>";
    size_t mark = sizeof eof_mark - 1;
    result = len >= mark && strcmp(msg + len - mark, eof_mark) == 0;
  }
  lua_pop(L, 1);
  return result;
}

static char *join(const char *a, const char *b) {
  size_t la = a ? strlen(a) : 0, lb = strlen(b);
  char *s = malloc(la + lb + 2);
  if (s == NULL) return NULL;
  if (a != NULL) {
    memcpy(s, a, la);
    s[la++] = '\n';
  }
  memcpy(s + la, b, lb + 1);
  return s;
}

static const char *prompt(repl *r) {
  return r->pending ? PROMPT2 : PROMPT;
}

/* One line of input: complete the pending chunk or keep waiting for more. */
static void take_line(repl *r, const char *line) {
  char *chunk = join(r->pending, line);
  free(r->pending);
  r->pending = NULL;
  if (chunk == NULL) return;
  if (incomplete(r->h->L, chunk)) {
    r->pending = chunk;
  } else {
    r->ready = chunk;
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
  if (!r->eof && r->ready == NULL) rl_callback_handler_install(prompt(r), readline_cb);
}

/* Plain mode: take every complete line that is buffered, up to the first complete chunk. */
static void split_lines(repl *r) {
  while (r->ready == NULL) {
    char *nl = memchr(r->in, '\n', r->in_len);
    if (nl == NULL) {
      if (r->in_len == sizeof r->in - 1 || (r->eof && r->in_len > 0)) nl = r->in + r->in_len;
      else return;
    }
    size_t n = (size_t)(nl - r->in);
    char line[sizeof r->in];
    memcpy(line, r->in, n);
    line[n] = '\0';
    size_t used = n < r->in_len ? n + 1 : n;
    memmove(r->in, r->in + used, r->in_len - used);
    r->in_len -= used;
    take_line(r, line);
    if (r->ready == NULL) {
      fputs(prompt(r), stdout);
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
  free(r->pending);
  r->pending = NULL;
  if (r->tty) {
    rl_free_line_state();
    rl_replace_line("", 0);
    rl_callback_handler_remove();
    fputs("^C\n", stdout);
    fflush(stdout);
    rl_callback_handler_install(PROMPT, readline_cb);
  } else {
    fputs("\n" PROMPT, stdout);
    fflush(stdout);
  }
}

static void run_chunk(repl *r, const char *chunk) {
  lua_State *L = r->h->L;
  int base = lua_gettop(L);
  char *ret = malloc(strlen(chunk) + 8);
  int status = LUA_ERRMEM;
  if (ret != NULL) {
    sprintf(ret, "return %s", chunk);
    status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
    free(ret);
  }
  if (status != LUA_OK) {
    if (status != LUA_ERRMEM) lua_pop(L, 1);
    status = luaL_loadbuffer(L, chunk, strlen(chunk), "=stdin");
  }
  if (status == LUA_OK) status = luxec_docall(L, 0, LUA_MULTRET);
  if (status == LUA_OK) {
    int n = lua_gettop(L) - base;
    if (n > 0) { /* print the results with the global print */
      luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
      lua_getglobal(L, "print");
      lua_insert(L, base + 1);
      if (lua_pcall(L, n, 0, 0) != LUA_OK) {
        fprintf(stderr, "luxec: error calling 'print' (%s)\n", lua_tostring(L, -1));
        lua_pop(L, 1);
      }
    }
  } else {
    luxec_report(L, status);
  }
  lua_settop(L, base);
  fflush(stdout);
}

void luxec_repl(luxec_host *h) {
  repl *r = calloc(1, sizeof *r);
  if (r == NULL) return;
  r->h = h;
  r->tty = isatty(STDIN_FILENO);
  r->pollable = uv_poll_init(&h->loop, &r->poll, STDIN_FILENO) == 0;
  if (r->pollable) r->poll.data = NULL;
  uv_signal_init(&h->loop, &r->sigint);
  r->sigint.data = NULL;
  active = r;
  if (r->tty) {
    rl_readline_name = "luxec";
    rl_callback_handler_install(PROMPT, readline_cb);
  } else {
    fputs(PROMPT, stdout);
    fflush(stdout);
  }
  while (!r->eof || r->ready != NULL) {
    if (r->ready == NULL && r->pollable) {
      uv_poll_start(&r->poll, UV_READABLE, poll_cb);
      uv_signal_start(&r->sigint, sigint_cb, SIGINT);
      while (r->ready == NULL && !r->eof) luxec_host_run(h, UV_RUN_ONCE);
      uv_poll_stop(&r->poll);
      uv_signal_stop(&r->sigint); /* libuv leaves SIGINT at SIG_DFL: the host's again */
      luxec_host_signals();
    } else if (r->ready == NULL) {
      if (r->tty) rl_callback_read_char();
      else read_plain(r);
    }
    if (r->ready != NULL) {
      char *chunk = r->ready;
      r->ready = NULL;
      if (r->tty) add_history(chunk);
      run_chunk(r, chunk);
      free(chunk);
      if (r->tty && !r->eof) {
        rl_callback_handler_install(prompt(r), readline_cb);
      } else if (!r->tty) {
        split_lines(r);
        if (r->ready == NULL && !r->eof) {
          fputs(prompt(r), stdout);
          fflush(stdout);
        }
      }
    }
  }
  if (r->tty) rl_callback_handler_remove();
  fputs("\n", stdout);
  fflush(stdout);
  if (r->pollable) uv_close((uv_handle_t *)&r->poll, NULL);
  uv_close((uv_handle_t *)&r->sigint, NULL);
  luxec_host_run(h, UV_RUN_NOWAIT); /* let the closes finish before r is freed */
  free(r->pending);
  active = NULL;
  free(r);
}
