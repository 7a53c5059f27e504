/* sandbox_ns.c: the namespaces of a sandboxed child (child side, system calls only): the
 * mount layer that makes everything outside the writable roots read-only. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

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

struct mount_attr_v0 {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};

int sandbox_mount_layer(sandbox_prep *p) {
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
  /* git repositories, hooks and protected configuration read-only again; secrets masked */
  if (sandbox_paths_apply(p) < 0) return -1;
  return 0;
}
