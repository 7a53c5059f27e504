/* cgroup_limits.c: writing a session's limits where the host can enforce them, and reading
 * back which one was hit. Nothing here stays open for the session's life: each control file
 * is opened, read or written, and closed. */
#include "cgroup_limits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const cgl_names[CGL_N] = {"memory", "pids", "cpu"};

/* A cgroup v1 hierarchy with one of the controllers: the host's directory in it. */
typedef struct v1_ctl {
  int state; /* 0 unknown, 1 usable, -1 not */
  int host_fd;
  char why[512];
} v1_ctl;

static v1_ctl v1[CGL_N];
static unsigned v1_next = 1;

/* The value after "key " on a line of a flat keyed file (memory.events, cpu.stat), or -1. */
static long long keyed(const char *buf, const char *key) {
  size_t n = strlen(key);
  for (const char *p = buf; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, key, n) == 0 && p[n] == ' ') return atoll(p + n + 1);
  }
  return -1;
}

static long long read_keyed(int dir_fd, const char *file, const char *key) {
  char buf[1024];
  return cg_read_text(dir_fd, file, buf, sizeof buf) == 0 ? keyed(buf, key) : -1;
}

static long long read_number(int dir_fd, const char *file) {
  char buf[64];
  return cg_read_text(dir_fd, file, buf, sizeof buf) == 0 && buf[0] >= '0' && buf[0] <= '9'
             ? atoll(buf)
             : -1;
}

static int host_has_swap(void) {
  char buf[4096];
  int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1; /* unknown: assume the worse */
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 1;
  buf[n] = '\0';
  char *p = strstr(buf, "SwapTotal:");
  return p == NULL || atoll(p + 10) > 0;
}

/* --- cgroup v1 ---------------------------------------------------------------------------- */

static int has_token(const char *list, const char *tok, char sep) {
  size_t n = strlen(tok);
  for (const char *p = list; p != NULL; p = strchr(p, sep), p = p ? p + 1 : NULL) {
    if (strncmp(p, tok, n) == 0 && (p[n] == sep || p[n] == '\0' || p[n] == '\n')) return 1;
  }
  return 0;
}

/* Where the host's cgroup of this v1 controller is in the file system. */
static int v1_own_dir(const char *ctl, char *out, size_t size) {
  char line[4096], own[4096] = "", mnt[4096] = "", root[4096] = "";
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL) {
    char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
    if (b == NULL) continue;
    *b = '\0';
    if (has_token(a + 1, ctl, ',')) {
      b[1 + strcspn(b + 1, "\n")] = '\0';
      snprintf(own, sizeof own, "%s", b + 1);
    }
  }
  fclose(f);
  f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL || own[0] == '\0') {
    if (f) fclose(f);
    return -1;
  }
  while (mnt[0] == '\0' && fgets(line, sizeof line, f) != NULL) {
    char *sep = strstr(line, " - cgroup ");
    if (sep == NULL) continue;
    char *opts = strrchr(sep, ' ');
    if (opts == NULL || !has_token(opts + 1, ctl, ',')) continue;
    if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2) mnt[0] = '\0';
  }
  fclose(f);
  if (mnt[0] == '\0') return -1;
  size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
  if (rl > 0 && strncmp(own, root, rl) != 0) return -1; /* our cgroup is not under the mount */
  const char *rest = own + rl;
  return snprintf(out, size, "%s%s", mnt, strcmp(rest, "/") == 0 ? "" : rest) < (int)size ? 0 : -1;
}

/* Directories of hosts that died (the watchdog only knows the v2 tree): empty by now. */
static void v1_sweep_stale(const char *parent) {
  DIR *d = opendir(parent);
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid;
    char tail;
    if (sscanf(e->d_name, "luxec.%ld%c", &pid, &tail) != 1 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
    DIR *s = opendir(path);
    struct dirent *c;
    while (s != NULL && (c = readdir(s)) != NULL) {
      if (c->d_type == DT_DIR && c->d_name[0] == 's') {
        char sub[8448];
        snprintf(sub, sizeof sub, "%s/%s", path, c->d_name);
        rmdir(sub);
      }
    }
    if (s) closedir(s);
    rmdir(path);
  }
  closedir(d);
}

