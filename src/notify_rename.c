/* notify_rename.c: rename and link, the file calls with two names, judged as the kernel
 * would (see notify_files.c) and performed here (notify_create.c), never left to the kernel,
 * which would read the paths again. The host makes them on the host's tree, where no mount of
 * the sandbox's pins anything: what the kernel would refuse there as a mount point (EBUSY)
 * or across mounts (EXDEV), or what would free a protected path, is refused here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "notify_int.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

/* Whether `path` is, or is a directory above, one of `list`. */
static int at_or_above(const char *path, char *const *list, int n) {
  size_t len = strlen(path);
  for (int i = 0; i < n; i++)
    if (strncmp(list[i], path, len) == 0 && (list[i][len] == '\0' || list[i][len] == '/')) return 1;
  return 0;
}

/* Whether moving `path` would move a mount of the sandbox's tree (a read-only path, a mask,
 * a writable root) or a directory above one. The kernel refuses to move a mount point
 * (EBUSY); the host, which makes the move on the host's tree where no mount pins anything,
 * would move it, and a directory above it, so that the protected path is free to make again
 * where it was (a new tools/fsmon.sh that core.fsmonitor runs, a new ~/.bashrc, a secret read
 * at its new place by the next session). */
static int pins_mount(const sbx_monitor *m, const char *path) {
  return at_or_above(path, m->ro_paths, m->nro) || at_or_above(path, m->roots, m->nroots);
}

/* The file system type of link's object a (resolved, file_resolve_obj) and of the directory
 * of the new name b differ: the kernel's own EXDEV (a link never spans two file systems; a
 * /proc/self/fd/N not followed is a link in procfs), whatever the sandbox would say. Two
 * mounts of one type are left to the checks of the policy (a sandbox's bind mounts divide
 * one file system too). */
static int other_fs(sbx_task *t, sbx_loc *a, sbx_loc *b) {
  int da = loc_dirfd(t, a), db = loc_dirfd(t, b);
  if (da < 0 || db < 0) return 0;
  int obj = a->type == LAST_NORM ? openat(da, a->name, O_PATH | O_NOFOLLOW | O_CLOEXEC) : da;
  struct statfs fa, fb;
  int other = obj >= 0 && fstatfs(obj, &fa) == 0 && fstatfs(db, &fb) == 0 && fa.f_type != fb.f_type;
  if (obj >= 0 && obj != da) close(obj);
  return other;
}

static long mount_id(sbx_task *t, sbx_loc *l) {
  struct statx sx;
  int fd = loc_dirfd(t, l);
  if (fd < 0 || statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0) return -1;
  return (long)sx.stx_mnt_id;
}

/* The kernel's own answer to a rename of a to b, which it gives before any the sandbox would
 * (from, to: their paths): a missing name, a name already there (RENAME_NOREPLACE), a '/'
 * after a file's name, a directory moved below itself or onto one of its own directories, a
 * file onto a directory or a directory onto a file, a directory onto one not empty. 0 when
 * the rename would be made; -1 when it changes nothing (one file under both names: the
 * kernel answers 0). */
static int rename_own_error(sbx_task *t, sbx_loc *a, sbx_loc *b, unsigned flags, const char *from,
                            const char *to) {
  struct stat sa, sb;
  int rc = loc_lstat(t, a, &sa);
  if (rc < 0) return -rc;
  rc = loc_lstat(t, b, &sb);
  if (rc < 0 && rc != -ENOENT) return -rc;
  int there = rc == 0, adir = S_ISDIR(sa.st_mode), bdir = there && S_ISDIR(sb.st_mode);
  if ((flags & RENAME_NOREPLACE) && there) return EEXIST;
  if (flags & RENAME_EXCHANGE) {
    if (!there) return ENOENT;
    if (!bdir && b->slash) return ENOTDIR;
  }
  if (!adir && (a->slash || (!(flags & RENAME_EXCHANGE) && b->slash))) return ENOTDIR;
  size_t nf = strlen(from), nt = strlen(to);
  if (adir && nt > nf && strncmp(to, from, nf) == 0 && to[nf] == '/') return EINVAL;
  if (bdir && nf > nt && strncmp(from, to, nt) == 0 && from[nt] == '/')
    return (flags & RENAME_EXCHANGE) ? EINVAL : ENOTEMPTY;
  if (there && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) return -1;
  if (!there || (flags & RENAME_EXCHANGE)) return 0;
  if (adir != bdir) return adir ? ENOTDIR : EISDIR;
  if (bdir && file_dir_empty(t, b) == 0) return ENOTEMPTY;
  return 0;
}

