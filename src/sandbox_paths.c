/* sandbox_paths.c: the paths of a sandboxed child's mount namespace that differ from the
 * host's view (child side, system calls only): what stays read-only inside a writable root
 * (git repositories, hooks, configuration other programs run later) and what is masked
 * (secrets: deny_read).
 *
 * The parent resolved every path to a canonical one (no symlink in any component). Between
 * that and this, a process of an earlier session may have swapped a component for a symlink;
 * each path is therefore opened with RESOLVE_NO_SYMLINKS and mounted through the descriptor,
 * so a mount lands on exactly the object that was checked, and a component that became a
 * symlink fails the spawn instead of leaving the path unprotected (a path that is gone needs
 * nothing: see sandbox_paths_apply).
 *
 * Masks come from one small tmpfs made here with fsopen/fsmount: it is never attached
 * anywhere (nothing is created on the host, and no mount point is needed for it), holds an
 * empty directory and an empty file, and is made read-only; each masked directory gets a
 * clone of the empty directory, each masked file (or socket, fifo, device) a clone of the
 * empty file. A masked path reads as empty, cannot be written, removed or renamed (it is a
 * mount point), and what it covered cannot be reached through it. These calls work in a
 * user namespace that owns the mount namespace, as the bind mounts do. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

/* The object at path, no symlink in any component: RESOLVE_NO_SYMLINKS refuses a trailing one
 * too (ELOOP) as long as O_NOFOLLOW is not given. With st, its type is wanted as well. */
static int open_exact(const char *path, struct stat *st) {
  struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                         .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  int checked = fd >= 0;
  struct stat own;
  if (st == NULL) st = &own;
  if (fd < 0 && errno == ENOSYS) /* before 5.6: the last component is still checked */
    fd = open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0 && (st != &own || !checked)) {
    if (fstat(fd, st) < 0 || S_ISLNK(st->st_mode)) {
      close(fd);
      errno = ELOOP;
      return -1;
    }
  }
  return fd;
}

#ifndef SYS_open_tree_attr
#define SYS_open_tree_attr 467
#endif

/* A clone of the mount at target (not recursive), read-only: one call since 6.15 */
static int clone_read_only(int target) {
  static volatile int no_attr; /* (shared with the host: a kernel fact, written the same) */
  struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
  if (!no_attr) {
    int tree = (int)syscall(SYS_open_tree_attr, target, "",
                            OPEN_TREE_CLONE | AT_EMPTY_PATH | O_CLOEXEC, &ro, sizeof ro);
    if (tree >= 0 || errno != ENOSYS) return tree;
    no_attr = 1;
  }
  int tree = (int)syscall(SYS_open_tree, target, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | O_CLOEXEC);
  if (tree >= 0 && syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &ro, sizeof ro) < 0) {
    int e = errno;
    close(tree);
    errno = e;
    return -1;
  }
  return tree;
}

static int set_read_only(int tree, int recursive) {
  struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
  return (int)syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                      &ro, sizeof ro);
}

/* Mount `tree` (a detached mount) on the object `target` refers to, then close both. */
static int attach(int tree, int target) {
  int rc = (int)syscall(SYS_move_mount, tree, "", target, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
  int e = errno;
  close(tree);
  close(target);
  errno = e;
  return rc;
}

/* The path, bound read-only onto itself. Not recursive: a mount below it on the host is not
 * carried over (the bind covers the whole path, so nothing writable stays below it), and a
 * recursive clone would walk every mount already made in the same root, making n paths cost
 * n^2. */
static int keep_read_only(const char *path) {
  int target = open_exact(path, NULL);
  if (target < 0) return -1;
  int tree = clone_read_only(target);
  if (tree < 0) {
    int e = errno;
    close(target);
    errno = e;
    return -1;
  }
  return attach(tree, target);
}

static int empty_tmpfs(void) {
  int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) return -1;
  int mnt = -1;
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0755", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "4096", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
    mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  int e = errno;
  close(fs);
  errno = e;
  return mnt;
}

