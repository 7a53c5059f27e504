/* notify_files.c: file calls that write (open for writing, create, remove, rename, link,
 * truncate; rename and link in notify_rename.c), judged as the kernel would: the path is resolved as the calling task sees it,
 * following a final symbolic link only where the call does; the kernel's own errors that
 * come before the sandbox's (EEXIST, ENOENT, EISDIR...) are left to it, unrecorded; a call
 * the policy refuses is answered here with the errno the kernel layers would give (EROFS
 * where the file system is read-only in the sandbox, else Landlock's EACCES, EXDEV for a
 * link or rename across) and recorded. Everything else goes on to the kernel. The walk in
 * the supervisor and the kernel's read the task's memory at different times: a task that
 * changes the path in between can at worst make a refusal go unrecorded (the kernel still
 * refuses it), never get through. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "notify_int.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE (1 << 1)
#endif

/* The task's path argument at addr; -1 when unreadable (the kernel says EFAULT). */
int file_arg_path(sbx_call *c, uint64_t addr, char *out) {
  if (addr == 0) return -1;
  return read_string((pid_t)c->req->pid, addr, out, PATH_MAX);
}

/* Resolve to the object (following final links when follow). 0 or -errno. */
int file_resolve_obj(sbx_task *t, sbx_loc *l, int follow, struct stat *st) {
  for (;;) {
    int rc = loc_lstat(t, l, st);
    if (rc < 0) return rc;
    if (l->type != LAST_NORM) return 0;
    if (S_ISLNK(st->st_mode) && (follow || l->slash)) {
      if ((rc = loc_follow(t, l)) < 0) return rc;
      continue;
    }
    if (l->slash && !S_ISDIR(st->st_mode)) return -ENOTDIR;
    return 0;
  }
}

int file_ro_path(const sbx_monitor *m, const char *path) {
  for (int i = 0; i < m->nro; i++)
    if (strcmp(path, m->ro_paths[i]) == 0) return 1;
  return 0;
}

/* A refusal of the policy (not of a reserved name): recorded only with file evidence (the
 * kernel would refuse it unrecorded). */
void file_deny(sbx_call *c, const char *op, int err, const char *path, const char *to) {
  if (c->m->reserve_only)
    answer(c, err);
  else
    refuse(c, op, err, path, to);
}

/* The errno of a write refused in dir (obj: on the last component itself). */
int file_write_errno(sbx_task *t, sbx_loc *l, int obj) {
  return loc_readonly(t, l, obj) ? EROFS : EACCES;
}

/* ---- open ---- */

static void task_resolve(sbx_task *t, uint64_t resolve) {
  if (resolve & RESOLVE_NO_SYMLINKS) t->flags |= W_NOSYM;
  if (resolve & RESOLVE_NO_MAGICLINKS) t->flags |= W_NOMAGIC;
  if (resolve & RESOLVE_BENEATH) t->flags |= W_BENEATH;
  if (resolve & RESOLVE_IN_ROOT) t->flags |= W_INROOT;
}

/* Whether l is a memfd reached through /proc/<pid>/fd ("/memfd:name (deleted)"): in no file
 * system, so nothing a root or a mount decides. */
static int memfd_obj(const sbx_loc *l) {
  size_t n = strlen(l->dir);
  return l->type == LAST_OBJ && strncmp(l->dir, "/memfd:", 7) == 0 && n > 10 &&
         strcmp(l->dir + n - 10, " (deleted)") == 0;
}

static int dac_refuses(sbx_call *c, sbx_task *t, sbx_loc *l, int acc, uint64_t flags) {
  int mask = (acc != O_WRONLY ? R_OK : 0) | (acc != O_RDONLY || (flags & O_TRUNC) ? W_OK : 0);
  return file_dac_refuses(c, t, l, 1, mask);
}

/* Open name in dfd for the caller, as the caller (its umask, no capability), and hand it the
 * descriptor: a file made so never gets a set-user-ID or set-group-ID bit (notify_meta.c). */
