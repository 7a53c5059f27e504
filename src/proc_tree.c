/* proc_tree.c: a session's whole process tree: signals, kill with proof, the processes that
 * hold its output open, and whether it waits for input. */
#include "proc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "launch.h"
#include "procfs.h"

void proc_ns_kill(proc *p) {
  if (p->init_pid <= 0 || p->init_killed) return;
  kill(p->init_pid, SIGKILL); /* still the host's unreaped child: the pid is this init's */
  p->init_killed = 1;
}

/* A sandbox's init, killed, until it is reaped. It runs on a stack of the host's memory
 * (CLONE_VM), which may be unmapped only then; its death sends no signal (its exit signal is
 * 0) and takes as long as the namespace's other processes take to die, so a pidfd says when,
 * on the loop. */
typedef struct init_end {
  uv_poll_t poll; /* data NULL: found with container_of */
  struct init_end *next;
  int fd;
  void *stack;
  struct netns_lease *netns; /* the session's network namespace, given back once it is reaped */
} init_end;

static init_end *ending_inits = NULL;

static void init_end_closed(uv_handle_t *h) {
  init_end *ie = container_of((uv_poll_t *)h, init_end, poll);
  close(ie->fd);
  free(ie);
}

static void init_end_forget(init_end *ie) {
  sandbox_netns_release(ie->netns, 0); /* (the host ends: not reaped) */
  for (init_end **pp = &ending_inits; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == ie) {
      *pp = ie->next;
      break;
    }
  }
  uv_close((uv_handle_t *)&ie->poll, init_end_closed);
}

static void init_end_cb(uv_poll_t *h, int status, int events) {
  init_end *ie = container_of(h, init_end, poll);
  (void)status, (void)events;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  int rc = waitid(P_PIDFD, (id_t)ie->fd, &si, WEXITED | WNOHANG | __WALL);
  if ((rc == 0 && si.si_pid == 0) || (rc < 0 && errno == EINTR)) return; /* not yet */
  launch_init_stack_free(ie->stack, 1); /* reaped here, or (ECHILD) by another: dead either way */
  /* (the kernel ends an init only after every other process of its namespace) */
  sandbox_netns_release(ie->netns, 1);
  ie->netns = NULL;
  sandbox_netns_refill(); /* (a normal user's goes to the keeper now, not at the next launch) */
  init_end_forget(ie);
}

/* Kill the init and reap it once dead (then its stack goes); the session lets go of both. */
void proc_ns_release(proc *p) {
  if (p->init_pid <= 0) return;
  proc_ns_kill(p);
  void *stack = p->init_stack;
  p->init_stack = NULL;
  init_end *ie = calloc(1, sizeof *ie);
  int fd = ie ? (int)syscall(SYS_pidfd_open, p->init_pid, 0) : -1;
  if (fd < 0 || uv_poll_init(&luxec_gethost(p->L)->loop, &ie->poll, fd) != 0) {
    /* (out of memory or descriptors: the stack stays mapped, the zombie stays; both small) */
    if (fd >= 0) close(fd);
    free(ie);
    sandbox_netns_release(p->netns, 0);
    p->netns = NULL;
    return;
  }
  ie->fd = fd;
  ie->stack = stack;
  ie->netns = p->netns;
  p->netns = NULL;
  ie->poll.data = NULL;
  ie->next = ending_inits;
  ending_inits = ie;
  uv_poll_start(&ie->poll, UV_READABLE, init_end_cb);
  uv_unref((uv_handle_t *)&ie->poll);
}

/* Host exit: what is still dying is let go (the host's memory goes with it). */
void proc_ns_shutdown(void) {
  while (ending_inits != NULL) init_end_forget(ending_inits);
}

static const struct {
  int sig;
  const char *name;
} names[] = {{SIGHUP, "HUP"},
             {SIGINT, "INT"},
             {SIGQUIT, "QUIT"},
             {SIGILL, "ILL"},
             {SIGTRAP, "TRAP"},
             {SIGABRT, "ABRT"},
             {SIGBUS, "BUS"},
             {SIGFPE, "FPE"},
             {SIGKILL, "KILL"},
             {SIGUSR1, "USR1"},
             {SIGSEGV, "SEGV"},
             {SIGUSR2, "USR2"},
             {SIGPIPE, "PIPE"},
             {SIGALRM, "ALRM"},
             {SIGTERM, "TERM"},
             {SIGCHLD, "CHLD"},
             {SIGCONT, "CONT"},
             {SIGSTOP, "STOP"},
             {SIGTSTP, "TSTP"},
             {SIGTTIN, "TTIN"},
             {SIGTTOU, "TTOU"},
             {SIGURG, "URG"},
             {SIGXCPU, "XCPU"},
             {SIGXFSZ, "XFSZ"},
             {SIGVTALRM, "VTALRM"},
             {SIGPROF, "PROF"},
             {SIGWINCH, "WINCH"},
             {SIGIO, "IO"},
             {SIGPWR, "PWR"},
             {SIGSYS, "SYS"},
             {0, NULL}};

