/* launch_ns.c: starting a program inside its sandbox's namespaces. The host cannot enter
 * namespaces itself (it has threads, and must stay outside), so a setup child does it: cloned
 * sharing the host's memory and descriptor table while the host waits (CLONE_VFORK), it makes
 * the user namespace (not root), the mount, pid, IPC and network namespaces and the mount
 * layer, opens the session's PTY from the sandbox's own devpts (its descriptors land in the
 * host's table), then clones two children that become the HOST's children (CLONE_PARENT):
 *   - the pid namespace's init (pid 1): it only waits, with SIGCHLD ignored so the kernel
 *     reaps the orphans that come to it, until the host is gone (EOF on a pipe only the host
 *     writes to, and PR_SET_PDEATHSIG). Killing it kills everything in the namespace, however
 *     the processes there detached themselves: that is how a sandboxed tree ends, and how it
 *     ends with the host whatever way the host goes.
 *   - the program (pid 2), with the ordinary launch path (launch_child_main): it mounts the
 *     fresh /proc, applies Landlock and seccomp and execs. Its exit status reaches the host
 *     as from any child.
 * The setup child then exits; the host reaps it. */
#include "clone3.h"
#include "launch_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

typedef struct setup_ctx {
  const launch_req *req;
  child_ctx *g;     /* the program's launch context */
  char *init_stack; /* the init's own stack: it outlives this launch */
  int alive_fd;     /* read end of the pipe whose EOF tells the init the host is gone */
  volatile pid_t pid, init_pid;
  volatile int pidfd, master, slave;
  volatile int err;
  volatile const char *stage;
  int in_cgroup;        /* born in its cgroup (clone3): the inits' or the session's */
  volatile int started; /* it ran (a child killed at its birth never does) */
} setup_ctx;

/* The write end is never written and never leaves the host (close-on-exec, and every init
 * closes it): its EOF is the host's death, however that comes. */
static int alive_pipe[2] = {-1, -1};

/* pid 1 of a sandbox. It shares the host's memory (no copy of the host's heap for each
 * session) on a stack of its own and runs while the host's threads do, so it uses the
 * system calls directly: no libc wrapper or sanitizer interceptor touches the host's
 * thread state, and each call succeeds (errno, which is the host's, is never written). All
 * signals stay blocked as the host blocked them around the clone: only SIGKILL reaches it. */
static int init_main(void *arg) {
  int fd = (int)(intptr_t)arg;
  struct kernel_sigaction ign = {.handler = SIG_IGN};
  /* orphans that come to pid 1 are reaped by the kernel */
  syscall(SYS_rt_sigaction, SIGCHLD, &ign, NULL, sizeof ign.mask);
  syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  syscall(SYS_chdir, "/");
  if (fd > 0) syscall(SYS_close_range, 0U, (unsigned)fd - 1, 0U);
  syscall(SYS_close_range, (unsigned)fd + 1, ~0U, 0U);
  char byte;
  while (syscall(SYS_read, fd, &byte, 1) != 0) {
  }
  syscall(SYS_exit, 0);
  return 0;
}

/* Stacks of inits that ended, kept for the next ones: unmapping memory the host's threads
 * share costs a TLB shootdown on every CPU one of them ran on (inter-processor interrupts,
 * slow on a VM: ~0.15 ms a session measured here). (The loop's thread only.) */
#define KEPT_INIT_STACKS 32
static void *kept_stacks[KEPT_INIT_STACKS];
static int nkept_stacks = 0;

