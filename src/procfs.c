/* procfs.c: reading /proc for the process tree, descriptor holders and input waits. */
#include "procfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The pids listed in one task's "children" file (plain reads: no stdio on this path). The
 * file is a seq_file: a read returns every record that fits in its page-sized buffer, so a
 * read that left more room than one record ("<pid> ") needs is the last one, and the read of
 * EOF after it is saved. */
static int task_children(const char *file, pid_t *out, int max) {
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  int n = 0;
  ssize_t r = (ssize_t)sizeof buf;
  pid_t cur = 0;
  int digits = 0;
  while (n < max && r >= (ssize_t)sizeof buf - 32 && (r = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < r && n < max; i++) {
      if (buf[i] >= '0' && buf[i] <= '9') {
        cur = cur * 10 + (buf[i] - '0');
        digits = 1;
      } else if (digits) {
        out[n++] = cur;
        cur = 0;
        digits = 0;
      }
    }
  }
  if (digits && n < max) out[n++] = cur;
  close(fd);
  return n;
}

int pfs_children(pid_t pid, pid_t *out, int max) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  /* The task directory's link count is 2 and its threads: a process of one thread has one
   * children file, read without listing the directory (4 system calls, not 7). */
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  if (st.st_nlink == 3) {
    char file[96];
    snprintf(file, sizeof file, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    return task_children(file, out, max);
  }
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 0;
  int n = 0;
  char ents[4096] __attribute__((aligned(8)));
  long len;
  while (n < max && (len = syscall(SYS_getdents64, dfd, ents, sizeof ents)) > 0) {
    for (long off = 0; off < len && n < max;) {
      struct dirent64 *e = (struct dirent64 *)(ents + off);
      off += e->d_reclen;
      if (!isdigit((unsigned char)e->d_name[0])) continue;
      char file[300];
      snprintf(file, sizeof file, "/proc/%d/task/%s/children", (int)pid, e->d_name);
      n += task_children(file, out + n, max - n);
    }
  }
  close(dfd);
  return n;
}

int pfs_descendants(pid_t root, pid_t *out, int max) {
  int n = pfs_children(root, out, max);
  for (int i = 0; i < n && n < max; i++) n += pfs_children(out[i], out + n, max - n);
  return n;
}

int pfs_all_pids(pid_t *out, int max) {
  DIR *d = opendir("/proc");
  if (d == NULL) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    if (isdigit((unsigned char)e->d_name[0])) out[n++] = atoi(e->d_name);
  }
  closedir(d);
  return n;
}

int pfs_fd_target(pid_t pid, int fd, char *out, size_t size) {
  char link[64];
  if (pid == 0)
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  else
    snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, fd);
  ssize_t n = readlink(link, out, size - 1);
  if (n < 0) return -1;
  out[n] = '\0';
  return 0;
}

static int holds(pid_t pid, const char *target) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (d == NULL) return 0;
  int found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    char t[256];
    if (pfs_fd_target(pid, atoi(e->d_name), t, sizeof t) == 0 && strcmp(t, target) == 0) found = 1;
  }
  closedir(d);
  return found;
}

int pfs_holders(const pid_t *cands, int n, const char *target, pid_t *out, int max) {
  int k = 0;
  pid_t self = getpid();
  for (int i = 0; i < n && k < max; i++) {
    if (cands[i] != self && holds(cands[i], target)) out[k++] = cands[i];
  }
  return k;
}

void pfs_cmdline(pid_t pid, char *out, size_t size) {
  char path[64];
  out[0] = '\0';
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, out, size - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) { /* a zombie or a kernel thread: fall back to the name */
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    n = fd >= 0 ? read(fd, out, size - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) n = 0;
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return;
  }
  out[n] = '\0';
  while (n > 0 && out[n - 1] == '\0') n--;
  for (ssize_t i = 0; i < n; i++) {
    if (out[i] == '\0') out[i] = ' ';
  }
}

/* /proc/<pid>/<file> into buf (NUL-terminated, cut at size): 0 or -1. */
int pfs_read(pid_t pid, const char *file, char *buf, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return 0;
}

pid_t pfs_pgid(pid_t pid) {
  char buf[512];
  if (pfs_read(pid, "stat", buf, sizeof buf) < 0) return -1;
  char *p = strrchr(buf, ')'); /* the name may contain anything but is in parentheses */
  int ppid, pgid;
  char st;
  if (p == NULL || sscanf(p + 1, " %c %d %d", &st, &ppid, &pgid) != 3) return -1;
  return pgid;
}

/* Whether /proc/<pid>/stat names the terminal `target` as pid's controlling terminal:
 * /dev/tty opened by a process is its controlling terminal, whatever pts that is. */
