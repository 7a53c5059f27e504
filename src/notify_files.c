/* notify_files.c: file calls the sandbox's listener sees: resolved as the target sees them and
 * recorded when they fall outside the writable roots. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "notify_int.h"

/* ---- paths ---- */

static void normalize(char *path) {
  char out[PATH_MAX];
  size_t n = 0;
  const char *p = path;
  while (*p) {
    while (*p == '/') p++;
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 0) break;
    if (len == 1 && p[0] == '.') {
    } else if (len == 2 && p[0] == '.' && p[1] == '.') {
      while (n > 0 && out[n - 1] != '/') n--;
      if (n > 0) n--;
    } else if (n + 1 + len < sizeof out) {
      out[n++] = '/';
      memcpy(out + n, p, len);
      n += len;
    }
    p += len;
  }
  if (n == 0) out[n++] = '/';
  out[n] = '\0';
  strcpy(path, out);
}

/* Absolute, normalised path of (dirfd, path) as the target sees it; symlinks in the
 * directories are resolved where they exist. */
static int resolve(pid_t pid, int dirfd, const char *path, char *out) {
  char base[PATH_MAX] = "/";
  if (path[0] != '/') {
    char link[64];
    if (dirfd == AT_FDCWD) snprintf(link, sizeof link, "/proc/%d/cwd", (int)pid);
    else snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, dirfd);
    ssize_t n = readlink(link, base, sizeof base - 1);
    if (n < 0) return -1;
    base[n] = '\0';
  }
  char joined[PATH_MAX * 2];
  if (path[0] == '/') snprintf(joined, sizeof joined, "%s", path);
  else if (path[0] == '\0') snprintf(joined, sizeof joined, "%s", base);
  else snprintf(joined, sizeof joined, "%s/%s", base, path);
  joined[PATH_MAX - 1] = '\0';
  normalize(joined);
  /* a final component that is a symlink is where an open lands (Landlock checks that) */
  for (int hops = 0; hops < 8; hops++) {
    struct stat st;
    char target[PATH_MAX * 2];
    if (lstat(joined, &st) < 0 || !S_ISLNK(st.st_mode)) break;
    ssize_t n = readlink(joined, target, sizeof target - 1);
    if (n <= 0) break;
    target[n] = '\0';
    if (target[0] == '/') {
      copy_str(joined, sizeof joined, target);
    } else {
      char *cut = strrchr(joined, '/');
      cut[1] = '\0';
      size_t used = strlen(joined);
      copy_str(joined + used, sizeof joined - used, target);
    }
    normalize(joined);
  }
  char *slash = strrchr(joined, '/');
  char dir[PATH_MAX], real[PATH_MAX];
  snprintf(dir, sizeof dir, "%.*s", slash == joined ? 1 : (int)(slash - joined), joined);
  if (realpath(dir, real) != NULL) {
    char both[PATH_MAX * 2 + 2];
    snprintf(both, sizeof both, "%s%s%s", real, strcmp(real, "/") == 0 ? "" : "/", slash + 1);
    copy_str(out, PATH_MAX, both);
  } else {
    copy_str(out, PATH_MAX, joined);
  }
  if (out[0] == '\0') strcpy(out, "/");
  return 0;
}

static int under(const char *path, const char *root) {
  size_t n = strlen(root);
  if (n == 1 && root[0] == '/') return 1;
  return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int writable(const sbx_monitor *m, const char *path) {
  static const char *const devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                        "/dev/urandom", "/dev/tty", "/dev/ptmx", NULL};
  for (int i = 0; devices[i]; i++)
    if (strcmp(path, devices[i]) == 0) return 1;
  if (under(path, "/dev/pts")) return 1;
  for (int i = 0; i < m->nro; i++)
    if (under(path, m->ro_paths[i])) return 0;
  for (int i = 0; i < m->nroots; i++)
    if (under(path, m->roots[i])) return 1;
  return 0;
}

