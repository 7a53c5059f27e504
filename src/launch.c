/* launch.c: the direct launch path. The child is made with clone(CLONE_VM | CLONE_VFORK),
 * as posix_spawn does, so starting costs no page-table copy; it runs only async-signal-safe
 * system calls on its own stack, and reports a failure through memory it shares with the
 * suspended parent, which is exact (an errno and the stage) and needs no pipe. Under valgrind,
 * which runs such a clone as a plain fork, the report goes through a close-on-exec pipe. */
#include "clone3.h"
#include "launch_int.h"
#include "luxec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define LUXEC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LUXEC_ASAN 1
#endif
#endif
#ifdef LUXEC_ASAN
#include <sanitizer/asan_interface.h>
#endif

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

typedef struct child_report {
  int err;
  const char *stage; /* a string literal: the same address in a forked copy */
} child_report;

static int child_fail(child_ctx *c, const char *stage) {
  c->err = errno;
  c->stage = stage;
  if (c->report_fd >= 0) {
    child_report r;
    memset(&r, 0, sizeof r); /* no uninitialised padding goes through the pipe */
    r.err = errno;
    r.stage = stage;
    ssize_t n = write(c->report_fd, &r, sizeof r);
    (void)n;
  }
  _exit(127);
}

/* After a clone that did not share memory: the child's failure, or nothing once exec closed
 * the pipe. */
static void read_report(child_ctx *c, int fd) {
  child_report r;
  ssize_t n;
  while ((n = read(fd, &r, sizeof r)) < 0 && errno == EINTR) {
  }
  if (n == (ssize_t)sizeof r) {
    c->err = r.err ? r.err : EIO;
    c->stage = r.stage;
  }
}

int launch_child_main(void *arg) {
  child_ctx *c = arg;
  c->started = 1;
  const launch_req *req = c->req;
  struct kernel_sigaction dfl = {.handler = SIG_DFL};
  for (int sig = 1; sig <= 64; sig++) {
    if (((c->reset >> (sig - 1)) & 1) && sig != SIGKILL && sig != SIGSTOP)
      syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
  }
  if (setsid() < 0) child_fail(c, "setsid");
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) child_fail(c, "pdeathsig");
  /* the host is already gone? (inside a pid namespace the parent is outside: 0, and the
   * namespace's init goes with the host instead) */
  if (getppid() != (c->contained ? 0 : c->parent)) _exit(127);
  if (!c->in_cgroup && !c->born_in_cgroup && req->cgroup_fd >= 0 &&
      launch_join_cgroup(req->cgroup_fd) < 0)
    child_fail(c, "cgroup");
  for (int i = 0; !c->in_cgroup && i < req->ncgroup_more; i++) /* cgroup v1 (limits) */
    if (write(req->cgroup_more_fds[i], "0", 1) != 1) child_fail(c, "cgroup");
  if (req->sandbox != NULL) {
    /* A sandboxed child starts on the host's descriptor table (CLONE_FILES), so the seccomp
     * listener it makes is the host's at once (no hand-off through a socket, which the filter
     * would have to let through); then it takes a table of its own. */
    const char *stage = "sandbox";
    if (sandbox_child_apply(req->sandbox, &stage) < 0) child_fail(c, stage);
    if (c->files_shared && unshare(CLONE_FILES) < 0) child_fail(c, "unshare files");
  }
  if (c->null_inside && (c->fd0 = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
    child_fail(c, "/dev/null");
  if (c->ctty >= 0 && ioctl(c->ctty, TIOCSCTTY, 0) < 0) child_fail(c, "controlling terminal");
  if (dup2(c->fd0, 0) < 0 || dup2(c->fd1, 1) < 0 || dup2(c->fd2, 2) < 0) child_fail(c, "dup2");
  /* after the sandbox: a new mount namespace needs the working directory looked up again */
  if (req->cwd != NULL && chdir(req->cwd) < 0) child_fail(c, "cwd");
  if (luxec_nofile_raised) setrlimit(RLIMIT_NOFILE, &luxec_nofile_original);
  /* Nothing the host holds (or inherited from its own parent) may reach the program. */
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
    for (int fd = 3; fd < 65536; fd++) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  for (int i = 0; i < req->nrlimits; i++)
    if (setrlimit(req->rlimit_res[i], &req->rlimit_val[i]) < 0) child_fail(c, "limits");
  if (req->sandbox != NULL) sandbox_stamp(req->sandbox, SBX_T_EXECVE);
  execve(req->path, req->argv, req->envp);
  child_fail(c, "exec");
  return 127;
}

int launch_resolve(const char *file, char *const *envp, char *out, size_t size) {
  if (file[0] == '\0') return ENOENT;
  if (strchr(file, '/') != NULL) {
    if (strlen(file) >= size) return ENAMETOOLONG;
    strcpy(out, file);
    return 0;
  }
  const char *path = NULL;
  for (char *const *e = envp; e != NULL && *e != NULL; e++) {
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  }
  if (path == NULL) path = getenv("PATH");
  if (path == NULL) path = "/usr/local/bin:/usr/bin:/bin";
  int seen_eacces = 0;
  while (1) {
    const char *end = strchr(path, ':');
    size_t dlen = end ? (size_t)(end - path) : strlen(path);
    const char *dir = dlen ? path : ".";
    if (dlen == 0) dlen = 1;
    if (dlen + 1 + strlen(file) < size) {
      memcpy(out, dir, dlen);
      out[dlen] = '/';
      strcpy(out + dlen + 1, file);
      struct stat st;
      if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
        if (access(out, X_OK) == 0) return 0;
        seen_eacces = 1;
      }
    }
    if (end == NULL) break;
    path = end + 1;
  }
  return seen_eacces ? EACCES : ENOENT;
}