static void open_as_caller(sbx_call *c, int dfd, const char *name, int flags, unsigned mode) {
  emu_state es;
  int rc = emu_begin(c, &es);
  if (rc < 0) {
    answer(c, -rc);
    return;
  }
  int fd = openat(dfd, name, flags | O_NOCTTY | O_CLOEXEC, mode & ~(unsigned)(S_ISUID | S_ISGID));
  int e = errno;
  emu_end(&es);
  if (fd < 0)
    answer(c, e);
  else
    emu_give_fd(c, fd, (flags & O_CLOEXEC) != 0);
}

/* An open that makes a name (O_CREAT): judged, then performed here (notify_create.c):
 * never left to the kernel, which would read the path again. */
static void open_create(sbx_call *c, int dirfd, const char *path, int flags, unsigned mode,
                        uint64_t resolve) {
  if (flags & O_DIRECTORY) {
    answer(c, EINVAL);
    return;
  } /* (O_CREAT | O_DIRECTORY) */
  sbx_task t;
  task_init(&t, (pid_t)c->req->pid);
  task_resolve(&t, resolve);
  sbx_loc l;
  struct stat st;
  char full[LOC_MAX];
  emu_state es;
  int acc = flags & O_ACCMODE;
  int rc = loc_parent(&t, dirfd, path, &l);
  if (rc < 0) {
    answer(c, -rc);
    goto out;
  }
  for (;;) {
    if (l.type == LAST_OBJ) { /* a magic link's object: it exists */
      if ((rc = loc_lstat(&t, &l, &st)) < 0) {
        answer(c, -rc);
        goto out;
      }
      break;
    }
    if (l.type != LAST_NORM || l.slash) {
      answer(c, EISDIR);
      goto out;
    }
    loc_path(&l, full, sizeof full);
    rc = loc_lstat(&t, &l, &st);
    if (rc == -ENOENT) { /* a new name */
      int res = file_reserved(&t, c->m, &l, full, 0);
      if (res) {
        refuse(c, "open", file_reserved_errno(res), full, NULL);
      } else if (!path_writable(c->m, l.dir)) {
        if (file_dac_refuses(c, &t, &l, 0, W_OK | X_OK))
          answer(c, EACCES);
        else
          file_deny(c, "open", file_write_errno(&t, &l, 0), full, NULL);
      } else {
        int dfd = loc_dirfd(&t, &l);
        if (dfd < 0)
          answer(c, -dfd);
        else
          open_as_caller(c, dfd, l.name, flags | O_NOFOLLOW, mode);
      }
      goto out;
    }
    if (rc < 0 || (flags & O_EXCL)) { /* EEXIST (O_EXCL never follows a link) */
      answer(c, rc < 0 ? -rc : EEXIST);
      goto out;
    }
    if (!S_ISLNK(st.st_mode)) break;
    if ((flags & O_NOFOLLOW) || (rc = loc_follow(&t, &l)) < 0) {
      answer(c, (flags & O_NOFOLLOW) ? ELOOP : -rc);
      goto out;
    }
  }
  loc_path(&l, full, sizeof full);
  int special =
      S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
  int writes = acc != O_RDONLY || ((flags & O_TRUNC) && !special);
  if (!S_ISDIR(st.st_mode) && writes && full[0] == '/' && !memfd_obj(&l) &&
      !path_writable(c->m, full)) {
    if (((flags & O_CREAT) && file_open_sticky_refuses(c, &t, &l, &st)) ||
        dac_refuses(c, &t, &l, acc, (uint64_t)flags)) {
      answer(c, EACCES);
      goto out;
    }
    /* a device, a fifo or a socket is written without the file system's write access:
     * only Landlock refuses it */
    file_deny(c, "open", special ? EACCES : file_write_errno(&t, &l, 1), full, NULL);
    goto out;
  }
  if (loc_proc_foreign(&t, &l)) { /* another process's environ, memory...: ptrace's */
    file_deny(c, "open", EACCES, full, NULL);
    goto out;
  }
  int dfd = loc_dirfd(&t, &l);
  if (dfd < 0 || (rc = emu_begin(c, &es)) < 0) {
    answer(c, dfd < 0 ? -dfd : -rc);
    goto out;
  }
  emu_open_existing(c, dfd, l.type == LAST_OBJ ? NULL : l.name, flags, &st);
  emu_end(&es);
out:
  loc_free(&l);
  task_free(&t);
}

