/* proc_orphans.c: what the host owns of its sessions beyond their first process, without a
 * cgroup. As child subreaper it adopts the orphans of its sessions and reaps those, and only
 * those: never a child it did not start (io.popen, os.execute, uv.spawn). And a watchdog kills
 * every session tree when the host ends, however it ends (SIGKILL included). */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "procfs.h"

static int subreaper = 0;
static void watchdog_tell(int32_t msg);
static int watching = 0;        /* the handles below are open (or closing, at the end) */
static uv_signal_t orphan_sig;  /* SIGCHLD, while there are sessions without a cgroup or with
                                 * a sandbox's init, both of which leave children to reap */
static uv_timer_t orphan_timer; /* and a slow sweep, for a SIGCHLD that went elsewhere */
static uv_check_t orphan_check; /* the SIGCHLDs of one turn of the loop: one sweep after them */
static int watchdog_fd = -1;    /* write end: session ids in, EOF when the host ends */

/* Adopted orphans known to be the sessions', with their start time: a pid that someone else
 * reaped and the kernel gave to a new child of the host is not taken for the old one. */
#define ADOPTED_MAX 1024
static struct {
  pid_t pid;
  unsigned long long start;
} adopted[ADOPTED_MAX];
static int nadopted = 0;

/* The marker prefix every session of this host has in its environment without a cgroup
 * ("LUXEC_SESSION=<host pid>."), and the cgroup directory name with one ("/luxec.<pid>/"). */
static char marker_prefix[64], cgroup_part[64];
static size_t marker_len;
static pid_t host_pid; /* (the watchdog, a fork of the host, keeps the host's) */

/* Facts of /proc/<pid>/stat: state, session id, start time. 0, or -1 when it is gone. */
static int stat_of(pid_t pid, char *state, pid_t *sid, unsigned long long *start) {
  char buf[1024];
  if (pfs_read(pid, "stat", buf, sizeof buf) < 0) return -1;
  char *p = strrchr(buf, ')');
  int ppid, pgrp, session;
  if (p == NULL || sscanf(p + 1, " %c %d %d %d", state, &ppid, &pgrp, &session) != 4) return -1;
  *sid = session;
  /* field 22; fields 3 and on follow the ')' */
  unsigned long long v = 0;
  int field = 2;
  for (char *q = p + 1; *q && field < 22; q++) {
    if (*q == ' ') field++;
    if (field == 22) v = strtoull(q + 1, NULL, 10);
  }
  *start = v;
  return 0;
}

static int has_prefix_env(pid_t pid) {
  return marker_len > 0 && pfs_has_env_prefix(pid, marker_prefix);
}

static int in_host_cgroup(pid_t pid) {
  char buf[4096];
  if (cgroup_part[0] == '\0' || pfs_read(pid, "cgroup", buf, sizeof buf) < 0) return 0;
  return strstr(buf, cgroup_part) != NULL;
}

static int adopted_index(pid_t pid, unsigned long long start) {
  for (int i = 0; i < nadopted; i++)
    if (adopted[i].pid == pid && adopted[i].start == start) return i;
  return -1;
}

static void adopted_drop(int i) {
  adopted[i] = adopted[--nadopted];
}

/* The host's own hard RTTIME: its children but the sessions' have it; a session's process
 * can only lower it (the mark, or below). 0: unknown yet, or marks are not in use. */
static uint64_t host_rtt = 0;

static void host_rtt_init(void) {
  struct rlimit r;
  if (host_rtt != 0 || getrlimit(RLIMIT_RTTIME, &r) != 0) return;
  uint64_t v = r.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_max;
  if (v > pfs_mark_make(0, 0)) host_rtt = v;
}

/* A process started in a session (its hard RTTIME below the host's) whose limit is the mark
 * of no live session (lowered further, or made another value that looks like one) and that
 * no cgroup of the host holds. */
static int unmarked(pid_t kid) {
  uint64_t hard;
  if (host_rtt == 0 || pfs_rttime_hard(kid, &hard) != 0 || hard >= host_rtt) return 0;
  for (proc *q = proc_live(); q != NULL; q = q->next)
    if (q->mark != 0 && q->mark == hard && !q->closed) return 0;
  return !in_host_cgroup(kid);
}

int proc_orphans_unclaimed(pid_t kid, proc *except, int claim_ending) {
  char state;
  pid_t sid;
  unsigned long long start;
  if (stat_of(kid, &state, &sid, &start) < 0 || state == 'Z' || !unmarked(kid)) return 0;
  for (proc *q = proc_live(); q != NULL; q = q->next) {
    if (q == except || q->cg.id != 0 || q->init_pid > 0 || q->marker[0] == '\0') continue;
    if ((claim_ending || (!q->ending && !q->closed)) && q->start_ticks <= start) return 0;
  }
  return 1;
}

