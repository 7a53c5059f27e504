/* proc_end.c: how a session's tree ends without the loop ever waiting for it. Signals and
 * SIGKILL reach every process of the tree at once; a "tree_empty" event says when nothing of
 * it is left (through the host's one inotify watcher on cgroup.events, or pidfds of its
 * processes without a cgroup); a cgroup a closed session leaves not yet empty is removed
 * later, its zombies are proc_adopt.c's. How long to wait and when to escalate is the Lua
 * side's. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procfs.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#define MAX_TREE 4096

typedef struct titem { /* one process of a tree without a cgroup, watched through a pidfd */
  uv_poll_t poll;      /* data NULL: found with container_of */
  struct tree_end *te; /* NULL once the session let go of the watch */
  struct titem *next;  /* te's other items */
  int fd;
} titem;

struct tree_end {
  proc *p;
  struct tree_end *next; /* the sessions whose cgroup is watched */
  int wd;                /* inotify watch of its cgroup.events, or -1 */
  titem *items;          /* pidfds not yet readable */
  int left;
  int empty;    /* seen empty with the program reaped: told once */
  int cg_empty; /* its cgroup was seen empty (a killed one never fills again) */
  int killing;  /* SIGKILLed: processes found later are killed too */
  int owed;     /* a signal sent to the program's group only, owed to the rest of the tree */
};

static struct tree_end *watching = NULL;
static uv_poll_t cg_poll; /* the inotify descriptor of cgroup.c */
static int cg_poll_open = 0;

/* ---- the host's children, scanned once per call however many sessions it concerns ---- */

static pid_t kids[MAX_TREE], kid_pgid[MAX_TREE], kid_sid[MAX_TREE];
static int nkids = -1;
static pid_t leaders[MAX_TREE]; /* live sessions' programs and sandbox inits, sorted */
static pid_t orphans[MAX_TREE]; /* the host's children the last members() found */
static int norphans = 0;
static int nleaders = 0;

static int cmp_pid(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return x < y ? -1 : x > y;
}

static void scan_begin(void) {
  nleaders = 0;
  for (proc *q = proc_live(); q != NULL && nleaders < MAX_TREE - 1; q = q->next) {
    if (!q->reaped) leaders[nleaders++] = q->pid;
    if (q->init_pid > 0 && !q->init_killed) leaders[nleaders++] = q->init_pid;
  }
  qsort(leaders, (size_t)nleaders, sizeof(pid_t), cmp_pid);
  int n = pfs_children(getpid(), kids, MAX_TREE), k = 0;
  for (int i = 0; i < n; i++) { /* only orphans can belong to a session by pgid, sid, marker */
    if (kids[i] == cg_watchdog_pid() ||
        bsearch(&kids[i], leaders, (size_t)nleaders, sizeof(pid_t), cmp_pid) != NULL)
      continue;
    char st = pfs_state(kids[i], &kid_pgid[k]);
    if (st == 'Z') { /* a session's dead orphan is ours to reap; another one is left alone */
      kid_sid[k] = -1;
    } else if (st == 0) {
      continue;
    } else {
      kid_sid[k] = getsid(kids[i]);
    }
    kids[k++] = kids[i];
  }
  nkids = k;
}

static int batch = 0;      /* within one call on many sessions: the scan is shared */
static int all_empty = -1; /* within one: every session's cgroup seen empty (1), or not (0) */

static void scan_end(void) {
  nkids = -1;
  all_empty = -1;
}

/* Whether every cgroup of the host's sessions is empty, from one read of the directory they
 * are made in; asked only when no session's program (or sandbox init) is alive, as then it
 * may be. Once per call on many sessions. */
static int cgroups_all_empty(void) {
  if (all_empty >= 0) return all_empty;
  int empty = 0;
  for (proc *q = proc_live(); q != NULL; q = q->next)
    if (!q->reaped || (q->init_pid > 0 && !q->init_killed)) goto done;
  empty = cg_sessions_populated() == 0;
done:
  all_empty = empty;      /* (kept for the rest of a call on many sessions) */
  if (!batch) scan_end(); /* (which forgets it) */
  return empty;
}

/* One call on many sessions: the host's children are scanned once, and only if one of
 * them needs it (a session with a cgroup does not). */
static void batch_begin(void) {
  batch = 1;
}

static void batch_end(void) {
  batch = 0;
  scan_end();
}

static void add_live(pid_t pid, pid_t *out, int *n) {
  char st = pfs_state(pid, NULL);
  if (st != 0 && st != 'Z' && *n < MAX_TREE) out[(*n)++] = pid;
}