/* The detached tmpfs the masks are cloned from: "d" an empty directory, "f" an empty file. */
static int mask_source(void) {
  int mnt = empty_tmpfs();
  if (mnt < 0) return -1;
  int f = openat(mnt, "f", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
  if (f >= 0) close(f); /* before the read-only switch, which a writer would make EBUSY */
  if (f < 0 || mkdirat(mnt, "d", 0755) < 0 || set_read_only(mnt, 0) < 0) {
    int e = errno;
    close(mnt);
    errno = e;
    return -1;
  }
  return mnt;
}

/* A clone of the empty directory or file. Kernels before 6.15 refuse to clone from a mount
 * that is attached nowhere (EINVAL): a directory then gets a tmpfs of its own, a file a bind
 * of /dev/null (reads as empty too; a write to it is discarded instead of refused). */
static int mask_tree(int source, int dir) {
  int tree = (int)syscall(SYS_open_tree, source, dir ? "d" : "f", OPEN_TREE_CLONE | O_CLOEXEC);
  if (tree < 0 && errno == EINVAL) {
    tree = dir ? empty_tmpfs()
               : (int)syscall(SYS_open_tree, AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | O_CLOEXEC);
  }
  if (tree >= 0 && set_read_only(tree, 0) < 0) {
    int e = errno;
    close(tree);
    errno = e;
    return -1;
  }
  return tree;
}

static int mask(int source, const char *path) {
  struct stat st;
  int target = open_exact(path, &st);
  if (target < 0) return -1;
  int tree = mask_tree(source, S_ISDIR(st.st_mode));
  if (tree < 0) {
    int e = errno;
    close(target);
    errno = e;
    return -1;
  }
  return attach(tree, target);
}

/* A path gone since the host looked (a repository another program removed meanwhile) needs
 * no protection; one made later is like one made during the session. Anything else that
 * fails (it became a symbolic link, a mount failed) fails the spawn. */
int sandbox_paths_apply(sandbox_prep *p) {
  for (int i = 0; i < p->nro; i++) {
    if (keep_read_only(p->ro_paths[i]) < 0 && errno != ENOENT) {
      p->failed_path = p->ro_paths[i];
      return -1;
    }
  }
  if (p->nmasks == 0) return 0;
  int source = mask_source();
  if (source < 0) {
    p->failed_path = "(the tmpfs that masks deny_read paths)";
    return -1;
  }
  for (int i = 0; i < p->nmasks; i++) {
    if (mask(source, p->masks[i]) < 0 && errno != ENOENT) {
      int e = errno;
      p->failed_path = p->masks[i];
      close(source);
      errno = e;
      return -1;
    }
  }
  close(source);
  return 0;
}

/* ---- parent side ---- */

static char **copy_strings(const char *const *in, int n) {
  char **out = calloc((size_t)n + 1, sizeof(char *));
  for (int i = 0; out != NULL && i < n; i++) out[i] = strdup(in[i]);
  return out;
}

int sandbox_paths_prepare(const sandbox_spec *s, sandbox_prep *p, char *err, size_t errlen) {
  if ((s->nro > 0 || s->nmasks > 0) && !p->want_mountns && !s->best_effort) {
    snprintf(err, errlen,
             "mountns: %s %s needs a mount namespace, which needs CAP_SYS_ADMIN "
             "(run as root, or best_effort)",
             s->nro > 0 ? "keeping read-only" : "masking",
             s->nro > 0 ? s->ro_paths[0] : s->masks[0]);
    return -1;
  }
  p->ro_paths = copy_strings(s->ro_paths, s->nro);
  p->masks = copy_strings(s->masks, s->nmasks);
  p->reserved = copy_strings(s->reserved, s->nreserved);
  p->nreserved = s->nreserved;
  for (int i = 0; p->reserved != NULL && i < s->nreserved; i++)
    if (p->reserved[i] == NULL) goto oom;
  for (int i = 0; p->ro_paths != NULL && i < s->nro; i++)
    if (p->ro_paths[i] == NULL) goto oom;
  for (int i = 0; p->masks != NULL && i < s->nmasks; i++)
    if (p->masks[i] == NULL) goto oom;
  if (p->ro_paths == NULL || p->masks == NULL || p->reserved == NULL) goto oom;
  p->nro = s->nro;
  p->nmasks = s->nmasks;
  return 0;
oom:
  p->nro = s->nro; /* freed up to the first NULL */
  p->nmasks = s->nmasks;
  snprintf(err, errlen, "out of memory");
  return -1;
}

void sandbox_paths_free(sandbox_prep *p) {
  for (int i = 0; p->ro_paths && i < p->nro && p->ro_paths[i]; i++) free(p->ro_paths[i]);
  for (int i = 0; p->masks && i < p->nmasks && p->masks[i]; i++) free(p->masks[i]);
  for (int i = 0; p->reserved && i < p->nreserved && p->reserved[i]; i++) free(p->reserved[i]);
  free(p->ro_paths);
  free(p->masks);
  free(p->reserved);
  p->ro_paths = p->masks = p->reserved = NULL;
  p->nro = p->nmasks = p->nreserved = 0;
}