/* An unnamed file (O_TMPFILE) with a set-user-ID or set-group-ID mode: made here without
 * the bits, as open_create makes a named one (the kernel keeps them, and a later linkat
 * names the file in a root). The path is read once, here: never left to the kernel. */
static void open_tmpfile_setid(sbx_call *c, int dirfd, uint64_t addr, int flags, unsigned mode,
                               uint64_t resolve) {
  if (file_arg_path(c, addr, c->path) < 0) {
    answer(c, EFAULT);
    return;
  }
  if (c->path[0] == '\0') {
    answer(c, ENOENT);
    return;
  }
  sbx_task t;
  task_init(&t, (pid_t)c->req->pid);
  task_resolve(&t, resolve);
  sbx_loc l;
  struct stat st;
  char full[LOC_MAX];
  int rc = loc_parent(&t, dirfd, c->path, &l);
  if (rc == 0) rc = file_resolve_obj(&t, &l, 1, &st);
  if (rc < 0 || !S_ISDIR(st.st_mode)) {
    answer(c, rc < 0 ? -rc : ENOTDIR);
    goto out;
  }
  loc_path(&l, full, sizeof full);
  if (!path_writable(c->m, full)) {
    if (file_dac_refuses(c, &t, &l, 1, W_OK | X_OK))
      answer(c, EACCES);
    else
      file_deny(c, "open", file_write_errno(&t, &l, 1), full, NULL);
    goto out;
  }
  int dfd = loc_dirfd(&t, &l);
  if (dfd < 0) {
    answer(c, -dfd);
    goto out;
  }
  /* the directory itself: the location's descriptor unless the last component names it */
  int dir = l.type == LAST_NORM ? openat(dfd, l.name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC)
                                : fcntl(dfd, F_DUPFD_CLOEXEC, 0);
  if (dir < 0) {
    answer(c, errno);
    goto out;
  }
  open_as_caller(c, dir, ".", flags, mode);
  close(dir);
out:
  loc_free(&l);
  task_free(&t);
}