void proc_orphans_kill_unmarked(void) {
  if (!subreaper || host_rtt == 0) return;
  static pid_t kids[1024];
  int n = pfs_children(getpid(), kids, 1024);
  for (int i = 0; i < n; i++)
    if (kids[i] != cg_watchdog_pid() && unmarked(kids[i])) kill(kids[i], SIGKILL);
}

/* Whether a child of the host is a session's orphan: one of its session ids, its marker
 * (readable only while it lives: a live orphan is remembered), or its cgroup. */
static int ours(pid_t kid, proc *live) {
  char state;
  pid_t sid;
  unsigned long long start;
  if (stat_of(kid, &state, &sid, &start) < 0) return 0;
  if (adopted_index(kid, start) >= 0) return 1;
  int yes = 0;
  for (proc *p = live; p != NULL && !yes; p = p->next) yes = p->pid == sid;
  if (!yes && state != 'Z') yes = has_prefix_env(kid);
  if (!yes) yes = marker_len > 0 && pfs_mark_host(pfs_mark_of(kid)) == host_pid;
  if (!yes) yes = in_host_cgroup(kid);
  if (yes && state != 'Z' && nadopted < ADOPTED_MAX) {
    adopted[nadopted].pid = kid;
    adopted[nadopted].start = start;
    nadopted++;
  }
  return yes;
}

/* The sessions' own children (their programs not reaped yet, their sandboxes' inits) with
 * what each is (session_child's answer), sorted by pid: made once per sweep, so a sweep over
 * the host's children costs no walk of every session per child. */
typedef struct {
  pid_t pid;
  int kind;
} own_child;

static own_child owns[2 * 4096];
static int nowns = 0;

static int cmp_own(const void *a, const void *b) {
  pid_t x = ((const own_child *)a)->pid, y = ((const own_child *)b)->pid;
  return x < y ? -1 : x > y;
}

static void owns_build(proc *live) {
  nowns = 0;
  for (proc *p = live; p != NULL && nowns < (int)(sizeof owns / sizeof owns[0]) - 1; p = p->next) {
    if (!p->reaped) owns[nowns++] = (own_child){p->pid, 1};
    if (p->init_pid > 0) owns[nowns++] = (own_child){p->init_pid, p->init_killed ? 2 : 1};
  }
  qsort(owns, (size_t)nowns, sizeof owns[0], cmp_own);
}

/* 1: a session's own child, reaped by the session; 2: a sandbox's init the session killed,
 * the host's to reap; 0: neither. (After owns_build.) */
static int session_child(pid_t kid) {
  own_child key = {kid, 0};
  const own_child *o = bsearch(&key, owns, (size_t)nowns, sizeof owns[0], cmp_own);
  if (o != NULL) return o->kind;
  return kid == cg_watchdog_pid();
}

static void adopt(pid_t pid) {
  char state;
  pid_t sid;
  unsigned long long start;
  if (nadopted < ADOPTED_MAX && stat_of(pid, &state, &sid, &start) == 0 &&
      adopted_index(pid, start) < 0) {
    adopted[nadopted].pid = pid;
    adopted[nadopted].start = start;
    nadopted++;
  }
}

/* A session is freed with its sandbox's init killed: reap the init now, or remember it as an
 * orphan of the session's when it has not ended yet. */
void proc_orphans_init_done(proc *p) {
  if (p->init_pid <= 0) return;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid(P_PID, (id_t)p->init_pid, &si, WEXITED | WNOHANG | __WALL) == 0 && si.si_pid == 0)
    adopt(p->init_pid);
}

#define UV_PIDS_MAX 1024
static void collect_uv_pid(uv_handle_t *h, void *arg) {
  pid_t *pids = arg;
  if (uv_handle_get_type(h) == UV_PROCESS && pids[0] < UV_PIDS_MAX - 1) {
    pids[++pids[0]] = uv_process_get_pid((uv_process_t *)h);
  }
}

/* Whether a child of the host that is not the sessions' may be reaped: only an orphan the
 * host adopted as subreaper from some other tree (so it cannot be a child the host started
 * itself: those share the host's session, as io.popen's and os.execute's do, or are
 * libuv's). Its own parent would have reaped it; now nobody else will. */