int launch_join_cgroup(int cgroup_fd) {
  int fd = openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int ok = write(fd, "0", 1) == 1;
  int e = errno;
  close(fd);
  errno = e;
  return ok ? 0 : -1;
}

int launch_set_nonblock(int fd) {
  int on = 1; /* (one call, where F_GETFL + F_SETFL make two) */
  return ioctl(fd, FIONBIO, &on);
}

static void close_all(int *fds, int n) {
  for (int i = 0; i < n; i++) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
}

int launch_pty_slave_setup(const launch_req *req, int slave) {
  struct termios tio;
  if (tcgetattr(slave, &tio) == 0) {
    tio.c_iflag |= IUTF8;
    if (req->no_echo) tio.c_lflag &= ~(tcflag_t)ECHO;
    if (req->raw) cfmakeraw(&tio); /* bytes through as they are: no echo, no line editing */
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__) || defined(__i386__))
    /* Where the C library's termios begins with the kernel's (the generic layout), one call;
     * tcsetattr reads the settings again before and after (three). */
    ioctl(slave, TCSETS, &tio);
#else
    tcsetattr(slave, TCSANOW, &tio);
#endif
  }
  struct winsize ws = {.ws_row = req->rows, .ws_col = req->cols};
  return ioctl(slave, TIOCSWINSZ, &ws);
}

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* The PTY: master (non-blocking, close-on-exec) and slave with IUTF8 and the window size.
 * The slave is opened through the master (TIOCGPTPEER: no lookup of its name, two calls
 * where grantpt, unlockpt, ptsname and open make four), by its name on a kernel without. */
static int open_pty(const launch_req *req, int *master, int *slave) {
  *master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (*master < 0) return -1;
  int unlock = 0;
  if (ioctl(*master, TIOCSPTLCK, &unlock) < 0) return -1; /* (grantpt does nothing on devpts) */
  *slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (*slave < 0) {
    char name[64];
    if (grantpt(*master) < 0 || ptsname_r(*master, name, sizeof name)) return -1;
    *slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  }
  if (*slave < 0) return -1;
  return launch_pty_slave_setup(req, *slave) < 0 ? -1 : 0; /* (the master opened non-blocking) */
}

char *launch_stack(int i) {
  static char *stacks[3];
  if (stacks[i] == NULL) {
    void *p = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return NULL;
    stacks[i] = p;
  }
  return stacks[i];
}