static void judge_open(sbx_call *c, int dirfd, uint64_t addr, uint64_t flags, unsigned mode,
                       uint64_t resolve) {
  if (flags & O_PATH) return; /* no access at all (the kernel drops every other flag) */
  /* the kernel's own EINVAL first, unrecorded: an unnamed file (its bit, 020000000: the C
   * library's __O_TMPFILE has O_DIRECTORY in it) needs O_DIRECTORY, no O_CREAT and write
   * access */
  const uint64_t tmp_bit = 020000000;
  if ((flags & tmp_bit) &&
      ((flags & (tmp_bit | O_DIRECTORY | O_CREAT)) != (tmp_bit | O_DIRECTORY) ||
       (flags & O_ACCMODE) == O_RDONLY)) {
    answer(c, EINVAL);
    return;
  }
  int tmpfile = (flags & O_TMPFILE) == O_TMPFILE;
  if (tmpfile && (mode & (S_ISUID | S_ISGID))) {
    open_tmpfile_setid(c, dirfd, addr, (int)flags, mode, resolve);
    return;
  }
  int creat = (flags & O_CREAT) && !tmpfile;
  int acc = (int)(flags & O_ACCMODE);
  if (acc == O_RDONLY && !(flags & (O_CREAT | O_TRUNC)) && !tmpfile) return;
  char *path = c->path;
  if (creat) { /* never CONTINUE: the path is read once, here */
    if (file_arg_path(c, addr, path) < 0) {
      answer(c, EFAULT);
      return;
    }
    if (path[0] == '\0') {
      answer(c, ENOENT);
      return;
    }
    {
      open_create(c, dirfd, path, (int)flags, mode, resolve);
      return;
    }
  }
  if (c->m->reserve_only) return; /* no evidence: the reserved names alone */
  if (file_arg_path(c, addr, path) < 0 || path[0] == '\0') return;
  sbx_task t;
  task_init(&t, (pid_t)c->req->pid);
  task_resolve(&t, resolve);
  sbx_loc l;
  struct stat st;
  char full[LOC_MAX];
  int rc = loc_parent(&t, dirfd, path, &l);
  if (rc < 0) goto out;
  if (tmpfile) { /* an unnamed file made in the directory path names */
    if (file_resolve_obj(&t, &l, 1, &st) < 0 || !S_ISDIR(st.st_mode)) goto out;
    loc_path(&l, full, sizeof full);
    if (!path_writable(c->m, full)) {
      if (file_dac_refuses(c, &t, &l, 1, W_OK | X_OK))
        answer(c, EACCES);
      else
        refuse(c, "open", file_write_errno(&t, &l, 1), full, NULL);
    }
    goto out;
  }
  for (;;) { /* (no O_CREAT here) */
    rc = loc_lstat(&t, &l, &st);
    if (rc < 0) goto out; /* ENOENT, or the kernel's own error */
    if (l.type == LAST_NORM && S_ISLNK(st.st_mode)) {
      if ((flags & O_NOFOLLOW) && !l.slash) goto out; /* ELOOP */
      if (loc_follow(&t, &l) < 0) goto out;
      continue;
    }
    break;
  }
  if (S_ISDIR(st.st_mode)) goto out;                                        /* EISDIR */
  if ((l.slash || (flags & O_DIRECTORY)) && !S_ISDIR(st.st_mode)) goto out; /* ENOTDIR */
  if (memfd_obj(&l)) goto out;
  loc_path(&l, full, sizeof full);
  /* a pipe or socket reopened through /proc/<pid>/fd is in no file system */
  if (full[0] != '/' || path_writable(c->m, full)) goto out;
  int special =
      S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
  if (special && acc == O_RDONLY) goto out; /* O_TRUNC means nothing there */
  if (dac_refuses(c, &t, &l, acc, flags)) {
    answer(c, EACCES);
    goto out;
  }
  /* a device, a fifo or a socket is written without the file system's write access:
   * only Landlock refuses it */
  refuse(c, "open", special ? EACCES : file_write_errno(&t, &l, 1), full, NULL);
out:
  loc_free(&l);
  task_free(&t);
}

/* ---- mkdir, mknod, symlink, a unix socket's bind: a new name in a directory ---- */

/* mkdir, mknod, symlink: judged, then performed here (notify_create.c), never left to the
 * kernel, which would read the path again. */
static void create_call(sbx_call *c, const char *op, int dirfd, uint64_t addr, int kind,
                        unsigned mode, uint64_t target) {
  if (file_arg_path(c, addr, c->to) < 0 ||
      (kind == MK_LINK && file_arg_path(c, target, c->path) < 0)) {
    answer(c, EFAULT);
    return;
  }
  make_name(c, op, dirfd, kind, mode, -1);
}

