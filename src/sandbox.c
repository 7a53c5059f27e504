/* sandbox.c: Landlock, seccomp, mount and network namespaces and capabilities for a child.
 * What was observed on these machines (and the bypasses a naive filter lets through) is in
 * the project's sandbox reference notes; each layer is detected at run time. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Newer than Debian 12's kernel headers. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#define ACCESS_FS_IOCTL_DEV (1ULL << 15)
#define RULE_NET_PORT 2
#define ACCESS_NET_BIND_TCP (1ULL << 0)
#define ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

struct ruleset_attr { /* the ABI 6 layout; older kernels get a prefix of it */
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct mount_attr_v0 {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};

int sandbox_landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

int sandbox_can_unshare(void) {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) < 0) return 0;
  return (d[0].effective >> CAP_SYS_ADMIN) & 1;
}

static uint64_t fs_rights(int abi) {
  uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
  if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) r |= ACCESS_FS_IOCTL_DEV;
  return r;
}

static int add_path_rule(int ruleset, const char *path, uint64_t access) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : -1; /* a device this machine lacks is no error */
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
    /* a rule on a file may carry only file rights */
    access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
              LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | ACCESS_FS_IOCTL_DEV;
  }
  struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
  int rc = (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

static int build_ruleset(const sandbox_spec *s, int abi, char *err, size_t errlen) {
  uint64_t all = fs_rights(abi);
  struct ruleset_attr attr = {.handled_access_fs = all};
  size_t size = sizeof(uint64_t);
  if (abi >= 4 && s->network_deny) { /* TCP bind/connect denied in-kernel too (no rules) */
    attr.handled_access_net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP;
  }
  if (abi >= 4) size = 2 * sizeof(uint64_t);
  if (abi >= 6) {
    attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
    size = sizeof attr;
  }
  int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (rs < 0) {
    snprintf(err, errlen, "landlock: create_ruleset failed: %s", strerror(errno));
    return -1;
  }
  uint64_t rw_dev = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE;
  uint64_t ioctl = abi >= 5 ? ACCESS_FS_IOCTL_DEV : 0;
  struct { const char *path; uint64_t access; } fixed[] = {
    {"/", LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR},
    {"/dev/null", rw_dev | ioctl}, {"/dev/zero", rw_dev | ioctl}, {"/dev/full", rw_dev | ioctl},
    {"/dev/random", rw_dev}, {"/dev/urandom", rw_dev},
    {"/dev/tty", rw_dev | ioctl}, {"/dev/ptmx", rw_dev | ioctl}, {"/dev/pts", rw_dev | ioctl},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
    if (add_path_rule(rs, fixed[i].path, fixed[i].access) < 0) {
      snprintf(err, errlen, "landlock: rule for %s: %s", fixed[i].path, strerror(errno));
      close(rs);
      return -1;
    }
  }
  /* never MAKE_CHAR or MAKE_BLOCK: a device node made in a root would bypass everything */
  uint64_t root_access = all & ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK);
  for (int i = 0; i < s->nroots; i++) {
    if (add_path_rule(rs, s->roots[i], root_access) < 0) {
      snprintf(err, errlen, "landlock: rule for root %s: %s", s->roots[i], strerror(errno));
      close(rs);
      return -1;
    }
  }
  return rs;
}

