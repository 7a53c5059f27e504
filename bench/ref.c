/* ref.c: the plain-C reference for scripts/bench. Each workload is done the most direct way
 * (posix_spawn or vfork + exec, waitpid, read() at a chosen size, posix_openpt PTYs made the
 * child's controlling terminal, poll()), with no libuv and no Lua. Prints one line of
 * key=value pairs: secs (the workload's wall time, CLOCK_MONOTONIC) and where relevant
 * rss_kib (peak RSS from getrusage) and more.
 *
 *   bench-ref w1 pipe|pty COUNT PROGRAM              spawn + reap PROGRAM COUNT times in turn
 *   bench-ref w2 BYTES READ_SIZE poll|block HEAD     HEAD -c BYTES /dev/zero through a pipe,
 *                                                    read non-blocking after poll(), or blocking
 *   bench-ref w3 BYTES READ_SIZE poll|block HEAD     the same through a PTY
 *   bench-ref w3raw BYTES READ_SIZE poll|block HEAD  the same, the terminal in raw mode
 *   bench-ref w4 COUNT CAT                           COUNT line round trips through CAT on a PTY
 *   bench-ref notify COUNT                           COUNT fchmod calls of a child through a bare
 *                                                    seccomp user-notification supervisor that
 *                                                    lets each go on (poll, RECV, SEND; the
 *                                                    synchronous wake-up luxec asks for): the
 *                                                    round trip any judged call costs at least
 *   bench-ref w5 COUNT SLEEP [serial|cgroup]         COUNT PTY sessions of SLEEP 60, then kill all
 *                                                    (serial: each killed and reaped in turn;
 *                                                    cgroup: each born in a cgroup v2 of its own,
 *                                                    as luxec's sessions are: src/clone3.c)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "clone3.h"

extern char **environ;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what) {
  fprintf(stderr, "bench-ref: %s: %s\n", what, strerror(errno));
  exit(1);
}

static long peak_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* ---- children ---- */

/* A child on pipes: stdin from a pipe, stdout and stderr into one pipe (what luxec.spawn does
 * by default). Returns the pid; *in_w and *out_r are the parent's ends (close-on-exec). */
static pid_t spawn_pipes(char *const argv[], int *in_w, int *out_r) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) die("pipe2");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    errno = rc;
    die("posix_spawn");
  }
  close(in[0]);
  close(out[1]);
  *in_w = in[1];
  *out_r = out[0];
  return pid;
}

static int pty_raw = 0; /* the terminal in raw mode (cfmakeraw) before the child runs */

/* What the child of spawn_pty runs: the terminal made its controlling one, then the exec. */
struct pty_child {
  char *const *argv;
  int slave;
  volatile int started;
};

static int pty_child_main(void *arg) {
  struct pty_child *c = arg;
  c->started = 1;
  if (setsid() < 0 || ioctl(c->slave, TIOCSCTTY, 0) < 0) _exit(126);
  if (dup2(c->slave, 0) < 0 || dup2(c->slave, 1) < 0 || dup2(c->slave, 2) < 0) _exit(126);
  execve(c->argv[0], c->argv, environ);
  _exit(127);
}

/* A child on a new PTY that becomes its controlling terminal, sharing the parent's memory
 * until it execs (vfork); with cgroup_fd >= 0 born in that cgroup (clone3, as luxec's are).
 * Returns the pid; *master is the parent's end (close-on-exec, blocking). */
static pid_t spawn_pty_in(char *const argv[], int *master, int cgroup_fd) {
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) die("posix_openpt");
  char name[64];
  if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof name) != 0) die("pty");
  int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0) die("open pty slave");
  struct winsize ws = {.ws_row = 24, .ws_col = 80};
  ioctl(s, TIOCSWINSZ, &ws);
  struct termios tio;
  if (pty_raw && tcgetattr(s, &tio) == 0) {
    cfmakeraw(&tio);
    tcsetattr(s, TCSANOW, &tio);
  }
  static char stack[64 * 1024] __attribute__((aligned(16)));
  struct pty_child c = {.argv = argv, .slave = s, .started = 0};
  int born = 0;
  pid_t pid;
  if (cgroup_fd >= 0) {
    pid = luxec_clone_in(pty_child_main, stack, sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &c,
                         NULL, cgroup_fd, &born, &c.started);
    if (pid < 0 || !born) die("clone3 into a cgroup");
  } else if ((pid = vfork()) == 0) {
    pty_child_main(&c);
  }
  if (pid < 0) die("vfork");
  close(s);
  *master = m;
  return pid;
}