void make_name(sbx_call *c, const char *op, int dirfd, int kind, unsigned mode, int sock) {
  int device = 0;
  if (kind == MK_NODE) {
    unsigned type = mode & S_IFMT;
    if (type == S_IFDIR) { /* the kernel's first answer (may_mknod), before the path */
      answer(c, EPERM);
      return;
    }
    if (type != 0 && type != S_IFREG && type != S_IFCHR && type != S_IFBLK && type != S_IFIFO &&
        type != S_IFSOCK) {
      answer(c, EINVAL);
      return;
    }
    device = type == S_IFCHR || type == S_IFBLK;
  }
  if (c->to[0] == '\0' || (kind == MK_LINK && c->path[0] == '\0')) {
    answer(c, ENOENT);
    return;
  }
  sbx_task t;
  task_init(&t, (pid_t)c->req->pid);
  sbx_loc l;
  struct stat st;
  char full[LOC_MAX];
  emu_state es;
  int exists = kind == MK_SOCK ? EADDRINUSE : EEXIST; /* (bind's word for it) */
  int rc = loc_parent(&t, dirfd, c->to, &l);
  if (rc < 0 || l.type != LAST_NORM) {
    answer(c, rc < 0 ? -rc : exists);
    goto out;
  }
  rc = loc_lstat(&t, &l, &st);
  if (rc != -ENOENT || (l.slash && kind != MK_DIR)) {
    answer(c, rc == 0 ? exists : rc == -ENOENT ? ENOENT : -rc);
    goto out;
  }
  loc_path(&l, full, sizeof full);
  int res = file_reserved(&t, c->m, &l, full, kind == MK_LINK);
  if (res) {
    refuse(c, op, file_reserved_errno(res), full, NULL);
    goto out;
  }
  if (!path_writable(c->m, l.dir) || device) {
    if (file_dac_refuses(c, &t, &l, 0, W_OK | X_OK))
      answer(c, EACCES);
    else
      file_deny(c, op, file_write_errno(&t, &l, 0), full, NULL);
    goto out;
  }
  int dfd = loc_dirfd(&t, &l);
  if (dfd < 0 || (rc = emu_begin(c, &es)) < 0) {
    answer(c, dfd < 0 ? -dfd : -rc);
    goto out;
  }
  if (kind == MK_DIR)
    rc = mkdirat(dfd, l.name, (mode_t)mode);
  else if (kind == MK_NODE)
    rc = mknodat(dfd, l.name, (mode_t)mode & ~(mode_t)(S_ISUID | S_ISGID), 0);
  else if (kind == MK_SOCK)
    rc = emu_bind_at(sock, dfd, l.name);
  else
    rc = symlinkat(c->path, dfd, l.name);
  emu_answer(c, rc);
  emu_end(&es);
out:
  loc_free(&l);
  task_free(&t);
}

/* ---- unlink, rmdir ---- */

/* Whether the directory at l holds no name but "." and "..": 1, 0, or -1 when it cannot be
 * read. */
