/* screen.c: luxec.screen, a terminal emulator (libvterm) fed with a session's output, so a
 * script can read what a full-screen program shows: the text of each line, the cursor, the
 * title. Mechanism only: when to feed it, and at what size, is luxec.screen's (Lua) choice. */
#include "luxec.h"

#include <stdlib.h>
#include <string.h>

#include <vterm.h>

#include "dynlib.h"

#define SCREEN_MT "luxec.screen"
/* libvterm, loaded by the first screen (dynlib.h): a host that renders none does not map it */
static struct {
  __typeof__(vterm_new) *vterm_new;
  __typeof__(vterm_free) *vterm_free;
  __typeof__(vterm_get_size) *vterm_get_size;
  __typeof__(vterm_set_size) *vterm_set_size;
  __typeof__(vterm_set_utf8) *vterm_set_utf8;
  __typeof__(vterm_input_write) *vterm_input_write;
  __typeof__(vterm_output_set_callback) *vterm_output_set_callback;
  __typeof__(vterm_obtain_screen) *vterm_obtain_screen;
  __typeof__(vterm_obtain_state) *vterm_obtain_state;
  __typeof__(vterm_screen_set_callbacks) *vterm_screen_set_callbacks;
  __typeof__(vterm_screen_enable_altscreen) *vterm_screen_enable_altscreen;
  __typeof__(vterm_screen_reset) *vterm_screen_reset;
  __typeof__(vterm_screen_flush_damage) *vterm_screen_flush_damage;
  __typeof__(vterm_screen_get_text) *vterm_screen_get_text;
  __typeof__(vterm_state_get_cursorpos) *vterm_state_get_cursorpos;
} vtlib;

static const dynlib_sym vt_syms[] = {
    {"vterm_new", (void **)&vtlib.vterm_new},
    {"vterm_free", (void **)&vtlib.vterm_free},
    {"vterm_get_size", (void **)&vtlib.vterm_get_size},
    {"vterm_set_size", (void **)&vtlib.vterm_set_size},
    {"vterm_set_utf8", (void **)&vtlib.vterm_set_utf8},
    {"vterm_input_write", (void **)&vtlib.vterm_input_write},
    {"vterm_output_set_callback", (void **)&vtlib.vterm_output_set_callback},
    {"vterm_obtain_screen", (void **)&vtlib.vterm_obtain_screen},
    {"vterm_obtain_state", (void **)&vtlib.vterm_obtain_state},
    {"vterm_screen_set_callbacks", (void **)&vtlib.vterm_screen_set_callbacks},
    {"vterm_screen_enable_altscreen", (void **)&vtlib.vterm_screen_enable_altscreen},
    {"vterm_screen_reset", (void **)&vtlib.vterm_screen_reset},
    {"vterm_screen_flush_damage", (void **)&vtlib.vterm_screen_flush_damage},
    {"vterm_screen_get_text", (void **)&vtlib.vterm_screen_get_text},
    {"vterm_state_get_cursorpos", (void **)&vtlib.vterm_state_get_cursorpos},
};

static dynlib vt_lib = {"libvterm.so.0", vt_syms, sizeof vt_syms / sizeof vt_syms[0], NULL, {0}};

#define ANSWER_MAX (64 * 1024) /* bytes of replies (cursor reports...) kept between feeds */

typedef struct screen {
  VTerm *vt;
  VTermScreen *vs;
  char title[256];
  int has_title;
  int altscreen;
  int cursor_visible;
  char *answer; /* what the terminal would send back to the program */
  size_t answer_len;
} screen;

typedef struct sbox {
  screen *s;
} sbox;

static screen *check_screen(lua_State *L, int idx) {
  sbox *b = luaL_checkudata(L, idx, SCREEN_MT);
  if (b->s == NULL) luaL_error(L, "attempt to use a closed screen");
  return b->s;
}

static int settermprop_cb(VTermProp prop, VTermValue *val, void *user) {
  screen *s = user;
  switch (prop) {
    case VTERM_PROP_TITLE:
      snprintf(s->title, sizeof s->title, "%s", val->string ? val->string : "");
      s->has_title = 1;
      break;
    case VTERM_PROP_ALTSCREEN: s->altscreen = val->boolean; break;
    case VTERM_PROP_CURSORVISIBLE: s->cursor_visible = val->boolean; break;
    default: break;
  }
  return 1;
}

static const VTermScreenCallbacks screen_callbacks = {
    .settermprop = settermprop_cb,
};

static void output_cb(const char *bytes, size_t len, void *user) {
  screen *s = user;
  if (s->answer_len + len > ANSWER_MAX) return; /* nobody collects them: stop keeping them */
  char *grown = realloc(s->answer, s->answer_len + len);
  if (grown == NULL) return;
  s->answer = grown;
  memcpy(s->answer + s->answer_len, bytes, len);
  s->answer_len += len;
}

static void check_size(lua_State *L, int idx, int *rows, int *cols) {
  lua_Integer r = luaL_checkinteger(L, idx), c = luaL_checkinteger(L, idx + 1);
  luaL_argcheck(L, r > 0 && r <= 1000, idx, "rows must be 1..1000");
  luaL_argcheck(L, c > 0 && c <= 1000, idx + 1, "cols must be 1..1000");
  *rows = (int)r;
  *cols = (int)c;
}

