/* notify_create.c: calls that make a name (mkdir, mknod, symlink, link, rename, open with
 * O_CREAT), performed by the host. Judging the name and answering CONTINUE is no
 * enforcement: the kernel reads the path from the caller's memory again, and another thread
 * can change it in between (a name judged "x" becomes ".git"). So the host makes the call
 * itself, on the directory the walk reached (a descriptor in the sandbox's mount namespace:
 * its read-only mounts hold) with its own copy of the name, as the caller would: with the
 * caller's umask, without the host's capabilities (the sandboxed process has none), and
 * answers with the result; an opened file goes to the caller with SECCOMP_ADDFD. */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "notify_int.h"

static __thread int own_fs = -1; /* this thread has a umask of its own */

static int caller_umask(pid_t tid) {
  char path[48], buf[2048];
  snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char *u = strstr(buf, "\nUmask:");
  return u == NULL ? -1 : (int)strtol(u + 7, NULL, 8);
}

/* As the caller: its umask, no effective capability. 0, or -errno. */
int emu_begin(sbx_call *c, emu_state *s) {
  s->dropped = 0;
  if (own_fs < 0 && unshare(CLONE_FS) == 0) own_fs = 1;
  if (own_fs != 1) return -EPERM; /* (tried again at the next call) */
  int um = caller_umask((pid_t)c->req->pid);
  if (um < 0) return -ESRCH;
  umask((mode_t)um);
  return emu_drop_caps(s);
}

/* A thread's capabilities change only through emu_drop_caps and emu_end, which puts back what
 * it found: read once a thread. */
static _Thread_local struct __user_cap_data_struct own_caps[2];
static _Thread_local int own_caps_read;

int emu_drop_caps(emu_state *s) {
  s->dropped = 0;
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  if (!own_caps_read) {
    if (syscall(SYS_capget, &h, own_caps) < 0) return -errno;
    own_caps_read = 1;
  }
  memcpy(s->caps, own_caps, sizeof own_caps);
  if (s->caps[0].effective == 0 && s->caps[1].effective == 0) return 0;
  struct __user_cap_data_struct none[2];
  memcpy(none, s->caps, sizeof none);
  none[0].effective = none[1].effective = 0;
  if (syscall(SYS_capset, &h, none) < 0) return -errno;
  s->dropped = 1;
  return 0;
}

/* A serving thread done with a session: its directory (emu_bind_at's, in the session's
 * mount namespace, which it would keep in use) goes back to the host's root. */
void emu_thread_reset(void) {
  if (own_fs == 1) (void)!chdir("/");
}

void emu_end(emu_state *s) {
  if (!s->dropped) return;
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  syscall(SYS_capset, &h, s->caps);
  s->dropped = 0;
}