static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *out) {
  int fd = memfd_create("luxec-bpf", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (seccomp_export_bpf(ctx, fd) < 0) {
    close(fd);
    return -1;
  }
  off_t size = lseek(fd, 0, SEEK_END);
  struct sock_filter *f = malloc((size_t)size);
  if (f == NULL || pread(fd, f, (size_t)size, 0) != size) {
    free(f);
    close(fd);
    return -1;
  }
  close(fd);
  out->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
  out->filter = f;
  return 0;
}

#define RULE(action, name, ...) \
  rc |= seccomp_rule_add(ctx, action, SCMP_SYS(name), __VA_ARGS__)

/* The filter: denials that never depend on memory the child controls (EPERM, never KILL),
 * and, with notify, the calls the host records as evidence. */
static int build_filter(const sandbox_spec *s, int notify, int netns, int handoff_fd,
                        struct sock_fprog *out) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) return -1;
  /* with a listener, every policy denial goes through the host, which records it and
   * answers EPERM (the answer never depends on memory the child controls) */
  const uint32_t deny = notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM);
  int rc = 0;
  /* another architecture's system calls (int 0x80) would skip every rule below */
  rc |= seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, deny);
  rc |= seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); /* set by the child itself */
  static const char *const denied[] = {
    "ptrace", "process_vm_writev", "bpf", "mount", "umount2", "fsopen", "fsconfig", "fsmount",
    "fspick", "move_mount", "open_tree", "mount_setattr", "pivot_root", "chroot", "keyctl",
    "add_key", "request_key", "unshare", "setns", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "swapon", "swapoff", "reboot", "perf_event_open", "userfaultfd",
    "open_by_handle_at", "name_to_handle_at", "quotactl", "acct", "iopl", "ioperm", NULL};
  for (int i = 0; denied[i]; i++) {
    int nr = seccomp_syscall_resolve_name(denied[i]);
    if (nr != __NR_SCMP_ERROR) rc |= seccomp_rule_add(ctx, deny, nr, 0);
  }
  static const uint64_t ns_flags[] = {CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWPID,
                                      CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP};
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++)
    RULE(deny, clone, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
  RULE(SCMP_ACT_ERRNO(ENOSYS), clone3, 0); /* its flags are in memory: libc falls back */

  if (s->network_deny) {
    const uint32_t act = deny;
    if (netns) {
      /* inet sockets may exist in the empty network namespace; where they try to go is
       * evidence, and the namespace enforces whatever the memory says */
      for (int fam = 0; fam <= 64; fam++) {
        if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6) continue;
        RULE(act, socket, 1, SCMP_A0(SCMP_CMP_EQ, (uint64_t)fam));
      }
      RULE(act, socket, 1, SCMP_A0(SCMP_CMP_GT, 64));
      if (notify) {
        RULE(SCMP_ACT_NOTIFY, connect, 0);
        RULE(SCMP_ACT_NOTIFY, bind, 0);
        RULE(SCMP_ACT_NOTIFY, sendto, 0);
        /* the child hands the listener over with sendmsg while its parent waits for the
         * exec: notifying that call would deadlock */
        RULE(SCMP_ACT_NOTIFY, sendmsg, 1, SCMP_A0(SCMP_CMP_NE, (uint64_t)handoff_fd));
      }
    } else {
      RULE(act, socket, 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    }
    RULE(deny, socketpair, 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  }
  if (notify && s->evidence_files && s->mode != SBX_FULL) {
    /* log-only: the host records what falls outside the roots and lets the kernel layers
     * decide (CONTINUE) */
    const uint32_t n = SCMP_ACT_NOTIFY;
    static const struct { const char *name; int arg; } opens[] = {{"open", 1}, {"openat", 2}};
    for (int i = 0; i < 2; i++) {
      int nr = seccomp_syscall_resolve_name(opens[i].name);
      struct scmp_arg_cmp w = {(unsigned)opens[i].arg, SCMP_CMP_MASKED_EQ, O_ACCMODE, O_WRONLY};
      struct scmp_arg_cmp rw = {(unsigned)opens[i].arg, SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDWR};
      struct scmp_arg_cmp cr = {(unsigned)opens[i].arg, SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT};
      struct scmp_arg_cmp tr = {(unsigned)opens[i].arg, SCMP_CMP_MASKED_EQ, O_TRUNC, O_TRUNC};
      rc |= seccomp_rule_add_array(ctx, n, nr, 1, &w);
      rc |= seccomp_rule_add_array(ctx, n, nr, 1, &rw);
      rc |= seccomp_rule_add_array(ctx, n, nr, 1, &cr);
      rc |= seccomp_rule_add_array(ctx, n, nr, 1, &tr);
    }
    static const char *const writes[] = {
      "creat", "openat2", "mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "rename",
      "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "truncate", "chmod",
      "fchmodat", "chown", "lchown", "fchownat", "mknod", "mknodat", NULL};
    for (int i = 0; writes[i]; i++) {
      int nr = seccomp_syscall_resolve_name(writes[i]);
      if (nr != __NR_SCMP_ERROR) rc |= seccomp_rule_add(ctx, n, nr, 0);
    }
    /* futimens (no path) changes a file already open for writing: nothing to tell */
    RULE(n, utimensat, 1, SCMP_A1(SCMP_CMP_NE, 0));
  }
  if (rc == 0) rc = export_bpf(ctx, out);
  seccomp_release(ctx);
  return rc == 0 ? 0 : -1;
}

static char **copy_strings(const char **in, int n) {
  char **out = calloc((size_t)n + 1, sizeof(char *));
  for (int i = 0; out != NULL && i < n; i++) out[i] = strdup(in[i]);
  return out;
}

int sandbox_prepare(const sandbox_spec *s, sandbox_prep *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  p->ruleset_fd = p->sock_child = p->sock_parent = -1;
  p->best_effort = s->best_effort;
  if (s->mode == SBX_FULL && !s->network_deny) return 0;
  int root = sandbox_can_unshare();
  p->landlock_abi = sandbox_landlock_abi();
  if (s->mode != SBX_FULL) {
    if (p->landlock_abi < 3 && !s->best_effort) {
      snprintf(err, errlen,
               "landlock: the kernel offers ABI %d; a read-only guarantee needs ABI 3 or later "
               "(truncate is not covered before it)", p->landlock_abi);
      return -1;
    }
    if (p->landlock_abi >= 1) {
      p->ruleset_fd = build_ruleset(s, p->landlock_abi, err, errlen);
      if (p->ruleset_fd < 0) return -1;
    }
    p->want_mountns = root;
    if (!root && s->nro > 0 && !s->best_effort) {
      snprintf(err, errlen, "mountns: keeping %s read-only inside a writable root needs a mount "
                            "namespace, which needs CAP_SYS_ADMIN (run as root, or best_effort)",
               s->ro_paths[0]);
      sandbox_prep_free(p);
      return -1;
    }
  }
  p->want_netns = root && s->network_deny;
  p->drop_caps = root;
  int notify = s->evidence_net || s->evidence_files;
  int sv[2];
  if (notify && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
    p->sock_parent = sv[0];
    p->sock_child = sv[1];
  }
  if ((notify && p->sock_child >= 0 &&
       build_filter(s, 1, p->want_netns, p->sock_child, &p->prog_notify) < 0) ||
      build_filter(s, 0, p->want_netns, -1, &p->prog_plain) < 0) {
    snprintf(err, errlen, "seccomp: cannot build the filter with libseccomp");
    sandbox_prep_free(p);
    return -1;
  }
  p->roots = copy_strings(s->roots, s->nroots);
  p->nroots = s->nroots;
  p->ro_paths = copy_strings(s->ro_paths, s->nro);
  p->nro = s->nro;
  return 0;
}

void sandbox_prep_free(sandbox_prep *p) {
  if (p->ruleset_fd >= 0) close(p->ruleset_fd);
  if (p->sock_child >= 0) close(p->sock_child);
  if (p->sock_parent >= 0) close(p->sock_parent);
  free(p->prog_notify.filter);
  free(p->prog_plain.filter);
  for (int i = 0; p->roots && i < p->nroots; i++) free(p->roots[i]);
  for (int i = 0; p->ro_paths && i < p->nro; i++) free(p->ro_paths[i]);
  free(p->roots);
  free(p->ro_paths);
  memset(p, 0, sizeof *p);
  p->ruleset_fd = p->sock_child = p->sock_parent = -1;
}

/* ---- child side: system calls only ---- */

static int mount_layer(sandbox_prep *p) {
  if (unshare(CLONE_NEWNS) < 0) return -1;
  /* private first: nothing done below may propagate to the host's mounts */
  if (syscall(SYS_mount, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return -1;
  int fds[64];
  int n = p->nroots < 64 ? p->nroots : 64;
  for (int i = 0; i < n; i++) {
    fds[i] = (int)syscall(SYS_open_tree, AT_FDCWD, p->roots[i],
                          OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC);
    if (fds[i] < 0) return -1;
  }
  struct mount_attr_v0 ro = {.attr_set = MOUNT_ATTR_RDONLY};
  if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) < 0) return -1;
  for (int i = 0; i < n; i++) {
    if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, p->roots[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return -1;
    close(fds[i]);
  }
  for (int i = 0; i < p->nro; i++) { /* .git: read-only again inside its writable root */
    int fd = (int)syscall(SYS_open_tree, AT_FDCWD, p->ro_paths[i],
                          OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC);
    if (fd < 0) return -1;
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof ro) < 0 ||
        syscall(SYS_move_mount, fd, "", AT_FDCWD, p->ro_paths[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return -1;
    close(fd);
  }
  return 0;
}

static int drop_capabilities(void) {
  for (int cap = 0; cap <= 63; cap++) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) return -1;
  }
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof d);
  if (syscall(SYS_capset, &h, d) < 0) return -1;
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  return 0;
}

