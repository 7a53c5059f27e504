/* proc.c: luxec.core.spawn and the process handle's lifecycle: exit through a pidfd on the
 * shared loop, status, signals, resize, whole-tree kill, holders and input waits. Reading and
 * writing live in proc_io.c. Policy (timeouts, graces, defaults) is the Lua layer's. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <poll.h>
#include <unistd.h>

#include "launch.h"
#include "notify.h"
#include "sandbox.h"
#include "procfs.h"
#include "cgroup.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static proc *live = NULL; /* every proc not yet freed */
static int subreaper = 0;
static uv_signal_t orphan_sig; /* SIGCHLD while the host is a child subreaper */
static uv_timer_t orphan_timer; /* and a slow sweep, for a SIGCHLD that went elsewhere */

static void collect_uv_pid(uv_handle_t *h, void *arg) {
  pid_t *pids = arg;
  if (uv_handle_get_type(h) == UV_PROCESS && pids[0] < 63) {
    pids[++pids[0]] = uv_process_get_pid((uv_process_t *)h);
  }
}

/* As child subreaper the host inherits the orphans of its sessions; reap those that exit
 * (never a session's own child, which its pidfd reaps, nor one of libuv's). */
static void reap_orphans(uv_loop_t *loop) {
  pid_t kids[1024], uvpids[64] = {0};
  int n = pfs_children(getpid(), kids, 1024);
  uv_walk(loop, collect_uv_pid, uvpids);
  for (int i = 0; i < n; i++) {
    int skip = kids[i] == cg_watchdog_pid();
    for (proc *p = live; p != NULL && !skip; p = p->next) {
      /* a sandbox's init is reaped by the session once killed: until then its pid is kept */
      skip = (p->pid == kids[i] && !p->reaped) || (p->init_pid == kids[i] && !p->init_killed);
    }
    for (int j = 1; j <= uvpids[0] && !skip; j++) skip = uvpids[j] == kids[i];
    if (!skip) waitpid(kids[i], NULL, WNOHANG);
  }
}

static void orphan_cb(uv_signal_t *h, int signum) {
  (void)signum;
  reap_orphans(uv_handle_get_loop((uv_handle_t *)h));
}

static void orphan_timer_cb(uv_timer_t *h) {
  reap_orphans(uv_handle_get_loop((uv_handle_t *)h));
}

static void become_subreaper(uv_loop_t *loop) {
  if (subreaper) return;
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  subreaper = 1;
  uv_signal_init(loop, &orphan_sig);
  orphan_sig.data = NULL;
  uv_signal_start(&orphan_sig, orphan_cb, SIGCHLD);
  uv_unref((uv_handle_t *)&orphan_sig);
  uv_timer_init(loop, &orphan_timer);
  orphan_timer.data = NULL;
  uv_timer_start(&orphan_timer, orphan_timer_cb, 1000, 1000);
  uv_unref((uv_handle_t *)&orphan_timer);
}

proc *proc_live(void) {
  return live;
}

static void live_add(proc *p) {
  p->next = live;
  if (live) live->prev = p;
  live = p;
}

static void live_remove(proc *p) {
  if (p->prev) p->prev->next = p->next;
  else live = p->next;
  if (p->next) p->next->prev = p->prev;
}

static void proc_free_if_done(proc *p) {
  if (!p->closed || p->pending_closes > 0) return;
  if (p->box != NULL) p->box->p = NULL; /* closed by the host: its Lua handle is closed too */
  live_remove(p);
  proc_ns_kill(p); /* (already, unless it ended without a close) */
  launch_init_stack_free(p->init_stack); /* it runs no more code */
  for (int i = 0; i < p->nout; i++) outbuf_free(&p->out[i].buf);
  proc_io_free_queue(p);
  free(p);
}

/* Each embedded handle has its own close callback, which finds the proc by container_of,
 * releases the descriptor the handle watched if that is still open, and counts down. */
static void close_done(proc *p) {
  p->pending_closes--;
  proc_free_if_done(p);
}

static void exit_poll_closed(uv_handle_t *h) {
  proc *p = container_of((uv_poll_t *)h, proc, exit_poll);
  if (p->pidfd >= 0) close(p->pidfd);
  p->pidfd = -1;
  close_done(p);
}

static void in_poll_closed(uv_handle_t *h) {
  proc *p = container_of((uv_poll_t *)h, proc, in_poll);
  if (p->in_fd >= 0) close(p->in_fd);
  p->in_fd = -1;
  close_done(p);
}

