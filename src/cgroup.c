/* cgroup.c: per-session cgroups and the watchdog that outlives a killed host. */
#include "cgroup.h"
#include "cgroup_limits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int state = 0; /* 0 unknown, 1 available, -1 not */
static const char *why = NULL;
static char host_dir[4096];
static char parent_dir[8192]; /* the cgroup the host lives in */
static int host_fd = -1;
static int host_events = -1;   /* the host directory's cgroup.events, read with pread */
static int watchdog_pipe = -1; /* write end; the watchdog acts when it reads EOF */
static pid_t watchdog = -1;
static unsigned next_id = 1;
/* Emptied session cgroups kept for reuse: a spawn then costs no mkdir or rmdir. As many as
 * a host with a few hundred sessions at once ends together (an empty cgroup costs the
 * kernel a few KiB; the rest are removed at host exit). */
#define POOL_MAX 256
static struct {
  unsigned id;
  int killed;
} pool[POOL_MAX];
static int pooled = 0;
/* One reusable cgroup keeps its directory open: a spawn that reuses it (one session at a time
 * takes the same one back from the pool) opens and closes nothing. One descriptor in all,
 * whatever the number of sessions. */
static unsigned kept_id = 0;
static int kept_dir = -1;
/* One inotify descriptor tells when any session's cgroup.events changes (a change of
 * "populated" is a modification of that file): no descriptor per session or per wait. */
static int inotify_fd = -1;
/* Cgroups of closed sessions that were killed but not yet empty: removed (or pooled) when
 * their cgroup.events says so, or at host exit. */
#define DRAIN_MAX 4096
static struct {
  unsigned id;
  int wd, fresh, killed;
} draining[DRAIN_MAX];
static int ndraining = 0;

static int find_mount(char *out, size_t size) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL) return -1;
  char line[4096];
  int found = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    char *sep = strstr(line, " - cgroup2 ");
    if (sep == NULL) continue;
    char mnt[4096];
    if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1) {
      snprintf(out, size, "%s", mnt);
      found = 0;
      break;
    }
  }
  fclose(f);
  return found;
}

static int own_cgroup(char *out, size_t size) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (f == NULL) return -1;
  char line[4096];
  int found = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "0::", 3) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(out, size, "%s", line + 3);
      found = 0;
    }
  }
  fclose(f);
  return found;
}

static int parse_populated(char *buf, ssize_t n) {
  buf[n] = '\0';
  char *p = strstr(buf, "populated ");
  return p != NULL && p[10] == '1';
}