static void *init_stack_take(void) {
  if (nkept_stacks > 0) return kept_stacks[--nkept_stacks];
  void *p = mmap(NULL, LAUNCH_INIT_STACK, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void launch_init_stack_free(void *stack, int reaped) {
  if (stack == NULL) return;
  launch_stack_clean_size(stack, LAUNCH_INIT_STACK); /* (its frames' redzones, under ASan) */
  if (reaped && nkept_stacks < KEPT_INIT_STACKS)
    kept_stacks[nkept_stacks++] = stack;
  else /* (an init killed but maybe not ended yet: its stack is given to no other) */
    munmap(stack, LAUNCH_INIT_STACK);
}

static int setup_fail(setup_ctx *s, const char *stage) {
  s->err = errno ? errno : EIO;
  s->stage = stage;
  if (s->init_pid > 0) kill(s->init_pid, SIGKILL);
  _exit(127);
}

/* The session's terminal from the sandbox's devpts: the program's name for it (ttyname,
 * `tty`) exists inside, and no other terminal does. */
static int open_pty(setup_ctx *s) {
  int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -1;
  s->master = m;
  int unlock = 0;
  if (ioctl(m, TIOCSPTLCK, &unlock) < 0) return -1;
  int sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (sl < 0) return -1;
  s->slave = sl;
  if (launch_pty_slave_setup(s->req, sl) < 0) return -1;
  return launch_set_nonblock(m);
}

static int setup_main(void *arg) {
  setup_ctx *s = arg;
  s->started = 1;
  /* A session of its own: if the host is killed while this runs, it ends as an orphan, and a
   * luxec that adopts it (a subreaper) reaps it only when it is not in its own session (where
   * its own children, io.popen's, are). */
  setsid();
  const launch_req *req = s->req;
  sandbox_prep *sp = req->sandbox;
  const char *stage = "sandbox";
  /* With the inits' cgroup, this child is in it (and so the init it makes); the program is
   * born in the session's cgroup, or joins it itself (launch_child_main). Without it, into the
   * session's cgroup first: the init and the program are born in it. */
  if (req->inits_fd >= 0) {
    if (!s->in_cgroup && launch_join_cgroup(req->inits_fd) < 0) setup_fail(s, "cgroup");
  } else {
    if (!s->in_cgroup && req->cgroup_fd >= 0 && launch_join_cgroup(req->cgroup_fd) < 0)
      setup_fail(s, "cgroup");
    for (int i = 0; i < req->ncgroup_more; i++)
      if (write(req->cgroup_more_fds[i], "0", 1) != 1) setup_fail(s, "cgroup");
    s->g->in_cgroup = 1; /* (a clone is born in its parent's cgroups: no second move) */
  }
  if (sandbox_ns_setup(sp, &stage) < 0) setup_fail(s, stage);
  if (req->tty) {
    if (open_pty(s) < 0) setup_fail(s, "pty");
    s->g->fd0 = s->g->fd1 = s->g->fd2 = s->g->ctty = s->slave;
  }
  if (sp->pidns_ok) {
    pid_t init = clone(init_main, s->init_stack + LAUNCH_INIT_STACK, CLONE_VM | CLONE_PARENT,
                       (void *)(intptr_t)s->alive_fd);
    if (init < 0) setup_fail(s, "sandbox pid namespace init");
    s->init_pid = init;
    s->g->contained = 1;
  }
  sandbox_stamp(sp, SBX_T_INIT);
  int pidfd = -1;
  char *stack = launch_stack(1);
  launch_stack_clean(stack);
  s->g->files_shared = 1; /* this table is the host's */
  int flags = CLONE_VM | CLONE_VFORK | CLONE_PARENT | CLONE_PIDFD | CLONE_FILES;
  pid_t pid = s->g->in_cgroup ? clone(launch_child_main, stack + CHILD_STACK, flags, s->g, &pidfd)
                              : luxec_clone_in(launch_child_main, stack, CHILD_STACK, flags, s->g,
                                               &pidfd, req->cgroup_born ? req->cgroup_fd : -1,
                                               &s->g->born_in_cgroup, &s->g->started);
  if (pid < 0) setup_fail(s, "clone");
  s->pid = pid;
  s->pidfd = pidfd;
  if (s->g->err != 0 && s->init_pid > 0) kill(s->init_pid, SIGKILL);
  _exit(0);
}

static void reap(pid_t pid) {
  while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR) {
  }
}

int launch_contained(const launch_req *req, launch_res *res, child_ctx *g) {
  if (g->report_fd >= 0) { /* valgrind runs shared-memory clones as forks: nothing comes back */
    res->err = ENOTSUP;
    res->stage = "sandbox namespaces (not under valgrind)";
    return -1;
  }
  if (alive_pipe[0] < 0 && pipe2(alive_pipe, O_CLOEXEC) < 0) {
    res->err = errno;
    res->stage = "pipe";
    return -1;
  }
  char *stack = launch_stack(0);
  if (stack == NULL || launch_stack(1) == NULL) {
    res->err = ENOMEM;
    res->stage = "stack";
    return -1;
  }
  setup_ctx s = {.req = req,
                 .g = g,
                 .alive_fd = alive_pipe[0],
                 .pid = -1,
                 .init_pid = -1,
                 .pidfd = -1,
                 .master = -1,
                 .slave = -1};
  void *istack = NULL;
  if (req->sandbox->want_pidns) {
    istack = init_stack_take();
    if (istack == NULL) {
      res->err = errno;
      res->stage = "stack";
      return -1;
    }
    s.init_stack = istack;
  }
  sandbox_prep *sp = req->sandbox;
  /* the network namespace made ahead (a normal user's with the user namespace it is in) */
  if (sp->want_netns && sp->netns_fd < 0) {
    int diag = -1;
    sp->netns_fd = sandbox_netns_take(sp->want_userns, sp->uid, sp->gid, &sp->userns_fd, &diag);
    if (sp->diag_fd < 0)
      sp->diag_fd = diag;
    else if (diag >= 0)
      close(diag);
  }
  if (sp->want_mountns && !sp->want_userns) sp->dev_template = sandbox_dev_template();
  sandbox_template_pick(sp); /* (after the user namespace it joins is known) */
  launch_stack_clean(stack);
  /* No signal handler may run in the children while they share the host's memory. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int flags = CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD;
  int born_in = req->inits_fd >= 0 ? req->inits_fd : req->cgroup_born ? req->cgroup_fd : -1;
  pid_t setup = luxec_clone_in(setup_main, stack, CHILD_STACK, flags, &s, NULL, born_in,
                               &s.in_cgroup, &s.started);
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (setup < 0) {
    if (istack) launch_init_stack_free(istack, 1);
    res->err = clone_errno;
    res->stage = "clone";
    return -1;
  }
  reap(setup);
  sandbox_template_keep(sp); /* a mount tree it prepared: the next launches copy it */
  if (sp->netns_fd >= 0) {
    /* A session whose processes are all in its pid namespace gives a network namespace
     * nothing was configured in back when they are gone (proc_sandbox.c); else it was this
     * launch's only. */
    if (!(sp->netns_ok && sp->pidns_ok && s.init_pid > 0 && sp->proxy_port == 0)) {
      close(sp->netns_fd);
      sp->netns_fd = -1;
    }
    if (sp->userns_fd >= 0) close(sp->userns_fd);
    sp->userns_fd = -1;
    sandbox_netns_refill();
  }
  if (s.slave >= 0) close(s.slave); /* the program has it as 0, 1 and 2 */
  int err = s.err ? s.err : g->err;
  if (err != 0 || s.pid < 0) {
    if (s.pid > 0) reap(s.pid); /* the program failed before exec */
    if (s.pidfd >= 0) close(s.pidfd);
    if (s.init_pid > 0) {
      kill(s.init_pid, SIGKILL);
      reap(s.init_pid);
    }
    if (s.master >= 0) close(s.master);
    if (istack) launch_init_stack_free(istack, 1);
    res->err = err ? err : EIO;
    res->stage = s.err ? (const char *)s.stage : (const char *)g->stage;
    return -1;
  }
  res->pid = s.pid;
  res->pidfd = s.pidfd;
  res->init_pid = s.init_pid;
  res->init_stack = s.init_pid > 0 ? istack : NULL;
  if (s.init_pid <= 0 && istack) launch_init_stack_free(istack, 1);
  if (req->tty) {
    res->out_fd = s.master;
    res->in_fd = s.master; /* the same descriptor: one poll serves reads and writes */
  }
  res->listener_fd = sandbox_take_listener(req->sandbox);
  return 0;
}
