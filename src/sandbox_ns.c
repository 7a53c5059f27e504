/* sandbox_ns.c: the namespaces of a sandboxed session, made by the launcher's setup child
 * (system calls only: it shares memory with the suspended host). A user namespace first when
 * the host is not root (the other namespaces then belong to it, as with bubblewrap), then
 * mount, pid, IPC and network namespaces, and the mount layer: everything outside the
 * writable roots read-only, and a /dev of its own (the harmless devices, a private devpts
 * instance, a private /dev/shm). The mount layer is built once per resolved policy, in a
 * namespace each later session copies whole (sandbox_template.c); a session then mounts only
 * its own devpts and /dev/shm. The fresh /proc is mounted by the program's process, the first
 * one inside the new pid namespace (sandbox.c). */
#include "sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <linux/netlink.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef MOUNT_ATTR_NODEV
#define MOUNT_ATTR_NODEV 0x00000004
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

struct mount_attr_v0 {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};

static int mount_layer(sandbox_prep *p) {
  /* private first: nothing done below may propagate to the host's mounts */
  if (syscall(SYS_mount, "none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0) return -1;
  /* No device node works outside the sandbox's own /dev (sandbox_dev.c): one that root put
   * in a writable root (a kernel log, a disk) would be written or read through it. */
  int fds[64];
  int n = p->nroots < 64 ? p->nroots : 64;
  struct mount_attr_v0 nodev = {.attr_set = MOUNT_ATTR_NODEV};
  for (int i = 0; i < n; i++) {
    fds[i] = (int)syscall(SYS_open_tree, AT_FDCWD, p->roots[i],
                          OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC);
    if (fds[i] < 0 || syscall(SYS_mount_setattr, fds[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &nodev,
                              sizeof nodev) < 0)
      return -1;
  }
  struct mount_attr_v0 ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV};
  if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) < 0) return -1;
  for (int i = 0; i < n; i++) {
    if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, p->roots[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return -1;
    close(fds[i]);
  }
  /* git repositories, hooks and protected configuration read-only again; secrets masked */
  if (sandbox_paths_apply(p) < 0) return -1;
  return 0;
}

/* The policy's mount tree in a mount namespace of its own, left in p->mnt_made for the host
 * (the setup child shares its descriptor table); the caller is then still in it. */
static int template_make(sandbox_prep *p) {
  if (unshare(CLONE_NEWNS) < 0 || mount_layer(p) < 0 || sandbox_dev_shared(p) < 0) return -1;
  int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  p->mnt_made = fd;
  return 0;
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  int e = errno;
  close(fd);
  errno = e;
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The host's uid and gid mapped to themselves: files keep their owners, and nothing else of
 * the host's ids exists inside (unmapped owners show as the overflow id). */
static int userns_layer(sandbox_prep *p) {
  if (unshare(CLONE_NEWUSER) < 0) return -1;
  char map[64];
  if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT) return -1;
  snprintf(map, sizeof map, "%u %u 1\n", p->uid, p->uid);
  if (write_file("/proc/self/uid_map", map) < 0) return -1;
  snprintf(map, sizeof map, "%u %u 1\n", p->gid, p->gid);
  if (write_file("/proc/self/gid_map", map) < 0) return -1;
  return 0;
}

int sandbox_ns_setup(sandbox_prep *p, const char **stage) {
  sandbox_stamp(p, SBX_T_SETUP);
  if (p->want_userns) {
    /* one made ahead with its network namespace (sandbox_netpool.c), or one of its own */
    if (p->userns_fd >= 0 ? setns(p->userns_fd, CLONE_NEWUSER) < 0 : userns_layer(p) < 0) {
      *stage = p->userns_fd >= 0 ? "sandbox user namespace (made ahead)" : "sandbox user namespace";
      return -1;
    }
    p->userns_ok = 1;
    sandbox_stamp(p, SBX_T_USERNS);
  }
  /* the network namespace apart from the others (the same result): its cost is its own. One
   * made ahead, or one an ended session left as new, is joined (one session at a time:
   * sandbox_netpool.c); a failure to join it fails the spawn, as a failure to make one does. */
  if (p->want_netns && p->netns_fd >= 0 && setns(p->netns_fd, CLONE_NEWNET) < 0) {
    *stage = "sandbox network namespace (made ahead)";
    return -1;
  }
  if (p->want_netns && p->netns_fd < 0 && unshare(CLONE_NEWNET) < 0) {
    *stage = "sandbox namespaces";
    return -1;
  }
  p->netns_ok = p->want_netns;
  /* the host's way to see which unix sockets were made inside (notify_unix.c) */
  if (p->want_netns && p->diag_fd < 0) /* (one made with a namespace made ahead is there) */
    p->diag_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (p->want_netns && p->proxy_port > 0 && sandbox_proxy_listen(p) < 0) {
    *stage = "sandbox network proxy";
    return -1;
  }
  if (p->want_netns) sandbox_stamp(p, SBX_T_NETNS);
  /* a mount tree prepared for the policy: joined, then copied whole by the unshare below;
   * or prepared now, in a mount namespace of its own, for the next launches */
  int copy = 0;
  if (p->want_mountns && p->mnt_template >= 0 && setns(p->mnt_template, CLONE_NEWNS) == 0) {
    copy = 1;
  } else if (p->want_mountns && p->mnt_template >= 0) {
    p->mnt_bad = 1; /* (nothing changed: this launch builds its own; the host drops it) */
  } else if (p->want_mountns && p->mnt_make) {
    if (template_make(p) < 0) {
      *stage = "sandbox mount namespace";
      return -1;
    }
    copy = 1;
  }
  int flags = (p->want_mountns ? CLONE_NEWNS : 0) | (p->want_pidns ? CLONE_NEWPID : 0) |
              (p->want_ipcns ? CLONE_NEWIPC : 0);
  if (flags != 0 && unshare(flags) < 0) {
    *stage = "sandbox namespaces";
    return -1;
  }
  p->pidns_ok = p->want_pidns;
  p->ipcns_ok = p->want_ipcns;
  if (flags != 0) sandbox_stamp(p, SBX_T_NS);
  if (p->want_mountns) {
    if (!copy && mount_layer(p) < 0) {
      *stage = "sandbox mount namespace";
      return -1;
    }
    p->mnt_copied = copy && !p->mnt_make; /* (not the launch that prepared it) */
    sandbox_stamp(p, SBX_T_MOUNTS);
    if ((!copy && sandbox_dev_shared(p) < 0) || sandbox_dev_private() < 0) {
      *stage = "sandbox /dev";
      return -1;
    }
    p->mountns_ok = 1;
    sandbox_stamp(p, SBX_T_DEV);
  }
  return 0;
}

int sandbox_contains(const sandbox_prep *p) {
  return p->want_userns || p->want_mountns || p->want_pidns || p->want_ipcns || p->want_netns;
}

/* ---- parent side: can a normal user make the namespaces here? ---- */

typedef struct probe_ctx {
  sandbox_prep prep;
  volatile int err;
  volatile const char *stage;
} probe_ctx;

static int probe_main(void *arg) {
  probe_ctx *c = arg;
  const char *stage = "";
  setsid(); /* (see setup_main in launch_ns.c) */
  if (sandbox_ns_setup(&c->prep, &stage) < 0) {
    c->err = errno ? errno : EIO;
    c->stage = stage;
  } else if (mount("tmpfs", "/tmp", "tmpfs", 0, "size=4k") < 0) { /* a mount works inside */
    c->err = errno;
    c->stage = "sandbox mount namespace";
  }
  _exit(0);
}

/* Tried once per host, exactly as a spawn would (a child makes a user namespace, maps the ids,
 * makes the other namespaces and mounts): what the probe finds is what a spawn will find. */
int sandbox_userns_probe(char *why, size_t size) {
  static int done = 0, result = 0;
  static char reason[320];
  if (!done) {
    static char stack[32 * 1024];
    probe_ctx c;
    memset(&c, 0, sizeof c);
    c.prep.want_userns = c.prep.want_mountns = c.prep.want_pidns = c.prep.want_ipcns = 1;
    c.prep.want_netns = 1;
    c.prep.netns_fd = c.prep.userns_fd = c.prep.dev_template = -1; /* (made here) */
    c.prep.mnt_template = c.prep.mnt_made = -1;
    c.prep.uid = (unsigned)getuid();
    c.prep.gid = (unsigned)getgid();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = clone(probe_main, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
      c.err = e;
      c.stage = "clone";
    } else {
      while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
      }
    }
    if (c.err != 0) {
      snprintf(reason, sizeof reason, "%s failed: %s", c.stage, strerror(c.err));
      if (c.err == EPERM || c.err == ENOSPC || c.err == EINVAL) {
        size_t n = strlen(reason);
        snprintf(reason + n, sizeof reason - n,
                 " (unprivileged user namespaces are off here: "
                 "see user.max_user_namespaces, kernel.unprivileged_userns_clone, "
                 "kernel.apparmor_restrict_unprivileged_userns)");
      }
      result = -1;
    }
    done = 1;
  }
  if (why != NULL) snprintf(why, size, "%s", reason);
  return result;
}