/* The kernel's own refusal of a rename from a to b outside the writable roots (wa, wb), as
 * without a sandbox: the name's directory refuses its removal (its mode: EACCES; its sticky
 * bit: EPERM), then the new name's directory refuses the new name or, where a name is
 * replaced, its removal. 0 when the caller may. */
static int rename_dac_errno(sbx_call *c, sbx_task *t, sbx_loc *a, sbx_loc *b, int wa, int wb) {
  if (!wa && file_dac_refuses(c, t, a, 0, W_OK | X_OK)) return EACCES;
  if (!wa && file_sticky_refuses(c, t, a)) return EPERM;
  if (!wb && file_dac_refuses(c, t, b, 0, W_OK | X_OK)) return EACCES;
  struct stat st;
  if (!wb && loc_lstat(t, b, &st) == 0 && file_sticky_refuses(c, t, b)) return EPERM;
  return 0;
}

/* rename and link: judged, then performed here (notify_create.c), never left to the kernel,
 * which would read the paths again. A rename the kernel would fail for its own reasons
 * (rename_own_error) is answered with its errno, unrecorded, whatever the sandbox would
 * refuse in it. */
void file_rename(sbx_call *c, int olddir, uint64_t oldaddr, int newdir, uint64_t newaddr,
                 unsigned flags) {
  if ((flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) ||
      ((flags & RENAME_EXCHANGE) && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT)))) {
    answer(c, EINVAL);
    return;
  }
  if (file_arg_path(c, oldaddr, c->path) < 0 || file_arg_path(c, newaddr, c->to) < 0) {
    answer(c, EFAULT);
    return;
  }
  if (c->path[0] == '\0' || c->to[0] == '\0') {
    answer(c, ENOENT);
    return;
  }
  sbx_task t;
  task_init(&t, (pid_t)c->req->pid);
  sbx_loc a, b;
  char from[LOC_MAX], to[LOC_MAX];
  emu_state es;
  b.dirfd = -1;
  int rc = loc_parent(&t, olddir, c->path, &a);
  if (rc == 0) rc = loc_parent(&t, newdir, c->to, &b);
  if (rc < 0 || a.type != LAST_NORM || b.type != LAST_NORM) {
    answer(c, rc < 0 ? -rc : a.type == LAST_OBJ || b.type == LAST_OBJ ? EXDEV : EBUSY);
    goto out;
  }
  loc_path(&a, from, sizeof from);
  loc_path(&b, to, sizeof to);
  int wa = path_writable(c->m, a.dir), wb = path_writable(c->m, b.dir);
  int pinned = pins_mount(c->m, from) || file_ro_path(c->m, to) ||
               ((flags & RENAME_EXCHANGE) && pins_mount(c->m, to));
  /* a new name onto a reserved one (an exchange puts something at both) */
  int res = file_reserved(&t, c->m, &b, to, 1);
  if (!res && (flags & RENAME_EXCHANGE)) res = file_reserved(&t, c->m, &a, from, 1);
  if (res || !wa || !wb || pinned) {
    int own = rename_own_error(&t, &a, &b, flags, from, to);
    /* a directory whose permissions refuse the caller: the kernel's refusal, unrecorded */
    int dac = !res && !pinned && own == 0 ? rename_dac_errno(c, &t, &a, &b, wa, wb) : 0;
    /* where the file system is read-only the kernel looks at the mounts before the names
     * (EXDEV across two, then EROFS): its errno, recorded only for a call that would
     * otherwise be made */
    if (!res && (!wa || !wb) && (loc_readonly(&t, &a, 0) || loc_readonly(&t, &b, 0))) {
      int err = mount_id(&t, &a) != mount_id(&t, &b) ? EXDEV : EROFS;
      if (own != 0)
        answer(c, err);
      else if (dac) /* (as without a sandbox) */
        answer(c, dac);
      else
        file_deny(c, "rename", err, from, to);
      goto out;
    }
    if (own != 0) { /* (-1: nothing would change) */
      answer(c, own < 0 ? 0 : own);
      goto out;
    }
    if (dac) {
      answer(c, dac);
      goto out;
    }
    int err;
    if (res) {
      err = file_reserved_errno(res);
    } else if (!wa || !wb) {
      int ro = loc_readonly(&t, &a, 0) || loc_readonly(&t, &b, 0);
      err = !ro ? EACCES : mount_id(&t, &a) != mount_id(&t, &b) ? EXDEV : EROFS;
    } else {
      err = c->m->mountns ? EBUSY : EACCES;
    }
    if (res)
      refuse(c, "rename", err, from, to);
    else
      file_deny(c, "rename", err, from, to);
    goto out;
  }
  if (a.slash || b.slash) { /* (the names made below have none: a file's '/' is ENOTDIR) */
    int own = rename_own_error(&t, &a, &b, flags, from, to);
    if (own != 0) {
      answer(c, own < 0 ? 0 : own);
      goto out;
    }
  }
  int da = loc_dirfd(&t, &a), db = loc_dirfd(&t, &b);
  if (da < 0 || db < 0 || (rc = emu_begin(c, &es)) < 0) {
    answer(c, da < 0 ? -da : db < 0 ? -db : -rc);
    goto out;
  }
  emu_answer(c, (int)syscall(SYS_renameat2, da, a.name, db, b.name, flags));
  emu_end(&es);