static void stream_poll_closed(uv_handle_t *h) {
  pstream *s = container_of((uv_poll_t *)h, pstream, poll);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  close_done(s->proc);
}

void proc_close_handle(proc *p, uv_handle_t *h) {
  if (uv_is_closing(h)) return;
  uv_close_cb cb = h == (uv_handle_t *)&p->exit_poll ? exit_poll_closed
                 : h == (uv_handle_t *)&p->in_poll  ? in_poll_closed
                                                     : stream_poll_closed;
  p->pending_closes++;
  uv_close(h, cb);
  /* libuv lets the watched descriptor go right after uv_close: released now, a spawn just
   * after a close finds it free (at a low RLIMIT_NOFILE that decides whether it succeeds).
   * The pidfd only once reaped: until then it is how the child is waited for. */
  if (cb == in_poll_closed) {
    if (p->in_fd >= 0) close(p->in_fd);
    p->in_fd = -1;
  } else if (cb == stream_poll_closed) {
    pstream *s = container_of((uv_poll_t *)h, pstream, poll);
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
  } else if (p->reaped && p->pidfd >= 0) {
    close(p->pidfd);
    p->pidfd = -1;
  }
}

/* Tell the Lua side; the callback may close p, which stays allocated until the handles'
 * close callbacks have run on a later turn of the loop. */
void proc_emit(proc *p, const char *event, int a, lua_Integer b) {
  if (p->closed || p->cb_ref == LUA_NOREF) return;
  lua_State *L = p->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->cb_ref);
  lua_pushstring(L, event);
  lua_pushinteger(L, a);
  lua_pushinteger(L, b);
  luxec_callback_pcall(L, 3, 0, 0);
}

static int all_eof(const proc *p) {
  for (int i = 0; i < p->nout; i++)
    if (!p->out[i].eof) return 0;
  return 1;
}

/* A session that exited and reached EOF everywhere holds no resource that needs the Lua
 * object kept alive: let the garbage collector have it once the script drops it. */
void proc_maybe_release(proc *p) {
  if (p->exited && all_eof(p) && p->self_ref != LUA_NOREF) {
    luaL_unref(p->L, LUA_REGISTRYINDEX, p->self_ref);
    p->self_ref = LUA_NOREF;
  }
}

static void record_exit(proc *p, const siginfo_t *si) {
  p->exited = 1;
  p->reaped = 1;
  if (si->si_code == CLD_EXITED) {
    p->code = si->si_status;
  } else {
    p->termsig = si->si_status;
    p->core_dumped = si->si_code == CLD_DUMPED;
  }
}

/* Reap the child if it has exited; with block, wait for it. 1 when reaped. */
int proc_reap(proc *p, int block) {
  if (p->reaped) return 1;
  if (p->pidfd < 0) return 0;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  int rc;
  for (;;) {
    rc = waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | (block ? 0 : WNOHANG));
    if (rc == 0 || errno == EINTR) {
      if (rc == 0) break;
      continue;
    }
    /* libuv made the pidfd non-blocking, which turns a blocking waitid into EAGAIN */
    if (errno != EAGAIN || !block) break;
    struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
    poll(&pf, 1, -1);
  }
  if (rc < 0 || si.si_pid == 0) return 0;
  record_exit(p, &si);
  return 1;
}

static void exit_cb(uv_poll_t *h, int status, int events) {
  proc *p = container_of(h, proc, exit_poll);
  (void)status;
  (void)events;
  if (!proc_reap(p, 0)) return;
  proc_close_handle(p, (uv_handle_t *)&p->exit_poll);
  p->exit_poll_open = 0;
  proc_io_exited(p);
  proc_emit(p, "exit", 0, 0);
  if (!p->closed) proc_maybe_release(p);
}

/* A launched child: into the live list, its event function and handle (on top of L's stack,
 * popped) anchored, its exit and output watched on the loop. */
void proc_started(proc *p, lua_State *L) {
  live_add(p);
  p->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  p->cb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  uv_loop_t *loop = &luxec_gethost(L)->loop;
  if (p->cg.id == 0) become_subreaper(loop); /* orphans come back to the host */
  uv_poll_init(loop, &p->exit_poll, p->pidfd);
  p->exit_poll.data = NULL;
  p->exit_poll_open = 1;
  uv_poll_start(&p->exit_poll, UV_READABLE, exit_cb);
  proc_io_start(p);
  uv_unref((uv_handle_t *)&p->exit_poll);
}