static int controlled_by(pid_t pid, const char *target) {
  char buf[512];
  if (pfs_read(pid, "stat", buf, sizeof buf) < 0) return 0;
  char *p = strrchr(buf, ')');
  int ppid, pgid, sid;
  unsigned long nr;
  char st;
  if (p == NULL || sscanf(p + 1, " %c %d %d %d %lu", &st, &ppid, &pgid, &sid, &nr) != 5) return 0;
  if (nr == 0) return 0;
  /* A pseudo-terminal's number says its device (the majors from 136 hold 256 each), in
   * whichever devpts instance it is: a sandboxed session's own is not the host's /dev/pts,
   * where a stat would find another terminal, or none. Any other path is looked up. */
  dev_t rdev;
  unsigned idx;
  char rest;
  if (sscanf(target, "/dev/pts/%u%c", &idx, &rest) == 1) {
    rdev = makedev(136 + idx / 256, idx % 256);
  } else {
    struct stat sb;
    if (stat(target, &sb) != 0 || !S_ISCHR(sb.st_mode)) return 0;
    rdev = sb.st_rdev;
  }
  /* the kernel's encoding of tty_nr: minor's low byte, major, then minor's high bits */
  unsigned int maj = (unsigned int)((nr & 0xfff00) >> 8);
  unsigned int min = (unsigned int)((nr & 0xff) | ((nr >> 12) & 0xfff00));
  return major(rdev) == maj && minor(rdev) == min;
}

/* Whether pid's descriptor fd reads target: the same file, or /dev/tty naming it. */
static int reads_from(pid_t pid, int fd, const char *target) {
  char t[256];
  if (pfs_fd_target(pid, fd, t, sizeof t) != 0) return 0;
  if (strcmp(t, target) == 0) return 1;
  return strcmp(t, "/dev/tty") == 0 && strncmp(target, "/dev/", 5) == 0 &&
         controlled_by(pid, target);
}

/* Read len bytes of pid's memory at addr (a descendant's, or as root): 0 or -1. */
static int read_mem(pid_t pid, unsigned long addr, void *out, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = pread(fd, out, len, (off_t)addr);
  close(fd);
  return n == (ssize_t)len ? 0 : -1;
}

/* Whether a poll/ppoll on the nfds pollfds at addr waits to read target: 1, 0, or -1 when
 * the array cannot be read. */
static int polls_on(pid_t pid, unsigned long addr, unsigned long nfds, const char *target) {
  struct pollfd fds[64];
  if (nfds == 0 || nfds > 64) return -1;
  if (read_mem(pid, addr, fds, nfds * sizeof fds[0]) < 0) return -1;
  for (unsigned long i = 0; i < nfds; i++) {
    if (fds[i].fd >= 0 && (fds[i].events & POLLIN) && reads_from(pid, fds[i].fd, target)) return 1;
  }
  return 0;
}

/* The same for a select/pselect6 on the read set at addr (nfds descriptors). */
static int selects_on(pid_t pid, unsigned long nfds, unsigned long addr, const char *target) {
  fd_set set;
  if (addr == 0) return 0;
  if (nfds == 0 || nfds > FD_SETSIZE) return -1;
  size_t len = (nfds + 63) / 64 * 8;
  if (read_mem(pid, addr, &set, len) < 0) return -1;
  for (int f = 0; f < (int)nfds; f++) {
    if (FD_ISSET(f, &set) && reads_from(pid, f, target)) return 1;
  }
  return 0;
}

/* The same for an epoll_wait on epfd: its watched descriptors are in /proc fdinfo. */
static int epolls_on(pid_t pid, int epfd, const char *target) {
  char buf[4096], file[64];
  snprintf(file, sizeof file, "fdinfo/%d", epfd);
  if (pfs_read(pid, file, buf, sizeof buf) < 0) return -1;
  for (char *line = strstr(buf, "tfd:"); line != NULL; line = strstr(line + 1, "tfd:")) {
    int tfd;
    unsigned int events;
    if (sscanf(line, "tfd: %d events: %x", &tfd, &events) == 2 && (events & POLLIN) &&
        reads_from(pid, tfd, target))
      return 1;
  }
  return 0;
}

/* 1 when pid has a signal pending that it does not block: its blocking read is about to be
 * interrupted (a ^C the terminal turned into SIGINT, not yet delivered), so it does not wait
 * for input yet. */
static int signal_due(pid_t pid) {
  char buf[2048];
  if (pfs_read(pid, "status", buf, sizeof buf) < 0) return 0;
  unsigned long long pnd = 0, blk = 0, v;
  for (char *line = buf; line != NULL && *line; line = strchr(line, '\n')) {
    if (*line == '\n') line++;
    if (sscanf(line, "SigPnd: %llx", &v) == 1 || sscanf(line, "ShdPnd: %llx", &v) == 1) {
      pnd |= v;
    } else if (sscanf(line, "SigBlk: %llx", &v) == 1) {
      blk = v;
    }
  }
  return (pnd & ~blk) != 0;
}

