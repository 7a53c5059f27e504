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
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FLAG_WAIT_KILLABLE_RECV (1UL << 5) /* SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV */

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

struct ruleset_attr { /* the ABI 6 layout; older kernels get a prefix of it */
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

/* The kernel's Landlock ABI does not change while the host runs: asked once. */
int sandbox_landlock_abi(void) {
  static int abi = -1;
  if (abi < 0) {
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    abi = v < 0 ? 0 : (int)v;
  }
  return abi;
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

/* A rule on a file may carry only file rights. */
static uint64_t rights_for(int fd, uint64_t access) {
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
    access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
              LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | ACCESS_FS_IOCTL_DEV;
  return access;
}

static int add_fd_rule(int ruleset, int fd, uint64_t access) {
  struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
  return (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
}

static int add_path_rule(int ruleset, const char *path, uint64_t access) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : -1; /* a device this machine lacks is no error */
  int rc = add_fd_rule(ruleset, fd, rights_for(fd, access));
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
  struct {
    const char *path;
    uint64_t access;
  } fixed[] = {
      {"/",
       LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR},
      {"/dev/null", rw_dev | ioctl},
      {"/dev/zero", rw_dev | ioctl},
      {"/dev/full", rw_dev | ioctl},
      {"/dev/random", rw_dev | ioctl}, /* (RNDGETENTCNT; the rest want CAP_SYS_ADMIN) */
      {"/dev/urandom", rw_dev | ioctl},
      {"/dev/tty", rw_dev | ioctl},
      {"/dev/ptmx", rw_dev | ioctl},
      {"/dev/pts", rw_dev | ioctl},
  };
  /* The system's own paths are opened once for the host's life (a rule names an inode: one
   * replaced since is only left out, never widened). -2: not opened yet, -1: missing. Each
   * is checked to be what was opened (one fstat, where a new open costs three calls): a
   * descriptor number closed by mistake elsewhere in the host and given to another file must
   * not carry the rule to that file. */
  enum { NFIXED = sizeof fixed / sizeof fixed[0] };
  static int fixed_fd[NFIXED] = {[0 ... NFIXED - 1] = -2};
  static uint64_t fixed_access[NFIXED];
  static struct stat fixed_st[NFIXED];
  for (size_t i = 0; i < NFIXED; i++) {
    struct stat now;
    if (fixed_fd[i] >= 0 &&
        (fstat(fixed_fd[i], &now) < 0 || now.st_dev != fixed_st[i].st_dev ||
         now.st_ino != fixed_st[i].st_ino || now.st_mode != fixed_st[i].st_mode))
      fixed_fd[i] = -2; /* (not closed: the number is no longer this code's) */
    if (fixed_fd[i] == -2) {
      int fd = open(fixed[i].path, O_PATH | O_CLOEXEC);
      if (fd < 0 && errno != ENOENT) { /* (a device this machine lacks is no error) */
        snprintf(err, errlen, "landlock: rule for %s: %s", fixed[i].path, strerror(errno));
        close(rs);
        return -1;
      }
      if (fd >= 0 && fstat(fd, &fixed_st[i]) < 0) {
        snprintf(err, errlen, "landlock: rule for %s: %s", fixed[i].path, strerror(errno));
        close(fd);
        close(rs);
        return -1;
      }
      if (fd >= 0) fixed_access[i] = rights_for(fd, fixed[i].access);
      fixed_fd[i] = fd < 0 ? -1 : fd;
    }
    if (fixed_fd[i] >= 0 && add_fd_rule(rs, fixed_fd[i], fixed_access[i]) < 0) {
      snprintf(err, errlen, "landlock: rule for %s: %s", fixed[i].path, strerror(errno));
      close(rs);
      return -1;
    }
  }
  /* never MAKE_CHAR or MAKE_BLOCK: a device node made in a root would bypass everything */
  uint64_t root_access = all & ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK);
  /* network by name: the proxy, and the transparent path's ports (every address is local) */
  uint64_t net_ports[] = {(uint64_t)s->proxy_port, 443, 80};
  for (int i = 0; attr.handled_access_net && s->proxy_port > 0 && i < 3; i++) {
    struct {
      uint64_t allowed_access, port;
    } np = {ACCESS_NET_CONNECT_TCP, net_ports[i]};
    if (syscall(SYS_landlock_add_rule, rs, 2 /* LANDLOCK_RULE_NET_PORT */, &np, 0) < 0) {
      snprintf(err, errlen, "landlock: rule for the proxy's port: %s", strerror(errno));
      close(rs);
      return -1;
    }
  }
  for (int i = 0; i < s->nroots; i++) {
    if (add_path_rule(rs, s->roots[i], root_access) < 0) {
      snprintf(err, errlen, "landlock: rule for root %s: %s", s->roots[i], strerror(errno));
      close(rs);
      return -1;
    }
  }
  return rs;
}

/* The bounding set has this many entries to drop (a prctl each in the child). */
static int last_cap(void) {
  static int last = -1;
  if (last < 0) {
    char buf[16] = "";
    int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0) close(fd);
    last = n > 0 ? atoi(buf) : 63;
    if (last <= 0 || last > 63) last = 63;
  }
  return last;
}