static void file_call(sbx_monitor *m, const struct seccomp_notif *req, const char *op,
                      int dirfd, uint64_t path_addr) {
  char path[PATH_MAX], full[PATH_MAX];
  pid_t pid = (pid_t)req->pid;
  if (path_addr == 0) { /* utimensat(fd, NULL, ...): the descriptor itself */
    path[0] = '\0';
  } else if (read_string(pid, path_addr, path, sizeof path) < 0) {
    return;
  }
  if (resolve(pid, dirfd, path, full) < 0 || !notif_valid(m, req->id)) return;
  if (!m->force && writable(m, full)) return;
  sbx_denial *d = record(m, op, pid);
  if (d) copy_str(d->path, sizeof d->path, full);
}

int notify_file_call(sbx_monitor *m, const struct seccomp_notif *req,
                     struct seccomp_notif_resp *resp) {
  const __u64 *a = req->data.args;
  int nr = req->data.nr;
  int at = AT_FDCWD;
  (void)resp;
  switch (nr) {
    case SYS_open: file_call(m, req, "open", at, a[0]); return 1;
    case SYS_creat: file_call(m, req, "creat", at, a[0]); return 1;
    case SYS_openat: file_call(m, req, "open", (int)a[0], a[1]); return 1;
    case SYS_openat2: {
      uint64_t flags = 0;
      if (read_mem((pid_t)req->pid, a[2], &flags, sizeof flags) == 0 &&
          (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)))
        file_call(m, req, "open", (int)a[0], a[1]);
      return 1;
    }
    case SYS_mkdir: file_call(m, req, "mkdir", at, a[0]); return 1;
    case SYS_mkdirat: file_call(m, req, "mkdir", (int)a[0], a[1]); return 1;
    case SYS_unlink: file_call(m, req, "unlink", at, a[0]); return 1;
    case SYS_unlinkat: file_call(m, req, "unlink", (int)a[0], a[1]); return 1;
    case SYS_rmdir: file_call(m, req, "rmdir", at, a[0]); return 1;
    case SYS_rename: file_call(m, req, "rename", at, a[0]); file_call(m, req, "rename", at, a[1]);
      return 1;
    case SYS_renameat:
    case SYS_renameat2:
      file_call(m, req, "rename", (int)a[0], a[1]);
      file_call(m, req, "rename", (int)a[2], a[3]);
      return 1;
    case SYS_link: file_call(m, req, "link", at, a[1]); return 1;
    case SYS_linkat: file_call(m, req, "link", (int)a[2], a[3]); return 1;
    case SYS_symlink: file_call(m, req, "symlink", at, a[1]); return 1;
    case SYS_symlinkat: file_call(m, req, "symlink", (int)a[1], a[2]); return 1;
    case SYS_truncate: file_call(m, req, "truncate", at, a[0]); return 1;
    case SYS_mknod:
    case SYS_mknodat: {
      /* Landlock never grants device nodes: refused even inside a root */
      int dirfd = nr == SYS_mknod ? at : (int)a[0];
      uint64_t path = nr == SYS_mknod ? a[0] : a[1];
      unsigned mode = (unsigned)(nr == SYS_mknod ? a[1] : a[2]);
      m->force = S_ISCHR(mode) || S_ISBLK(mode);
      file_call(m, req, "mknod", dirfd, path);
      m->force = 0;
      return 1;
    }
    default: break;
  }
  if (!m->mountns) return 0; /* metadata calls outside the roots succeed without the mount layer */
  switch (nr) {
    case SYS_chmod: file_call(m, req, "chmod", at, a[0]); break;
    case SYS_fchmodat: file_call(m, req, "chmod", (int)a[0], a[1]); break;
    case SYS_chown: file_call(m, req, "chown", at, a[0]); break;
    case SYS_lchown: file_call(m, req, "chown", at, a[0]); break;
    case SYS_fchownat: file_call(m, req, "chown", (int)a[0], a[1]); break;
    case SYS_utimensat: file_call(m, req, "utime", (int)a[0], a[1]); break;
    default: return 0;
  }
  return 1;
}