static int read_populated(int dir_fd, const char *events) {
  int fd = openat(dir_fd, events, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  int e = errno;
  close(fd);
  if (n < 0) return -e;
  return parse_populated(buf, n);
}

int cg_write_text(int dir_fd, const char *name, const char *text) {
  int fd = openat(dir_fd, name, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = write(fd, text, strlen(text));
  int e = errno;
  close(fd);
  return n < 0 ? -e : 0;
}

/* Remove the cgroup name in parent_fd with every cgroup below it, deepest first (rmdir of an
 * empty cgroup; one that still has processes stays). A nested host's own directory sits in
 * one of its session's cgroups. Only system calls: the watchdog runs it after fork. */
static void remove_tree(int parent_fd, const char *name, int depth) {
  int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0 && depth < 32) {
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
      for (long off = 0; off < n;) {
        struct dirent64 *d = (struct dirent64 *)(buf + off);
        off += d->d_reclen;
        if (d->d_type == DT_DIR && strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0)
          remove_tree(fd, d->d_name, depth + 1);
      }
  }
  if (fd >= 0) close(fd);
  unlinkat(parent_fd, name, AT_REMOVEDIR);
}

/* Directories "luxec.<pid>" beside this host's, left by hosts that died with their watchdog
 * (a whole service cgroup killed at once): each is removed when its pid is gone and nobody
 * holds its lock (a live host's watchdog keeps the flock on its directory until it exits,
 * so a host in another pid namespace is never swept). */
static void sweep_stale(int parent_fd, const char *own) {
  int fd = dup(parent_fd);
  DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (dir == NULL) {
    if (fd >= 0) close(fd);
    return;
  }
  struct dirent *d;
  while ((d = readdir(dir)) != NULL) {
    char *end;
    if (strncmp(d->d_name, "luxec.", 6) != 0 || strcmp(d->d_name, own) == 0) continue;
    long pid = strtol(d->d_name + 6, &end, 10);
    if (*end != '\0' || pid <= 0 || pid > 0x3fffffff || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;
    int lk = openat(parent_fd, d->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (lk < 0) continue;
    if (flock(lk, LOCK_EX | LOCK_NB) == 0) remove_tree(parent_fd, d->d_name, 0);
    close(lk);
  }
  closedir(dir);
}

/* The watchdog: a forked copy of the host that only makes system calls. It blocks until
 * the host's end of the pipe closes (the host exited, however it died), then kills and
 * removes whatever cgroups are left. */
static void watchdog_main(int rd, int dir_fd, int parent_fd, const char *name) {
  /* Keep only what it needs, as 3, 4 and 5: anything else it held (a session's pipe, say)
   * would keep that open as long as the host lives. Everything else is closed first, so the
   * moves need no free descriptor above a low RLIMIT_NOFILE (F_DUPFD 100 failed under 64). */
  int keep[3] = {rd, dir_fd, parent_fd}, sorted[3] = {rd, dir_fd, parent_fd};
  for (int i = 1; i < 3; i++)
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
      int t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  int lo = 3;
  for (int i = 0; i < 3; i++) {
    if (sorted[i] < lo) continue;
    if (sorted[i] > lo) syscall(SYS_close_range, (unsigned)lo, (unsigned)sorted[i] - 1, 0U);
    lo = sorted[i] + 1;
  }
  syscall(SYS_close_range, (unsigned)lo, ~0U, 0U);
  for (int i = 0; i < 3; i++) keep[i] = fcntl(keep[i], F_DUPFD, 6);
  for (int i = 0; i < 3; i++) dup2(keep[i], 3 + i);
  rd = 3;
  dir_fd = 4;
  parent_fd = 5;
  syscall(SYS_close_range, 6U, ~0U, 0U);
  setsid();
  prctl(PR_SET_NAME, "luxec-watchdog");
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
  }
  char c;
  while (read(rd, &c, 1) < 0 && errno == EINTR) {
  }
  cg_write_text(dir_fd, "cgroup.kill", "1");
  struct timespec tick = {0, 5 * 1000 * 1000};
  for (int i = 0; i < 1000 && read_populated(dir_fd, "cgroup.events") == 1; i++)
    nanosleep(&tick, NULL);
  remove_tree(parent_fd, name, 0);
  _exit(0);
}

static int setup(void) {
  char mnt[4096], own[4096];
  if (find_mount(mnt, sizeof mnt) < 0) {
    why = "no cgroup2 file system is mounted";
    return -1;
  }
  if (own_cgroup(own, sizeof own) < 0) {
    why = "this process has no cgroup v2 membership";
    return -1;
  }
  char parent[8192];
  snprintf(parent, sizeof parent, "%s%s", mnt, strcmp(own, "/") == 0 ? "" : own);
  snprintf(parent_dir, sizeof parent_dir, "%s", parent);
  char name[64];
  snprintf(name, sizeof name, "luxec.%d", (int)getpid());
  if (snprintf(host_dir, sizeof host_dir, "%s/%s", parent, name) >= (int)sizeof host_dir) {
    why = "cgroup path too long";
    return -1;
  }
  if (mkdir(host_dir, 0755) < 0 && errno != EEXIST) {
    why = errno == EACCES || errno == EPERM || errno == EROFS
              ? "the cgroup2 tree is not writable (not root and not delegated)"
              : "cannot create a cgroup";
    return -1;
  }
  host_fd = open(host_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (host_fd >= 0) flock(host_fd, LOCK_EX | LOCK_NB); /* held by the watchdog's copy */
  if (parent_fd >= 0) sweep_stale(parent_fd, name);
  int p[2];
  if (host_fd < 0 || parent_fd < 0 || pipe2(p, O_CLOEXEC) < 0) {
    why = "cannot open the cgroup directory";
    if (parent_fd >= 0) close(parent_fd);
    rmdir(host_dir);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(p[1]);
    watchdog_main(p[0], host_fd, parent_fd, name);
  }
  close(p[0]);
  close(parent_fd);
  if (pid < 0) {
    close(p[1]);
    why = "cannot start the cgroup watchdog";
    rmdir(host_dir);
    return -1;
  }
  watchdog = pid;
  watchdog_pipe = p[1];
  inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC); /* -1: waits see no events (EMFILE) */
  host_events = openat(host_fd, "cgroup.events", O_RDONLY | O_CLOEXEC); /* -1: opened per read */
  return 0;
}

int cg_available(const char **reason) {
  if (state == 0) state = setup() == 0 ? 1 : -1;
  if (reason != NULL) *reason = why;
  return state == 1;
}

/* "s<id>/<file>" into buf (async-signal-safe: no stdio). */
static void session_path(unsigned id, const char *file, char *buf, size_t size) {
  char digits[16];
  int nd = 0;
  do digits[nd++] = (char)('0' + id % 10);
  while ((id /= 10) > 0 && nd < 15);
  size_t k = 0;
  if (k + 1 < size) buf[k++] = 's';
  while (nd > 0 && k + 1 < size) buf[k++] = digits[--nd];
  if (file != NULL && k + 1 < size) buf[k++] = '/';
  for (const char *f = file; f != NULL && *f != '\0' && k + 1 < size; f++) buf[k++] = *f;
  buf[k] = '\0';
}

/* A killed session's cgroup set aside unwatched (cg_session_release) that is empty now, taken
 * back for reuse into s; 0 when none of the few looked at is. */
static int reclaim(cg_session *s) {
  for (int i = 0, looked = 0; i < ndraining && looked < 4; i++) {
    if (draining[i].wd >= 0) continue;
    looked++;
    cg_session t = {.id = draining[i].id, .dir_fd = -1};
    if (cg_session_populated(&t) != 0) continue;
    s->id = draining[i].id;
    s->killed = draining[i].killed;
    draining[i] = draining[--ndraining];
    return 1;
  }
  return 0;
}

int cg_session_create(cg_session *s, int fresh) {
  s->id = 0;
  s->dir_fd = -1;
  s->fresh = fresh;
  s->killed = 0;
  if (!cg_available(NULL)) return -ENOTSUP;
  if (pooled > 0 && !fresh) {
    pooled--;
    s->id = pool[pooled].id;
    s->killed = pool[pooled].killed;
    return 0;
  }
  if (!fresh && reclaim(s)) return 0;
  unsigned id = next_id++;
  char name[32];
  session_path(id, NULL, name, sizeof name);
  if (mkdirat(host_fd, name, 0755) < 0) return -errno;
  s->id = id;
  if (fresh) { /* its limits are written and their counters read through it */
    s->dir_fd = openat(host_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0) {
      int e = errno;
      cg_session_destroy(s);
      return -e;
    }
  }
  return 0;
}

int cg_session_open(const cg_session *s, const char *file, int flags) {
  if (s->id == 0) return -ENOENT;
  char path[64];
  session_path(s->id, file, path, sizeof path);
  int fd = openat(host_fd, path, flags | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

int cg_session_dir(const cg_session *s) {
  if (s->id != 0 && s->id == kept_id) return kept_dir;
  if (s->dir_fd >= 0) return s->dir_fd;
  return cg_session_open(s, NULL, O_RDONLY | O_DIRECTORY);
}

void cg_session_launched(const cg_session *s, int dir_fd) {
  if (dir_fd < 0 || dir_fd == kept_dir || dir_fd == s->dir_fd) return;
  if (kept_dir < 0 && !s->fresh && s->id != 0) { /* (a fresh one is removed at its end) */
    kept_id = s->id;
    kept_dir = dir_fd;
  } else {
    close(dir_fd);
  }
}

int cg_session_populated(const cg_session *s) {
  if (s->id == 0) return 0;
  char path[64];
  session_path(s->id, "cgroup.events", path, sizeof path);
  return read_populated(host_fd, path);
}

/* The directory every session's cgroup is made in: it is populated while any of them is. */
int cg_sessions_populated(void) {
  if (state != 1) return -ENOTSUP;
  if (host_events < 0) return read_populated(host_fd, "cgroup.events");
  char buf[256];
  ssize_t n = pread(host_events, buf, sizeof buf - 1, 0);
  return n < 0 ? -errno : parse_populated(buf, n);
}

int cg_session_kill(cg_session *s) {
  if (s->id == 0) return 0;
  s->killed = 1;
  char path[64];
  session_path(s->id, "cgroup.kill", path, sizeof path);
  int fd = openat(host_fd, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = write(fd, "1", 1) == 1 ? 0 : -errno;
  close(fd);
  return rc;
}

int cg_session_pids(const cg_session *s, pid_t *out, int max) {
  int fd = cg_session_open(s, "cgroup.procs", O_RDONLY);
  if (fd < 0) return s->id == 0 ? 0 : fd;
  char buf[8192];
  int n = 0, have = 0, more = 1;
  ssize_t r;
  /* A seq_file: a read that left room for another record in the page it fills was the last
   * (the read of EOF after it is saved). */
  while (more && n < max && (r = read(fd, buf + have, sizeof buf - 1 - (size_t)have)) > 0) {
    size_t asked = sizeof buf - 1 - (size_t)have;
    more = (size_t)r + 32 >= (asked < 4096 ? asked : 4096);
    have += (int)r;
    buf[have] = '\0';
    char *p = buf, *nl;
    while (n < max && (nl = strchr(p, '\n')) != NULL) {
      out[n++] = (pid_t)atoi(p);
      p = nl + 1;
    }
    have = (int)(buf + have - p);
    memmove(buf, p, (size_t)have);
  }
  close(fd);
  return n;
}

int cg_session_signal(const cg_session *s, int sig) {
  pid_t pids[1024];
  int n = cg_session_pids(s, pids, 1024);
  for (int i = 0; i < n; i++) kill(pids[i], sig);
  return n;
}

int cg_watch_fd(void) {
  return state == 1 ? inotify_fd : -1;
}

int cg_session_watch(const cg_session *s) {
  if (s->id == 0 || inotify_fd < 0) return -ENOENT;
  char path[8192];
  int k = snprintf(path, sizeof path, "%s/", host_dir);
  session_path(s->id, "cgroup.events", path + k, sizeof path - (size_t)k);
  int wd = inotify_add_watch(inotify_fd, path, IN_MODIFY);
  return wd < 0 ? -errno : wd;
}

void cg_unwatch(int wd) {
  if (wd >= 0 && inotify_fd >= 0) inotify_rm_watch(inotify_fd, wd);
}

int cg_watch_read(int *wds, int max) {
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  int n = 0;
  ssize_t len;
  while ((len = read(inotify_fd, buf, sizeof buf)) > 0) {
    for (char *ptr = buf; ptr < buf + len;) {
      const struct inotify_event *ev = (const struct inotify_event *)ptr;
      if ((ev->mask & IN_MODIFY) && n < max) wds[n++] = ev->wd;
      ptr += sizeof *ev + ev->len;
    }
  }
  return n;
}

/* Into the pool when it can be reused at once, else removed. */
static void put_back(cg_session *s) {
  if (!s->fresh && s->dir_fd < 0 && pooled < POOL_MAX && state == 1) {
    pool[pooled].id = s->id;
    pool[pooled++].killed = s->killed;
  } else {
    cg_session_destroy(s);
  }
  s->id = 0;
}

int cg_session_release(cg_session *s, int known_empty) {
  if (s->id == 0) return 1;
  if (s->dir_fd >= 0) close(s->dir_fd); /* a fresh one is never pooled */
  s->dir_fd = -1;
  /* Just killed, so full still: a reusable one is set aside without a watch or a look, and a
   * spawn takes it back once it is empty (cgroup.kill left nothing in it that can run). */
  if (!known_empty && state == 1 && !s->fresh && ndraining < DRAIN_MAX) {
    draining[ndraining].id = s->id;
    draining[ndraining].wd = -1;
    draining[ndraining].killed = s->killed;
    draining[ndraining++].fresh = 0;
    s->id = 0;
    return 0;
  }
  /* Watched first, then read: an emptying between the two is not missed. (Not known empty
   * means its tree was just killed: it is full still, and the read before is saved.) */
  int wd = state == 1 && !known_empty ? cg_session_watch(s) : -1;
  if (wd >= 0 && cg_session_populated(s) == 1 && ndraining < DRAIN_MAX) {
    draining[ndraining].id = s->id;
    draining[ndraining].wd = wd;
    draining[ndraining].killed = s->killed;
    draining[ndraining++].fresh = s->fresh;
    s->id = 0;
    return 0;
  }
  if (wd >= 0) cg_unwatch(wd);
  put_back(s);
  return 1;
}

int cg_drain_fired(int wd) {
  for (int i = 0; i < ndraining; i++) {
    if (draining[i].wd != wd) continue;
    cg_session s = {.id = draining[i].id,
                    .fresh = draining[i].fresh,
                    .dir_fd = -1,
                    .killed = draining[i].killed};
    if (cg_session_populated(&s) == 1) return 1;
    cg_unwatch(wd);
    draining[i] = draining[--ndraining];
    put_back(&s);
    return 1;
  }
  return 0;
}

int cg_draining(void) {
  return ndraining;
}

void cg_session_destroy(cg_session *s) {
  if (s->id != 0 && s->id == kept_id) {
    close(kept_dir);
    kept_dir = -1;
    kept_id = 0;
  }
  if (s->dir_fd >= 0) close(s->dir_fd);
  s->dir_fd = -1;
  if (s->id != 0) {
    char name[32];
    session_path(s->id, NULL, name, sizeof name);
    unlinkat(host_fd, name, AT_REMOVEDIR);
  }
  s->id = 0;
}

/* An init shares the host's memory: in a session's cgroup, that session's out-of-memory
 * killer, weighing each process by its memory, would pick it (the host's size) over a bomb of
 * small processes, and with it every process of that memory, the host. So inits live here,
 * outside every session's limits; they hold no memory of their own. */
static int inits_fd = -1;

int cg_inits_dir(void) {
  if (state != 1 || host_fd < 0) return -1;
  if (inits_fd >= 0) return inits_fd;
  if (mkdirat(host_fd, "i", 0755) < 0 && errno != EEXIST) return -1;
  inits_fd = openat(host_fd, "i", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  return inits_fd;
}

void cg_shutdown(void) {
  cgl_shutdown(); /* the cgroup v1 directories of limits, which need no v2 tree */
  if (state != 1) return;
  while (pooled > 0) {
    cg_session s = {.id = pool[--pooled].id, .dir_fd = -1};
    cg_session_destroy(&s);
  }
  while (ndraining > 0) { /* killed: what is empty goes now, the rest is the watchdog's */
    cg_session s = {.id = draining[--ndraining].id, .dir_fd = -1};
    cg_session_destroy(&s);
  }
  if (inotify_fd >= 0) close(inotify_fd);
  if (host_events >= 0) close(host_events);
  if (kept_dir >= 0) close(kept_dir);
  kept_dir = -1;
  kept_id = 0;
  if (inits_fd >= 0) { /* (empty once every session ended; else the watchdog's) */
    close(inits_fd);
    unlinkat(host_fd, "i", AT_REMOVEDIR);
    inits_fd = -1;
  }
  if (host_fd >= 0) close(host_fd);
  rmdir(host_dir);
  close(watchdog_pipe); /* the watchdog removes what is left, then exits */
  while (waitpid(watchdog, NULL, 0) < 0 && errno == EINTR) {
  }
  host_fd = watchdog_pipe = inotify_fd = host_events = -1;
  watchdog = -1;
  state = 0;
}

pid_t cg_watchdog_pid(void) {
  return watchdog;
}

const char *cg_host_dir(void) {
  return state == 1 ? host_dir : NULL;
}

int cg_host_fd(void) {
  return state == 1 ? host_fd : -1;
}

const char *cg_parent_dir(void) {
  return parent_dir;
}