/* The session's live processes but its program: the program's descendants, and orphans
 * that came back to the host (its child subreaper) in its process group or session or with
 * its marker in their environment (setsid daemons). Zombie orphans of it are reaped. */
static int members(proc *p, pid_t *out) {
  static pid_t tmp[MAX_TREE];
  int n = 0;
  norphans = 0;
  if (!p->reaped) { /* first: one that leaves it now for the host is in the host's list next */
    int m = pfs_descendants(p->pid, tmp, MAX_TREE);
    for (int i = 0; i < m; i++) add_live(tmp[i], out, &n);
  }
  if (p->init_pid > 0 && !p->init_killed) { /* a sandbox's orphans go to its init */
    int m = pfs_descendants(p->init_pid, tmp, MAX_TREE);
    for (int i = 0; i < m; i++)
      if (tmp[i] != p->pid) add_live(tmp[i], out, &n);
  }
  if (nkids < 0) scan_begin();
  for (int i = 0; i < nkids; i++) {
    if (kid_pgid[i] != p->pid && kid_sid[i] != p->pid &&
        (p->marker[0] == '\0' || !pfs_has_env(kids[i], p->marker)) &&
        (p->mark == 0 || pfs_mark_of(kids[i]) != p->mark) &&
        (p->marker[0] == '\0' || !proc_orphans_unclaimed(kids[i], p, 0)))
      continue;
    if (kid_sid[i] == -1) { /* a zombie: reaped by pid, exact as it is our unreaped child */
      waitpid(kids[i], NULL, WNOHANG);
      continue;
    }
    add_live(kids[i], out, &n);
    orphans[norphans++] = kids[i];
    int m = pfs_descendants(kids[i], tmp, MAX_TREE);
    for (int j = 0; j < m; j++) add_live(tmp[j], out, &n);
  }
  if (!batch) scan_end();
  return n;
}

int proc_end_members(proc *p, pid_t *out) {
  int n = 0;
  if (!p->reaped) out[n++] = p->pid;
  return n + members(p, out + n);
}

/* ---- kill ---- */

static struct tree_end *end_of(proc *p);

/* SIGKILL the whole tree now; with count, how many processes that was (with a cgroup, a read
 * of its list that closing does not need). */
static int kill_now(proc *p, const char **method, int count) {
  static pid_t pids[MAX_TREE];
  int n = 0;
  struct tree_end *te = end_of(p);
  if (te != NULL) te->killing = 1, te->owed = 0;
  if (p->cg.id != 0) {
    *method = p->init_pid > 0 ? "pid namespace" : "cgroup";
    n = count ? cg_session_pids(&p->cg, pids, MAX_TREE) : 0;
    /* the pid namespace's init takes every process of the session with it (no process
     * leaves a pid namespace): the cgroup's kill is only needed without one */
    if (p->init_pid <= 0 || p->init_killed) cg_session_kill(&p->cg);
    proc_ns_kill(p);
    return n > 0 ? n : 0;
  }
  *method = p->init_pid > 0 ? "pid namespace" : "process group and sweep";
  /* Found while the tree stands (once its processes die, theirs move to the host), then
   * killed; a second look catches one that was on its way between the two lists. */
  int m = members(p, pids);
  if (!p->reaped) n += kill(-p->pid, SIGKILL) == 0; /* (its own group: it leads a session) */
  for (int i = 0; i < m; i++) n += kill(pids[i], SIGKILL) == 0;
  int again = members(p, pids);
  for (int i = 0; i < again; i++) kill(pids[i], SIGKILL);
  proc_ns_kill(p);
  return n;
}

int proc_end_kill(proc *p, const char *reason) {
  const char *method;
  p->ending = 1;
  if (p->killed_by[0] == '\0' && !p->reaped)
    snprintf(p->killed_by, sizeof p->killed_by, "%s", reason);
  return kill_now(p, &method, 1);
}

/* ---- the "tree_empty" event ---- */

static void emit_empty(struct tree_end *te) {
  te->empty = 1;
  proc_emit(te->p, "tree_empty", 0, 0);
}

static void unwatch_cgroup(struct tree_end *te) {
  if (te->wd < 0) return;
  cg_unwatch(te->wd);
  te->wd = -1;
  for (struct tree_end **q = &watching; *q != NULL; q = &(*q)->next) {
    if (*q == te) {
      *q = te->next;
      break;
    }
  }
}

