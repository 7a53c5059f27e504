/* notify_path.c: where a path of a sandboxed task leads, as that task sees it. The walk goes
 * through the task's own root, cwd and descriptors (/proc/<tid>/root, cwd, fd/N), one
 * component at a time with O_PATH descriptors, the way the kernel's walk goes: symbolic links
 * are followed in the middle of a path and, only where the caller asks, at its end; ".."
 * stops at the task's root; an absolute link starts again there; /proc/self and
 * /proc/thread-self name the task (never the host); a magic link (/proc/<pid>/fd/N, cwd,
 * root) jumps to the object it stands for. The paths it builds are the task's view: a
 * directory's path read back from /proc is relative to the root of the task's mount
 * namespace when the host cannot reach it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "notify_int.h"

#define MAX_LINKS 40 /* the kernel's MAXSYMLINKS */
#define PROC_ROOT_INO 1

void task_init(sbx_task *t, pid_t tid) {
  t->tid = tid;
  t->rootfd = -1;
  strcpy(t->rootpath, "/");
  t->flags = 0;
  t->gitlock[0] = t->gitlock[1] = -1;
  t->gitdir[0] = t->gitdir[1] = NULL;
}

void task_free(sbx_task *t) {
  if (t->rootfd >= 0) close(t->rootfd);
  t->rootfd = -1;
  file_gitdir_unlock(t);
}

void loc_free(sbx_loc *l) {
  if (l->dirfd >= 0) close(l->dirfd);
  l->dirfd = -1;
}

static int task_root(sbx_task *t) {
  if (t->rootfd < 0) {
    char link[48];
    snprintf(link, sizeof link, "/proc/%d/root", (int)t->tid);
    t->rootfd = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (t->rootfd < 0) return -errno;
  }
  return t->rootfd;
}

/* Whether path, which fd_path gave for our descriptor fd, is that of an object no longer
 * linked: the kernel writes " (deleted)" after the path of one removed, and a live file's own
 * name can end so too ("notes (deleted)"), which only its count of links tells apart (a
 * removed directory, a file with no name left: 0). */
static int unlinked(int fd, const char *path) {
  size_t n = strlen(path);
  if (n <= 10 || strcmp(path + n - 10, " (deleted)") != 0) return 0;
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_nlink == 0;
}

/* The name of the directory whose stat is st in the directory up (read whole): 0, or -1. */
static int name_in(int up, const struct stat *st, char *name) {
  int rd = openat(up, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rd < 0) return -1;
  DIR *d = fdopendir(rd);
  if (d == NULL) {
    close(rd);
    return -1;
  }
  int found = -1;
  struct dirent *e;
  while (found < 0 && (e = readdir(d)) != NULL) {
    struct stat es;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
    if (fstatat(up, e->d_name, &es, AT_SYMLINK_NOFOLLOW) == 0 && es.st_ino == st->st_ino &&
        es.st_dev == st->st_dev) {
      copy_str(name, NAME_MAX + 1, e->d_name);
      found = 0;
    }
  }
  closedir(d);
  return found;
}

/* The path of directory fd where it is longer than the kernel writes for a descriptor: the
 * names found walking up through "..", each by its inode in its parent, to a directory whose
 * path the kernel gives. At most size - NAME_MAX - 2 bytes (a name can still follow it). */
static int deep_path(int fd, char *out, size_t size) {
  char tail[LOC_MAX], name[NAME_MAX + 1], link[48];
  size_t len = 0; /* tail holds "/a/b/c" at its end: tail + sizeof tail - len */
  int cur = fcntl(fd, F_DUPFD_CLOEXEC, 0), rc = -ENAMETOOLONG;
  while (cur >= 0) {
    struct stat st;
    int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (up < 0 || fstat(cur, &st) < 0 || name_in(up, &st, name) < 0) {
      if (up >= 0) close(up);
      break;
    }
    close(cur);
    cur = up;
    size_t k = strlen(name);
    if (len + k + 1 > sizeof tail) break;
    len += k + 1;
    tail[sizeof tail - len] = '/';
    memcpy(tail + sizeof tail - len + 1, name, k);
    snprintf(link, sizeof link, "/proc/self/fd/%d", cur);
    ssize_t n = readlink(link, out, size - 1);
    if (n < 0 && errno == ENAMETOOLONG) continue;
    if (n <= 0 || out[0] != '/') break;
    if (n == 1) n = 0; /* (the root: "/" + "a/b") */
    if ((size_t)n + len + NAME_MAX + 2 > size) break;
    memcpy(out + n, tail + sizeof tail - len, len);
    out[(size_t)n + len] = '\0';
    rc = 0;
    break;
  }
  if (cur >= 0) close(cur);
  return rc;
}