const char *proc_signame(int sig) {
  for (int i = 0; names[i].name; i++)
    if (names[i].sig == sig) return names[i].name;
  return NULL;
}

int proc_checksignal(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    lua_Integer s = luaL_checkinteger(L, idx);
    if (s < 0 || s >= NSIG) return luaL_argerror(L, idx, "signal number out of range");
    return (int)s;
  }
  const char *name = luaL_checkstring(L, idx);
  if (strncmp(name, "SIG", 3) == 0) name += 3;
  for (int i = 0; names[i].name; i++)
    if (strcmp(names[i].name, name) == 0) return names[i].sig;
  return luaL_argerror(L, idx, lua_pushfstring(L, "unknown signal '%s'", luaL_checkstring(L, idx)));
}

/* p:signal(sig [, "group"]) -> true | nil, msg, code */
static int proc_signal(lua_State *L) {
  proc *p = proc_check(L, 1);
  int sig = proc_checksignal(L, 2);
  const char *target = luaL_optstring(L, 3, "process");
  int rc;
  if (strcmp(target, "group") == 0) {
    rc = kill(-p->pid, sig);
  } else if (strcmp(target, "process") == 0) {
    if (p->reaped || p->pidfd < 0) return luxec_push_error(L, ESRCH);
    rc = (int)syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0);
    /* A kernel (or valgrind) without pidfd_send_signal: the pid is still ours, since an
     * unreaped child's pid cannot be reused, so kill() is exact too. */
    if (rc < 0 && errno == ENOSYS) rc = kill(p->pid, sig);
  } else {
    return luaL_argerror(L, 3, "expected \"process\" or \"group\"");
  }
  if (rc < 0) return luxec_push_error(L, errno);
  lua_pushboolean(L, 1);
  return 1;
}

/* The program leads its own session (setsid at launch), so its process group is its pid for
 * life: 1 when the signal went to that group (the program and what stayed in its group). */
int proc_tree_signal_group(proc *p, int sig) {
  return !p->reaped && kill(-p->pid, sig) == 0;
}

/* Every process of the tree: how many. led: the program's group had it already (from
 * proc_tree_signal_group), and none of the group is signalled a second time. */
int proc_tree_signal_led(proc *p, int sig, int led) {
  static pid_t pids[4096];
  if (p->cg.id != 0) {
    int n = cg_session_pids(&p->cg, pids, 4096);
    for (int i = 0; i < n; i++) {
      if (led && (pids[i] == p->pid || getpgid(pids[i]) == p->pid)) continue;
      kill(pids[i], sig);
    }
    return n > 0 ? n : 0;
  }
  int n = proc_end_members(p, pids); /* (the program first while it runs) */
  for (int i = led && !p->reaped; i < n; i++) kill(pids[i], sig);
  return n;
}

int proc_tree_signal(proc *p, int sig) {
  if (p->cg.id != 0) return cg_session_signal(&p->cg, sig);
  return proc_tree_signal_led(p, sig, proc_tree_signal_group(p, sig));
}

/* p:signal_tree(sig): every process of the session (cgroup, else group + tree) */
static int proc_signal_tree(lua_State *L) {
  proc *p = proc_check(L, 1);
  lua_pushinteger(L, proc_tree_signal(p, proc_checksignal(L, 2)));
  return 1;
}

/* p:tree_alive() -> 0 when nothing of the session is alive (else a positive number) */
static int proc_tree_alive(lua_State *L) {
  proc *p = proc_check(L, 1);
  static pid_t pids[4096];
  int n;
  if (p->cg.id != 0)
    n = cg_session_populated(&p->cg) == 1; /* the exact count is not needed */
  else
    n = proc_end_members(p, pids);
  lua_pushinteger(L, n);
  return 1;
}

static int proc_resize(lua_State *L) {
  proc *p = proc_check(L, 1);
  lua_Integer rows = luaL_checkinteger(L, 2), cols = luaL_checkinteger(L, 3);
  luaL_argcheck(L, rows > 0 && rows <= 65535, 2, "rows must be 1..65535");
  luaL_argcheck(L, cols > 0 && cols <= 65535, 3, "cols must be 1..65535");
  if (!p->tty) return luaL_error(L, "resize: this session has no terminal (spawn with tty = true)");
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  int fd = p->out[0].fd >= 0 ? p->out[0].fd : p->in_fd;
  if (fd < 0 || ioctl(fd, TIOCSWINSZ, &ws) < 0) return luxec_push_error(L, fd < 0 ? EBADF : errno);
  lua_pushboolean(L, 1);
  return 1;
}