static void cg_poll_cb(uv_poll_t *h, int status, int events) {
  int wds[256], n;
  (void)h, (void)status, (void)events;
  while ((n = cg_watch_read(wds, 256)) > 0) {
    for (int i = 0; i < n; i++) {
      if (cg_drain_fired(wds[i])) continue;
      for (struct tree_end *te = watching; te != NULL; te = te->next) {
        if (te->wd != wds[i] || cg_session_populated(&te->p->cg) == 1) continue;
        unwatch_cgroup(te);
        te->cg_empty = te->killing || te->p->reaped;
        if (te->p->reaped) emit_empty(te); /* else its exit event tells */
        break;
      }
    }
  }
}

static int ensure_cg_poll(proc *p) {
  int fd = cg_watch_fd();
  if (fd < 0) return -1;
  if (!cg_poll_open) {
    if (uv_poll_init(&luxec_gethost(p->L)->loop, &cg_poll, fd) != 0) return -1;
    cg_poll_open = 1;
    uv_poll_start(&cg_poll, UV_READABLE, cg_poll_cb);
    uv_unref((uv_handle_t *)&cg_poll);
  }
  return 0;
}

static void item_closed(uv_handle_t *h) {
  free(container_of((uv_poll_t *)h, titem, poll));
}

static void item_close(titem *it) {
  struct tree_end *te = it->te;
  if (te != NULL) {
    for (titem **q = &te->items; *q != NULL; q = &(*q)->next) {
      if (*q == it) {
        *q = it->next;
        break;
      }
    }
    te->left--;
  }
  it->te = NULL;
  close(it->fd);
  it->fd = -1;
  uv_close((uv_handle_t *)&it->poll, item_closed);
}

static int arm_pidfds(struct tree_end *te);

static void item_cb(uv_poll_t *h, int status, int events) {
  titem *it = container_of(h, titem, poll);
  struct tree_end *te = it->te;
  (void)status, (void)events;
  siginfo_t si; /* an orphan of the host is reaped here; ECHILD for the others */
  si.si_pid = 0;
  waitid(P_PIDFD, (id_t)it->fd, &si, WEXITED | WNOHANG);
  item_close(it);
  if (te == NULL || te->left > 0) return;
  if (arm_pidfds(te) == 0 && te->p->reaped && !te->empty) emit_empty(te);
}

/* Watch every process of the tree but the program (its exit is its own event); how many are
 * alive (watched, or alive without a watch). */
static int arm_pidfds(struct tree_end *te) {
  static pid_t pids[MAX_TREE];
  proc *p = te->p;
  int n = members(p, pids), armed = 0;
  uv_loop_t *loop = &luxec_gethost(p->L)->loop;
  for (int i = 0; i < n; i++) {
    if (te->killing || te->owed) kill(pids[i], te->killing ? SIGKILL : te->owed);
    int fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
    if (fd < 0) {
      /* ESRCH: gone already. Any other failure (no descriptor left, no pidfd_open under an
       * emulator): alive, but no event will tell; the waits are bounded and look again. */
      if (errno != ESRCH) armed++;
      continue;
    }
    titem *it = calloc(1, sizeof *it);
    if (it == NULL || uv_poll_init(loop, &it->poll, fd) != 0) {
      free(it);
      close(fd);
      armed++;
      continue;
    }
    it->te = te;
    it->fd = fd;
    it->next = te->items;
    te->items = it;
    uv_poll_start(&it->poll, UV_READABLE, item_cb);
    uv_unref((uv_handle_t *)&it->poll);
    te->left++;
    armed++;
  }
  te->owed = 0; /* (every process of the tree had it now) */
  return armed;
}

/* The signal owed to the rest of the tree (signal_trees with defer) sent now, to every
 * process of it outside the program's group; how many. */
static int pay_owed(proc *p) {
  struct tree_end *te = p->te;
  if (te == NULL || te->owed == 0) return 0;
  int sig = te->owed;
  te->owed = 0;
  return proc_tree_signal_led(p, sig, 1);
}

static struct tree_end *end_of(proc *p) {
  if (p->te == NULL) {
    p->te = calloc(1, sizeof *p->te);
    if (p->te == NULL) return NULL;
    p->te->p = p;
    p->te->wd = -1;
  }
  return p->te;
}

/* 1 when nothing of the session is alive (its program reaped, its tree empty); else 0, and a
 * "tree_empty" event comes once the rest of the tree is gone (the program's own end is its
 * "exit" event: ask again then). */