/* The path of one of our descriptors (the task's view, see the top). */
static int fd_path(int fd, char *out, size_t size) {
  char link[48];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, size - 1);
  if (n < 0) return errno == ENAMETOOLONG && size >= LOC_MAX ? deep_path(fd, out, size) : -errno;
  out[n] = '\0';
  return 0;
}

int loc_dirfd(sbx_task *t, sbx_loc *l) {
  if (l->dirfd >= 0) return l->dirfd;
  if (l->lazy[0] != '\0') {
    l->dirfd = open(l->lazy, O_PATH | O_CLOEXEC);
  } else {
    int root = task_root(t);
    if (root < 0) return root;
    l->dirfd = fcntl(root, F_DUPFD_CLOEXEC, 0);
  }
  return l->dirfd < 0 ? -errno : l->dirfd;
}

static void set_dir(sbx_loc *l, int fd, const char *path) {
  loc_free(l);
  l->dirfd = fd;
  l->lazy[0] = '\0';
  l->proc = -1;
  if (path != NULL) copy_str(l->dir, sizeof l->dir, path);
}

static int to_root(sbx_task *t, sbx_loc *l) {
  if (t->flags & W_BENEATH) return -EXDEV;
  set_dir(l, -1, t->rootpath);
  if (t->rootfd >= 0 && strcmp(t->rootpath, "/") != 0) {
    l->dirfd = fcntl(t->rootfd, F_DUPFD_CLOEXEC, 0);
    if (l->dirfd < 0) return -errno;
  }
  return 0;
}

/* 1: dir is a procfs's root; 2: inside a procfs; 0: elsewhere. */
static int in_proc(sbx_task *t, sbx_loc *l) {
  if (l->proc >= 0) return l->proc;
  int fd = loc_dirfd(t, l);
  struct statfs sf;
  struct stat st;
  if (fd < 0 || fstatfs(fd, &sf) < 0 || fstat(fd, &st) < 0) return 0;
  l->proc = sf.f_type != PROC_SUPER_MAGIC ? 0 : st.st_ino == PROC_ROOT_INO ? 1 : 2;
  return l->proc;
}

/* What "self" / "thread-self" name in the task's /proc: its ids in its own pid namespace
 * (the last of NStgid / NSpid; the sandbox's /proc belongs to that namespace). */
static int self_name(sbx_task *t, int thread, char *out, size_t size) {
  char path[48], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)t->tid);
  FILE *f = fopen(path, "re");
  if (f == NULL) return -errno;
  long tgid = -1, tid = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    long *to = strncmp(line, "NStgid:", 7) == 0  ? &tgid
               : strncmp(line, "NSpid:", 6) == 0 ? &tid
                                                 : NULL;
    if (to == NULL) continue;
    for (char *p = strchr(line, ':') + 1, *end; *p != '\0'; p = end) {
      long v = strtol(p, &end, 10);
      if (end == p) break;
      *to = v;
    }
  }
  fclose(f);
  if (tgid < 0 || tid < 0) return -ESRCH;
  if (thread)
    snprintf(out, size, "%ld/task/%ld", tgid, tid);
  else
    snprintf(out, size, "%ld", tgid);
  return 0;
}

static int append(sbx_loc *l, const char *name) {
  size_t n = strlen(l->dir), k = strlen(name);
  int slash = !(n == 1 && l->dir[0] == '/');
  /* (room left for a last name: loc_path's full path fits LOC_MAX) */
  if (n + slash + k + 1 + NAME_MAX + 2 > sizeof l->dir) return -ENAMETOOLONG;
  if (slash) l->dir[n++] = '/';
  memcpy(l->dir + n, name, k + 1);
  return 0;
}