static int v1_available(int i) {
  v1_ctl *c = &v1[i];
  if (c->state != 0) return c->state == 1;
  c->state = -1;
  c->host_fd = -1;
  char own[4096], host[4200];
  if (v1_own_dir(cgl_names[i], own, sizeof own) < 0) {
    snprintf(c->why, sizeof c->why, "cgroup v1: no hierarchy has the '%s' controller",
             cgl_names[i]);
    return 0;
  }
  v1_sweep_stale(own);
  snprintf(host, sizeof host, "%s/luxec.%d", own, (int)getpid());
  if (mkdir(host, 0755) < 0 && errno != EEXIST) {
    snprintf(c->why, sizeof c->why, "cgroup v1: cannot create %.300s: %s", host, strerror(errno));
    return 0;
  }
  c->host_fd = open(host, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (c->host_fd < 0) {
    snprintf(c->why, sizeof c->why, "cgroup v1: cannot open %.300s: %s", host, strerror(errno));
    rmdir(host);
    return 0;
  }
  c->state = 1;
  return 1;
}

static int v1_apply(cg_limits_state *st, int i, char *why, size_t len) {
  if (!v1_available(i)) {
    snprintf(why, len, "%s", v1[i].why);
    return -1;
  }
  if (st->v1_id == 0) st->v1_id = v1_next++;
  char name[32], file[96];
  snprintf(name, sizeof name, "s%u", st->v1_id);
  if (mkdirat(v1[i].host_fd, name, 0755) < 0 && errno != EEXIST) {
    snprintf(why, len, "cgroup v1 %s: mkdir: %s", cgl_names[i], strerror(errno));
    return -1;
  }
  st->v1_made[i] = 1;
  char val[64];
  int rc = 0;
  const cg_limits *w = &st->want;
  const char *bad = "";
  if (i == CGL_MEMORY) {
    snprintf(val, sizeof val, "%lld", w->memory);
    snprintf(file, sizeof file, "%s/memory.limit_in_bytes", name);
    rc = cg_write_text(v1[i].host_fd, file, val);
    bad = "memory.limit_in_bytes";
    if (rc == 0) { /* memory + swap, so swap does not extend the limit */
      snprintf(file, sizeof file, "%s/memory.memsw.limit_in_bytes", name);
      rc = cg_write_text(v1[i].host_fd, file, val);
      bad = "memory.memsw.limit_in_bytes";
      if (rc == -ENOENT && !host_has_swap()) rc = 0;
    }
  } else if (i == CGL_PIDS) {
    snprintf(val, sizeof val, "%lld", w->pids);
    snprintf(file, sizeof file, "%s/pids.max", name);
    rc = cg_write_text(v1[i].host_fd, file, val);
    bad = "pids.max";
  } else {
    snprintf(val, sizeof val, "%lld", w->cpu_period_us);
    snprintf(file, sizeof file, "%s/cpu.cfs_period_us", name);
    rc = cg_write_text(v1[i].host_fd, file, val);
    bad = "cpu.cfs_period_us";
    if (rc == 0) {
      snprintf(val, sizeof val, "%lld", w->cpu_quota_us);
      snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", name);
      rc = cg_write_text(v1[i].host_fd, file, val);
      bad = "cpu.cfs_quota_us";
    }
  }
  if (rc < 0) {
    snprintf(why, len, "cgroup v1: writing %s: %s%s", bad, strerror(-rc),
             rc == -ENOENT ? " (no swap accounting, and the host has swap)" : "");
    return -1;
  }
  return 0;
}

/* --- cgroup v2 ---------------------------------------------------------------------------- */

static int v2_apply(const cg_limits_state *st, const cg_session *cg, int i, char *why, size_t len) {
  if (cg_enable_controller(cgl_names[i], why, len) < 0) return -1;
  const cg_limits *w = &st->want;
  char val[64];
  const char *file;
  int rc;
  if (i == CGL_MEMORY) {
    snprintf(val, sizeof val, "%lld", w->memory);
    rc = cg_write_text(cg->dir_fd, file = "memory.max", val);
    if (rc == 0) { /* swap would otherwise hold what memory.max pushes out */
      rc = cg_write_text(cg->dir_fd, file = "memory.swap.max", "0");
      if (rc == -ENOENT && !host_has_swap()) rc = 0;
      if (rc < 0) cg_write_text(cg->dir_fd, "memory.max", "max"); /* enforced elsewhere, or not */
    }
  } else if (i == CGL_PIDS) {
    snprintf(val, sizeof val, "%lld", w->pids);
    rc = cg_write_text(cg->dir_fd, file = "pids.max", val);
  } else {
    snprintf(val, sizeof val, "%lld %lld", w->cpu_quota_us, w->cpu_period_us);
    rc = cg_write_text(cg->dir_fd, file = "cpu.max", val);
  }
  if (rc < 0) {
    snprintf(why, len, "cgroup v2: writing %s: %s%s", file, strerror(-rc),
             rc == -ENOENT && i == CGL_MEMORY ? " (no swap accounting, and the host has swap)"
                                              : "");
    return -1;
  }
  return 0;
}

/* --- the session -------------------------------------------------------------------------- */

static int wanted(const cg_limits *w, int i) {
  return i == CGL_MEMORY ? w->memory > 0 : i == CGL_PIDS ? w->pids > 0 : w->cpu_quota_us > 0;
}

int cgl_setup(cg_limits_state *st, const cg_limits *want, const cg_session *cg, int use_cgroups,
              char *err, size_t len) {
  memset(st, 0, sizeof *st);
  st->want = *want;
  for (int i = 0; i < CGL_N; i++) {
    if (!wanted(want, i)) continue;
    char why2[400] = "", why1[300] = "";
    if (!use_cgroups) {
      snprintf(why2, sizeof why2, "the session has no cgroup (cgroup = false)");
    } else if (cg->dir_fd < 0) {
      const char *r = NULL;
      cg_available(&r);
      snprintf(why2, sizeof why2, "cgroup v2: no session cgroup (%s)", r ? r : "none was made");
    } else if (v2_apply(st, cg, i, why2, sizeof why2) == 0) {
      st->via[i] = CGL_CGROUP2;
      continue;
    }
    if (use_cgroups) {
      if (v1_apply(st, i, why1, sizeof why1) == 0) {
        st->via[i] = CGL_CGROUP1;
        continue;
      }
    }
    const char *instead =
        i == CGL_MEMORY ? "RLIMIT_DATA instead, which bounds each process's private writable "
                          "memory, not the session's total"
        : i == CGL_PIDS ? "no pids limit (RLIMIT_NPROC counts every process of the user, not "
                          "the session's)"
                        : "no cpu limit (RLIMIT_CPU counts cpu-seconds, not a rate)";
    if (!want->best_effort) {
      snprintf(err, len, "limits.%s cannot be enforced here: %s%s%s (with best_effort: %s)",
               cgl_names[i], why2, why1[0] ? "; " : "", why1, instead);
      cgl_release(st);
      return -1;
    }
    snprintf(st->degraded[i], sizeof st->degraded[i], "limits.%s: %s%s%s: %s", cgl_names[i], why2,
             why1[0] ? "; " : "", why1, instead);
    st->via[i] = i == CGL_MEMORY ? CGL_RLIMIT : CGL_NONE;
  }
  return 0;
}

int cgl_open_procs(const cg_limits_state *st, int fds[CGL_N]) {
  int n = 0;
  for (int i = 0; i < CGL_N; i++) {
    if (st->via[i] != CGL_CGROUP1) continue;
    char file[64];
    snprintf(file, sizeof file, "s%u/cgroup.procs", st->v1_id);
    int fd = openat(v1[i].host_fd, file, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) fds[n++] = fd;
  }
  return n;
}

int cgl_rlimits(const cg_limits_state *st, int res[CGL_N], struct rlimit val[CGL_N]) {
  if (st->via[CGL_MEMORY] != CGL_RLIMIT) return 0;
  struct rlimit now;
  rlim_t v = (rlim_t)st->want.memory;
  /* never above the hard limit the host already has: that would fail with EPERM */
  if (getrlimit(RLIMIT_DATA, &now) == 0 && now.rlim_max != RLIM_INFINITY && now.rlim_max < v)
    v = now.rlim_max;
  res[0] = RLIMIT_DATA;
  val[0].rlim_cur = val[0].rlim_max = v;
  return 1;
}

void cgl_read(const cg_limits_state *st, const cg_session *cg, cg_limits_stats *out) {
  memset(out, 0xff, sizeof *out); /* every field -1 */
  char f[96];
  if (st->via[CGL_MEMORY] == CGL_CGROUP2 && cg->dir_fd >= 0) {
    char buf[1024];
    if (cg_read_text(cg->dir_fd, "memory.events", buf, sizeof buf) == 0) {
      out->mem_hits = keyed(buf, "max");
      out->mem_oom = keyed(buf, "oom");
      out->mem_oom_kills = keyed(buf, "oom_kill");
    }
    out->mem_peak = read_number(cg->dir_fd, "memory.peak");
    out->mem_current = read_number(cg->dir_fd, "memory.current");
  } else if (st->via[CGL_MEMORY] == CGL_CGROUP1) {
    int d = v1[CGL_MEMORY].host_fd;
    snprintf(f, sizeof f, "s%u/memory.failcnt", st->v1_id);
    out->mem_hits = read_number(d, f);
    snprintf(f, sizeof f, "s%u/memory.oom_control", st->v1_id);
    out->mem_oom_kills = read_keyed(d, f, "oom_kill");
    snprintf(f, sizeof f, "s%u/memory.max_usage_in_bytes", st->v1_id);
    out->mem_peak = read_number(d, f);
    snprintf(f, sizeof f, "s%u/memory.usage_in_bytes", st->v1_id);
    out->mem_current = read_number(d, f);
  }
  if (st->via[CGL_PIDS] == CGL_CGROUP2 || st->via[CGL_PIDS] == CGL_CGROUP1) {
    int v2 = st->via[CGL_PIDS] == CGL_CGROUP2, d = v2 ? cg->dir_fd : v1[CGL_PIDS].host_fd;
    char pre[32] = "";
    if (!v2) snprintf(pre, sizeof pre, "s%u/", st->v1_id);
    snprintf(f, sizeof f, "%spids.events", pre);
    out->pids_hits = read_keyed(d, f, "max");
    snprintf(f, sizeof f, "%spids.peak", pre);
    out->pids_peak = read_number(d, f);
    snprintf(f, sizeof f, "%spids.current", pre);
    out->pids_current = read_number(d, f);
  }
  if (st->via[CGL_CPU] == CGL_CGROUP2 || st->via[CGL_CPU] == CGL_CGROUP1) {
    int v2 = st->via[CGL_CPU] == CGL_CGROUP2;
    char buf[1024];
    snprintf(f, sizeof f, "s%u/cpu.stat", st->v1_id);
    if (cg_read_text(v2 ? cg->dir_fd : v1[CGL_CPU].host_fd, v2 ? "cpu.stat" : f, buf, sizeof buf) ==
        0) {
      out->cpu_periods = keyed(buf, "nr_periods");
      out->cpu_throttled = keyed(buf, "nr_throttled");
      long long t = keyed(buf, v2 ? "throttled_usec" : "throttled_time"); /* v1: ns */
      out->cpu_throttled_usec = t < 0 || v2 ? t : t / 1000;
    }
  }
}

void cgl_release(cg_limits_state *st) {
  char name[32];
  snprintf(name, sizeof name, "s%u", st->v1_id);
  for (int i = 0; i < CGL_N; i++) {
    if (st->v1_made[i] && v1[i].host_fd >= 0) unlinkat(v1[i].host_fd, name, AT_REMOVEDIR);
    st->v1_made[i] = 0;
  }
}

void cgl_shutdown(void) {
  for (int i = 0; i < CGL_N; i++) {
    if (v1[i].state != 1) continue;
    char path[64];
    snprintf(path, sizeof path, "../luxec.%d", (int)getpid());
    unlinkat(v1[i].host_fd, path, AT_REMOVEDIR);
    close(v1[i].host_fd);
    v1[i].host_fd = -1;
    v1[i].state = 0;
  }
}

/* ---- controllers: what the session cgroups can be limited by ---- */

static int has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return 1;
  }
  return 0;
}

