/* sandbox_filter.c: the seccomp filter of a sandboxed child, built with libseccomp in the
 * parent and exported as a BPF program the child installs. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

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

#define RULE(action, name, ...) rc |= seccomp_rule_add(ctx, action, SCMP_SYS(name), __VA_ARGS__)

/* The file calls the host judges (see notify_files.c, notify_meta.c): every call that
 * writes, makes, removes or renames a name, or changes a file's metadata, by path or by
 * descriptor; a unix socket's bind (it makes a file). Opens only with a write intent. */
static int file_rules(scmp_filter_ctx ctx) {
  const uint32_t n = SCMP_ACT_NOTIFY;
  int rc = 0;
  static const struct {
    const char *name;
    unsigned arg;
  } opens[] = {{"open", 1}, {"openat", 2}};
  for (int i = 0; i < 2; i++) {
    int nr = seccomp_syscall_resolve_name(opens[i].name);
    struct scmp_arg_cmp w = {opens[i].arg, SCMP_CMP_MASKED_EQ, O_ACCMODE, O_WRONLY};
    struct scmp_arg_cmp rw = {opens[i].arg, SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDWR};
    struct scmp_arg_cmp cr = {opens[i].arg, SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT};
    struct scmp_arg_cmp tr = {opens[i].arg, SCMP_CMP_MASKED_EQ, O_TRUNC, O_TRUNC};
    rc |= seccomp_rule_add_array(ctx, n, nr, 1, &w);
    rc |= seccomp_rule_add_array(ctx, n, nr, 1, &rw);
    rc |= seccomp_rule_add_array(ctx, n, nr, 1, &cr);
    rc |= seccomp_rule_add_array(ctx, n, nr, 1, &tr);
  }
  static const char *const calls[] = {
      "creat",       "mkdir",        "mkdirat",      "unlink",   "unlinkat",  "rmdir",
      "rename",      "renameat",     "renameat2",    "link",     "linkat",    "symlink",
      "symlinkat",   "truncate",     "mknod",        "mknodat",  "chmod",     "fchmodat",
      "fchmod",      "chown",        "lchown",       "fchownat", "fchown",    "utime",
      "utimes",      "futimesat",    "utimensat",    "setxattr", "lsetxattr", "fsetxattr",
      "removexattr", "lremovexattr", "fremovexattr", "bind",     NULL};
  for (int i = 0; calls[i]; i++) {
    int nr = seccomp_syscall_resolve_name(calls[i]);
    if (nr != __NR_SCMP_ERROR) rc |= seccomp_rule_add(ctx, n, nr, 0);
  }
  /* newer than this libseccomp: fchmodat2, setxattrat, removexattrat, file_setattr */
  static const int newer[] = {452, 463, 466, 469};
  for (size_t i = 0; i < sizeof newer / sizeof newer[0]; i++)
    rc |= seccomp_rule_add(ctx, n, newer[i], 0);
  /* chattr: the inode-flag, attribute and version setters (cmd is an int: compare its low
   * 32 bits only). Not the 32-bit variants: a 64-bit caller's file system answers those
   * ENOTTY (other ABIs are refused whole), and judging them here would record refusals the
   * kernel never made; nor fs-verity or encryption policies, which the file system answers
   * first (mostly EOPNOTSUPP). */
  static const uint64_t setflags[] = {FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR, FS_IOC_SETVERSION};
  for (size_t i = 0; i < sizeof setflags / sizeof setflags[0]; i++)
    RULE(n, ioctl, 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, setflags[i] & 0xffffffffu));
  return rc;
}

/* Without evidence: the calls that make a new name, for the host to refuse the reserved
 * ones (notify_files.c): a unix socket's bind too. Opens only with O_CREAT. */
static int create_rules(scmp_filter_ctx ctx) {
  const uint32_t n = SCMP_ACT_NOTIFY;
  int rc = 0;
  struct scmp_arg_cmp cr1 = {1, SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT};
  struct scmp_arg_cmp cr2 = {2, SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT};
  rc |= seccomp_rule_add_array(ctx, n, seccomp_syscall_resolve_name("open"), 1, &cr1);
  rc |= seccomp_rule_add_array(ctx, n, seccomp_syscall_resolve_name("openat"), 1, &cr2);
  static const char *const calls[] = {"creat",     "mkdir",   "mkdirat", "rename",  "renameat",
                                      "renameat2", "link",    "linkat",  "symlink", "symlinkat",
                                      "mknod",     "mknodat", "bind",    NULL};
  for (int i = 0; calls[i]; i++) {
    int nr = seccomp_syscall_resolve_name(calls[i]);
    if (nr != __NR_SCMP_ERROR) rc |= seccomp_rule_add(ctx, n, nr, 0);
  }
  return rc;
}

/* The filter: denials that never depend on memory the child controls (EPERM, never KILL),
 * and, with notify, the calls the host records as evidence. */