static int foreign_orphan(pid_t kid, const pid_t *uvpids) {
  char state;
  pid_t sid;
  unsigned long long start;
  if (stat_of(kid, &state, &sid, &start) < 0) return 0;
  for (int j = 1; j <= uvpids[0]; j++)
    if (uvpids[j] == kid) return 0;
  /* In the host's own session, only the init of another luxec's sandbox (pid 1 of a pid
   * namespace below: the host never starts one itself but through a session, whose inits
   * session_child knows) can be told apart as adopted. */
  return sid != getsid(0) || pfs_status_last(kid, "NSpid") == 1;
}

/* With nothing to look for, the sweep pauses (its signal and timer stopped: an idle host is
 * not woken every second): the host is not the subreaper (no orphan comes back to it), no
 * orphan is remembered and no live session has a sandbox's init. watch() resumes it. */
static int paused = 0;

static void pause_if_idle(void) {
  if (!watching || paused || subreaper || nadopted > 0) return;
  for (proc *p = proc_live(); p != NULL; p = p->next)
    if (p->init_pid > 0) return;
  uv_signal_stop(&orphan_sig);
  uv_timer_stop(&orphan_timer);
  paused = 1;
}

/* Reap the adopted orphans that ended; remember the live ones that are the sessions'. */
void proc_orphans_reap(void) {
  if (!watching) return;
  proc *live = proc_live();
  static pid_t kids[1024], uvpids[UV_PIDS_MAX];
  uvpids[0] = 0;
  int n = pfs_children(getpid(), kids, 1024);
  int walked = 0; /* uvpids, made the first time a child is neither a session's nor ours */
  owns_build(live);
  /* (not the subreaper: no orphan comes back, so a stale entry is dropped at once, and an
   * empty list lets the sweep pause) */
  for (int j = nadopted - 1; j >= 0 && (nadopted > ADOPTED_MAX / 2 || !subreaper); j--) {
    int child = 0; /* reaped elsewhere (a tree kill waits for what it killed): forgotten */
    for (int i = 0; i < n && !child; i++) child = kids[i] == adopted[j].pid;
    if (!child) adopted_drop(j);
  }
  for (int i = 0; i < n; i++) {
    int own = session_child(kids[i]);
    if (own == 1) continue;
    /* One that lost every mark: killed once no session that may be its own is left (each
     * kills it as its own if it is the last one to end); the watchdog knows it meanwhile. */
    if (own == 0 && subreaper && host_rtt != 0 && unmarked(kids[i])) {
      char state;
      pid_t sid;
      unsigned long long start;
      int known = stat_of(kids[i], &state, &sid, &start) == 0 && adopted_index(kids[i], start) >= 0;
      if (proc_orphans_unclaimed(kids[i], NULL, 1)) {
        kill(kids[i], SIGKILL);
      } else if (!known) {
        watchdog_tell((int32_t)kids[i]);
      }
      if (!known) adopt(kids[i]);
    }
    if (own == 0 && !ours(kids[i], live)) {
      if (!subreaper) continue;
      if (!walked) uv_walk(orphan_timer.loop, collect_uv_pid, uvpids);
      walked = 1;
      if (!foreign_orphan(kids[i], uvpids)) continue;
    }
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)kids[i], &si, WEXITED | WNOHANG | __WALL) == 0 &&
        si.si_pid == kids[i]) {
      for (int j = nadopted - 1; j >= 0; j--)
        if (adopted[j].pid == kids[i]) adopted_drop(j);
      watchdog_tell(-(int32_t)kids[i]); /* (one it was told of: an unmarked one) */
    }
  }
  pause_if_idle();
}

static void orphan_check_cb(uv_check_t *h) {
  uv_check_stop(h);
  /* The SIGCHLDs of sessions' programs, reaped through their pidfds this turn, leave no
   * child of the host ended: one look (that reaps nothing) saves the sweep. */
  siginfo_t si;
  si.si_pid = 0;
  if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0 || si.si_pid == 0) return;
  proc_orphans_reap();
}

/* Many children ending together send many SIGCHLDs in one turn: the sweep runs once, after
 * the turn's events (the sessions' own programs reaped by then). */
static void orphan_cb(uv_signal_t *h, int signum) {
  (void)h;
  (void)signum;
  uv_check_start(&orphan_check, orphan_check_cb);
}

static void orphan_timer_cb(uv_timer_t *h) {
  (void)h;
  proc_orphans_reap();
}

/* ---- the watchdog ---------------------------------------------------------------------- */

#define WD_MAX 8192
static pid_t wd_ids[WD_MAX]; /* in the watchdog: the session ids (and sandbox inits) alive */
static unsigned long long wd_start[WD_MAX]; /* each one's start time, read when told */
static int wd_n = 0;

