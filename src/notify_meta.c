/* notify_meta.c: calls that change a file's metadata (mode, owner, times, extended
 * attributes, inode flags), by path or by descriptor. Landlock does not govern them; the
 * read-only mount layer refuses them (EROFS) everywhere outside the writable roots, so a
 * call that would land outside is answered here with that errno and recorded. A descriptor
 * opened read-only (or O_PATH) on a file outside is how such a call reaches it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "notify_int.h"

/* Newer than Debian 12's headers (x86_64 numbers). */
#define NR_fchmodat2 452
#define NR_setxattrat 463
#define NR_removexattrat 466
#define NR_file_setattr 469
#ifndef UTIME_NOW
#define UTIME_NOW ((1l << 30) - 1l)
#define UTIME_OMIT ((1l << 30) - 2l)
#endif

enum { M_FOLLOW = 1, M_FD = 2 };

/* What a call needs of the kernel's permission checks besides the mount (see judge_meta). */
enum {
  N_OWNER, /* the file's owner: chmod, inode flags */
  N_CHOWN, /* uid and gid, each (uint32_t)-1 for "unchanged" */
  N_TIMES, /* times at `times` (0: now); T_* says their form */
  N_XATTR, /* the attribute named at `name` */
};
enum { T_UTIMBUF, T_TIMEVAL, T_TIMESPEC };
typedef struct {
  int need;
  uint64_t times;
  int form;
  uint32_t uid, gid;
  uint64_t name;
} meta_need;

/* Whether the task's descriptor fd is an O_PATH one (its metadata calls fail EBADF). */
static int opath(pid_t tid, int fd) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)tid, fd);
  int f = open(path, O_RDONLY | O_CLOEXEC);
  if (f < 0) return 1; /* gone: EBADF */
  ssize_t n = read(f, buf, sizeof buf - 1);
  close(f);
  if (n <= 0) return 1;
  buf[n] = '\0';
  const char *flags = strstr(buf, "flags:");
  return flags == NULL || (strtoul(flags + 6, NULL, 8) & O_PATH) != 0;
}

static int times_ok(sbx_call *c, const meta_need *n);
static int dac_errno(sbx_call *c, sbx_task *t, sbx_loc *l, const struct stat *st,
                     const meta_need *n);

/* Whether the task's descriptor fd names a file in a root, by the path /proc gives for it
 * (one readlink, no descriptor of ours): tar's fchown, fchmod and futimens on each file it
 * made. The kernel takes descriptor fd again when the call goes on, whatever was read here,
 * as it does after the longer way (open the descriptor, then read its path). */
static int fd_meta_ok(const sbx_monitor *m, pid_t tid, int fd) {
  char link[48], path[LOC_MAX];
  snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)tid, fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0 || path[0] != '/') return 0; /* a pipe, a socket, gone: the longer way says */
  path[n] = '\0';
  struct stat st; /* removed (" (deleted)" is also a name's own ending): the longer way */
  if (n > 10 && strcmp(path + n - 10, " (deleted)") == 0 &&
      (stat(link, &st) < 0 || st.st_nlink == 0))
    return 0;
  return path_meta_ok(m, path);
}

/* (dirfd, path) or, with M_FD or an empty path and AT_EMPTY_PATH, the descriptor itself.
 * n: what the call needs of the permission checks (utime*'s times are checked only for a
 * call that would be refused). A call outside the writable roots that the file's owner and
 * modes refuse the caller fails so without a sandbox: the kernel's errno, unrecorded. */