int cg_read_text(int dir_fd, const char *name, char *buf, size_t size) {
  int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = read(fd, buf, size - 1);
  int e = errno;
  close(fd);
  if (n < 0) return -e;
  buf[n] = '\0';
  return 0;
}

int cg_enable_controller(const char *name, char *why_out, size_t len) {
  char have[512], plus[32];
  const char *why = NULL;
  if (!cg_available(&why)) {
    snprintf(why_out, len, "no cgroup v2 directory for sessions (%s)", why ? why : "?");
    return -1;
  }
  int host_fd = cg_host_fd();
  const char *parent_dir = cg_parent_dir(), *host_dir = cg_host_dir();
  if (cg_read_text(host_fd, "cgroup.subtree_control", have, sizeof have) == 0 &&
      has_word(have, name))
    return 0;
  snprintf(plus, sizeof plus, "+%s", name);
  if (cg_read_text(host_fd, "cgroup.controllers", have, sizeof have) < 0 || !has_word(have, name)) {
    /* Offered to the host's directory only once enabled in the cgroup the host lives in. A
     * controller the cgroup itself lacks (bound to a v1 hierarchy, or not delegated to this
     * user) cannot be; with processes of its own, a domain controller like memory gets EBUSY
     * (the "no internal processes" rule), unless it is the root cgroup. */
    char offered[512] = "";
    int pfd = open(parent_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd >= 0) cg_read_text(pfd, "cgroup.controllers", offered, sizeof offered);
    offered[strcspn(offered, "\n")] = '\0';
    if (!has_word(offered, name)) {
      snprintf(why_out, len,
               "the cgroup v2 tree offers no '%s' controller here (%s/cgroup.controllers:"
               " \"%s\": bound to a cgroup v1 hierarchy, or not delegated to this user)",
               name, parent_dir, offered);
      if (pfd >= 0) close(pfd);
      return -1;
    }
    int rc = pfd >= 0 ? cg_write_text(pfd, "cgroup.subtree_control", plus) : -errno;
    close(pfd);
    if (rc < 0) {
      snprintf(why_out, len, "cannot enable '%s' in %s/cgroup.subtree_control: %s%s", name,
               parent_dir, strerror(-rc),
               rc == -EBUSY ? " (that cgroup has processes of its own: start luxec in a cgroup of "
                              "its own, e.g. systemd-run --user --scope -p Delegate=yes)"
                            : "");
      return -1;
    }
  }
  int rc = cg_write_text(host_fd, "cgroup.subtree_control", plus);
  if (rc < 0) {
    snprintf(why_out, len, "cannot enable '%s' in %s/cgroup.subtree_control: %s", name, host_dir,
             strerror(-rc));
    return -1;
  }
  return 0;
}