proc *proc_check(lua_State *L, int idx) {
  pbox *b = luaL_checkudata(L, idx, PROC_MT);
  if (b->p == NULL) luaL_error(L, "attempt to use a closed process handle");
  return b->p;
}

/* Close everything of p: kill what still runs, close handles and descriptors. */
static void proc_shutdown(proc *p, const char *why) {
  if (p->closed) return;
  int empty = proc_end_close(p, why); /* SIGKILL now; nothing waits for the tree to end */
  p->closed = 1;
  sbx_monitor_close(p->sbx); /* only now: a live sandboxed process would get ENOSYS */
  p->sbx = NULL;
  if (p->proxy_fd >= 0) close(p->proxy_fd); /* (never taken by the Lua side) */
  p->proxy_fd = -1;
  proc_io_stop_input(p);
  for (int i = 0; i < p->nout; i++) {
    pstream *s = &p->out[i];
    if (s->poll_open) {
      s->poll_open = 0;
      proc_close_handle(p, (uv_handle_t *)&s->poll);
    } else if (s->fd >= 0) {
      close(s->fd);
      s->fd = -1;
    }
  }
  if (p->exit_poll_open) {
    p->exit_poll_open = 0;
    proc_close_handle(p, (uv_handle_t *)&p->exit_poll);
  }
  proc_end_release(p, empty); /* the pidfd now, the cgroup once empty */
  if (p->limited) cgl_release(&p->lim); /* the v1 directories, empty now that the tree is gone */
  if (p->self_ref != LUA_NOREF) luaL_unref(p->L, LUA_REGISTRYINDEX, p->self_ref);
  if (p->cb_ref != LUA_NOREF) luaL_unref(p->L, LUA_REGISTRYINDEX, p->cb_ref);
  p->self_ref = p->cb_ref = LUA_NOREF;
  proc_free_if_done(p);
}

static int proc_close(lua_State *L) {
  pbox *b = luaL_checkudata(L, 1, PROC_MT);
  if (b->p != NULL) {
    proc *p = b->p;
    b->p = NULL;
    p->box = NULL;
    proc_shutdown(p, "close");
  }
  return 0;
}

/* Kill every session's tree without touching Lua or allocating: for exit() paths that skip
 * the orderly shutdown (os.exit without close) and for fatal signals. */
void luxec_procs_kill_all(void) {
  for (proc *p = live; p != NULL; p = p->next) {
    if (p->closed) continue;
    cg_session_kill(&p->cg); /* (when it fails, the watchdog still covers it) */
    proc_ns_kill(p);
    if (!p->reaped) {
      kill(-p->pid, SIGKILL);
      kill(p->pid, SIGKILL);
    }
  }
}

void luxec_procs_shutdown(void) {
  luxec_procs_kill_all(); /* every tree at once; each is then waited for and closed */
  if (subreaper && !uv_is_closing((uv_handle_t *)&orphan_sig)) {
    uv_close((uv_handle_t *)&orphan_sig, NULL);
    uv_close((uv_handle_t *)&orphan_timer, NULL);
  }
  while (live != NULL) {
    proc *p = live;
    while (p != NULL && p->closed) p = p->next;
    if (p == NULL) break;
    proc_shutdown(p, "host exit");
  }
  proc_end_shutdown();
}

/* p:status() -> the native facts; luxec.process adds what policy knows. */
static int proc_status(lua_State *L) {
  proc *p = proc_check(L, 1);
  lua_createtable(L, 0, 12);
  lua_pushinteger(L, p->pid);
  lua_setfield(L, -2, "pid");
  lua_pushboolean(L, !p->exited);
  lua_setfield(L, -2, "running");
  lua_pushboolean(L, p->exited);
  lua_setfield(L, -2, "exited");
  if (p->exited) {
    if (p->termsig) {
      lua_pushinteger(L, p->termsig);
      lua_setfield(L, -2, "signal");
      const char *n = proc_signame(p->termsig);
      if (n) lua_pushstring(L, n);
      else lua_pushfstring(L, "SIG%d", p->termsig);
      lua_setfield(L, -2, "signal_name");
    } else {
      lua_pushinteger(L, p->code);
      lua_setfield(L, -2, "code");
    }
    lua_pushboolean(L, p->core_dumped);
    lua_setfield(L, -2, "core_dumped");
  }
  if (p->killed_by[0]) {
    lua_pushstring(L, p->killed_by);
    lua_setfield(L, -2, "killed_by");
  }
  lua_pushboolean(L, all_eof(p));
  lua_setfield(L, -2, "eof");
  lua_pushboolean(L, p->tty);
  lua_setfield(L, -2, "tty");
  lua_pushboolean(L, p->cg.id != 0);
  lua_setfield(L, -2, "cgroup");
  lua_pushinteger(L, (lua_Integer)p->wq_bytes);
  lua_setfield(L, -2, "write_queued");
  if (p->in_err) {
    lua_pushstring(L, uv_err_name(uv_translate_sys_error(p->in_err)));
    lua_setfield(L, -2, "stdin_error");
  }
  return 1;
}