static void judge_meta(sbx_call *c, const char *op, int dirfd, uint64_t addr, int how, int empty_ok,
                       const meta_need *n) {
  pid_t tid = (pid_t)c->req->pid;
  char *path = c->to;
  int by_fd = (how & M_FD) != 0;
  if (by_fd && dirfd < 0) return; /* EBADF */
  if (!by_fd) {
    if (addr == 0 || read_string(tid, addr, path, PATH_MAX) < 0) return; /* EFAULT */
    if (path[0] == '\0' && !empty_ok) return;                            /* ENOENT */
    if (path[0] == '\0' && dirfd == AT_FDCWD) strcpy(path, ".");         /* the cwd itself */
    by_fd = path[0] == '\0';
  }
  if (by_fd && fd_meta_ok(c->m, tid, dirfd)) return;
  sbx_task t;
  task_init(&t, tid);
  sbx_loc l;
  struct stat st;
  char full[LOC_MAX];
  int rc = by_fd ? loc_fd(&t, dirfd, &l) : loc_parent(&t, dirfd, path, &l);
  if (rc < 0) goto out;
  /* a descriptor's object in a root (tar's fchown, fchmod and futimens on each file it
   * made): its path is all there is to judge, no open or stat of it */
  if (by_fd && path_meta_ok(c->m, l.dir)) goto out;
  for (;;) { /* to the object, through final links where the call follows them */
    if ((rc = loc_lstat(&t, &l, &st)) < 0) goto out;
    if (l.type != LAST_NORM || !S_ISLNK(st.st_mode) || !((how & M_FOLLOW) || l.slash)) break;
    if (loc_follow(&t, &l) < 0) goto out;
  }
  if (l.type == LAST_NORM && l.slash && !S_ISDIR(st.st_mode)) goto out; /* ENOTDIR */
  loc_path(&l, full, sizeof full);
  if (full[0] != '/' || path_meta_ok(c->m, full)) goto out;
  if ((how & M_FD) && opath(tid, dirfd)) goto out; /* EBADF */
  if (!times_ok(c, n)) goto out;                   /* EINVAL, or nothing to change */
  int dac = dac_errno(c, &t, &l, &st, n);
  if (dac)
    answer(c, dac);
  else
    refuse(c, op, loc_readonly(&t, &l, 1) ? EROFS : EPERM, full, NULL);
out:
  loc_free(&l);
  task_free(&t);
}

/* An xattr name the kernel takes (else ERANGE / EFAULT before anything else). */
static int xattr_name_ok(sbx_call *c, uint64_t addr) {
  char name[XATTR_NAME_MAX + 2];
  if (addr == 0 || read_string((pid_t)c->req->pid, addr, name, sizeof name) < 0) return 0;
  return name[0] != '\0';
}

static int xattr_ok(sbx_call *c, uint64_t name, uint64_t size, uint64_t flags) {
  return xattr_name_ok(c, name) && size <= XATTR_SIZE_MAX &&
         !(flags & ~(uint64_t)(XATTR_CREATE | XATTR_REPLACE));
}

/* utime*: invalid times fail EINVAL first (a timespec's tv_nsec past a second, not UTIME_NOW
 * or UTIME_OMIT; a timeval's tv_usec past a second); both omitted changes nothing. */
static int times_ok(sbx_call *c, const meta_need *n) {
  uint64_t addr = n->times;
  if (n->need != N_TIMES || addr == 0 || n->form == T_UTIMBUF) return 1;
  if (n->form == T_TIMEVAL) {
    struct timeval tv[2];
    if (read_mem((pid_t)c->req->pid, addr, tv, sizeof tv) < 0) return 0;
    for (int i = 0; i < 2; i++)
      if (tv[i].tv_usec < 0 || tv[i].tv_usec >= 1000000) return 0;
    return 1;
  }
  struct timespec ts[2];
  if (read_mem((pid_t)c->req->pid, addr, ts, sizeof ts) < 0) return 0;
  for (int i = 0; i < 2; i++) {
    long ns = ts[i].tv_nsec;
    if (ns != UTIME_NOW && ns != UTIME_OMIT && (ns < 0 || ns > 999999999)) return 0;
  }
  return !(ts[0].tv_nsec == UTIME_OMIT && ts[1].tv_nsec == UTIME_OMIT);
}

/* Whether the times at n are "now" for both (no times, or both UTIME_NOW): the owner or a
 * writer may set those; any other times only the owner. */
static int times_now(sbx_call *c, const meta_need *n) {
  if (n->times == 0) return 1;
  if (n->form != T_TIMESPEC) return 0;
  struct timespec ts[2];
  if (read_mem((pid_t)c->req->pid, n->times, ts, sizeof ts) < 0) return 0;
  return ts[0].tv_nsec == UTIME_NOW && ts[1].tv_nsec == UTIME_NOW;
}