/* Drop the ids whose number now names another process. While a process of a session lives,
 * the session's id (its first process's pid, and its group's) cannot be given to a new
 * process; once one has it, nothing of that session is left, and a kill by that number would
 * reach a stranger. (The host forgets every id it reaps; this covers one it could not tell.) */
static void wd_drop_reused(void) {
  for (int i = 0; i < wd_n;) {
    char state;
    pid_t sid;
    unsigned long long start;
    if (stat_of(wd_ids[i], &state, &sid, &start) == 0 && start != wd_start[i]) {
      wd_n--;
      wd_ids[i] = wd_ids[wd_n];
      wd_start[i] = wd_start[wd_n];
    } else {
      i++;
    }
  }
}

static int wd_known(pid_t sid) {
  for (int i = 0; i < wd_n; i++)
    if (wd_ids[i] == sid) return 1;
  return 0;
}

/* One pass over /proc: SIGKILL every process of a session (its id, or the marker); how many
 * were found alive. Only system calls and stack buffers: it runs in a forked copy. */
static int wd_sweep(void) {
  int found = 0;
  wd_drop_reused();
  for (int i = 0; i < wd_n; i++) { /* (a zombie takes a signal too: the scan counts) */
    kill(-wd_ids[i], SIGKILL);
    kill(wd_ids[i], SIGKILL);
  }
  int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return found;
  char buf[8192];
  long nread;
  pid_t self = getpid();
  while ((nread = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
    for (long off = 0; off < nread;) {
      struct {
        unsigned long long ino;
        long long off;
        unsigned short reclen;
        unsigned char type;
        char name[];
      } *d = (void *)(buf + off);
      off += d->reclen;
      pid_t pid = 0;
      const char *c = d->name;
      for (; *c >= '0' && *c <= '9'; c++) pid = pid * 10 + (*c - '0');
      if (*c != '\0' || pid <= 1 || pid == self) continue;
      char state;
      pid_t sid;
      unsigned long long start;
      if (stat_of(pid, &state, &sid, &start) < 0 || state == 'Z' || state == 'X') continue;
      if (wd_known(sid) || has_prefix_env(pid) || pfs_mark_host(pfs_mark_of(pid)) == host_pid) {
        kill(pid, SIGKILL);
        found++;
      }
    }
  }
  close(dir);
  return found;
}

static void watchdog_main(int rd) {
  if (rd != 3) {
    dup2(rd, 3);
    rd = 3;
  }
  syscall(SYS_close_range, 4U, ~0U, 0U);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 3) close(null);
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  prctl(PR_SET_NAME, "luxec-sweeper");
  int32_t msgs[1024]; /* the host writes whole messages, at most a pipe's atomic size at once */
  ssize_t n;
  while ((n = read(rd, msgs, sizeof msgs)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || n % (ssize_t)sizeof msgs[0] != 0) break;
    for (ssize_t k = 0; k < n / (ssize_t)sizeof msgs[0]; k++) {
      int32_t msg = msgs[k];
      char state;
      pid_t sid;
      unsigned long long start;
      if (msg > 0 && wd_n < WD_MAX && !wd_known(msg)) {
        /* the host's unreaped child when told: its start time tells it from a later one */
        if (stat_of(msg, &state, &sid, &start) < 0) continue;
        wd_ids[wd_n] = msg;
        wd_start[wd_n++] = start;
      } else if (msg < 0) {
        for (int i = 0; i < wd_n; i++) {
          if (wd_ids[i] != -msg) continue;
          wd_n--;
          wd_ids[i] = wd_ids[wd_n];
          wd_start[i] = wd_start[wd_n];
          break;
        }
      } else if (msg > 0 && wd_n >= WD_MAX && !wd_known(msg)) {
        wd_drop_reused(); /* (full of ids the host could not tell reaped: make room) */
        if (wd_n < WD_MAX && stat_of(msg, &state, &sid, &start) == 0) {
          wd_ids[wd_n] = msg;
          wd_start[wd_n++] = start;
        }
      }
    }
  }
  /* The host is gone: kill until a pass finds nothing alive (a tree that forks meanwhile
   * is caught by the next pass), for at most about five seconds. */
  struct timespec tick = {0, 2 * 1000 * 1000};
  for (int round = 0; round < 2500 && wd_sweep() > 0; round++) nanosleep(&tick, NULL);
  _exit(0);
}

/* Start the watchdog as a grandchild, before the host becomes a subreaper, so that it is
 * init's (or an outer subreaper's) and never the host's child. */