static int waiting_on(pid_t pid, const char *target);

int pfs_waiting_on(pid_t pid, const char *target) {
  return waiting_on(pid, target) && !signal_due(pid);
}

static int waiting_on(pid_t pid, const char *target) {
  char buf[256];
  if (pfs_read(pid, "syscall", buf, sizeof buf) < 0) return 0;
  long nr;
  unsigned long arg0, arg1 = 0;
  if (sscanf(buf, "%ld %lx %lx", &nr, &arg0, &arg1) < 2) return 0; /* "running" */
  int r;
  switch (nr) {
    case SYS_read:
    case SYS_readv:
    case SYS_pread64: return reads_from(pid, (int)arg0, target);
    /* readline, python's input() and shells wait in these before reading stdin; what they
     * wait on is read from the call's arguments, and only when that fails is stdin assumed */
    case SYS_poll:
    case SYS_ppoll: r = polls_on(pid, arg0, arg1, target); break;
    case SYS_select:
    case SYS_pselect6: r = selects_on(pid, arg0, arg1, target); break;
    case SYS_epoll_wait:
    case SYS_epoll_pwait: r = epolls_on(pid, (int)arg0, target); break;
    default: return 0;
  }
  return r >= 0 ? r : reads_from(pid, 0, target);
}

long pfs_status_last(pid_t pid, const char *field) {
  char buf[2048];
  if (pfs_read(pid, "status", buf, sizeof buf) < 0) return -1;
  size_t flen = strlen(field);
  for (char *line = buf; line != NULL && *line; line = strchr(line, '\n')) {
    if (*line == '\n') line++;
    if (strncmp(line, field, flen) != 0 || line[flen] != ':') continue;
    char *end = strchr(line, '\n');
    if (end) *end = '\0';
    char *last = strrchr(line, '\t');
    return last ? strtol(last + 1, NULL, 10) : -1;
  }
  return -1;
}

pid_t pfs_tgid(pid_t tid) {
  return (pid_t)pfs_status_last(tid, "Tgid");
}

/* 1 when an entry of pid's environment is s (exact), or starts with s and is longer. */
static int env_match(pid_t pid, const char *s, int exact) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  static char buf[1 << 16];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  size_t len = strlen(s);
  for (ssize_t i = 0; i < n;) {
    const char *e = buf + i;
    size_t elen = strnlen(e, (size_t)(n - i));
    if ((exact ? elen == len : elen > len) && memcmp(e, s, len) == 0) return 1;
    i += (ssize_t)elen + 1;
  }
  return 0;
}

int pfs_has_env(pid_t pid, const char *entry) {
  return env_match(pid, entry, 1);
}

int pfs_has_env_prefix(pid_t pid, const char *prefix) {
  return env_match(pid, prefix, 0);
}

#define MARK_BASE 0x7ff0000000000000ULL
#define MARK_BITS 22 /* pid_max is at most 2^22 */
#define MARK_MASK ((1ULL << MARK_BITS) - 1)

uint64_t pfs_mark_make(pid_t host, unsigned long serial) {
  return MARK_BASE | (((uint64_t)host & MARK_MASK) << MARK_BITS) | ((uint64_t)serial & MARK_MASK);
}

int pfs_rttime_hard(pid_t pid, uint64_t *hard) {
  struct rlimit r;
  if (prlimit(pid, RLIMIT_RTTIME, NULL, &r) == 0) {
    *hard = r.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_max;
    return 0;
  }
  if (errno != EPERM) return -1;
  char buf[4096]; /* (world-readable, unlike the limits through prlimit) */
  if (pfs_read(pid, "limits", buf, sizeof buf) < 0) return -1;
  const char *line = strstr(buf, "Max realtime timeout");
  char soft[32], max[32];
  if (line == NULL || sscanf(line + 20, " %31s %31s", soft, max) != 2) return -1;
  if (strcmp(max, "unlimited") == 0) {
    *hard = UINT64_MAX;
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(max, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *hard = v;
  return 0;
}

uint64_t pfs_mark_of(pid_t pid) {
  uint64_t v;
  if (pfs_rttime_hard(pid, &v) != 0 || v == UINT64_MAX) return 0;
  return (v & ~((1ULL << (2 * MARK_BITS)) - 1)) == MARK_BASE ? v : 0;
}

pid_t pfs_mark_host(uint64_t mark) {
  return mark == 0 ? 0 : (pid_t)((mark >> MARK_BITS) & MARK_MASK);
}

char pfs_state(pid_t pid, pid_t *pgid) {
  char buf[512];
  if (pfs_read(pid, "stat", buf, sizeof buf) < 0) return 0;
  char *q = strrchr(buf, ')');
  char st;
  int ppid, pg;
  if (q == NULL || sscanf(q + 1, " %c %d %d", &st, &ppid, &pg) != 3) return 0;
  if (pgid) *pgid = pg;
  return st;
}