/* The kernel's own refusal of the call n on the object at l (lstat st) for the caller, as
 * without a sandbox: EPERM where only the owner may (a mode, inode flags, times other than
 * now, an owner or a group given away, a POSIX ACL) or only a capability may (trusted.* and
 * security.* attributes), EACCES where the file's mode refuses a write (times set to now, a
 * user.* attribute); 0 where the caller may, so that the sandbox's refusal is its own. */
static int dac_errno(sbx_call *c, sbx_task *t, sbx_loc *l, const struct stat *st,
                     const meta_need *n) {
  int own = file_owned(c, l, st);
  switch (n->need) {
    case N_OWNER: return own ? 0 : EPERM;
    case N_CHOWN:
      if (n->uid != UINT32_MAX && (!own || n->uid != st->st_uid)) return EPERM;
      if (n->gid != UINT32_MAX && (!own || (n->gid != st->st_gid && !file_in_group(n->gid))))
        return EPERM;
      return 0;
    case N_TIMES:
      if (own) return 0;
      if (!times_now(c, n)) return EPERM;
      return file_dac_refuses(c, t, l, 1, W_OK) ? EACCES : 0;
    case N_XATTR: {
      char name[XATTR_NAME_MAX + 2];
      if (read_string((pid_t)c->req->pid, n->name, name, sizeof name) < 0) return 0;
      if (strncmp(name, "trusted.", 8) == 0 || strncmp(name, "security.", 9) == 0) return EPERM;
      if (strcmp(name, "system.posix_acl_access") == 0 ||
          strcmp(name, "system.posix_acl_default") == 0)
        return own ? 0 : EPERM;
      if (strncmp(name, "system.", 7) == 0) return 0; /* (the file system's to answer) */
      int user = strncmp(name, "user.", 5) == 0;
      if (user && !S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) return EPERM;
      if (user && S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && !own) return EPERM;
      if (file_dac_refuses(c, t, l, 1, W_OK)) return EACCES;
      return user ? 0 : EOPNOTSUPP; /* (a name in no namespace: no file system takes it) */
    }
  }
  return 0;
}

static int at_flags_ok(uint64_t flags) {
  return !(flags & ~(uint64_t)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH));
}

static int follow(uint64_t flags) {
  return (flags & AT_SYMLINK_NOFOLLOW) ? 0 : M_FOLLOW;
}

/* A set-id chmod of the task's descriptor fd that names no file of a file system (a pipe, a
 * socket, an anonymous inode: nothing a path reaches, nothing that can be run): the kernel's
 * own answer, from the host's chmod of its duplicate of that very object (the task's
 * descriptor could be another file by the time the kernel looked again), made without the
 * host's capabilities. 1 when answered so, 0 when fd is a file (judged as any). */
static int setid_nofile(sbx_call *c, int fd, uint64_t mode) {
  int dup = unix_target_fd(c->m, c->req->id, (pid_t)c->req->pid, fd);
  if (dup < 0) {
    answer(c, errno == EBADF ? EBADF : EPERM);
    return 1;
  }
  char link[48], target[8];
  snprintf(link, sizeof link, "/proc/self/fd/%d", dup);
  if (readlink(link, target, sizeof target) > 0 && target[0] == '/') { /* a file */
    close(dup);
    return 0;
  }
  emu_state es;
  int rc = emu_drop_caps(&es);
  if (rc < 0) {
    answer(c, -rc);
  } else { /* (through the link: an O_PATH descriptor too) */
    emu_answer(c, fchmodat(AT_FDCWD, link, (mode_t)(mode & 07777), 0));
    emu_end(&es);
  }
  close(dup);
  return 1;
}

/* A set-user-ID or set-group-ID bit, on any file: refused. A program left in a writable root
 * (the workspace, /tmp) with the bit set runs as its owner for whoever starts it on the host
 * later (root's, for a root host: a root shell for every local user). The mode is a register
 * (no race); the record names the path the call would have changed (recorded with file
 * evidence; without it the same answer, unrecorded). The kernel's own failures come first:
 * no such file, a descriptor that is not open, fchmod of an O_PATH one (EBADF). */