static int dotdot(sbx_task *t, sbx_loc *l) {
  if (strcmp(l->dir, t->rootpath) == 0) return (t->flags & W_BENEATH) ? -EXDEV : 0;
  int fd = loc_dirfd(t, l);
  if (fd < 0) return fd;
  int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (up < 0) return -errno;
  /* where ".." led, read back from it (a directory renamed since it was walked has another
   * parent than its path says) */
  char now[LOC_MAX];
  if (fd_path(up, now, sizeof now) == 0 && now[0] == '/') {
    set_dir(l, up, now);
    return 0;
  }
  char *cut = strrchr(l->dir, '/');
  if (cut == l->dir)
    cut[1] = '\0';
  else if (cut != NULL)
    *cut = '\0';
  set_dir(l, up, NULL);
  return 0;
}

/* Whether dir (a path in the task's /proc) is the task's own process's, or no process's
 * (/proc/sys...). The host may open what the task may not: the kernel lets a process follow
 * another's magic links and read its environ or memory only with ptrace access, and the
 * sandbox's init (a fork of the host, with its memory and environment, holding the pipe
 * that ends the session with the host) is one the task has no such access to. So on the
 * task's behalf the host goes into the task's own /proc/<pid> only. */
static int proc_own(sbx_task *t, const char *dir) {
  if (strncmp(dir, "/proc/", 6) != 0) return 0;
  const char *p = dir + 6;
  size_t n = strspn(p, "0123456789");
  if (n == 0) return 1; /* not a process's directory */
  char own[64];
  if (self_name(t, 0, own, sizeof own) < 0) return 0;
  return strlen(own) == n && strncmp(p, own, n) == 0 && (p[n] == '/' || p[n] == '\0');
}

int loc_proc_foreign(sbx_task *t, sbx_loc *l) {
  if (l->type != LAST_NORM || in_proc(t, l) == 0) return 0;
  char full[LOC_MAX];
  loc_path(l, full, sizeof full);
  return !proc_own(t, full);
}

/* Jump through the magic link name in dir (a /proc/<pid>/... entry) to its object. */
static int magic(sbx_task *t, sbx_loc *l, const char *name) {
  if (t->flags & (W_NOMAGIC | W_NOSYM)) return -ELOOP;
  if (t->flags & (W_BENEATH | W_INROOT)) return -EXDEV;
  if (!proc_own(t, l->dir)) return -EACCES;
  int obj = openat(loc_dirfd(t, l), name, O_PATH | O_CLOEXEC);
  if (obj < 0) return -errno;
  char path[LOC_MAX];
  int rc = fd_path(obj, path, sizeof path);
  if (rc < 0) {
    close(obj);
    return rc;
  }
  set_dir(l, obj, path);
  return 0;
}

/* Put text, then what is left of the path, in rest (a link's expansion). */
static int expand(char *rest, size_t size, const char *text, const char *left) {
  char tmp[PATH_MAX * 2];
  int n = snprintf(tmp, sizeof tmp, "%s%s%s", text, *left ? "/" : "", left);
  if (n < 0 || (size_t)n >= size || (size_t)n >= sizeof tmp) return -ENAMETOOLONG;
  memcpy(rest, tmp, (size_t)n + 1);
  return 0;
}