static void watchdog_start(void) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return;
  pid_t mid = fork();
  if (mid == 0) {
    setsid();
    if (fork() == 0) {
      close(fds[1]);
      watchdog_main(fds[0]);
    }
    _exit(0);
  }
  close(fds[0]);
  if (mid < 0) {
    close(fds[1]);
    return;
  }
  while (waitpid(mid, NULL, 0) < 0 && errno == EINTR) {
  }
  watchdog_fd = fds[1];
}

/* What the watchdog is to forget (the sessions reaped in this turn of the loop): told in one
 * write once the turn's events are done, not one write (and one wake-up of it) each. */
static int32_t forgets[1024];
static int nforgets = 0;
static uv_check_t forget_check;

static void watchdog_write(const int32_t *msgs, int n) {
  if (watchdog_fd < 0 || n == 0) return;
  while (write(watchdog_fd, msgs, (size_t)n * sizeof msgs[0]) < 0 && errno == EINTR) {
  }
}

static void forgets_flush(void) {
  watchdog_write(forgets, nforgets);
  nforgets = 0;
}

static void forget_check_cb(uv_check_t *h) {
  uv_check_stop(h);
  forgets_flush();
}

static void watchdog_tell(int32_t msg) {
  if (watchdog_fd < 0) return;
  if (msg < 0 && watching && !uv_is_closing((uv_handle_t *)&forget_check) &&
      nforgets < (int)(sizeof forgets / sizeof forgets[0])) {
    forgets[nforgets++] = msg;
    uv_check_start(&forget_check, forget_check_cb);
    return;
  }
  forgets_flush(); /* first: a pid reaped and given again to a new session, in that order */
  watchdog_write(&msg, 1);
}

static void watch(uv_loop_t *loop) {
  if (watching && paused) {
    paused = 0;
    uv_signal_start(&orphan_sig, orphan_cb, SIGCHLD);
    uv_timer_start(&orphan_timer, orphan_timer_cb, 1000, 1000);
  }
  if (watching) return;
  watching = 1;
  uv_signal_init(loop, &orphan_sig);
  orphan_sig.data = NULL;
  uv_signal_start(&orphan_sig, orphan_cb, SIGCHLD);
  uv_unref((uv_handle_t *)&orphan_sig);
  uv_timer_init(loop, &orphan_timer);
  orphan_timer.data = NULL;
  uv_timer_start(&orphan_timer, orphan_timer_cb, 1000, 1000);
  uv_unref((uv_handle_t *)&orphan_timer);
  uv_check_init(loop, &orphan_check);
  orphan_check.data = NULL;
  uv_unref((uv_handle_t *)&orphan_check);
  uv_check_init(loop, &forget_check);
  forget_check.data = NULL;
  uv_unref((uv_handle_t *)&forget_check);
}

/* What tells the host's sessions apart: its marker prefix, cgroup name, pid and limit. */
static void names_init(void) {
  if (marker_len != 0) return;
  snprintf(marker_prefix, sizeof marker_prefix, "LUXEC_SESSION=%d.", (int)getpid());
  marker_len = strlen(marker_prefix);
  host_pid = getpid();
  host_rtt_init();
  snprintf(cgroup_part, sizeof cgroup_part, "/luxec.%d/", (int)getpid());
}

void proc_orphans_ready(void) {
  names_init();
  if (!subreaper) {
    watchdog_start();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    subreaper = 1;
  }
}

/* A session started. Without a cgroup, its session id (and its sandbox's init) is the
 * watchdog's to kill if the host ends before it does, and its orphans come back to the
 * host; a sandbox's init is the host's child to reap once the session is done with it. */
void proc_orphans_session(proc *p, uv_loop_t *loop) {
  names_init();
  if (p->cg.id == 0) proc_orphans_ready();
  if (p->cg.id == 0 || p->init_pid > 0) watch(loop);
  if (p->cg.id != 0) return;
  watchdog_tell((int32_t)p->pid);
  if (p->init_pid > 0) watchdog_tell((int32_t)p->init_pid);
}

/* The session's first process was reaped: its id may be reused, the watchdog forgets it. */
void proc_orphans_forget(pid_t pid) {
  if (pid > 0) watchdog_tell(-(int32_t)pid);
}

void proc_orphans_close(void) {
  forgets_flush();
  if (watching && !uv_is_closing((uv_handle_t *)&orphan_sig)) {
    uv_close((uv_handle_t *)&orphan_sig, NULL);
    uv_close((uv_handle_t *)&orphan_timer, NULL);
    uv_close((uv_handle_t *)&orphan_check, NULL);
    uv_close((uv_handle_t *)&forget_check, NULL);
  }
}