/* screen.new(rows, cols) -> a blank screen of that size */
static int screen_new(lua_State *L) {
  int rows, cols;
  check_size(L, 1, &rows, &cols);
  if (dynlib_load(&vt_lib) != 0) return luaL_error(L, "luxec.screen: %s", vt_lib.why);
  sbox *b = lua_newuserdatauv(L, sizeof *b, 0); /* created closed */
  b->s = NULL;
  luaL_setmetatable(L, SCREEN_MT);
  screen *s = calloc(1, sizeof *s);
  if (s == NULL) return luaL_error(L, "not enough memory");
  s->vt = vtlib.vterm_new(rows, cols);
  if (s->vt == NULL) {
    free(s);
    return luaL_error(L, "not enough memory");
  }
  s->cursor_visible = 1;
  vtlib.vterm_set_utf8(s->vt, 1);
  vtlib.vterm_output_set_callback(s->vt, output_cb, s);
  s->vs = vtlib.vterm_obtain_screen(s->vt);
  vtlib.vterm_screen_set_callbacks(s->vs, &screen_callbacks, s);
  vtlib.vterm_screen_enable_altscreen(s->vs, 1);
  vtlib.vterm_screen_reset(s->vs, 1);
  b->s = s;
  return 1;
}

/* s:feed(bytes) -> the bytes the terminal answered (cursor position reports, device
 * attributes...), "" mostly; whether to send them to the program is the caller's choice. */
static int screen_feed(lua_State *L) {
  screen *s = check_screen(L, 1);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  vtlib.vterm_input_write(s->vt, data, len);
  vtlib.vterm_screen_flush_damage(s->vs);
  lua_pushlstring(L, s->answer ? s->answer : "", s->answer_len);
  s->answer_len = 0;
  return 1;
}

/* s:lines() -> {line, ...}: the text of every row, trailing blanks removed */
static int screen_lines(lua_State *L) {
  screen *s = check_screen(L, 1);
  int rows, cols;
  vtlib.vterm_get_size(s->vt, &rows, &cols);
  size_t cap = (size_t)cols * VTERM_MAX_CHARS_PER_CELL * 4 + 1;
  char *buf = lua_newuserdatauv(L, cap, 0); /* buf */
  lua_createtable(L, rows, 0);              /* buf lines */
  for (int r = 0; r < rows; r++) {
    VTermRect rect = {.start_row = r, .end_row = r + 1, .start_col = 0, .end_col = cols};
    size_t n = vtlib.vterm_screen_get_text(s->vs, buf, cap - 1, rect);
    while (n > 0 && buf[n - 1] == ' ') n--;
    lua_pushlstring(L, buf, n);
    lua_rawseti(L, -2, r + 1);
  }
  return 1;
}

/* s:cursor() -> row, col (1-based), visible */
static int screen_cursor(lua_State *L) {
  screen *s = check_screen(L, 1);
  VTermPos pos;
  vtlib.vterm_state_get_cursorpos(vtlib.vterm_obtain_state(s->vt), &pos);
  lua_pushinteger(L, pos.row + 1);
  lua_pushinteger(L, pos.col + 1);
  lua_pushboolean(L, s->cursor_visible);
  return 3;
}

/* s:title() -> the window title the program set (OSC 0 or 2), or nil */
static int screen_title(lua_State *L) {
  screen *s = check_screen(L, 1);
  if (s->has_title)
    lua_pushstring(L, s->title);
  else
    lua_pushnil(L);
  return 1;
}

/* s:altscreen() -> whether the program switched to the alternate screen */
static int screen_altscreen(lua_State *L) {
  lua_pushboolean(L, check_screen(L, 1)->altscreen);
  return 1;
}

static int screen_size(lua_State *L) {
  screen *s = check_screen(L, 1);
  int rows, cols;
  vtlib.vterm_get_size(s->vt, &rows, &cols);
  lua_pushinteger(L, rows);
  lua_pushinteger(L, cols);
  return 2;
}

static int screen_resize(lua_State *L) {
  screen *s = check_screen(L, 1);
  int rows, cols;
  check_size(L, 2, &rows, &cols);
  vtlib.vterm_set_size(s->vt, rows, cols);
  vtlib.vterm_screen_flush_damage(s->vs);
  return 0;
}

static int screen_close(lua_State *L) {
  sbox *b = luaL_checkudata(L, 1, SCREEN_MT);
  if (b->s != NULL) {
    vtlib.vterm_free(b->s->vt);
    free(b->s->answer);
    free(b->s);
    b->s = NULL;
  }
  return 0;
}

static int screen_tostring(lua_State *L) {
  sbox *b = luaL_checkudata(L, 1, SCREEN_MT);
  if (b->s == NULL) {
    lua_pushliteral(L, "luxec.screen (closed)");
  } else {
    int rows, cols;
    vtlib.vterm_get_size(b->s->vt, &rows, &cols);
    lua_pushfstring(L, "luxec.screen (%dx%d)", rows, cols);
  }
  return 1;
}

static const luaL_Reg screen_methods[] = {
    {"altscreen", screen_altscreen}, {"close", screen_close}, {"cursor", screen_cursor},
    {"feed", screen_feed},           {"lines", screen_lines}, {"resize", screen_resize},
    {"size", screen_size},           {"title", screen_title}, {NULL, NULL}};

static const luaL_Reg screen_meta[] = {{"__close", screen_close},
                                       {"__gc", screen_close},
                                       {"__tostring", screen_tostring},
                                       {NULL, NULL}};

static const luaL_Reg screen_functions[] = {{"new", screen_new}, {NULL, NULL}};

int luaopen_luxec_screen(lua_State *L) {
  if (luaL_newmetatable(L, SCREEN_MT)) { /* mt */
    luaL_setfuncs(L, screen_meta, 0);
    luaL_newlib(L, screen_methods); /* mt methods */
    lua_setfield(L, -2, "__index"); /* mt */
  }
  lua_pop(L, 1);
  luaL_newlib(L, screen_functions);
  return 1;
}