/* Walk path from the directory in l; leaves the last component in l. */
static int walk(sbx_task *t, sbx_loc *l, const char *path) {
  char rest[PATH_MAX * 2];
  if (strlen(path) >= PATH_MAX) return -ENAMETOOLONG;
  strcpy(rest, path);
  char *p = rest;
  int rc;
  if (*p == '/' && (rc = to_root(t, l)) < 0) return rc;
  for (;;) {
    int abs_start = *p == '/';
    while (*p == '/') p++;
    if (*p == '\0') { /* "/" (or a link to it): the root itself */
      if (!abs_start) return -ENOENT;
      l->type = LAST_ROOT;
      l->name[0] = '\0';
      return 0;
    }
    char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > NAME_MAX) return -ENAMETOOLONG;
    char comp[NAME_MAX + 1];
    memcpy(comp, p, len);
    comp[len] = '\0';
    char *left = p + len;
    while (*left == '/') left++;
    int dot = strcmp(comp, ".") == 0, dots = strcmp(comp, "..") == 0;
    if (*left == '\0') { /* the last component: the caller decides what to do with it */
      l->slash = end != NULL;
      if (dots && (rc = dotdot(t, l)) < 0) return rc;
      l->type = dot ? LAST_DOT : dots ? LAST_DOTDOT : LAST_NORM;
      strcpy(l->name, dot || dots ? "" : comp);
      return 0;
    }
    p = left;
    if (dot) continue;
    if (dots) {
      if ((rc = dotdot(t, l)) < 0) return rc;
      continue;
    }
    int fd = loc_dirfd(t, l);
    if (fd < 0) return fd;
    int self = strcmp(comp, "self") == 0, tself = strcmp(comp, "thread-self") == 0;
    if ((self || tself) && in_proc(t, l) == 1) {
      char ids[64];
      if ((rc = self_name(t, tself, ids, sizeof ids)) < 0) return rc;
      if ((rc = expand(rest, sizeof rest, ids, left)) < 0) return rc;
      p = rest;
      continue;
    }
    int next = openat(fd, comp, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
    if (next >= 0) {
      set_dir(l, next, NULL);
      if ((rc = append(l, comp)) < 0) return rc;
      continue;
    }
    if (errno != ENOTDIR) return -errno;
    char text[PATH_MAX];
    ssize_t n = readlinkat(fd, comp, text, sizeof text - 1);
    if (n < 0) return -ENOTDIR; /* not a link: a file in the middle of the path */
    text[n] = '\0';
    if (++l->links > MAX_LINKS || (t->flags & W_NOSYM)) return -ELOOP;
    if (in_proc(t, l) == 2) {
      if ((rc = magic(t, l, comp)) < 0) return rc;
      continue;
    }
    if ((rc = expand(rest, sizeof rest, text, left)) < 0) return rc;
    p = rest;
    if (text[0] == '/' && (rc = to_root(t, l)) < 0) return rc;
  }
}

/* Start at the task's cwd, one of its descriptors, or (absolute paths) its root. */
/* obj: the descriptor names the object itself (AT_EMPTY_PATH), which may be an unnamed file
 * (O_TMPFILE, linkable) or one removed since: only a directory to walk from must exist. */
static int start(sbx_task *t, int dirfd, const char *path, sbx_loc *l, int obj) {
  /* (not a memset: the buffers are large, and written before they are read) */
  l->dirfd = -1;
  l->proc = -1;
  l->links = l->slash = 0;
  l->type = LAST_NORM;
  l->name[0] = l->lazy[0] = '\0';
  if (path[0] == '/' && !(t->flags & (W_INROOT | W_BENEATH))) {
    strcpy(l->dir, "/");
    return 0;
  }
  /* The directory is opened first and its path read back from that descriptor: the task can
   * move its cwd (or put another file at descriptor dirfd) at any time, so a path read from
   * /proc/<tid>/cwd and a directory opened from it a moment later could be two places (a
   * workspace judged, /proc/sys written). */
  char link[48];
  if (dirfd == AT_FDCWD)
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)t->tid);
  else
    snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)t->tid, dirfd);
  int fd = open(link, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? -EBADF : -errno;
  int rc = fd_path(fd, l->dir, sizeof l->dir);
  if (rc < 0 || l->dir[0] != '/' || (!obj && unlinked(fd, l->dir))) {
    close(fd);
    return rc < 0 ? rc : l->dir[0] != '/' ? -ENOTDIR : -ENOENT; /* a pipe, a socket: no dir */
  }
  l->dirfd = fd;
  if (t->flags & (W_INROOT | W_BENEATH)) { /* openat2: dirfd is the walk's root */
    t->rootfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (t->rootfd < 0) return -errno;
    copy_str(t->rootpath, sizeof t->rootpath, l->dir);
  }
  return 0;
}

int loc_parent(sbx_task *t, int dirfd, const char *path, sbx_loc *l) {
  int rc = start(t, dirfd, path, l, 0);
  return rc < 0 ? rc : walk(t, l, path);
}

int loc_fd(sbx_task *t, int fd, sbx_loc *l) {
  int rc = start(t, fd, "", l, 1);
  if (rc == -ENOTDIR) return -EBADF; /* not in the file system: nothing we judge */
  if (rc < 0) return rc;
  l->type = LAST_OBJ;
  return 0;
}