/* What /proc shows for the child's end of one of our descriptors ("pipe:[inode]", or the
 * terminal's path), looked up the first time it is asked rather than at every spawn; ""
 * once our end is closed (the stream at EOF, stdin closed) before anyone asked. */
static const char *target_of(proc *p, char target[PROC_TARGET_MAX], int fd) {
  if (target[0] != '\0' || fd < 0) return target;
  struct stat st;
  if (p->tty) {
    if (ptsname_r(fd, target, PROC_TARGET_MAX) != 0) target[0] = '\0';
  } else if (fstat(fd, &st) == 0) {
    snprintf(target, PROC_TARGET_MAX, "pipe:[%lu]", (unsigned long)st.st_ino);
  }
  return target;
}

/* p:holders() -> {{pid=, cmd=}, ...}: processes other than the host that hold an output
 * stream's write side open. */
static int proc_holders(lua_State *L) {
  proc *p = proc_check(L, 1);
  static pid_t cands[32768];
  int n = p->cg.id != 0 ? cg_session_pids(&p->cg, cands, 32768) : pfs_all_pids(cands, 32768);
  lua_newtable(L);
  int k = 0;
  for (int i = 0; i < p->nout; i++) {
    if (p->out[i].eof || target_of(p, p->out[i].target, p->out[i].fd)[0] == '\0') continue;
    pid_t found[64];
    int m = pfs_holders(cands, n < 0 ? 0 : n, p->out[i].target, found, 64);
    for (int j = 0; j < m; j++) {
      char cmd[512];
      pfs_cmdline(found[j], cmd, sizeof cmd);
      lua_createtable(L, 0, 3);
      lua_pushinteger(L, found[j]);
      lua_setfield(L, -2, "pid");
      lua_pushstring(L, cmd);
      lua_setfield(L, -2, "cmd");
      lua_pushstring(L, i == 0 ? "stdout" : "stderr");
      lua_setfield(L, -2, "stream");
      lua_rawseti(L, -2, ++k);
    }
  }
  return 1;
}

/* p:input_state() -> waiting_for_input, echo_off, canonical (the last two nil without a
 * terminal). A secret prompt (getpass) reads lines with echo off; a line editor (readline,
 * a REPL) turns echo off too but reads characters (not canonical). */
static int proc_input_state(lua_State *L) {
  proc *p = proc_check(L, 1);
  int waiting = 0;
  pid_t fg = -1;
  if (p->tty && p->out[0].fd >= 0) fg = tcgetpgrp(p->out[0].fd);
  int in_fd = p->tty ? p->out[0].fd : p->in_fd;
  if (!p->stdin_closed && target_of(p, p->in_target, in_fd)[0] != '\0' && (!p->tty || fg > 0)) {
    pid_t pids[1024];
    int n;
    if (p->cg.id != 0) {
      n = cg_session_pids(&p->cg, pids, 1024);
    } else {
      n = 0;
      if (!p->reaped) pids[n++] = p->pid;
      n += pfs_descendants(p->pid, pids + n, 1024 - n);
    }
    for (int i = 0; i < n && !waiting; i++) {
      if (p->tty && pfs_pgid(pids[i]) != fg) continue;
      waiting = pfs_waiting_on(pids[i], p->in_target);
    }
  }
  lua_pushboolean(L, waiting);
  struct termios tio;
  if (p->tty && p->out[0].fd >= 0 && tcgetattr(p->out[0].fd, &tio) == 0) {
    lua_pushboolean(L, !(tio.c_lflag & ECHO));
    lua_pushboolean(L, (tio.c_lflag & ICANON) != 0);
  } else {
    lua_pushnil(L);
    lua_pushnil(L);
  }
  return 3;
}

/* core.signum(sig) -> the signal's number (a name, "SIG" optional, or a number), or raises */
static int core_signum(lua_State *L) {
  lua_pushinteger(L, proc_checksignal(L, 1));
  return 1;
}

const luaL_Reg proc_tree_functions[] = {{"signum", core_signum}, {NULL, NULL}};

const luaL_Reg proc_tree_methods[] = {{"holders", proc_holders},
                                      {"input_state", proc_input_state},
                                      {"resize", proc_resize},
                                      {"signal", proc_signal},
                                      {"signal_tree", proc_signal_tree},
                                      {"tree_alive", proc_tree_alive},
                                      {NULL, NULL}};
