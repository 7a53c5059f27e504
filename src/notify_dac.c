/* notify_dac.c: the kernel's own permission checks, for a call the sandbox would refuse,
 * made as the calling task has them: its user and groups (the host's: a sandboxed program
 * can change neither) and no capability (a sandboxed program has none). A call they refuse
 * fails so without any sandbox; it is answered with the kernel's errno (EACCES, EPERM) and
 * is no denial of the sandbox's, so it is not recorded. At or under a path the sandbox
 * mounted (kept read-only, or masked with an object of its own) the object seen is not the
 * file's own: the sandbox's verdict stands there. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "notify_int.h"

static int mounted(const sbx_monitor *m, const char *path) {
  for (int i = 0; i < m->nro; i++) {
    size_t n = strlen(m->ro_paths[i]);
    if (strncmp(path, m->ro_paths[i], n) == 0 && (path[n] == '\0' || path[n] == '/')) return 1;
  }
  return 0;
}

/* The path of l's object (obj) or of the directory that holds its name. */
static void where(const sbx_loc *l, int obj, char *path, size_t size) {
  if (obj)
    loc_path(l, path, size);
  else
    snprintf(path, size, "%s", l->dir);
}

int file_dac_refuses(sbx_call *c, sbx_task *t, sbx_loc *l, int obj, int mask) {
  char path[LOC_MAX];
  where(l, obj, path, sizeof path);
  if (mounted(c->m, path)) return 0;
  int dfd = loc_dirfd(t, l);
  emu_state es;
  if (dfd < 0 || emu_begin(c, &es) < 0) return 0;
  int name = obj && l->type == LAST_NORM;
  long rc = syscall(SYS_faccessat2, dfd, name ? l->name : "", mask,
                    AT_EACCESS | (name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH));
  int e = errno;
  emu_end(&es);
  return rc < 0 && e == EACCES;
}

int file_owned(sbx_call *c, const sbx_loc *l, const struct stat *st) {
  char path[LOC_MAX];
  where(l, 1, path, sizeof path);
  return mounted(c->m, path) || st->st_uid == geteuid();
}

int file_in_group(gid_t gid) {
  if (gid == getegid()) return 1;
  gid_t list[NGROUPS_MAX];
  int n = getgroups(NGROUPS_MAX, list);
  for (int i = 0; i < n; i++)
    if (list[i] == gid) return 1;
  return 0;
}

/* The sticky bit of l's directory refuses the removal (or the move) of its name l: neither
 * the file nor the directory is the caller's. */
int file_sticky_refuses(sbx_call *c, sbx_task *t, sbx_loc *l) {
  if (l->type != LAST_NORM || mounted(c->m, l->dir)) return 0;
  int dfd = loc_dirfd(t, l);
  struct stat dir, obj;
  if (dfd < 0 || fstat(dfd, &dir) < 0 || !(dir.st_mode & S_ISVTX)) return 0;
  if (loc_lstat(t, l, &obj) < 0) return 0;
  uid_t me = geteuid();
  return obj.st_uid != me && dir.st_uid != me;
}

/* The value of /proc/sys/fs/<name> (a digit); 0 when unreadable. */
static int fs_sysctl(const char *name) {
  char path[64], v = '0';
  snprintf(path, sizeof path, "/proc/sys/fs/%s", name);
  int f = open(path, O_RDONLY | O_CLOEXEC);
  if (f >= 0) {
    if (read(f, &v, 1) != 1) v = '0';
    close(f);
  }
  return v >= '0' && v <= '9' ? v - '0' : 0;
}

/* fs.protected_regular and fs.protected_fifos refuse an O_CREAT open of obj, an existing
 * file at l, in a sticky directory that others may write, where neither the directory's owner
 * nor the caller owns it (the kernel's EACCES, before the file's mode is looked at). */
int file_open_sticky_refuses(sbx_call *c, sbx_task *t, sbx_loc *l, const struct stat *obj) {
  int reg = S_ISREG(obj->st_mode);
  if (l->type != LAST_NORM || (!reg && !S_ISFIFO(obj->st_mode)) || mounted(c->m, l->dir)) return 0;
  int level = fs_sysctl(reg ? "protected_regular" : "protected_fifos");
  int dfd = loc_dirfd(t, l);
  struct stat dir;
  if (level == 0 || dfd < 0 || fstat(dfd, &dir) < 0 || !(dir.st_mode & S_ISVTX)) return 0;
  if (obj->st_uid == dir.st_uid || obj->st_uid == geteuid()) return 0;
  return (dir.st_mode & S_IWOTH) || (level >= 2 && (dir.st_mode & S_IWGRP));
}

/* fs.protected_hardlinks refuses a hard link to obj (at a): the caller neither owns it nor
 * may read and write it, or it is no regular file, or it runs as another user or group. */
int file_link_refuses(sbx_call *c, sbx_task *t, sbx_loc *a, const struct stat *obj) {
  if (fs_sysctl("protected_hardlinks") == 0 || file_owned(c, a, obj)) return 0;
  if (!S_ISREG(obj->st_mode) || (obj->st_mode & S_ISUID)) return 1;
  if ((obj->st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) return 1;
  return file_dac_refuses(c, t, a, 1, R_OK | W_OK);
}
