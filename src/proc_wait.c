/* proc_wait.c: one turn of a top-level wait on a session, run by the core. Top-level code
 * that waits on a session (p:wait, p:wait_output, p:expect outside a task) drives the loop
 * itself; doing that here keeps the session's output out of Lua while it waits (no "output"
 * event, no wake closure, no timer with a Lua callback per wait, no re-anchoring of the
 * handle): the Lua side looks at what it waits for after each turn. Inside a task a wait
 * yields instead (luxec.sched). How long to wait is the caller's to say. */
#include "proc.h"

#include <luv/luv.h>

/* The deadline of a turn: one for the host, as top-level waits do not nest (a wait inside a
 * loop callback is refused). Its data stays NULL: the core closes it, not the host's walk. */
static uv_timer_t turn_timer;
static int turn_timer_open;

static void turn_timer_cb(uv_timer_t *t) {
  uv_stop(t->loop); /* due before the loop polled: the poll must not block after it */
}

static void turn_timer_closed(uv_handle_t *h) {
  (void)h;
  turn_timer_open = 0;
}

void proc_wait_shutdown(void) {
  if (turn_timer_open && !uv_is_closing((uv_handle_t *)&turn_timer))
    uv_close((uv_handle_t *)&turn_timer, turn_timer_closed);
}

/* One turn of the loop for a top-level wait on b's session (what is ready, else the first
 * event, else ms; ms < 0 waits for an event however far off). Output read in that turn is not
 * told to Lua unless someone else waits for it or listens to it (p:want_output). Returns
 * whether the wait can still end. */
static int turn(lua_State *L, pbox *b, lua_Number ms) {
  proc *p = b->p;
  luxec_host *h = p->host;
  if (((luv_ctx_t *)h->luv)->mode != -1)
    return luaL_error(L,
                      "cannot wait inside a loop callback: run the waiting code in "
                      "luxec.go(fn)");
  p->waiting = 1;
  /* The turn's timer keeps the loop alive through a timed turn (a timed wait can always end);
   * an untimed one is kept alive by the session's handles, referenced for the turn. */
  int untimed = ms < 0;
  if (untimed) {
    proc_loop_ref(p, 1);
  } else {
    if (!turn_timer_open) {
      uv_timer_init(&h->loop, &turn_timer);
      turn_timer.data = NULL;
      turn_timer_open = 1;
    }
    uv_update_time(&h->loop);      /* (stale after top-level code ran for a while) */
    if (ms > 9e15) ms = 9e15;      /* (a wait of ~285,000 years: the cast stays defined) */
    uint64_t whole = (uint64_t)ms; /* rounded up: a wait never ends before its time */
    uv_timer_start(&turn_timer, turn_timer_cb, whole + ((double)whole < ms), 0);
  }
  int alive = luxec_host_run(h, UV_RUN_ONCE);
  if (!untimed) {
    if (turn_timer_open) uv_timer_stop(&turn_timer);
    alive = 1;
  }
  /* (the handle on the stack kept b alive; p is gone when a callback closed the session) */
  if (b->p != NULL) {
    p->waiting = 0;
    if (untimed) proc_loop_ref(p, p->lua_ref);
    proc_maybe_release(p);
  }
  return alive;
}

static pbox *check_open_box(lua_State *L) {
  pbox *b = proc_checkbox(L, 1);
  if (b->p == NULL) luaL_error(L, "attempt to use a closed process handle");
  return b;
}

static int check_stream(lua_State *L, pbox *b, int idx, int opt) {
  lua_Integer stream = opt ? luaL_optinteger(L, idx, 0) : luaL_checkinteger(L, idx);
  luaL_argcheck(L, stream >= !opt && stream <= b->p->nout, idx, "no such stream");
  return (int)stream;
}

/* p:run_once(timeout_ms[, stream]) -> whether the wait can still end[, the bytes the stream
 * carried after the turn, and before it]: one turn (see turn). With a stream, its totals
 * (what a wait for output compares, without a call of p:total). */
static int proc_run_once(lua_State *L) {
  pbox *b = check_open_box(L);
  lua_Number ms = luaL_optnumber(L, 2, -1);
  int stream = check_stream(L, b, 3, 1);
  lua_Integer before = stream ? (lua_Integer)b->p->out[stream - 1].buf.total : 0;
  lua_pushboolean(L, turn(L, b, ms));
  if (stream == 0) return 1;
  /* (a session closed meanwhile: its handle's total is no more; Lua sees the close) */
  lua_pushinteger(L, b->p != NULL ? (lua_Integer)b->p->out[stream - 1].buf.total : -1);
  lua_pushinteger(L, before);
  return 3;
}

/* p:run_read(timeout_ms, stream, cursor) -> whether the wait can still end, then what
 * p:read(stream, cursor) returns after the turn (data, next_cursor, dropped, gap_at; nothing
 * more when a callback closed the session): one turn (see turn) and the read of what it
 * brought, in one call, for a reader that found nothing new at cursor. */
static int proc_run_read(lua_State *L) {
  pbox *b = check_open_box(L);
  lua_Number ms = luaL_optnumber(L, 2, -1);
  int stream = check_stream(L, b, 3, 0);
  lua_Integer from = luaL_checkinteger(L, 4);
  luaL_argcheck(L, from >= 0, 4, "cursor must be >= 0");
  lua_pushboolean(L, turn(L, b, ms));
  if (b->p == NULL) return 1;
  return 1 + luxec_push_read(L, &b->p->out[stream - 1].buf, (uint64_t)from);
}

/* p:end_turn(): if a top-level wait on this session is in a turn of the loop, that turn ends
 * without polling (a wake from a timer that ran before the poll). */
static int proc_end_turn(lua_State *L) {
  pbox *b = proc_checkbox(L, 1);
  if (b->p != NULL && b->p->waiting) uv_stop(&b->p->host->loop);
  return 0;
}

const luaL_Reg proc_wait_methods[] = {{"end_turn", proc_end_turn},
                                      {"run_once", proc_run_once},
                                      {"run_read", proc_run_read},
                                      {NULL, NULL}};