/* The same without a cgroup: vfork. */
static pid_t spawn_pty(char *const argv[], int *master) {
  return spawn_pty_in(argv, master, -1);
}

/* Read fd until EOF (or EIO: a PTY master once no slave is open); returns the byte count.
 * With use_poll the descriptor is made non-blocking and read until EAGAIN between poll()s,
 * as an event loop does; else read() blocks. */
static long long drain(int fd, char *buf, size_t size, int use_poll) {
  long long total = 0;
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  if (use_poll && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) die("fcntl");
  for (;;) {
    ssize_t n = read(fd, buf, size);
    if (n > 0) {
      total += n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      if (poll(&pf, 1, -1) < 0 && errno != EINTR) die("poll");
    } else {
      return total;
    }
  }
}

static int reap(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) die("waitpid");
  }
  return st;
}

/* ---- workloads ---- */

static int w1(const char *mode, int count, const char *prog) {
  char *argv[] = {(char *)prog, NULL};
  char buf[4096];
  int tty = strcmp(mode, "pty") == 0;
  double t0 = now();
  for (int i = 0; i < count; i++) {
    int in_w = -1, out_r;
    pid_t pid = tty ? spawn_pty(argv, &out_r) : spawn_pipes(argv, &in_w, &out_r);
    drain(out_r, buf, sizeof buf, 0);
    int st = reap(pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "bench-ref: %s exited with status %d\n", prog, st);
      return 1;
    }
    close(out_r);
    if (in_w >= 0) close(in_w);
  }
  printf("secs=%.6f\n", now() - t0);
  return 0;
}

static int w2w3(int tty, long long bytes, size_t size, int use_poll, const char *head) {
  char count[32];
  snprintf(count, sizeof count, "%lld", bytes);
  char *argv[] = {(char *)head, "-c", count, "/dev/zero", NULL};
  char *buf = malloc(size);
  if (buf == NULL) die("malloc");
  double t0 = now();
  int in_w = -1, out_r;
  pid_t pid = tty ? spawn_pty(argv, &out_r) : spawn_pipes(argv, &in_w, &out_r);
  long long got = drain(out_r, buf, size, use_poll);
  reap(pid);
  double secs = now() - t0;
  close(out_r);
  if (in_w >= 0) close(in_w);
  if (got != bytes) {
    fprintf(stderr, "bench-ref: read %lld bytes, expected %lld\n", got, bytes);
    return 1;
  }
  printf("secs=%.6f rss_kib=%ld\n", secs, peak_rss_kib());
  free(buf);
  return 0;
}

/* Count the occurrences of needle in hay[0..len). */
static int occurrences(const char *hay, size_t len, const char *needle) {
  size_t nl = strlen(needle);
  int k = 0;
  for (const char *p = hay; (p = memmem(p, len - (size_t)(p - hay), needle, nl)) != NULL; p += nl)
    k++;
  return k;
}

static int w4(int count, const char *cat) {
  char *argv[] = {(char *)cat, NULL};
  int m;
  pid_t pid = spawn_pty(argv, &m);
  static char acc[1 << 16];
  double t0 = now();
  for (int i = 0; i < count; i++) {
    char line[32];
    int len = snprintf(line, sizeof line, "rt%06d\n", i);
    if (write(m, line, (size_t)len) != len) die("write");
    line[len - 1] = '\0';
    /* the terminal's echo and cat's copy, each the line with "\r\n" */
    size_t have = 0, want = 2 * (size_t)(len + 1);
    while (have < want) {
      ssize_t n = read(m, acc + have, sizeof acc - have);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("read");
      have += (size_t)n;
    }
    if (have != want || occurrences(acc, have, line) != 2) {
      fprintf(stderr, "bench-ref: round trip %d: unexpected output %.*s\n", i, (int)have, acc);
      return 1;
    }
  }
  double secs = now() - t0;
  kill(pid, SIGKILL);
  reap(pid);
  close(m);
  printf("secs=%.6f\n", secs);
  return 0;
}

/* How many processes named comm descend from root (by walking /proc's parent links), zombies
 * included: a child left unreaped is left too. */
