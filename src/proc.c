/* proc.c: luxec.core.spawn and the process handle's lifecycle: exit through a pidfd on the
 * shared loop, status, signals, resize, whole-tree kill, holders and input waits. Reading and
 * writing live in proc_io.c. Policy (timeouts, graces, defaults) is the Lua layer's. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
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

static proc *live = NULL;         /* every proc not yet freed */
static const char LIVE_KEY = 'l'; /* registry: a weak table from each proc to its handle */

proc *proc_live(void) {
  return live;
}

static void live_add(proc *p) {
  p->next = live;
  if (live) live->prev = p;
  live = p;
}

static void live_remove(proc *p) {
  if (p->prev)
    p->prev->next = p->next;
  else
    live = p->next;
  if (p->next) p->next->prev = p->prev;
}

static void proc_free_if_done(proc *p) {
  if (!p->closed || p->pending_closes > 0) return;
  if (p->box != NULL) p->box->p = NULL; /* closed by the host: its Lua handle is closed too */
  proc_ns_kill(p);                      /* (already, unless it ended without a close) */
  proc_orphans_init_done(p);
  if (p->init_pid > 0) proc_orphans_forget(p->init_pid);
  live_remove(p);
  launch_init_stack_free(p->init_stack, 0); /* killed: it runs no more code */
  sandbox_netns_release(p->netns, 0);       /* (not given to proc_ns_release: not known) */
  for (int i = 0; i < p->nout; i++) outbuf_free(&p->out[i].buf);
  proc_io_free_queue(p);
  free(p->lim);
  free(p->sbx_info);
  free(p);
}

/* Each embedded handle has its own close callback, which finds the proc by container_of,
 * releases the descriptor the handle watched if that is still open, and counts down. */
static void close_done(proc *p) {
  p->pending_closes--;
  proc_free_if_done(p);
}

static void in_poll_closed(uv_handle_t *h) {
  proc *p = h->data;
  if (p->in_fd >= 0) close(p->in_fd);
  p->in_fd = -1;
  p->in_poll = NULL;
  free(h);
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
  uv_close_cb cb = h == (uv_handle_t *)p->in_poll ? in_poll_closed : stream_poll_closed;
  p->pending_closes++;
  uv_close(h, cb);
  /* libuv lets the watched descriptor go right after uv_close: released now, a spawn just
   * after a close finds it free (at a low RLIMIT_NOFILE that decides whether it succeeds). */
  if (cb == in_poll_closed) {
    if (p->in_fd >= 0) close(p->in_fd);
    p->in_fd = -1;
  } else {
    pstream *s = container_of((uv_poll_t *)h, pstream, poll);
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
  }
}

/* The handle of p on top of L's stack, found through a weak table (the handle is collected
 * once the script drops it and nothing holds it), or nothing pushed: 0. */
static int push_handle(proc *p, lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LIVE_KEY) != LUA_TTABLE || p->box == NULL) {
    lua_pop(L, 1);
    return 0;
  }
  lua_rawgetp(L, -1, p);
  lua_remove(L, -2);
  pbox *b = lua_touserdata(L, -1);
  if (b == NULL || b != p->box || b->p != p) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

/* Tell the Lua side through the function in the handle's user value (no registry reference:
 * a handle whose function reaches it back is still collectable). The callback may close p,
 * which stays allocated until the handles' close callbacks have run on a later turn. */