int file_dir_empty(sbx_task *t, sbx_loc *l) {
  int dfd = loc_dirfd(t, l);
  int fd = dfd < 0 ? -1 : openat(dfd, l->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (d == NULL) {
    if (fd >= 0) close(fd);
    return -1;
  }
  int empty = 1;
  struct dirent *e;
  while (empty && (e = readdir(d)) != NULL)
    empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
  closedir(d);
  return empty;
}

static void judge_remove(sbx_call *c, const char *op, int dirfd, uint64_t addr) {
  char *path = c->to;
  int rmdir = op[0] == 'r';
  if (c->m->reserve_only) return;
  if (file_arg_path(c, addr, path) < 0 || path[0] == '\0') return;
  sbx_task t;
  task_init(&t, (pid_t)c->req->pid);
  sbx_loc l;
  struct stat st;
  char full[LOC_MAX];
  if (loc_parent(&t, dirfd, path, &l) < 0 || l.type != LAST_NORM) goto out;
  int inside = path_writable(c->m, l.dir);
  loc_path(&l, full, sizeof full);
  if (inside && !file_ro_path(c->m, full)) goto out;
  /* (a missing name: the kernel's answer, unrecorded, as without evidence: EROFS where the
   * mount is read-only, which it looks at before the name) */
  if (loc_lstat(&t, &l, &st) < 0) goto out;
  /* A call that fails for the kernel's own reasons is left to it, unrecorded: unlink of a
   * directory (EISDIR) or with a '/' after the name, rmdir of what is no directory
   * (ENOTDIR) or of one that is not empty (ENOTEMPTY; the kernel looks at a mount point
   * first: EBUSY for a protected one, as without evidence). */
  int dir = S_ISDIR(st.st_mode);
  if (rmdir ? !dir : dir || l.slash) goto out;
  if (rmdir && file_dir_empty(&t, &l) == 0) goto out;
  /* the kernel's own refusals, as without a sandbox, unrecorded: a directory whose mode
   * refuses the caller (EACCES), a sticky one where neither the name's file nor the
   * directory is the caller's (EPERM) */
  if (!inside && file_dac_refuses(c, &t, &l, 0, W_OK | X_OK)) {
    answer(c, EACCES);
    goto out;
  }
  if (!inside && file_sticky_refuses(c, &t, &l)) {
    answer(c, EPERM);
    goto out;
  }
  /* a read-only path inside a root is a mount point in the sandbox: EBUSY */
  int err = inside ? (c->m->mountns ? EBUSY : EACCES) : file_write_errno(&t, &l, 0);
  refuse(c, op, err, full, NULL);
out:
  loc_free(&l);
  task_free(&t);
}

static void judge_truncate(sbx_call *c, uint64_t addr, int64_t length) {
  if (c->m->reserve_only || length < 0 || file_arg_path(c, addr, c->to) < 0 || c->to[0] == '\0')
    return;
  sbx_task t;
  task_init(&t, (pid_t)c->req->pid);
  sbx_loc l;
  struct stat st;
  char full[LOC_MAX];
  if (loc_parent(&t, AT_FDCWD, c->to, &l) < 0 || file_resolve_obj(&t, &l, 1, &st) < 0) goto out;
  if (!S_ISREG(st.st_mode)) goto out; /* EISDIR, EINVAL */
  loc_path(&l, full, sizeof full);
  if (!path_writable(c->m, full)) {
    if (file_dac_refuses(c, &t, &l, 1, W_OK))
      answer(c, EACCES);
    else
      refuse(c, "truncate", file_write_errno(&t, &l, 1), full, NULL);
  }
out:
  loc_free(&l);
  task_free(&t);
}

int notify_file_call(sbx_call *c) {
  const __u64 *a = c->req->data.args;
  const int at = AT_FDCWD;
  switch (c->req->data.nr) {
    case SYS_open: judge_open(c, at, a[0], a[1], (unsigned)a[2], 0); return 1;
    case SYS_creat:
      judge_open(c, at, a[0], O_CREAT | O_WRONLY | O_TRUNC, (unsigned)a[1], 0);
      return 1;
    case SYS_openat: judge_open(c, (int)a[0], a[1], a[2], (unsigned)a[3], 0); return 1;
    case SYS_mkdir: create_call(c, "mkdir", at, a[0], MK_DIR, (unsigned)a[1], 0); return 1;
    case SYS_mkdirat: create_call(c, "mkdir", (int)a[0], a[1], MK_DIR, (unsigned)a[2], 0); return 1;
    case SYS_mknod: create_call(c, "mknod", at, a[0], MK_NODE, (unsigned)a[1], 0); return 1;
    case SYS_mknodat:
      create_call(c, "mknod", (int)a[0], a[1], MK_NODE, (unsigned)a[2], 0);
      return 1;
    case SYS_symlink: create_call(c, "symlink", at, a[1], MK_LINK, 0, a[0]); return 1;
    case SYS_symlinkat: create_call(c, "symlink", (int)a[1], a[2], MK_LINK, 0, a[0]); return 1;
    case SYS_unlink: judge_remove(c, "unlink", at, a[0]); return 1;
    case SYS_rmdir: judge_remove(c, "rmdir", at, a[0]); return 1;
    case SYS_unlinkat:
      judge_remove(c, (a[2] & AT_REMOVEDIR) ? "rmdir" : "unlink", (int)a[0], a[1]);
      return 1;
    case SYS_rename: file_rename(c, at, a[0], at, a[1], 0); return 1;
    case SYS_renameat: file_rename(c, (int)a[0], a[1], (int)a[2], a[3], 0); return 1;
    case SYS_renameat2: file_rename(c, (int)a[0], a[1], (int)a[2], a[3], (unsigned)a[4]); return 1;
    case SYS_link: file_link(c, at, a[0], at, a[1], 0); return 1;
    case SYS_linkat: file_link(c, (int)a[0], a[1], (int)a[2], a[3], (int)a[4]); return 1;
    case SYS_truncate: judge_truncate(c, a[0], (int64_t)a[1]); return 1;
    default: return 0;
  }
}