/* p:ref(keep): whether the session keeps the loop (and so the host) alive. Sessions start
 * unreferenced: a script that ends ends its sessions, as Expect's and pexpect's do; the
 * Lua layer references it while something waits on it or listens to it. */
static int proc_ref(lua_State *L) {
  proc *p = proc_check(L, 1);
  int keep = lua_toboolean(L, 2);
  uv_handle_t *hs[3] = {(uv_handle_t *)&p->exit_poll, (uv_handle_t *)&p->out[0].poll,
                        (uv_handle_t *)&p->out[1].poll};
  int open[3] = {p->exit_poll_open, p->out[0].poll_open, p->nout > 1 && p->out[1].poll_open};
  p->referenced = keep;
  for (int i = 0; i < 3; i++) {
    if (!open[i]) continue;
    if (keep) uv_ref(hs[i]);
    else uv_unref(hs[i]);
  }
  return 0;
}

static int proc_gc(lua_State *L) {
  return proc_close(L);
}

static int proc_tostring(lua_State *L) {
  pbox *b = luaL_checkudata(L, 1, PROC_MT);
  proc *p = b->p;
  if (p == NULL) lua_pushliteral(L, "luxec.proc (closed)");
  else if (!p->exited) lua_pushfstring(L, "luxec.proc (pid %d, running)", (int)p->pid);
  else if (p->termsig) lua_pushfstring(L, "luxec.proc (pid %d, killed by SIG%s)", (int)p->pid,
                                       proc_signame(p->termsig) ? proc_signame(p->termsig) : "?");
  else lua_pushfstring(L, "luxec.proc (pid %d, exited %d)", (int)p->pid, p->code);
  return 1;
}

static const luaL_Reg proc_methods[] = {
  {"close", proc_close},
  {"ref", proc_ref},
  {"status", proc_status},
  {NULL, NULL}
};

static const luaL_Reg proc_meta[] = {
  {"__close", proc_close},
  {"__gc", proc_gc},
  {"__tostring", proc_tostring},
  {NULL, NULL}
};

/* core.cgroups() -> available, reason, host directory */
static int core_cgroups(lua_State *L) {
  const char *why;
  int ok = cg_available(&why);
  lua_pushboolean(L, ok);
  if (ok) lua_pushnil(L);
  else lua_pushstring(L, why);
  lua_pushstring(L, cg_host_dir());
  return 3;
}

static int core_watchdog_pid(lua_State *L) {
  pid_t w = cg_watchdog_pid();
  if (w > 0) lua_pushinteger(L, w);
  else lua_pushnil(L);
  return 1;
}

static int core_signame(lua_State *L) {
  const char *n = proc_signame((int)luaL_checkinteger(L, 1));
  if (n) lua_pushstring(L, n);
  else lua_pushnil(L);
  return 1;
}

static const luaL_Reg proc_functions[] = {
  {"cgroups", core_cgroups},
  {"signame", core_signame},
  {"watchdog_pid", core_watchdog_pid},
  {NULL, NULL}
};

void luxec_open_proc(lua_State *L) {
  if (luaL_newmetatable(L, PROC_MT)) {
    luaL_setfuncs(L, proc_meta, 0);
    luaL_newlib(L, proc_methods);
    luaL_setfuncs(L, proc_io_methods, 0);
    luaL_setfuncs(L, proc_input_methods, 0);
    luaL_setfuncs(L, proc_tree_methods, 0);
    luaL_setfuncs(L, proc_end_methods, 0);
    luaL_setfuncs(L, proc_sandbox_methods, 0);
    luaL_setfuncs(L, proc_proxy_methods, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  luaL_setfuncs(L, proc_functions, 0);
  luaL_setfuncs(L, proc_sandbox_functions, 0);
  luaL_setfuncs(L, proc_end_functions, 0);
  lua_pushcfunction(L, proc_core_spawn);
  lua_setfield(L, -2, "spawn");
}