static void refuse_setid(sbx_call *c, int dirfd, uint64_t addr, int how, int empty, uint64_t mode) {
  pid_t pid = (pid_t)c->req->pid;
  sbx_task t;
  sbx_loc l;
  struct stat st;
  char raw[PATH_MAX], full[LOC_MAX];
  int by_fd = (how & M_FD) != 0;
  if (by_fd && (dirfd < 0 || opath(pid, dirfd))) {
    answer(c, EBADF);
    return;
  }
  if (!by_fd && addr != 0 && empty) {
    char first;
    if (read_mem(pid, addr, &first, 1) == 0 && first == '\0') by_fd = 1;
  }
  if (by_fd && dirfd >= 0 && setid_nofile(c, dirfd, mode)) return;
  task_init(&t, pid);
  l.dirfd = -1;
  raw[0] = full[0] = '\0';
  int rc;
  if (how & M_FD)
    rc = loc_fd(&t, dirfd, &l);
  else if (addr == 0)
    rc = -EFAULT;
  else if ((rc = read_string(pid, addr, raw, sizeof raw)) < 0)
    raw[0] = '\0'; /* (EFAULT, ENAMETOOLONG: the kernel's) */
  else if (raw[0] == '\0')
    rc = empty ? loc_fd(&t, dirfd, &l) : -ENOENT;
  else if ((rc = loc_parent(&t, dirfd, raw, &l)) == 0)
    rc = file_resolve_obj(&t, &l, (how & M_FOLLOW) != 0, &st);
  /* no such file (or another failure of the kernel's own, before the mode is looked at):
   * the kernel's answer, nothing refused */
  if (rc < 0 && rc != -EACCES) {
    answer(c, -rc);
  } else if (c->m->reserve_only) {
    answer(c, EPERM);
  } else {
    if (rc == 0) loc_path(&l, full, sizeof full);
    refuse(c, "chmod", EPERM, full[0] ? full : raw[0] ? raw : NULL, NULL);
  }
  loc_free(&l);
  task_free(&t);
}

