/* sandbox_dev.c: a /dev of the sandbox's own, as bubblewrap's --dev makes: the harmless
 * devices bound from the host's, its own terminals (a read-only devpts instance: new terminals
 * are still made by the kernel through ptmx, none can be chmod'ed open to others, no other
 * session's or the host's exists there) and its own shared memory, and nothing else: no disk,
 * input device or console of the host, which root could otherwise read past every mask.
 *
 * What every session's /dev has alike (a read-only tmpfs with the device binds, the links and
 * the two directories) is made once per host when it runs as root, as a mount tree attached
 * nowhere (fsmount, and the devices moved onto it): the host holds it as a descriptor, nothing
 * else (it goes with the host's process), and no session can reach it. A policy's prepared
 * mount tree (sandbox_template.c) gets a clone of it, and each session mounts its own devpts
 * and /dev/shm on its copy of that tree: a few calls instead of some forty. Where a detached
 * copy cannot be cloned (kernels before 6.15) or the copy was not made (a normal user: the
 * session's mount namespace belongs to its own user namespace), the /dev of a prepared tree
 * (or of a session that builds its own) is built as the copy was built. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

/* The shared part, made on /dev: a tmpfs, the devices, the links, the empty pts and shm. */
static int dev_nodes(void) {
  static const char *const devs[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                                     "/dev/urandom", "/dev/tty",  NULL};
  static const char *const links[][2] = {
      {"pts/ptmx", "/dev/ptmx"},          {"/proc/self/fd", "/dev/fd"},
      {"/proc/self/fd/0", "/dev/stdin"},  {"/proc/self/fd/1", "/dev/stdout"},
      {"/proc/self/fd/2", "/dev/stderr"}, {NULL, NULL}};
  int fds[8];
  /* (the mount layer made every mount nodev, the host's /dev among them: its copies work) */
  struct mount_attr dev_attr = {.attr_clr = MOUNT_ATTR_NODEV};
  for (int i = 0; devs[i]; i++) {
    fds[i] = (int)syscall(SYS_open_tree, AT_FDCWD, devs[i], OPEN_TREE_CLONE | O_CLOEXEC);
    if (fds[i] < 0 && errno != ENOENT) return -1; /* (a device this machine lacks is none) */
    if (fds[i] >= 0 &&
        syscall(SYS_mount_setattr, fds[i], "", AT_EMPTY_PATH, &dev_attr, sizeof dev_attr) < 0)
      return -1;
  }
  if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0) return -1;
  for (int i = 0; devs[i]; i++) {
    if (fds[i] < 0) continue;
    int fd = open(devs[i], O_CREAT | O_WRONLY | O_CLOEXEC, 0666); /* the mount point */
    if (fd < 0) return -1;
    close(fd);
    if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, devs[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return -1;
    close(fds[i]);
  }
  for (int i = 0; links[i][0]; i++)
    if (symlink(links[i][0], links[i][1]) < 0) return -1;
  return mkdir("/dev/pts", 0755) < 0 || mkdir("/dev/shm", 01777) < 0 ? -1 : 0;
}

/* nothing more is made in /dev itself (its own mount only: pts and shm keep theirs) */
static int dev_read_only(void) {
  return mount("none", "/dev", "none", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
               NULL);
}

/* The session's own part: its terminals, and its POSIX shared memory and semaphores. */
int sandbox_dev_private(void) {
  if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC | MS_RDONLY,
            "newinstance,ptmxmode=0666,mode=0620") < 0)
    return -1;
  return mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
}

int sandbox_dev_shared(const sandbox_prep *p) {
  if (p->dev_template >= 0) {
    int tree = (int)syscall(SYS_open_tree, p->dev_template, "",
                            OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH | O_CLOEXEC);
    if (tree >= 0) {
      int rc = (int)syscall(SYS_move_mount, tree, "", AT_FDCWD, "/dev", MOVE_MOUNT_F_EMPTY_PATH);
      int e = errno;
      close(tree);
      errno = e;
      return rc;
    }
    if (errno != EINVAL) return -1; /* (EINVAL: this kernel clones no detached tree) */
  }
  /* (the session's devpts and /dev/shm are mounted on the read-only /dev's directories) */
  if (dev_nodes() < 0) return -1;
  return dev_read_only();
}

/* ---- host side: the shared part, once ---- */

static int template_build(void) {
  static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};
  static const char *const links[][2] = {
      {"pts/ptmx", "ptmx"},          {"/proc/self/fd", "fd"},       {"/proc/self/fd/0", "stdin"},
      {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}, {NULL, NULL}};
  int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) return -1;
  int d = -1;
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", "tmpfs", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0755", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "65536", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
    d = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
  close(fs);
  if (d < 0) return -1;
  /* each device bound read-only and private: nothing mounted on the host's reaches it */
  struct mount_attr dev_attr = {.attr_set = MOUNT_ATTR_RDONLY, .propagation = MS_PRIVATE};
  for (int i = 0; devs[i]; i++) {
    char path[32] = "/dev/";
    strcat(path, devs[i]);
    int t = (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | O_CLOEXEC);
    if (t < 0 && errno == ENOENT) continue; /* (a device this machine lacks is none) */
    int f = t < 0 ? -1 : openat(d, devs[i], O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    int ok = f >= 0 &&
             syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &dev_attr, sizeof dev_attr) == 0 &&
             syscall(SYS_move_mount, t, "", d, devs[i], MOVE_MOUNT_F_EMPTY_PATH) == 0;
    if (f >= 0) close(f);
    if (t >= 0) close(t);
    if (!ok) goto fail;
  }
  for (int i = 0; links[i][0]; i++)
    if (symlinkat(links[i][0], d, links[i][1]) < 0) goto fail;
  if (mkdirat(d, "pts", 0755) < 0 || mkdirat(d, "shm", 01777) < 0) goto fail;
  struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY}; /* (its own mount: devices are) */
  if (syscall(SYS_mount_setattr, d, "", AT_EMPTY_PATH, &ro, sizeof ro) < 0) goto fail;
  return d;
fail:
  close(d);
  return -1;
}

int sandbox_dev_template(void) {
  static int tried = 0, fd = -1;
  if (!tried) {
    tried = 1;
    int e = errno;
    fd = template_build();
    errno = e;
  }
  return fd;
}