static int count_descendants(pid_t root, const char *comm) {
  static pid_t pids[1 << 16], ppids[1 << 16];
  static char names[1 << 16][16];
  int n = 0;
  DIR *d = opendir("/proc");
  if (d == NULL) die("opendir /proc");
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < (1 << 16)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[300], stat[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t len = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (len <= 0) continue;
    stat[len] = '\0';
    char *l = strchr(stat, '('), *r = strrchr(stat, ')');
    char state;
    if (l == NULL || r == NULL || sscanf(r + 2, "%c %d", &state, &ppids[n]) != 2) continue;
    snprintf(names[n], sizeof names[n], "%.*s", (int)(r - l - 1), l + 1);
    pids[n++] = atoi(e->d_name);
  }
  closedir(d);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i], comm) != 0) continue;
    pid_t up = ppids[i];
    for (int depth = 0; up > 1 && depth < 64; depth++) {
      if (up == root) {
        k++;
        break;
      }
      int j = 0;
      while (j < n && pids[j] != up) j++;
      up = j < n ? ppids[j] : 0;
    }
  }
  return k;
}

/* the host's own CPU (user + system) so far, in seconds */
static double cpu_now(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static long vm_rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "re");
  char line[256];
  long kib = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) kib = atol(line + 6);
  }
  if (f != NULL) fclose(f);
  return kib;
}

/* serial: each session killed and reaped before the next is touched (what terminate() in turn
 * must do), instead of all killed, then all reaped */
/* The cgroup v2 directory this process is in (its mount from /proc/self/mountinfo, its path
 * from /proc/self/cgroup's "0::" line) into buf, or -1. */