static int build_filter(const sandbox_spec *s, int notify, int netns, struct sock_fprog *out) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) return -1;
  /* with a listener, every policy denial goes through the host, which records it and
   * answers EPERM (the answer never depends on memory the child controls) */
  const uint32_t deny = notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM);
  int rc = 0;
  /* another architecture's system calls (int 0x80) would skip every rule below */
  rc |= seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, deny);
  rc |= seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); /* set by the child itself */
  /* a binary tree of system call numbers: every call pays a few comparisons, not one per
   * rule (a long filter costs the unnotified calls too) */
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  static const char *const denied[] = {"ptrace",
                                       "process_vm_writev",
                                       "bpf",
                                       "mount",
                                       "umount2",
                                       "fsopen",
                                       "fsconfig",
                                       "fsmount",
                                       "fspick",
                                       "move_mount",
                                       "open_tree",
                                       "mount_setattr",
                                       "pivot_root",
                                       "chroot",
                                       "keyctl",
                                       "add_key",
                                       "request_key",
                                       "setns",
                                       "io_uring_setup",
                                       "io_uring_enter",
                                       "io_uring_register",
                                       "kexec_load",
                                       "kexec_file_load",
                                       "init_module",
                                       "finit_module",
                                       "delete_module",
                                       "swapon",
                                       "swapoff",
                                       "reboot",
                                       "perf_event_open",
                                       "userfaultfd",
                                       "open_by_handle_at",
                                       "name_to_handle_at",
                                       "quotactl",
                                       "acct",
                                       "iopl",
                                       "ioperm",
                                       NULL};
  for (int i = 0; denied[i]; i++) {
    int nr = seccomp_syscall_resolve_name(denied[i]);
    if (nr != __NR_SCMP_ERROR) rc |= seccomp_rule_add(ctx, deny, nr, 0);
  }
  static const uint64_t ns_flags[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWNET,   CLONE_NEWPID,
                                      CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP};
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++)
    RULE(deny, clone, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
  RULE(SCMP_ACT_ERRNO(ENOSYS), clone3, 0); /* its flags are in memory: libc falls back */
  /* Memory no other process can read: an argument put there (a path) is read by the kernel
   * but not by the host judging the call. openat2's flags are in memory too: another thread
   * could turn O_RDONLY into O_CREAT between the host's read and the kernel's. As if the kernel
   * had neither (programs fall back to openat, whose flags the filter sees). */
  int secret = seccomp_syscall_resolve_name("memfd_secret");
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), secret != __NR_SCMP_ERROR ? secret : 447, 0);
  RULE(SCMP_ACT_ERRNO(ENOSYS), openat2, 0);
  /* unshare(CLONE_FILES) only: the launcher's last step before exec, and harmless */
  RULE(deny, unshare, 1, SCMP_A0(SCMP_CMP_NE, (uint64_t)CLONE_FILES));
  /* Typing into a terminal (TIOCSTI) or the console's selection (TIOCLINUX) reaches whoever
   * reads that terminal next, outside the sandbox. The kernel takes the request as 32 bits:
   * compare only those, or a request with high bits set would slip past. Refused in the
   * kernel, without a round trip to the host. */
  RULE(SCMP_ACT_ERRNO(EPERM), ioctl, 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, TIOCSTI));
  RULE(SCMP_ACT_ERRNO(EPERM), ioctl, 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, TIOCLINUX));
  /* A lease on a file outside (any file the caller owns, only read) makes the host's next
   * open of it for writing wait for the sandbox, or fail with O_NONBLOCK: refused everywhere
   * (a lease is a cache hint; programs do without). The command is an int: its 32 bits. */
  RULE(deny, fcntl, 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, F_SETLEASE));

  if (s->network_deny) {
    const uint32_t act = deny;
    if (netns) {
      /* inet sockets may exist in the empty network namespace; where they try to go is
       * evidence, and the namespace enforces whatever the memory says */
      /* every family but AF_UNIX (1), AF_INET (2) and AF_INET6 (10), in five comparisons
       * (one per family made the filter three times as long, and every session's kernel
       * converts and compiles all of it): 0, 3, 4-7, 8-9, and above 10 (which takes a value
       * with any of the upper 32 bits set too) */
      _Static_assert(AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10, "the families' numbers");
      RULE(act, socket, 1, SCMP_A0(SCMP_CMP_EQ, 0));
      RULE(act, socket, 1, SCMP_A0(SCMP_CMP_EQ, 3));
      RULE(act, socket, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, ~(uint64_t)3, 4));
      RULE(act, socket, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, ~(uint64_t)1, 8));
      RULE(act, socket, 1, SCMP_A0(SCMP_CMP_GT, (uint64_t)AF_INET6));
      if (notify) RULE(SCMP_ACT_NOTIFY, bind, 0);
    } else {
      RULE(act, socket, 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    }
    RULE(deny, socketpair, 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  }
  /* Where a call may reach a socket: the host judges it (notify_net.c, notify_unix.c). With
   * the empty network namespace that is evidence for inet addresses; in the restricted modes
   * it is also the enforcement for AF_UNIX, whose pathname sockets no namespace or Landlock
   * rule covers: the host makes every connect, sendmsg, sendmmsg and sendto with an address
   * itself, on its own copy of the address (notify_send.c). sendto without an address (a
   * register: not raceable) sends only to the connected peer and needs no look. */
  int net_evidence = notify && s->network_deny && netns;
  if (net_evidence || (notify && s->mode != SBX_FULL)) {
    RULE(SCMP_ACT_NOTIFY, connect, 0);
    RULE(SCMP_ACT_NOTIFY, sendmsg, 0);
    RULE(SCMP_ACT_NOTIFY, sendmmsg, 0);
    if (net_evidence)
      RULE(SCMP_ACT_NOTIFY, sendto, 0);
    else
      RULE(SCMP_ACT_NOTIFY, sendto, 1, SCMP_A4(SCMP_CMP_NE, 0));
  }
  /* chmod to a set-user-ID or set-group-ID mode (the mode is a register): the host judges it
   * (notify_meta.c) with evidence or without, so that both give the kernel's own failures
   * first (no such file, EBADF) and the same refusal; only without a listener does the filter
   * refuse it */
  if (s->mode != SBX_FULL && !(notify && s->evidence_files)) {
    static const struct {
      int nr;
      unsigned arg;
    } chmods[] = {{SCMP_SYS(chmod), 1},
                  {SCMP_SYS(fchmod), 1},
                  {SCMP_SYS(fchmodat), 2},
                  {452 /* fchmodat2 */, 2}};
    for (size_t i = 0; i < sizeof chmods / sizeof chmods[0]; i++) {
      for (uint64_t bit = S_ISGID; bit <= S_ISUID; bit <<= 1) {
        struct scmp_arg_cmp m = {chmods[i].arg, SCMP_CMP_MASKED_EQ, bit, bit};
        rc |= seccomp_rule_add_array(ctx, notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM),
                                     chmods[i].nr, 1, &m);
      }
    }
  }
  /* A file made with a set-id mode (a register too): an open with O_CREAT or O_TMPFILE (an
   * unnamed file, whose bits the kernel keeps for the linkat that names it later), creat,
   * mknod. With a listener the host makes it without the bits (notify_files.c); without
   * one, refused. (An open's mode means nothing without those flags: only with them.) */
  if (s->mode != SBX_FULL) {
    const uint32_t act = notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM);
    static const struct {
      int nr;
      int flags_arg; /* -1: the call always makes a file */
      unsigned mode_arg;
    } makes[] = {{SCMP_SYS(open), 1, 2},
                 {SCMP_SYS(openat), 2, 3},
                 {SCMP_SYS(creat), -1, 1},
                 {SCMP_SYS(mknod), -1, 1},
                 {SCMP_SYS(mknodat), -1, 2}};
    static const uint64_t make_flags[] = {O_CREAT, 020000000 /* __O_TMPFILE */};
    for (size_t i = 0; i < sizeof makes / sizeof makes[0]; i++) {
      for (uint64_t bit = S_ISGID; bit <= S_ISUID; bit <<= 1) {
        struct scmp_arg_cmp m[2] = {{makes[i].mode_arg, SCMP_CMP_MASKED_EQ, bit, bit}};
        if (makes[i].flags_arg < 0) {
          rc |= seccomp_rule_add_array(ctx, act, makes[i].nr, 1, m);
          continue;
        }
        for (size_t f = 0; f < sizeof make_flags / sizeof make_flags[0]; f++) {
          m[1] = (struct scmp_arg_cmp){(unsigned)makes[i].flags_arg, SCMP_CMP_MASKED_EQ,
                                       make_flags[f], make_flags[f]};
          rc |= seccomp_rule_add_array(ctx, act, makes[i].nr, 2, m);
        }
      }
    }
  }
  if (notify && s->evidence_files && s->mode != SBX_FULL)
    rc |= file_rules(ctx);
  else if (notify && s->nreserved > 0 && s->mode != SBX_FULL)
    rc |= create_rules(ctx);
  if (rc == 0) rc = export_bpf(ctx, out);
  seccomp_release(ctx);
  return rc == 0 ? 0 : -1;
}

/* Building a filter with libseccomp costs about half a millisecond, as much as the rest of a
 * spawn; it depends only on these few flags (no path), so each is built once per host. */
int sandbox_build_filter(const sandbox_spec *s, int notify, int netns, struct sock_fprog *out) {
  static struct {
    unsigned key;
    struct sock_fprog prog;
  } cache[64];
  static int ncache = 0;
  unsigned key = (unsigned)(s->mode == SBX_FULL) | (unsigned)(s->network_deny != 0) << 1 |
                 (unsigned)(s->evidence_files != 0) << 2 | (unsigned)(notify != 0) << 3 |
                 (unsigned)(netns != 0) << 4 | (unsigned)(s->nreserved > 0) << 5;
  for (int i = 0; i < ncache; i++) {
    if (cache[i].key == key) {
      *out = cache[i].prog;
      return 0;
    }
  }
  if (build_filter(s, notify, netns, out) < 0) return -1;
  if (ncache < (int)(sizeof cache / sizeof cache[0])) {
    cache[ncache].key = key;
    cache[ncache++].prog = *out;
  }
  return 0;
}