static int prepare(const sandbox_spec *s, sandbox_prep *p, char *err, size_t errlen);

static char **copy_strings(const char **in, int n) {
  char **out = calloc((size_t)n + 1, sizeof(char *));
  for (int i = 0; out != NULL && i < n; i++) out[i] = strdup(in[i]);
  return out;
}

void sandbox_stamp(sandbox_prep *p, int i) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  p->t_ns[i] = (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

int sandbox_prepare(const sandbox_spec *s, sandbox_prep *p, char *err, size_t errlen) {
  sandbox_prep_init(p);
  sandbox_stamp(p, SBX_T_PREPARE);
  int rc = prepare(s, p, err, errlen);
  sandbox_stamp(p, SBX_T_PREPARED);
  return rc;
}

static int prepare(const sandbox_spec *s, sandbox_prep *p, char *err, size_t errlen) {
  p->best_effort = s->best_effort;
  p->mount_key = s->mount_key;
  if (s->mode == SBX_FULL && !s->network_deny) return 0;
  int root = sandbox_can_unshare();
  p->landlock_abi = sandbox_landlock_abi();
  if (s->mode != SBX_FULL) {
    if (p->landlock_abi < 3 && !s->best_effort) {
      snprintf(err, errlen,
               "landlock: the kernel offers ABI %d; a read-only guarantee needs ABI 3 or later "
               "(truncate is not covered before it)",
               p->landlock_abi);
      return -1;
    }
    if (p->landlock_abi >= 1) {
      p->ruleset_fd = build_ruleset(s, p->landlock_abi, err, errlen);
      if (p->ruleset_fd < 0) return -1;
    }
  }
  /* Containment: the restricted modes get their own mount, pid and IPC namespaces; a denied
   * network its own empty network namespace. Without CAP_SYS_ADMIN they come through a user
   * namespace; where none can be made, spawning fails naming why (or, best effort, runs with
   * Landlock and seccomp alone and says so). */
  int contain = s->mode != SBX_FULL;
  p->want_mountns = p->want_pidns = p->want_ipcns = contain;
  p->want_netns = s->network_deny;
  p->uid = (unsigned)getuid();
  p->gid = (unsigned)getgid();
  if (!root) {
    char why[320];
    if (sandbox_userns_probe(why, sizeof why) == 0) {
      p->want_userns = 1;
    } else if (!s->best_effort) {
      snprintf(err, errlen,
               "userns: %s; the sandbox's mount, pid, IPC and network namespaces "
               "need it when luxec does not run as root (or set best_effort)",
               why);
      sandbox_prep_free(p);
      return -1;
    } else {
      p->want_mountns = p->want_pidns = p->want_ipcns = p->want_netns = 0;
      p->degraded_ns = 1;
    }
  }
  if (s->proxy_port > 0) { /* network by name: the proxy is the only way out of a netns */
    if (!p->want_netns) {
      snprintf(err, errlen,
               "network by name needs a network namespace, and none can be made "
               "here (best_effort does not apply: the network would be open)");
      sandbox_prep_free(p);
      return -1;
    }
    p->proxy_port = s->proxy_port;
  }
  p->drop_caps = root || p->want_userns;
  p->last_cap = last_cap();
  p->evidence_files = s->evidence_files;
  /* a listener in the restricted modes even without evidence: AF_UNIX calls are judged there */
  int notify = s->evidence_net || s->evidence_files || s->mode != SBX_FULL;
  if ((notify && sandbox_build_filter(s, 1, p->want_netns, &p->prog_notify) < 0) ||
      sandbox_build_filter(s, 0, p->want_netns, &p->prog_plain) < 0) {
    snprintf(err, errlen, "seccomp: cannot build the filter with libseccomp");
    sandbox_prep_free(p);
    return -1;
  }
  p->roots = copy_strings(s->roots, s->nroots);
  p->nroots = s->nroots;
  for (int i = 0; i < s->nroots; i++) p->shm_root |= strcmp(s->roots[i], "/dev/shm") == 0;
  p->unix_sockets = copy_strings(s->unix_sockets, s->nunix);
  p->nunix = p->unix_sockets ? s->nunix : 0;
  p->unix_ids = p->nunix > 0 ? calloc((size_t)p->nunix, sizeof *p->unix_ids) : NULL;
  for (int i = 0; p->unix_ids && i < p->nunix; i++) {
    struct stat st;
    if (stat(p->unix_sockets[i], &st) == 0 && S_ISSOCK(st.st_mode)) {
      p->unix_ids[i][0] = (unsigned long long)st.st_dev;
      p->unix_ids[i][1] = (unsigned long long)st.st_ino;
    }
  }
  if (p->nunix > 0 && p->unix_ids == NULL) {
    snprintf(err, errlen, "out of memory");
    sandbox_prep_free(p);
    return -1;
  }
  if (sandbox_paths_prepare(s, p, err, errlen) < 0) {
    sandbox_prep_free(p);
    return -1;
  }
  return 0;
}

void sandbox_prep_free(sandbox_prep *p) {
  if (p->ruleset_fd >= 0) close(p->ruleset_fd);
  if (p->got_listener && p->listener_fd >= 0) close(p->listener_fd); /* a failed launch's */
  if (p->diag_fd >= 0) close(p->diag_fd);
  if (p->netns_fd >= 0) close(p->netns_fd);
  if (p->userns_fd >= 0) close(p->userns_fd);
  if (p->mnt_made >= 0) close(p->mnt_made);
  if (p->proxy_fd >= 0) close(p->proxy_fd);
  sandbox_proxy_close(p->transp_fd);
  for (int i = 0; i < p->nunix; i++) free(p->unix_sockets[i]);
  free(p->unix_sockets);
  free(p->unix_ids);
  /* (the filters belong to sandbox_filter.c's cache) */
  for (int i = 0; p->roots && i < p->nroots; i++) free(p->roots[i]);
  sandbox_paths_free(p);
  free(p->roots);
  sandbox_prep_init(p);
}

void sandbox_prep_init(sandbox_prep *p) {
  memset(p, 0, sizeof *p);
  p->ruleset_fd = p->listener_fd = p->diag_fd = p->proxy_fd = -1; /* (0: the host's stdin) */
  p->netns_fd = p->userns_fd = p->dev_template = -1;
  p->mnt_template = p->mnt_made = -1;
  for (int i = 0; i < SBX_TRANSP_N; i++) p->transp_fd[i] = -1;
}

/* ---- child side: system calls only ---- */

static int drop_capabilities(int last) {
  for (int cap = 0; cap <= last; cap++) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) return -1;
  }
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof d);
  if (syscall(SYS_capset, &h, d) < 0) return -1;
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  return 0;
}