int emu_bind_at(int sock, int dirfd, const char *name) {
  struct sockaddr_un un;
  memset(&un, 0, sizeof un);
  un.sun_family = AF_UNIX;
  size_t n = strlen(name);
  if (n >= sizeof un.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(un.sun_path, name, n);
  if (own_fs != 1 || fchdir(dirfd) < 0) return -1; /* (emu_begin gave it its own cwd) */
  return bind(sock, (struct sockaddr *)&un,
              (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1));
}

/* Answer with rc (a syscall's result: -1 and errno, or 0). */
void emu_answer(sbx_call *c, int rc) {
  answer(c, rc < 0 ? errno : 0);
}

/* Hand the host's descriptor fd (closed here) to the caller as the call's result. */
void emu_give_fd(sbx_call *c, int fd, int cloexec) {
  struct seccomp_notif_addfd a;
  memset(&a, 0, sizeof a);
  a.id = c->req->id;
  a.flags = SECCOMP_ADDFD_FLAG_SEND;
  a.srcfd = (__u32)fd;
  a.newfd_flags = cloexec ? O_CLOEXEC : 0;
  int rc = ioctl(c->m->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
  int e = errno;
  close(fd);
  if (rc >= 0 || e == ENOENT) {
    c->handed_off = 1; /* answered (or the caller is gone) */
    return;
  }
  answer(c, e == EINPROGRESS ? EBADF : e); /* EMFILE: the caller's limit */
}

/* The caller's controlling terminal, opened again through one of its descriptors on it
 * (what its open of /dev/tty names); -1 with errno ENXIO when it has none there. Each
 * descriptor is looked at through one O_PATH open of it, and only that object is opened
 * again: the caller may swap what a number names between a look and an open (another
 * thread's dup2 of a fifo outside over it would have been opened for writing, by a host
 * that no Landlock rule binds). (The terminal is told by its number: a terminal of the same
 * number in another devpts instance that the caller holds would be taken for it; the
 * caller can only hold such a one if it was handed one.) */
static int caller_tty(pid_t tid, int flags) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0) close(fd);
  if (n <= 0) return errno = ENXIO, -1;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  unsigned long long tty = 0;
  if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %llu", &tty) != 1 || tty == 0)
    return errno = ENXIO, -1;
  int want = (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOCTTY | O_CLOEXEC;
  snprintf(path, sizeof path, "/proc/%d/fd", (int)tid);
  DIR *dir = opendir(path); /* (the descriptors it has, not every number there could be) */
  if (dir == NULL) return errno = ENXIO, -1;
  struct dirent *d;
  int e = ENXIO;
  fd = -1;
  while (fd < 0 && (d = readdir(dir)) != NULL) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    int opath = openat(dirfd(dir), d->d_name, O_PATH | O_CLOEXEC);
    if (opath < 0) continue;
    struct stat st;
    if (fstat(opath, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == (dev_t)tty) {
      char self[48];
      snprintf(self, sizeof self, "/proc/self/fd/%d", opath);
      fd = open(self, want);
      if (fd < 0) e = errno;
    }
    close(opath);
  }
  closedir(dir);
  return fd >= 0 ? fd : (errno = e, -1);
}

typedef struct pending_open {
  sbx_monitor *m;
  uint64_t id;
  int opath, flags;
} pending_open;

/* A fifo opened for writing waits for a reader: on a thread of its own, so the session's
 * other calls (the reader's among them) keep being served. It looks after 10 ms, then twice
 * as long each time up to a second: the host's work for a wait stays small however many
 * waits the session starts (a thousand waiting writers made the host, outside the session's
 * CPU limit, busy on both CPUs when each looked every 10 ms). */
static void fifo_wait(pending_open *po) {
  char self[48];
  snprintf(self, sizeof self, "/proc/self/fd/%d", po->opath);
  int want = (po->flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOCTTY | O_CLOEXEC | O_NONBLOCK;
  int fd;
  /* tried again until a reader comes or the caller is gone (a blocking open would outlive
   * a session whose processes were killed) */
  int wait_ms = 10;
  while ((fd = open(self, want)) < 0 && errno == ENXIO) {
    uint64_t id = po->id;
    if (ioctl(po->m->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0) break;
    poll(NULL, 0, wait_ms);
    wait_ms = wait_ms < 500 ? wait_ms * 2 : 1000;
  }
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = po->id;
  if (fd < 0) {
    resp.error = -errno;
    ioctl(po->m->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  } else {
    struct seccomp_notif_addfd a;
    memset(&a, 0, sizeof a);
    a.id = po->id;
    a.flags = SECCOMP_ADDFD_FLAG_SEND;
    a.srcfd = (__u32)fd;
    a.newfd_flags = (po->flags & O_CLOEXEC) ? O_CLOEXEC : 0;
    if (ioctl(po->m->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &a) < 0 && errno != ENOENT) {
      resp.error = -errno;
      ioctl(po->m->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
    close(fd);
  }
  close(po->opath);
}

static void *fifo_thread(void *arg) {
  pending_open *po = arg;
  fifo_wait(po);
  later_done(po->m);
  free(po);
  return NULL;
}

/* Open the existing object at (dirfd, name), or the object dirfd itself when name is NULL
 * (reached through a magic link), for an open with O_CREAT that found it; answered. */
void emu_open_existing(sbx_call *c, int dirfd, const char *name, int flags, const struct stat *st) {
  pid_t tid = (pid_t)c->req->pid;
  int cloexec = (flags & O_CLOEXEC) != 0;
  if (S_ISDIR(st->st_mode)) {
    answer(c, EISDIR);
    return;
  }
  if (S_ISSOCK(st->st_mode)) {
    answer(c, ENXIO);
    return;
  }
  if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(5, 0)) { /* /dev/tty: the caller's */
    int fd = caller_tty(tid, flags);
    if (fd < 0) {
      answer(c, errno);
      return;
    }
    {
      emu_give_fd(c, fd, cloexec);
      return;
    }
  }
  int opath = name == NULL ? fcntl(dirfd, F_DUPFD_CLOEXEC, 0)
                           : openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (opath < 0) {
    answer(c, errno);
    return;
  }
  char self[48];
  snprintf(self, sizeof self, "/proc/self/fd/%d", opath);
  int want = (flags & ~(O_CREAT | O_EXCL)) | O_NOCTTY | O_CLOEXEC;
  if (S_ISFIFO(st->st_mode) && !(flags & O_NONBLOCK)) {
    int fd = open(self, want | O_NONBLOCK);
    if (fd >= 0) { /* a reader (or a writer) is there: no wait */
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      close(opath);
      {
        emu_give_fd(c, fd, cloexec);
        return;
      }
    }
    if (errno != ENXIO) {
      int e = errno;
      close(opath);
      {
        answer(c, e);
        return;
      }
    }
    pending_open one = {.m = c->m, .id = c->req->id, .opath = opath, .flags = flags};
    pending_open *po = malloc(sizeof *po);
    if (po != NULL) {
      *po = one;
      if (later_thread(c->m, fifo_thread, po) == 0) {
        c->handed_off = 1;
        return;
      }
      free(po);
    }
    /* as many waits as a session may have: this one waits on the serving thread (the reader
     * of a fifo opens it for reading, a call that does not come here) */
    fifo_wait(&one);
    c->handed_off = 1; /* (answered) */
    return;
  }
  int fd = open(self, want);
  int e = errno;
  close(opath);
  if (fd < 0) {
    answer(c, e);
    return;
  }
  emu_give_fd(c, fd, cloexec);
}