void proc_emit(proc *p, const char *event, int a, lua_Integer b) {
  if (p->closed) return;
  lua_State *L = p->L;
  if (!push_handle(p, L)) return;
  int t = lua_getiuservalue(L, -1, 1);
  lua_remove(L, -2);
  if (t != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return;
  }
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

/* The handle is anchored (kept from the collector) while something holds the session (a
 * waiter or a listener: p:ref(true)) and the session can still tell it something. A
 * session nothing holds is the script's to keep: dropped, it is collected, killed if it
 * still runs. */
static void anchor(proc *p) {
  int want = p->lua_ref && !p->closed && !(p->exited && all_eof(p));
  if (want && p->self_ref == LUA_NOREF) {
    if (push_handle(p, p->L)) p->self_ref = luaL_ref(p->L, LUA_REGISTRYINDEX);
  } else if (!want && p->self_ref != LUA_NOREF) {
    luaL_unref(p->L, LUA_REGISTRYINDEX, p->self_ref);
    p->self_ref = LUA_NOREF;
  }
}

void proc_maybe_release(proc *p) {
  anchor(p);
}

static void record_exit(proc *p, const siginfo_t *si) {
  p->exited = 1;
  p->reaped = 1;
  proc_orphans_forget(p->pid); /* (a session without a cgroup: the watchdog's no more) */
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

/* Every session's exit is watched through one epoll set of the host's, itself one handle on
 * the loop: a session's pidfd is added when it starts and removed when it is reaped or closed
 * (two system calls, where a loop handle per pidfd costs six). The handle keeps the loop
 * alive while any session with a watched exit is referenced. */
static int exits_fd = -1;
static uv_poll_t exits_poll;
static int exits_refs;
static unsigned long exits_removed; /* pidfds taken out of the set so far */

static void exits_ref(int delta) {
  exits_refs += delta;
  if (exits_refs > 0)
    uv_ref((uv_handle_t *)&exits_poll);
  else
    uv_unref((uv_handle_t *)&exits_poll);
}

/* The exit of p is watched no more; a reaped child's pidfd goes now (until it is reaped it is
 * how the child is waited for: proc_end_release closes it then). */
static void exits_unwatch(proc *p) {
  if (!p->exit_poll_open) return;
  p->exit_poll_open = 0;
  exits_removed++;
  epoll_ctl(exits_fd, EPOLL_CTL_DEL, p->pidfd, NULL);
  if (p->referenced) exits_ref(-1);
  if (p->reaped && p->pidfd >= 0) {
    close(p->pidfd);
    p->pidfd = -1;
  }
}

static void exits_cb(uv_poll_t *h, int status, int events) {
  (void)h;
  (void)status;
  (void)events;
  /* The exits due, many at a time; but once an exit's listeners closed other sessions
   * (their pidfds left the set) the rest of the batch may name sessions that are gone: the
   * set, still readable, names the others again on the next turn of the loop. A pidfd that
   * is readable and cannot be reaped yet goes to the back of the ready list. */
  struct epoll_event evs[64];
  int n = epoll_wait(exits_fd, evs, 64, 0);
  for (int i = 0; i < n; i++) {
    proc *p = evs[i].data.ptr;
    if (!proc_reap(p, 0)) continue;
    unsigned long removed = exits_removed;
    proc_exit_reaped(p);
    if (exits_removed != removed + 1) break;
  }
}

/* p's program was reaped (at its exit event, or found exited at the EOF of its output): its
 * exit is watched no more, its streams are read to where they stand, and Lua is told. An EOF
 * that came with the exit is told by the "exit" event alone: one call into Lua per ended
 * session, not two. */
void proc_exit_reaped(proc *p) {
  p->pending_closes++; /* (p stays while its listeners run, even if one closes it) */
  exits_unwatch(p);
  proc_io_exited(p);
  if (!p->closed) proc_emit(p, "exit", 0, 0);
  p->pending_closes--;
  if (p->closed)
    proc_free_if_done(p);
  else
    proc_maybe_release(p);
}

static void exits_closed(uv_handle_t *h) {
  (void)h;
  close(exits_fd);
  exits_fd = -1;
}

int proc_exits_ready(uv_loop_t *loop) {
  if (exits_fd >= 0) return 0;
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return errno;
  int rc = uv_poll_init(loop, &exits_poll, fd);
  if (rc != 0) {
    close(fd);
    return -rc;
  }
  exits_fd = fd;
  exits_poll.data = NULL;
  exits_refs = 0;
  uv_poll_start(&exits_poll, UV_READABLE, exits_cb);
  uv_unref((uv_handle_t *)&exits_poll);
  return 0;
}

/* (after proc_exits_ready: adding a pidfd to the set takes no descriptor) */
static int exits_watch(proc *p) {
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = p};
  if (epoll_ctl(exits_fd, EPOLL_CTL_ADD, p->pidfd, &ev) != 0) return -1;
  p->exit_poll_open = 1;
  if (p->referenced) exits_ref(1);
  return 0;
}

/* A launched child: into the live list, its handle (on top of L's stack, popped) findable
 * for events, its exit and output watched on the loop. */
void proc_started(proc *p, lua_State *L) {
  live_add(p);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LIVE_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 0);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &LIVE_KEY);
  }
  lua_rotate(L, -2, 1);
  lua_rawsetp(L, -2, p);
  lua_pop(L, 1);
  uv_loop_t *loop = &luxec_gethost(L)->loop;
  proc_orphans_session(p, loop);
  exits_watch(p);
  proc_io_start(p);
}