static int own_cgroup_dir(char *buf, size_t size) {
  char line[4096], mnt[2048] = "", own[2048] = "";
  FILE *f = fopen("/proc/self/mountinfo", "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    char *dash = strstr(line, " - cgroup2 ");
    char point[2048];
    if (dash != NULL && sscanf(line, "%*s %*s %*s %*s %2047s", point) == 1) {
      snprintf(mnt, sizeof mnt, "%s", point);
      break;
    }
  }
  if (f != NULL) fclose(f);
  f = fopen("/proc/self/cgroup", "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "0::", 3) == 0 && sscanf(line + 3, "%2047s", own) == 1) break;
  if (f != NULL) fclose(f);
  if (mnt[0] == '\0' || own[0] == '\0') return -1;
  return snprintf(buf, size, "%s%s", mnt, strcmp(own, "/") == 0 ? "" : own) < (int)size ? 0 : -1;
}

/* how: 0 all killed then reaped, 1 each killed and reaped in turn, 2 as 0 with each session
 * born in a cgroup of its own under one made for the run (made, like luxec's first session
 * makes its own, inside the timed start; removed after the timing). */
static int w5(int count, const char *sleep_prog, int how) {
  char *argv[] = {(char *)sleep_prog, "60", NULL};
  pid_t *pids = calloc((size_t)count, sizeof *pids);
  int *masters = calloc((size_t)count, sizeof *masters);
  struct pollfd *pf = calloc((size_t)count, sizeof *pf);
  char base[4096 + 64] = "", own[4096];
  if (how == 2) {
    if (own_cgroup_dir(own, sizeof own) < 0) die("no cgroup v2 membership");
    snprintf(base, sizeof base, "%s/bench-ref.%d", own, (int)getpid());
  }
  double t0 = now();
  int base_fd = -1;
  if (how == 2 && (mkdir(base, 0755) < 0 || (base_fd = open(base, O_RDONLY | O_DIRECTORY)) < 0))
    die(base);
  for (int i = 0; i < count; i++) {
    int cg = -1;
    if (how == 2) {
      char name[32];
      snprintf(name, sizeof name, "s%d", i);
      if (mkdirat(base_fd, name, 0755) < 0) die("mkdir a session's cgroup");
      cg = openat(base_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (cg < 0) die("open a session's cgroup");
    }
    pids[i] = spawn_pty_in(argv, &masters[i], cg);
    if (cg >= 0) close(cg);
  }
  double start = now() - t0;
  /* a turn of poll() over every master, as an event loop holding them would do */
  for (int i = 0; i < count; i++) pf[i] = (struct pollfd){.fd = masters[i], .events = POLLIN};
  poll(pf, (nfds_t)count, 0);
  long rss = vm_rss_kib();
  t0 = now();
  double c0 = cpu_now();
  for (int i = 0; i < count && how != 1; i++) kill(-pids[i], SIGKILL); /* each leads its group */
  for (int i = 0; i < count; i++) {
    if (how == 1) kill(-pids[i], SIGKILL);
    reap(pids[i]);
    close(masters[i]);
  }
  double stop = now() - t0, cpu = cpu_now() - c0;
  int left = count_descendants(getpid(), "sleep");
  if (how == 2) { /* (a cgroup is removed once its processes are reaped) */
    for (int i = 0; i < count; i++) {
      char name[32];
      snprintf(name, sizeof name, "s%d", i);
      unlinkat(base_fd, name, AT_REMOVEDIR);
    }
    close(base_fd);
    rmdir(base);
  }
  printf("start=%.6f rss_kib=%ld kill=%.6f kill_cpu=%.6f survivors=%d\n", start, rss, stop, cpu,
         left);
  free(pids);
  free(masters);
  free(pf);
  return left == 0 ? 0 : 1;
}

/* ---- a judged call's floor ---- */

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif

/* The child's side: fchmod notified, the listener sent to the parent over sock, then count
 * calls timed once the parent says go. */
static void notify_child(int sock, int count) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fchmod, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  int file = (int)syscall(SYS_memfd_create, "bench-ref", 0);
  if (file < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("memfd, no_new_privs");
  int lfd =
      (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (lfd < 0) die("seccomp");
  char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec io = {.iov_base = &byte, .iov_len = 1};
  struct msghdr m = {
      .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &lfd, sizeof lfd);
  if (sendmsg(sock, &m, 0) < 0 || read(sock, &byte, 1) != 1) die("listener to the parent");
  close(lfd);
  double t0 = now();
  for (int i = 0; i < count; i++) fchmod(file, 0600);
  printf("rt_us=%.3f\n", (now() - t0) / count * 1e6);
  fflush(stdout);
  _exit(0);
}

static int notify_rt(int count) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) die("socketpair");
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) notify_child(sv[1], count);
  char byte, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec io = {.iov_base = &byte, .iov_len = 1};
  struct msghdr m = {
      .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  int lfd = -1;
  if (recvmsg(sv[0], &m, 0) == 1 && CMSG_FIRSTHDR(&m) != NULL)
    memcpy(&lfd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof lfd);
  if (lfd < 0) die("the child's listener");
  __u64 flags = 1; /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6), as luxec asks */
  ioctl(lfd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags);
  if (write(sv[0], "g", 1) != 1) die("go");
  for (;;) { /* until the child is gone: its filter's last user */
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    if (poll(&pf, 1, -1) < 0) continue;
    if (!(pf.revents & POLLIN)) break;
    struct seccomp_notif req;
    memset(&req, 0, sizeof req);
    if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) continue;
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = req.id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  }
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static void usage(void) {
  fputs(
      "usage: bench-ref w1 pipe|pty COUNT PROG | w2|w3 BYTES READ_SIZE poll|block HEAD |"
      " w3raw ... | w4 COUNT CAT | notify COUNT | w5 COUNT SLEEP [serial|cgroup]\n",
      stderr);
  exit(2);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) usage();
  const char *w = argv[1];
  if (strcmp(w, "w1") == 0 && argc == 5) return w1(argv[2], atoi(argv[3]), argv[4]);
  if (strcmp(w, "notify") == 0 && argc == 3) return notify_rt(atoi(argv[2]));
  pty_raw = strcmp(w, "w3raw") == 0;
  if (pty_raw) w = "w3";
  if ((strcmp(w, "w2") == 0 || strcmp(w, "w3") == 0) && argc == 6 &&
      (strcmp(argv[4], "poll") == 0 || strcmp(argv[4], "block") == 0))
    return w2w3(w[1] == '3', atoll(argv[2]), (size_t)atoll(argv[3]), argv[4][0] == 'p', argv[5]);
  if (strcmp(w, "w4") == 0 && argc == 4) return w4(atoi(argv[2]), argv[3]);
  if (strcmp(w, "w5") == 0 && argc == 4) return w5(atoi(argv[2]), argv[3], 0);
  if (strcmp(w, "w5") == 0 && argc == 5 && strcmp(argv[4], "serial") == 0)
    return w5(atoi(argv[2]), argv[3], 1);
  if (strcmp(w, "w5") == 0 && argc == 5 && strcmp(argv[4], "cgroup") == 0)
    return w5(atoi(argv[2]), argv[3], 2);
  usage();
  return 2;
}