int proc_end_watch(proc *p) {
  struct tree_end *te = end_of(p);
  if (te == NULL) return -ENOMEM;
  if (te->empty) return 1;
  /* While the program runs its "exit" event comes first, and the caller asks again then:
   * nothing is watched yet. What of its tree outlives it is found then (in its cgroup, or
   * come back to the host as its subreaper), so a session whose tree dies with its program
   * costs no watch at all. */
  if (!p->reaped) return 0;
  if (p->cg.id != 0 && !te->cg_empty && cgroups_all_empty()) {
    te->cg_empty = 1; /* (and nothing is left to be owed a signal) */
    te->owed = 0;
    unwatch_cgroup(te);
  } else if (p->cg.id != 0 && !te->cg_empty) {
    if (te->wd >= 0) return 0; /* watched: its event comes */
    /* Empty now: with the program gone nothing can fill it again, and no watch is needed
     * (nor the rest of it the signal owed). Else watched first, then read again: no change
     * falls between. */
    if (cg_session_populated(&p->cg) == 1) {
      pay_owed(p);
      if (ensure_cg_poll(p) == 0) {
        te->wd = cg_session_watch(&p->cg);
        if (te->wd >= 0) {
          te->next = watching;
          watching = te;
        }
      }
      if (cg_session_populated(&p->cg) == 1) return 0;
      unwatch_cgroup(te);
    }
    te->cg_empty = 1;
    te->owed = 0;
  } else if (te->left > 0 || arm_pidfds(te) > 0) {
    return 0;
  }
  te->empty = 1;
  return 1;
}

/* Closing: SIGKILL what is alive and let go of every descriptor now; the program's zombie is
 * reaped when SIGCHLD says so and the cgroup removed once empty, without a wait here. */
int proc_end_close(proc *p, const char *why) {
  norphans = 0;
  p->ending = 1;
  int known_empty = p->reaped && p->te != NULL && p->te->cg_empty;
  int cg_alive = 0, ns_alive = p->init_pid > 0 && !p->init_killed;
  /* (while its program or its pid namespace's init lives, it is full) */
  if (p->cg.id != 0 && !known_empty && p->reaped && !ns_alive) {
    /* (one read of the host's directory says so for all when every program is gone) */
    cg_alive = !cgroups_all_empty() && cg_session_populated(&p->cg) == 1;
    known_empty = !cg_alive; /* with its program gone it cannot fill again */
  }
  int left = 0; /* without a cgroup: what it left came back to the host, its subreaper */
  if (p->cg.id == 0 && p->reaped && !ns_alive && !(p->te != NULL && p->te->empty)) {
    static pid_t pids[MAX_TREE];
    left = members(p, pids) > 0;
  }
  int alive = !p->reaped || ns_alive || cg_alive || left;
  if (alive) {
    const char *method;
    if (p->killed_by[0] == '\0') snprintf(p->killed_by, sizeof p->killed_by, "%s", why);
    kill_now(p, &method, 0);
  }
  if (p->te != NULL) {
    unwatch_cgroup(p->te);
    while (p->te->items != NULL) item_close(p->te->items);
    free(p->te);
    p->te = NULL;
  }
  return known_empty && !alive;
}

/* After the handles were closed: the pidfd goes now, the zombie to be is adopted. */
void proc_end_release(proc *p, int known_empty) {
  proc_ns_release(p);
  if (p->pidfd >= 0) { /* (libuv lets it go at once after uv_close) */
    if (!p->reaped && !proc_reap(p, 0)) proc_adopt(&luxec_gethost(p->L)->loop, p->pid);
    close(p->pidfd);
    p->pidfd = -1;
  }
  for (int i = 0; i < norphans; i++) proc_adopt(&luxec_gethost(p->L)->loop, orphans[i]);
  norphans = 0;
  cg_session_release(&p->cg, known_empty);
}

/* At host exit, after every session was closed: the host's own handles go. */
void proc_end_shutdown(void) {
  proc_ns_shutdown();
  if (cg_poll_open) {
    cg_poll_open = 0;
    uv_close((uv_handle_t *)&cg_poll, NULL);
  }
  proc_adopt_shutdown();
}

/* ---- Lua ---- */

/* p:watch_tree() -> true when nothing of the session is alive; else false, and a
 * "tree_empty" event follows when the rest of the tree is gone (after "exit": ask again). */
static int proc_watch_tree(lua_State *L) {
  proc *p = proc_check(L, 1);
  int rc = proc_end_watch(p);
  if (rc < 0) return luxec_push_error(L, -rc);
  lua_pushboolean(L, rc);
  return 1;
}

/* p:kill_tree(reason) -> {killed = n, method = "..."}: SIGKILL now, no wait (watch_tree
 * tells when it is over) */