/* Landlock skips a mount point that something is mounted over and rules belong to inodes:
 * the host's /dev/pts, /dev/ptmx and /dev/shm rules do not reach the sandbox's own devpts and
 * /dev/shm mounted over them. Added here, inside the mount namespace, before restrict_self. */
static int namespace_rules(sandbox_prep *p) {
  uint64_t dev = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                 (p->landlock_abi >= 5 ? ACCESS_FS_IOCTL_DEV : 0);
  if (add_path_rule(p->ruleset_fd, "/dev/pts", dev) < 0 ||
      add_path_rule(p->ruleset_fd, "/dev/ptmx", dev) < 0)
    return -1;
  uint64_t root_access =
      fs_rights(p->landlock_abi) & ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK);
  if (p->shm_root && add_path_rule(p->ruleset_fd, "/dev/shm", root_access) < 0) return -1;
  return 0;
}

int sandbox_child_apply(sandbox_prep *p, const char **stage) {
  sandbox_stamp(p, SBX_T_CHILD);
  /* the first process of the new pid namespace: its /proc shows that namespace only */
  if (p->pidns_ok &&
      mount("proc", "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
    *stage = "sandbox /proc";
    return -1;
  }
  sandbox_stamp(p, SBX_T_PROC);
  if (p->mountns_ok && p->ruleset_fd >= 0 && namespace_rules(p) < 0) {
    *stage = "sandbox landlock rules";
    return -1;
  }
  if (p->drop_caps) {
    if (drop_capabilities(p->last_cap) < 0) {
      *stage = "sandbox capability drop";
      return -1;
    }
    p->caps_dropped = 1;
  }
  sandbox_stamp(p, SBX_T_CAPS);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
    *stage = "sandbox no_new_privs";
    return -1;
  }
  if (p->ruleset_fd >= 0 && syscall(SYS_landlock_restrict_self, p->ruleset_fd, 0) < 0) {
    *stage = "sandbox landlock";
    return -1;
  }
  sandbox_stamp(p, SBX_T_LANDLOCK);
  if (p->prog_notify.len > 0) {
    /* A call the host took up is ended by its answer or by a fatal signal only (5.19): a
     * handled signal that cut it short would leave the caller not knowing what the host did
     * for it meanwhile (part of a stream sent, say), and its call made again would do it
     * twice. Older kernels take the listener without it. */
    int listener =
        (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                     SECCOMP_FILTER_FLAG_NEW_LISTENER | FLAG_WAIT_KILLABLE_RECV, &p->prog_notify);
    p->listener_killable = listener >= 0;
    if (listener < 0 && errno == EINVAL)
      listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                              SECCOMP_FILTER_FLAG_NEW_LISTENER, &p->prog_notify);
    if (listener >= 0) { /* in the host's descriptor table, shared until the launch ends */
      p->listener_fd = listener;
      p->got_listener = 1;
      sandbox_stamp(p, SBX_T_SECCOMP);
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
  sandbox_stamp(p, SBX_T_SECCOMP);
  return 0;
}

int sandbox_take_listener(sandbox_prep *p) {
  if (!p->got_listener) return -1;
  int fd = p->listener_fd;
  p->got_listener = 0;
  p->listener_fd = -1;
  return fd;
}