/* The metatable of handles, by address: every method checks its handle, and a comparison of
 * addresses costs a fraction of luaL_checkudata's lookup of the name (which still makes the
 * error message, and answers for a state whose metatable is another). */
static const void *proc_mt;

pbox *proc_checkbox(lua_State *L, int idx) {
  pbox *b = lua_touserdata(L, idx);
  if (b != NULL && proc_mt != NULL && lua_getmetatable(L, idx)) {
    const void *mt = lua_topointer(L, -1);
    lua_pop(L, 1);
    if (mt != proc_mt) b = NULL;
  } else {
    b = NULL;
  }
  if (b == NULL) b = luaL_checkudata(L, idx, PROC_MT);
  return b;
}

proc *proc_check(lua_State *L, int idx) {
  pbox *b = proc_checkbox(L, idx);
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
  for (int i = 0; i < 3; i++) {
    if (p->transp_fd[i] >= 0) close(p->transp_fd[i]);
    p->transp_fd[i] = -1;
  }
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
  exits_unwatch(p);
  proc_end_release(p, empty);          /* the pidfd now, the cgroup once empty */
  if (p->limited) cgl_release(p->lim); /* the v1 directories, empty now that the tree is gone */
  if (p->self_ref != LUA_NOREF) luaL_unref(p->L, LUA_REGISTRYINDEX, p->self_ref);
  p->self_ref = LUA_NOREF;
  proc_free_if_done(p);
}

static void close_box(pbox *b, const char *why) {
  if (b->p != NULL) {
    proc *p = b->p;
    b->p = NULL;
    p->box = NULL;
    proc_shutdown(p, why);
  }
}

static int proc_close(lua_State *L) {
  close_box(proc_checkbox(L, 1), "close");
  return 0;
}

/* Kill every session's tree without touching Lua or allocating: for exit() paths that skip
 * the orderly shutdown (os.exit without close) and for fatal signals. */