static int send_fd(int sock, int fd) {
  char byte = 'L';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

int sandbox_child_apply(sandbox_prep *p, const char **stage) {
  if (p->want_mountns) {
    if (mount_layer(p) == 0) {
      p->mountns_ok = 1;
    } else if (!p->best_effort) {
      *stage = "sandbox mount namespace";
      return -1;
    } else {
      p->degraded_mountns = 1;
    }
  }
  if (p->want_netns) {
    if (unshare(CLONE_NEWNET) == 0) {
      p->netns_ok = 1;
    } else if (!p->best_effort) {
      *stage = "sandbox network namespace";
      return -1;
    } else {
      p->degraded_netns = 1;
    }
  }
  if (p->drop_caps) {
    if (drop_capabilities() < 0) {
      *stage = "sandbox capability drop";
      return -1;
    }
    p->caps_dropped = 1;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
    *stage = "sandbox no_new_privs";
    return -1;
  }
  if (p->ruleset_fd >= 0 && syscall(SYS_landlock_restrict_self, p->ruleset_fd, 0) < 0) {
    *stage = "sandbox landlock";
    return -1;
  }
  if (p->prog_notify.len > 0) {
    int listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                SECCOMP_FILTER_FLAG_NEW_LISTENER, &p->prog_notify);
    if (listener >= 0) {
      int sent = p->sock_child >= 0 && send_fd(p->sock_child, listener) == 0;
      close(listener);
      if (!sent) { /* the filter is in place but nobody can answer it: fail closed */
        *stage = "sandbox seccomp listener handoff";
        return -1;
      }
      p->got_listener = 1;
      return 0;
    }
    if (!p->best_effort) { /* EBUSY: already under another listener (nested) */
      *stage = "sandbox seccomp listener";
      return -1;
    }
    p->degraded_notify = 1;
  }
  if (p->prog_plain.len > 0 &&
      syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p->prog_plain) < 0) {
    *stage = "sandbox seccomp";
    return -1;
  }
  return 0;
}

int sandbox_take_listener(sandbox_prep *p) {
  if (!p->got_listener || p->sock_parent < 0) return -1;
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
  if (recvmsg(p->sock_parent, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1) return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (c == NULL || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}