static int proc_kill_tree_l(lua_State *L) {
  proc *p = proc_check(L, 1);
  const char *reason = luaL_optstring(L, 2, "terminate");
  if (p->killed_by[0] == '\0' && !p->reaped)
    snprintf(p->killed_by, sizeof p->killed_by, "%s", reason);
  p->ending = 1;
  const char *method;
  int killed = kill_now(p, &method, 1);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, killed);
  lua_setfield(L, -2, "killed");
  lua_pushstring(L, method);
  lua_setfield(L, -2, "method");
  return 1;
}

/* Argument 1, a list of sessions, checked whole before any is touched: its length. */
static lua_Integer check_list(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    proc_check(L, -1);
    lua_pop(L, 1);
  }
  return n;
}

/* core.kill_trees({p, ...} [, reason]) -> processes killed, {killed of each}: every tree at
 * once, no wait */
static int core_kill_trees(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const char *reason = luaL_optstring(L, 2, "terminate");
  lua_Integer n = check_list(L);
  int total = 0;
  lua_createtable(L, (int)n, 0);
  batch_begin();
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    proc *p = proc_check(L, -1);
    lua_pop(L, 1);
    int k = proc_end_kill(p, reason);
    total += k;
    lua_pushinteger(L, k);
    lua_rawseti(L, -2, i);
  }
  batch_end();
  lua_pushinteger(L, total);
  lua_insert(L, -2);
  return 2;
}

/* core.signal_trees({p, ...}, sig [, defer]) -> processes signalled (each tree as
 * p:signal_tree), {how each session's tree is reached: "cgroup" or "process group and sweep"}.
 * With defer, a running program's group has the signal now and the rest of its tree is owed
 * it: sent when the program is reaped and its tree looked at (watch_trees), or by
 * signal_rest, whichever comes first; a tree that ends with its program costs no look. */
static int core_signal_trees(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int sig = proc_checksignal(L, 2);
  int defer = lua_toboolean(L, 3);
  lua_Integer n = check_list(L);
  int total = 0;
  /* Every program's group first, one call each: the ends begin while the rest of each tree
   * is looked up (a read of its cgroup, or of /proc). */
  static unsigned char led[MAX_TREE];
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    proc *p = proc_check(L, -1);
    lua_pop(L, 1);
    p->ending = 1; /* (an end asked: it claims no unmarked orphan of another session's) */
    if (i <= MAX_TREE) led[i - 1] = (unsigned char)proc_tree_signal_group(p, sig);
  }
  lua_createtable(L, (int)n, 0);
  batch_begin();
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    proc *p = proc_check(L, -1);
    lua_pop(L, 1);
    int was_led = i <= MAX_TREE && led[i - 1];
    /* (a sandbox's init holds its tree: signalled whole at once) */
    struct tree_end *te = defer && was_led && p->init_pid <= 0 ? end_of(p) : NULL;
    if (te != NULL && !te->killing) {
      te->owed = sig;
      total++;
    } else {
      total += proc_tree_signal_led(p, sig, was_led);
    }
    lua_pushstring(L, p->cg.id != 0 ? "cgroup" : "process group and sweep");
    lua_rawseti(L, -2, i);
  }
  batch_end();
  lua_pushinteger(L, total);
  lua_insert(L, -2);
  return 2;
}

/* core.signal_rest({p, ...}) -> processes signalled: what signal_trees with defer still owes
 * to each tree, sent now */
static int core_signal_rest(lua_State *L) {
  lua_Integer n = check_list(L);
  int total = 0;
  batch_begin();
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    proc *p = proc_check(L, -1);
    lua_pop(L, 1);
    total += pay_owed(p);
  }
  batch_end();
  lua_pushinteger(L, total);
  return 1;
}

/* core.watch_trees({p, ...}) -> {gone, ...}: p:watch_tree() of each, with one scan */
static int core_watch_trees(lua_State *L) {
  lua_Integer n = check_list(L);
  lua_createtable(L, (int)n, 0);
  batch_begin();
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    int rc = proc_end_watch(proc_check(L, -1)); /* (no Lua runs in it) */
    lua_pop(L, 1);
    lua_pushboolean(L, rc == 1);
    lua_rawseti(L, -2, i);
  }
  batch_end();
  return 1;
}

const luaL_Reg proc_end_functions[] = {{"kill_trees", core_kill_trees},
                                       {"watch_trees", core_watch_trees},
                                       {"signal_trees", core_signal_trees},
                                       {"signal_rest", core_signal_rest},
                                       {NULL, NULL}};

const luaL_Reg proc_end_methods[] = {
    {"kill_tree", proc_kill_tree_l}, {"watch_tree", proc_watch_tree}, {NULL, NULL}};