out:
  loc_free(&a);
  loc_free(&b);
  task_free(&t);
}

void file_link(sbx_call *c, int olddir, uint64_t oldaddr, int newdir, uint64_t newaddr, int flags) {
  if (flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH)) { /* the kernel's first answer */
    answer(c, EINVAL);
    return;
  }
  if (file_arg_path(c, oldaddr, c->path) < 0 || file_arg_path(c, newaddr, c->to) < 0) {
    answer(c, EFAULT);
    return;
  }
  if (c->to[0] == '\0' || (c->path[0] == '\0' && !(flags & AT_EMPTY_PATH))) {
    answer(c, ENOENT);
    return;
  }
  sbx_task t;
  task_init(&t, (pid_t)c->req->pid);
  sbx_loc a, b;
  struct stat st, obj; /* (obj: the file linked) */
  char from[LOC_MAX], to[LOC_MAX];
  emu_state es;
  b.dirfd = -1;
  int rc = c->path[0] == '\0' ? loc_fd(&t, olddir, &a) : loc_parent(&t, olddir, c->path, &a);
  if (rc == 0) rc = file_resolve_obj(&t, &a, flags & AT_SYMLINK_FOLLOW, &obj);
  if (rc == 0) rc = loc_parent(&t, newdir, c->to, &b);
  if (rc < 0 || b.type != LAST_NORM) {
    answer(c, rc < 0 ? -rc : EEXIST);
    goto out;
  }
  rc = loc_lstat(&t, &b, &st);
  if (rc != -ENOENT || b.slash) {
    answer(c, rc == 0 ? EEXIST : rc == -ENOENT ? ENOENT : -rc);
    goto out;
  }
  if (!loc_readonly(&t, &b, 0) && other_fs(&t, &a, &b)) { /* (after the EROFS of the new name) */
    answer(c, EXDEV);
    goto out;
  }
  loc_path(&a, from, sizeof from);
  loc_path(&b, to, sizeof to);
  int res = file_reserved(&t, c->m, &b, to, 0);
  int wb = path_writable(c->m, b.dir), wa = path_writable(c->m, from);
  if (!wb && S_ISDIR(obj.st_mode) && loc_readonly(&t, &b, 0)) {
    answer(c, EROFS); /* (the kernel looks at the new name's mount before the object) */
    goto out;
  }
  if ((res || !wa || !wb) && S_ISDIR(obj.st_mode)) { /* the kernel's own: no hard link */
    answer(c, EPERM);
    goto out;
  }
  if (res) {
    refuse(c, "link", file_reserved_errno(res), from, to);
    goto out;
  }
  if (!wa || !wb) {
    /* what the kernel refuses without a sandbox, unrecorded: a link fs.protected_hardlinks
     * forbids (EPERM), then a new name the directory's mode refuses (EACCES) */
    if (file_link_refuses(c, &t, &a, &obj)) {
      answer(c, EPERM);
    } else if (!wb && file_dac_refuses(c, &t, &b, 0, W_OK | X_OK)) {
      answer(c, EACCES);
    } else {
      /* the new name is refused first (EROFS, EACCES); a name in a root for a file outside it
       * would give it rights it has not: EXDEV (a mount boundary, or Landlock's refer rule) */
      file_deny(c, "link", wb ? EXDEV : file_write_errno(&t, &b, 0), from, to);
    }
    goto out;
  }
  int da = loc_dirfd(&t, &a), db = loc_dirfd(&t, &b);
  if (da < 0 || db < 0 || (rc = emu_begin(c, &es)) < 0) {
    answer(c, da < 0 ? -da : db < 0 ? -db : -rc);
    goto out;
  }
  if (a.type == LAST_NORM) {
    rc = linkat(da, a.name, db, b.name, 0);
  } else { /* the object itself (a descriptor, a magic link): through this host's own */
    char self[48];
    snprintf(self, sizeof self, "/proc/self/fd/%d", da);
    rc = linkat(AT_FDCWD, self, db, b.name, AT_SYMLINK_FOLLOW);
  }
  emu_answer(c, rc);
  emu_end(&es);
out:
  loc_free(&a);
  loc_free(&b);
  task_free(&t);
}

/* ---- truncate ---- */