void launch_stack_clean_size(void *stack, size_t size) {
#ifdef LUXEC_ASAN
  /* The child's frames poison the shared shadow of this stack and it never returns to clear
   * it: a later child with other frames at those addresses would trip over stale redzones. */
  ASAN_UNPOISON_MEMORY_REGION(stack, size);
#else
  (void)stack;
  (void)size;
#endif
}

void launch_stack_clean(char *stack) {
  launch_stack_clean_size(stack, CHILD_STACK);
}

/* The host's pid, asked once (a launch child compares its parent with it); forgotten in a
 * forked child, whose pid is another. */
static pid_t host_pid = 0;

static int status_fd = -2; /* the host's /proc/self/status, opened at the first launch */

static void forget_pid(void) {
  host_pid = 0;
  if (status_fd >= 0) close(status_fd); /* (the parent's: /proc/self named it) */
  status_fd = -2;
}

/* The value of the hexadecimal mask `key` (e.g. "SigCgt:") in a /proc status text. */
static int status_mask(const char *text, const char *key, uint64_t *mask) {
  const char *at = strstr(text, key);
  if (at == NULL) return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(at + strlen(key), &end, 16);
  if (errno != 0 || end == at + strlen(key)) return -1;
  *mask = v;
  return 0;
}

/* The signals a program must not get as the host has them (bit n - 1 for signal n): the ones
 * the host catches (no handler of the host's may run in the child before the exec, which
 * resets them) and the ones it ignores (which the exec keeps). The kernel says both in one
 * read of /proc/self/status (SigCgt, SigIgn), where putting every signal back to its default
 * one by one costs 62 calls in every launch; all of them when it cannot be read. */
static uint64_t signals_to_reset(void) {
  char text[4096];
  if (status_fd == -2) status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t n = status_fd >= 0 ? pread(status_fd, text, sizeof text - 1, 0) : -1;
  if (n <= 0) return ~(uint64_t)0;
  text[n] = '\0';
  uint64_t caught, ignored;
  if (status_mask(text, "\nSigCgt:", &caught) < 0 || status_mask(text, "\nSigIgn:", &ignored) < 0)
    return ~(uint64_t)0;
  return caught | ignored;
}

static pid_t own_pid(void) {
  static int registered = 0;
  if (!registered) registered = pthread_atfork(NULL, NULL, forget_pid) == 0;
  if (host_pid == 0 || !registered) host_pid = getpid();
  return host_pid;
}