int loc_lstat(sbx_task *t, sbx_loc *l, struct stat *st) {
  if (l->dirfd < 0 && l->type == LAST_NORM) { /* one call, not open + fstatat + close */
    char path[PATH_MAX + 64];
    if (l->lazy[0] != '\0')
      snprintf(path, sizeof path, "%s/%s", l->lazy, l->name);
    else if (strcmp(t->rootpath, "/") == 0)
      snprintf(path, sizeof path, "/proc/%d/root/%s", (int)t->tid, l->name);
    else
      path[0] = '\0';
    if (path[0] != '\0') return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
  }
  int fd = loc_dirfd(t, l);
  if (fd < 0) return fd;
  if (l->type != LAST_NORM) return fstat(fd, st) < 0 ? -errno : 0;
  return fstatat(fd, l->name, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

int loc_follow(sbx_task *t, sbx_loc *l) {
  if (++l->links > MAX_LINKS || (t->flags & W_NOSYM)) return -ELOOP;
  int fd = loc_dirfd(t, l);
  if (fd < 0) return fd;
  char text[PATH_MAX + 2];
  int proc = in_proc(t, l);
  int self = strcmp(l->name, "self") == 0, tself = strcmp(l->name, "thread-self") == 0;
  if (proc == 1 && (self || tself)) {
    int rc = self_name(t, tself, text, sizeof text);
    if (rc < 0) return rc;
  } else if (proc == 2) {
    char name[NAME_MAX + 1];
    strcpy(name, l->name);
    int rc = magic(t, l, name);
    if (rc < 0) return rc;
    l->type = LAST_OBJ;
    l->name[0] = '\0';
    return 0;
  } else {
    ssize_t n = readlinkat(fd, l->name, text, PATH_MAX - 1);
    if (n < 0) return -errno;
    text[n] = '\0';
  }
  if (l->slash) strcat(text, "/"); /* "link/" names the directory it points to */
  l->slash = 0;
  return walk(t, l, text);
}

int loc_settle(sbx_task *t, sbx_loc *l) {
  int fd = loc_dirfd(t, l);
  if (fd < 0) return fd;
  char now[LOC_MAX];
  int rc = fd_path(fd, now, sizeof now);
  if (rc < 0) return rc;
  if (now[0] != '/' || unlinked(fd, now)) return -ENOENT;
  copy_str(l->dir, sizeof l->dir, now);
  return 0;
}

void loc_path(const sbx_loc *l, char *out, size_t size) {
  if (l->type != LAST_NORM) {
    copy_str(out, size, l->dir);
  } else {
    snprintf(out, size, "%s%s%s", l->dir, strcmp(l->dir, "/") == 0 ? "" : "/", l->name);
  }
  /* an object removed meanwhile (reached through a descriptor): the path it had; a name the
   * caller gave is its own, whatever it ends with */
  if (l->type != LAST_NORM && l->dirfd >= 0 && unlinked(l->dirfd, out))
    out[strlen(out) - 10] = '\0';
}

int loc_readonly(sbx_task *t, sbx_loc *l, int obj) {
  int fd = loc_dirfd(t, l), own = -1;
  if (fd < 0) return 0;
  if (obj && l->type == LAST_NORM) {
    own = openat(fd, l->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (own >= 0) fd = own;
  }
  struct statvfs sv;
  int ro = fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY);
  if (own >= 0) close(own);
  return ro;
}

/* ---- the policy ---- */

static int under(const char *path, const char *root) {
  size_t n = strlen(root);
  if (n == 1 && root[0] == '/') return 1;
  return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The terminals (Landlock grants /dev/pts; its devpts is writable). /dev/shm is writable
 * where it is a root (the policy's tmp). */
static int own_mount(const char *path) {
  return under(path, "/dev/pts");
}

static int in_roots(const sbx_monitor *m, const char *path) {
  for (int i = 0; i < m->nro; i++)
    if (under(path, m->ro_paths[i])) return 0;
  for (int i = 0; i < m->nroots; i++)
    if (under(path, m->roots[i])) return 1;
  return 0;
}

int path_writable(const sbx_monitor *m, const char *path) {
  static const char *const devices[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                                        "/dev/urandom", "/dev/tty",  "/dev/ptmx", NULL};
  for (int i = 0; devices[i]; i++)
    if (strcmp(path, devices[i]) == 0) return 1;
  return own_mount(path) || in_roots(m, path);
}

int path_meta_ok(const sbx_monitor *m, const char *path) {
  return own_mount(path) || in_roots(m, path);
}
