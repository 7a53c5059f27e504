/* procfs.c: reading /proc for the process tree, descriptor holders and input waits. */
#include "procfs.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int pfs_children(pid_t pid, pid_t *out, int max) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (d == NULL) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    char file[300];
    snprintf(file, sizeof file, "/proc/%d/task/%s/children", (int)pid, e->d_name);
    FILE *f = fopen(file, "re");
    if (f == NULL) continue;
    int child;
    while (n < max && fscanf(f, "%d", &child) == 1) out[n++] = child;
    fclose(f);
  }
  closedir(d);
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
  if (pid == 0) snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  else snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, fd);
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
static int read_proc(pid_t pid, const char *file, char *buf, size_t size) {
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
  if (read_proc(pid, "stat", buf, sizeof buf) < 0) return -1;
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
  if (read_proc(pid, "stat", buf, sizeof buf) < 0) return 0;
  char *p = strrchr(buf, ')');
  int ppid, pgid, sid;
  unsigned long nr;
  char st;
  if (p == NULL || sscanf(p + 1, " %c %d %d %d %lu", &st, &ppid, &pgid, &sid, &nr) != 5) return 0;
  if (nr == 0) return 0;
  struct stat sb;
  if (stat(target, &sb) != 0 || !S_ISCHR(sb.st_mode)) return 0;
  /* the kernel's encoding of tty_nr: minor's low byte, major, then minor's high bits */
  unsigned int maj = (unsigned int)((nr & 0xfff00) >> 8);
  unsigned int min = (unsigned int)((nr & 0xff) | ((nr >> 12) & 0xfff00));
  return major(sb.st_rdev) == maj && minor(sb.st_rdev) == min;
}

/* Whether pid's descriptor fd reads target: the same file, or /dev/tty naming it. */
static int reads_from(pid_t pid, int fd, const char *target) {
  char t[256];
  if (pfs_fd_target(pid, fd, t, sizeof t) != 0) return 0;
  if (strcmp(t, target) == 0) return 1;
  return strcmp(t, "/dev/tty") == 0 && strncmp(target, "/dev/", 5) == 0
    && controlled_by(pid, target);
}

int pfs_waiting_on(pid_t pid, const char *target) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  long nr;
  unsigned long arg0;
  if (sscanf(buf, "%ld %lx", &nr, &arg0) != 2) return 0; /* "running" */
  switch (nr) {
    case SYS_read:
    case SYS_readv:
    case SYS_pread64:
      return reads_from(pid, (int)arg0, target);
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
      /* readline, python's input() and shells wait here before reading stdin */
      return reads_from(pid, 0, target);
    default:
      return 0;
  }
}

long pfs_status_last(pid_t pid, const char *field) {
  char buf[2048];
  if (read_proc(pid, "status", buf, sizeof buf) < 0) return -1;
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

int pfs_has_env(pid_t pid, const char *entry) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  static char buf[1 << 16];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  size_t len = strlen(entry);
  for (ssize_t i = 0; i < n;) {
    const char *e = buf + i;
    size_t elen = strnlen(e, (size_t)(n - i));
    if (elen == len && memcmp(e, entry, len) == 0) return 1;
    i += (ssize_t)elen + 1;
  }
  return 0;
}