void luxec_procs_kill_all(void) {
  proc_orphans_kill_unmarked(); /* (found while their sessions stand) */
  static pid_t tree[4096];
  for (proc *p = live; p != NULL; p = p->next) {
    if (p->closed) continue;
    /* without a cgroup: its descendants first, while the program holds them (an unmarked one) */
    int n = p->cg.id || p->init_pid > 0 || p->reaped ? 0 : pfs_descendants(p->pid, tree, 4096);
    for (int i = 0; i < n; i++) kill(tree[i], SIGKILL);
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
  proc_orphans_close();
  while (live != NULL) {
    proc *p = live;
    while (p != NULL && p->closed) p = p->next;
    if (p == NULL) break;
    proc_shutdown(p, "host exit");
  }
  if (exits_fd >= 0 && !uv_is_closing((uv_handle_t *)&exits_poll))
    uv_close((uv_handle_t *)&exits_poll, exits_closed);
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
      if (n)
        lua_pushstring(L, n);
      else
        lua_pushfstring(L, "SIG%d", p->termsig);
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
  lua_pushinteger(L, (lua_Integer)p->in_dropped);
  lua_setfield(L, -2, "input_dropped");
  if (p->in_err) {
    lua_pushstring(L, luxec_err_name(p->in_err));
    lua_setfield(L, -2, "stdin_error");
  }
  return 1;
}

/* p:ended() -> exited, eof: the two facts the Lua side needs after an exit or EOF event,
 * without building a status table */
static int proc_ended(lua_State *L) {
  proc *p = proc_check(L, 1);
  lua_pushboolean(L, p->exited);
  lua_pushboolean(L, all_eof(p));
  return 2;
}

/* p:ref(keep): whether the session keeps the loop (and so the host) alive, and its handle
 * from the collector. Sessions start unreferenced: a script that ends ends its sessions, as
 * Expect's and pexpect's do, and one it drops is collected; the Lua layer references it
 * while something waits on it or listens to it. */
void proc_loop_ref(proc *p, int keep) {
  if (p->exit_poll_open && !keep != !p->referenced) exits_ref(keep ? 1 : -1);
  p->referenced = keep;
  for (int i = 0; i < p->nout; i++) {
    if (!p->out[i].poll_open) continue;
    if (keep)
      uv_ref((uv_handle_t *)&p->out[i].poll);
    else
      uv_unref((uv_handle_t *)&p->out[i].poll);
  }
}

static int proc_ref(lua_State *L) {
  proc *p = proc_check(L, 1);
  p->lua_ref = lua_toboolean(L, 2);
  proc_loop_ref(p, p->lua_ref || p->waiting);
  anchor(p);
  return 0;
}

/* Dropped by the script and held by nothing: a running session is killed (its whole tree),
 * a finished one lets its descriptors go. */
static int proc_gc(lua_State *L) {
  close_box(luaL_checkudata(L, 1, PROC_MT), "collected");
  return 0;
}

static int proc_tostring(lua_State *L) {
  pbox *b = luaL_checkudata(L, 1, PROC_MT);
  proc *p = b->p;
  if (p == NULL)
    lua_pushliteral(L, "luxec.proc (closed)");
  else if (!p->exited)
    lua_pushfstring(L, "luxec.proc (pid %d, running)", (int)p->pid);
  else if (p->termsig)
    lua_pushfstring(L, "luxec.proc (pid %d, killed by SIG%s)", (int)p->pid,
                    proc_signame(p->termsig) ? proc_signame(p->termsig) : "?");
  else
    lua_pushfstring(L, "luxec.proc (pid %d, exited %d)", (int)p->pid, p->code);
  return 1;
}

static const luaL_Reg proc_methods[] = {{"close", proc_close},
                                        {"ended", proc_ended},
                                        {"ref", proc_ref},
                                        {"status", proc_status},
                                        {NULL, NULL}};

static const luaL_Reg proc_meta[] = {
    {"__close", proc_close}, {"__gc", proc_gc}, {"__tostring", proc_tostring}, {NULL, NULL}};

/* core.cgroups() -> available, reason, host directory */
static int core_cgroups(lua_State *L) {
  const char *why;
  int ok = cg_available(&why);
  lua_pushboolean(L, ok);
  if (ok)
    lua_pushnil(L);
  else
    lua_pushstring(L, why);
  lua_pushstring(L, cg_host_dir());
  return 3;
}

static int core_watchdog_pid(lua_State *L) {
  pid_t w = cg_watchdog_pid();
  if (w > 0)
    lua_pushinteger(L, w);
  else
    lua_pushnil(L);
  return 1;
}

static int core_signame(lua_State *L) {
  const char *n = proc_signame((int)luaL_checkinteger(L, 1));
  if (n)
    lua_pushstring(L, n);
  else
    lua_pushnil(L);
  return 1;
}

static const luaL_Reg proc_functions[] = {{"cgroups", core_cgroups},
                                          {"signame", core_signame},
                                          {"watchdog_pid", core_watchdog_pid},
                                          {NULL, NULL}};

void luxec_open_proc(lua_State *L) {
  if (luaL_newmetatable(L, PROC_MT)) {
    proc_mt = lua_topointer(L, -1);
    luaL_setfuncs(L, proc_meta, 0);
    luaL_newlib(L, proc_methods);
    luaL_setfuncs(L, proc_io_methods, 0);
    luaL_setfuncs(L, proc_wait_methods, 0);
    luaL_setfuncs(L, proc_input_methods, 0);
    luaL_setfuncs(L, proc_tree_methods, 0);
    luaL_setfuncs(L, proc_end_methods, 0);
    luaL_setfuncs(L, proc_sandbox_methods, 0);
    luaL_setfuncs(L, proc_proxy_methods, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  luaL_setfuncs(L, proc_functions, 0);
  luaL_setfuncs(L, proc_tree_functions, 0);
  luaL_setfuncs(L, proc_sandbox_functions, 0);
  luaL_setfuncs(L, proc_end_functions, 0);
  lua_pushcfunction(L, proc_core_spawn);
  lua_setfield(L, -2, "spawn");
}