int notify_meta_call(sbx_call *c) {
  const __u64 *a = c->req->data.args;
  const int at = AT_FDCWD;
  const int nr = (int)c->req->data.nr;
  uint64_t mode = 0;
  if (nr == SYS_chmod || nr == SYS_fchmod) mode = a[1];
  if (nr == SYS_fchmodat || nr == NR_fchmodat2) mode = a[2];
  if (mode & (S_ISUID | S_ISGID)) {
    if (nr == SYS_chmod)
      refuse_setid(c, at, a[0], M_FOLLOW, 0, mode);
    else if (nr == SYS_fchmod)
      refuse_setid(c, (int)a[0], 0, M_FD, 0, mode);
    else if (nr == SYS_fchmodat)
      refuse_setid(c, (int)a[0], a[1], M_FOLLOW, 0, mode);
    else if (!at_flags_ok(a[3]))
      answer(c, EINVAL);
    else
      refuse_setid(c, (int)a[0], a[1], follow(a[3]), (a[3] & AT_EMPTY_PATH) != 0, mode);
    return 1;
  }
  meta_need n = {N_OWNER, 0, 0, 0, 0, 0};
  switch (nr) {
    case SYS_chmod: judge_meta(c, "chmod", at, a[0], M_FOLLOW, 0, &n); return 1;
    case SYS_fchmodat: judge_meta(c, "chmod", (int)a[0], a[1], M_FOLLOW, 0, &n); return 1;
    case NR_fchmodat2:
      if (at_flags_ok(a[3]))
        judge_meta(c, "chmod", (int)a[0], a[1], follow(a[3]), (a[3] & AT_EMPTY_PATH) != 0, &n);
      return 1;
    case SYS_fchmod: judge_meta(c, "chmod", (int)a[0], 0, M_FD, 0, &n); return 1;
    case SYS_chown:
    case SYS_lchown:
    case SYS_fchown:
      n = (meta_need){N_CHOWN, 0, 0, (uint32_t)a[1], (uint32_t)a[2], 0};
      judge_meta(c, "chown", nr == SYS_fchown ? (int)a[0] : at, nr == SYS_fchown ? 0 : a[0],
                 nr == SYS_chown    ? M_FOLLOW
                 : nr == SYS_fchown ? M_FD
                                    : 0,
                 0, &n);
      return 1;
    case SYS_fchownat:
      n = (meta_need){N_CHOWN, 0, 0, (uint32_t)a[2], (uint32_t)a[3], 0};
      if (at_flags_ok(a[4]))
        judge_meta(c, "chown", (int)a[0], a[1], follow(a[4]), (a[4] & AT_EMPTY_PATH) != 0, &n);
      return 1;
    case SYS_utime:
      n = (meta_need){N_TIMES, a[1], T_UTIMBUF, 0, 0, 0};
      judge_meta(c, "utime", at, a[0], M_FOLLOW, 0, &n);
      return 1;
    case SYS_utimes:
      n = (meta_need){N_TIMES, a[1], T_TIMEVAL, 0, 0, 0};
      judge_meta(c, "utime", at, a[0], M_FOLLOW, 0, &n);
      return 1;
    case SYS_futimesat:
      n = (meta_need){N_TIMES, a[2], T_TIMEVAL, 0, 0, 0};
      if (a[1] == 0)
        judge_meta(c, "utime", (int)a[0], 0, M_FD, 0, &n);
      else
        judge_meta(c, "utime", (int)a[0], a[1], M_FOLLOW, 0, &n);
      return 1;
    case SYS_utimensat:
      n = (meta_need){N_TIMES, a[2], T_TIMESPEC, 0, 0, 0};
      if (!at_flags_ok(a[3])) return 1;
      if (a[1] == 0) {
        if ((int)a[0] != at && a[3] == 0) judge_meta(c, "utime", (int)a[0], 0, M_FD, 0, &n);
      } else {
        judge_meta(c, "utime", (int)a[0], a[1], follow(a[3]), (a[3] & AT_EMPTY_PATH) != 0, &n);
      }
      return 1;
    case SYS_setxattr:
    case SYS_lsetxattr:
      n = (meta_need){N_XATTR, 0, 0, 0, 0, a[1]};
      if (xattr_ok(c, a[1], a[3], a[4]))
        judge_meta(c, "setxattr", at, a[0], nr == SYS_setxattr ? M_FOLLOW : 0, 0, &n);
      return 1;
    case SYS_fsetxattr:
      n = (meta_need){N_XATTR, 0, 0, 0, 0, a[1]};
      if (xattr_ok(c, a[1], a[3], a[4])) judge_meta(c, "setxattr", (int)a[0], 0, M_FD, 0, &n);
      return 1;
    case SYS_removexattr:
    case SYS_lremovexattr:
      n = (meta_need){N_XATTR, 0, 0, 0, 0, a[1]};
      if (xattr_name_ok(c, a[1]))
        judge_meta(c, "removexattr", at, a[0], nr == SYS_removexattr ? M_FOLLOW : 0, 0, &n);
      return 1;
    case SYS_fremovexattr:
      n = (meta_need){N_XATTR, 0, 0, 0, 0, a[1]};
      if (xattr_name_ok(c, a[1])) judge_meta(c, "removexattr", (int)a[0], 0, M_FD, 0, &n);
      return 1;
    case NR_setxattrat:
    case NR_removexattrat: {
      int set = nr == NR_setxattrat;
      n = (meta_need){N_XATTR, 0, 0, 0, 0, a[3]};
      if (at_flags_ok(a[2]) && xattr_name_ok(c, a[3]) && (!set || a[5] >= 16))
        judge_meta(c, set ? "setxattr" : "removexattr", (int)a[0], a[1], follow(a[2]),
                   (a[2] & AT_EMPTY_PATH) != 0, &n);
      return 1;
    }
    case NR_file_setattr:
      if (at_flags_ok(a[4]) && a[3] >= 24)
        judge_meta(c, "setattr", (int)a[0], a[1], follow(a[4]), (a[4] & AT_EMPTY_PATH) != 0, &n);
      return 1;
    case SYS_ioctl: /* only the inode-flag setters are notified: chattr */
      judge_meta(c, "chattr", (int)a[0], 0, M_FD, 0, &n);
      return 1;
    default: return 0;
  }
}