int launch(const launch_req *req, launch_res *res) {
  char *stack = launch_stack(0); /* CLONE_VFORK keeps launches one at a time */
  int fds[7] = {-1, -1, -1, -1, -1, -1, -1};
  enum { MASTER, SLAVE, IN_R, IN_W, OUT_R, OUT_W, ERR_R };
  int err_w = -1, devnull = -1, report[2] = {-1, -1};
  memset(res, 0, sizeof *res);
  res->pid = -1;
  res->pidfd = res->in_fd = res->out_fd = res->err_fd = res->listener_fd = -1;
  res->init_pid = -1;
  child_ctx c = {.req = req, .parent = own_pid(), .ctty = -1, .report_fd = -1};
  c.reset = signals_to_reset();

#define FAIL(what)       \
  do {                   \
    res->err = errno;    \
    res->stage = (what); \
    goto fail;           \
  } while (0)

  if (stack == NULL) FAIL("stack");
  int contained = req->sandbox != NULL && sandbox_contains(req->sandbox);
  if (req->tty && !contained) { /* a contained session's PTY comes from its own devpts */
    if (open_pty(req, &fds[MASTER], &fds[SLAVE]) < 0) FAIL("pty");
    c.fd0 = c.fd1 = c.fd2 = c.ctty = fds[SLAVE];
    res->out_fd = fds[MASTER];
    res->in_fd = fds[MASTER]; /* the same descriptor: one poll serves reads and writes */
  } else {
    int p[2];
    if (req->stdin_pipe) {
      if (pipe2(p, O_CLOEXEC) < 0) FAIL("pipe");
      fds[IN_R] = p[0];
      fds[IN_W] = p[1];
      if (launch_set_nonblock(fds[IN_W]) < 0) FAIL("pipe");
      c.fd0 = fds[IN_R];
    } else {
      devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (devnull < 0) FAIL("/dev/null");
      c.fd0 = devnull;
      /* The host's /dev/null lies on the host's writable /dev: a descriptor of it would let
       * the program chmod or touch the host's device (fchmod, utimensat on /proc/self/fd/0). A
       * contained program gets the one of its own /dev, a read-only bind. */
      c.null_inside = contained;
    }
    if (pipe2(p, O_CLOEXEC) < 0) FAIL("pipe");
    fds[OUT_R] = p[0];
    fds[OUT_W] = p[1];
    /* (a pipe a fast writer fills is made larger by the loop's first full read of it:
     * proc_io.c; a program that writes little never needs that) */
    /* (the output ends are made non-blocking by the loop's poll on them: uv_poll_init) */
    c.fd1 = c.fd2 = fds[OUT_W];
    if (req->stderr_apart) {
      if (pipe2(p, O_CLOEXEC) < 0) FAIL("pipe");
      fds[ERR_R] = p[0];
      err_w = p[1];
      c.fd2 = err_w;
    }
  }

  if (RUNNING_ON_VALGRIND) {
    /* valgrind runs the clone as a fork: a listener made in the child never reaches the host,
     * and the calls it should answer would wait forever */
    if (req->sandbox != NULL && req->sandbox->prog_notify.len > 0) {
      errno = ENOTSUP;
      FAIL("sandbox listener (not under valgrind)");
    }
    if (pipe2(report, O_CLOEXEC) < 0) FAIL("pipe");
    c.report_fd = report[1];
  }

  if (contained) {
    int rc = launch_contained(req, res, &c);
    if (rc == 0 && !req->tty) { /* the parent's ends of the pipes are the session's now */
      res->in_fd = fds[IN_W];
      fds[IN_W] = -1;
      res->out_fd = fds[OUT_R];
      fds[OUT_R] = -1;
      res->err_fd = fds[ERR_R];
      fds[ERR_R] = -1;
    }
    close_all(fds, 7);
    close_all(report, 2);
    if (err_w >= 0) close(err_w);
    if (devnull >= 0) close(devnull);
    return rc;
  }
  launch_stack_clean(stack);
  /* No signal handler may run in the child while it shares the host's memory. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int pidfd = -1;
  int flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD;
  if (req->sandbox != NULL && c.report_fd < 0) { /* (valgrind: see below) */
    flags |= CLONE_FILES;
    c.files_shared = 1;
  }
  int cgroup = req->cgroup_born && c.report_fd < 0 ? req->cgroup_fd : -1; /* (not valgrind) */
  pid_t pid = luxec_clone_in(launch_child_main, stack, CHILD_STACK, flags, &c, &pidfd, cgroup,
                             &c.born_in_cgroup, &c.started);
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (report[1] >= 0) {
    close(report[1]);
    report[1] = -1;
    if (pid >= 0) read_report(&c, report[0]);
  }
  if (pid < 0) {
    errno = clone_errno;
    FAIL("clone");
  }
  if (c.err != 0) { /* the child failed before exec and has exited: reap it */
    siginfo_t si;
    while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR) {
    }
    close(pidfd);
    errno = c.err;
    FAIL((const char *)c.stage);
  }
  res->pid = pid;
  res->pidfd = pidfd;
  if (req->sandbox != NULL) res->listener_fd = sandbox_take_listener(req->sandbox);
  if (!req->tty) {
    res->in_fd = fds[IN_W];
    fds[IN_W] = -1;
    res->out_fd = fds[OUT_R];
    fds[OUT_R] = -1;
    res->err_fd = fds[ERR_R];
    fds[ERR_R] = -1;
  } else {
    fds[MASTER] = -1; /* kept as out_fd */
  }
  close_all(fds, 7);
  close_all(report, 2);
  if (err_w >= 0) close(err_w);
  if (devnull >= 0) close(devnull);
  return 0;

fail:
  close_all(fds, 7);
  close_all(report, 2);
  if (err_w >= 0) close(err_w);
  if (devnull >= 0) close(devnull);
  res->in_fd = res->out_fd = res->err_fd = -1;
  if (res->err == 0) res->err = EIO;
  return -1;
#undef FAIL
}
