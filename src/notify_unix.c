/* notify_unix.c: AF_UNIX calls of a sandboxed session, judged and performed by the host.
 *
 * No namespace and no Landlock rule (ABI <= 7) covers connecting to a pathname socket: a
 * host daemon's socket file (docker.sock, a tmux socket in /tmp, ssh-agent) would take
 * commands from inside. Checking the address and answering CONTINUE is no enforcement: the
 * target can change its memory between the host's read and the kernel's. So the host does
 * the call itself, on the target's own socket (pidfd_getfd) and its own copy of the address:
 *   - a pathname is resolved as the target sees it (its root and working directory, through
 *     /proc/<tid>/root with RESOLVE_IN_ROOT) to an O_PATH descriptor, and the connect goes to
 *     exactly that inode ("/proc/self/fd/N"), so no rename or symlink swap can redirect it;
 *   - it is allowed when the socket bound there belongs to the sandbox: found by sock_diag in
 *     the sandbox's own network namespace (only its processes make sockets there), or, when
 *     the sandbox shares the host's network, held by one of the sandbox's processes; or when
 *     the policy names the path (unix_sockets);
 *   - abstract names resolve in the socket's network namespace: the sandbox's own when the
 *     network is denied; otherwise judged like a pathname.
 * A datagram with an address (sendto, sendmsg, sendmmsg on a SOCK_DGRAM socket) is sent by
 * the host the same way, with the data copied out of the target. A stream or seqpacket socket
 * ignores the address of sendmsg, so those go through untouched. */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify_int.h"
#include "procfs.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

#define MAX_DGRAM (256 * 1024) /* more than a unix datagram can carry (wmem_max) */
#define MAX_IOV 64

/* The target's descriptor, duplicated into the host, or -1. */
int unix_target_fd(pid_t tid, int fd) {
  int pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
  if (pidfd < 0) { /* before 6.9 only a thread group leader: the table is shared anyway */
    pid_t tgid = pfs_tgid(tid);
    if (tgid <= 0) {
      errno = ESRCH;
      return -1;
    }
    pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
    if (pidfd < 0) return -1;
  }
  int dup = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
  int e = errno;
  close(pidfd);
  errno = e;
  return dup;
}

/* ---- where a pathname leads, as the target sees it ---- */

/* An O_PATH descriptor of the file path names for the target, or -1 with errno (ENOENT and the
 * like are the kernel's own answers; EACCES when it cannot be told). out: the path, absolute
 * in the target's view, for the record. */
static int resolve_target(pid_t tid, const char *path, char *out, size_t size) {
  char link[64], base[PATH_MAX];
  if (path[0] == '/') {
    /* the task's /proc/self is itself: from here that link names nobody (the host is not in
     * its pid namespace), so it is spelled out; what lies beyond (root, cwd, fd/N) are magic
     * links, which are refused below */
    const char *rest = NULL;
    const char *field = NULL;
    if (strncmp(path, "/proc/self/", 11) == 0) {
      rest = path + 10;
      field = "NStgid";
    } else if (strncmp(path, "/proc/thread-self/", 18) == 0) {
      rest = path + 17;
      field = "NSpid";
    }
    long id = field ? pfs_status_last(tid, field) : -1;
    if (rest != NULL && id > 0) {
      if (strcmp(field, "NSpid") == 0)
        snprintf(out, size, "/proc/%ld/task/%ld%s", pfs_status_last(tid, "NStgid"), id, rest);
      else
        snprintf(out, size, "/proc/%ld%s", id, rest);
    } else {
      snprintf(out, size, "%s", path);
    }
    /* /proc/<pid>/root of a process of the sandbox is the sandbox's root (no process in it
     * may chroot): the path beyond it is the one meant */
    for (int hops = 0; hops < 8; hops++) {
      int skip = 0;
      long p1, p2;
      int k = 0;
      if (sscanf(out, "/proc/%ld/task/%ld/root%n", &p1, &p2, &k) == 2 && k > 0)
        skip = k;
      else if (k = 0, sscanf(out, "/proc/%ld/root%n", &p1, &k) == 1 && k > 0)
        skip = k;
      if (skip == 0 || (out[skip] != '\0' && out[skip] != '/')) break;
      memmove(out, out + skip, strlen(out + skip) + 1);
      if (out[0] == '\0') snprintf(out, size, "/");
    }
  } else {
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)tid);
    ssize_t n = readlink(link, base, sizeof base - 1);
    if (n < 0) return -1;
    base[n] = '\0';
    if (n > 10 && strcmp(base + n - 10, " (deleted)") == 0) {
      errno = ENOENT;
      return -1;
    }
    int w = snprintf(out, size, "%s/%s", strcmp(base, "/") == 0 ? "" : base, path);
    if (w < 0 || (size_t)w >= size) {
      errno = ENAMETOOLONG;
      return -1;
    }
  }
  snprintf(link, sizeof link, "/proc/%d/root", (int)tid);
  int root = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -1;
  /* symlinks and ".." stay inside the target's root; the target's /proc/self cannot be
   * followed from here (it names the host), so magic links are refused, not guessed */
  struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                         .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(SYS_openat2, root, out, &how, sizeof how);
  int e = errno;
  close(root);
  errno = e;
  return fd;
}

/* ---- whose socket it is ---- */

typedef struct sock_key {
  int abstract;
  struct stat st; /* pathname: the socket file */
  char name[sizeof(((struct sockaddr_un *)0)->sun_path)];
  size_t namelen; /* abstract: the name without its leading NUL */
} sock_key;

/* Socket inodes bound to key in the network namespace of diag_fd; the count, or -1. */
static int bound_sockets(int diag_fd, const sock_key *key, unsigned long *inos, int max) {
  struct {
    struct nlmsghdr nlh;
    struct unix_diag_req r;
  } req;
  memset(&req, 0, sizeof req);
  req.nlh.nlmsg_len = sizeof req;
  req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.r.sdiag_family = AF_UNIX;
  req.r.udiag_states = ~0U;
  req.r.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS;
  if (send(diag_fd, &req, sizeof req, 0) != (ssize_t)sizeof req) return -1;
  int n = 0;
  /* (a connect to a socket file is rare: no buffer kept in every host, or in each thread) */
  enum { DIAG_BUF = 32768 };
  char *buf = malloc(DIAG_BUF);
  if (buf == NULL) return -1;
  for (;;) {
    ssize_t len = recv(diag_fd, buf, DIAG_BUF, 0);
    if (len < 0 && errno == EINTR) continue;
    if (len <= 0) {
      free(buf);
      return -1;
    }
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len);
         h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
        int done = h->nlmsg_type == NLMSG_DONE; /* (h is in buf) */
        free(buf);
        return done ? n : -1;
      }
      struct unix_diag_msg *msg = NLMSG_DATA(h);
      int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *msg));
      int match = 0;
      for (struct rtattr *a = (struct rtattr *)(msg + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
        if (a->rta_type == UNIX_DIAG_VFS && !key->abstract) {
          struct unix_diag_vfs *v = RTA_DATA(a);
          /* the kernel's dev_t: major in the top 12 bits, minor in the low 20 */
          match |= v->udiag_vfs_ino == key->st.st_ino &&
                   (v->udiag_vfs_dev >> 20) == major(key->st.st_dev) &&
                   (v->udiag_vfs_dev & 0xfffff) == minor(key->st.st_dev);
        } else if (a->rta_type == UNIX_DIAG_NAME && key->abstract) {
          const char *name = RTA_DATA(a);
          size_t nlen = RTA_PAYLOAD(a);
          match |= nlen == key->namelen + 1 && name[0] == '\0' &&
                   memcmp(name + 1, key->name, key->namelen) == 0;
        }
      }
      if (match && n < max) inos[n++] = msg->udiag_ino;
    }
  }
}

/* Whether the socket bound at key belongs to the sandbox. */
static int inside(sbx_monitor *m, const sock_key *key) {
  if (key->abstract && m->netns_private) return 1; /* its own abstract namespace */
  int diag = m->diag_fd;
  if (diag < 0) {
    diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (diag < 0) return 0;
    m->diag_fd = diag;
  }
  unsigned long inos[16];
  int n = bound_sockets(diag, key, inos, 16);
  if (n <= 0) return 0;
  if (m->netns_private) return 1; /* made in the sandbox's own network namespace */
  pid_t pids[4096];
  int k = 0;
  if (m->prog_pid > 0) pids[k++] = m->prog_pid;
  if (m->prog_pid > 0) k += pfs_descendants(m->prog_pid, pids + k, 4096 - k);
  if (m->init_pid > 0) k += pfs_descendants(m->init_pid, pids + k, 4096 - k);
  for (int i = 0; i < n; i++) {
    char target[40];
    pid_t holder;
    snprintf(target, sizeof target, "socket:[%lu]", inos[i]);
    if (pfs_holders(pids, k, target, &holder, 1) > 0) return 1;
  }
  return 0;
}

static int named_in_policy(const sbx_monitor *m, const struct stat *st) {
  for (int i = 0; i < m->nunix; i++) {
    struct stat a;
    if (stat(m->unix_allowed[i], &a) == 0 && a.st_dev == st->st_dev && a.st_ino == st->st_ino)
      return 1;
  }
  return 0;
}

/* ---- judging an address ---- */

typedef struct judged {
  struct sockaddr_un to; /* what the host sends or connects to */
  socklen_t tolen;
  int opath; /* held while the call is made, or -1 */
} judged;

/* 0: allowed, j filled; else the errno to answer (a refusal is recorded). */
static int judge(sbx_call *c, const char *op, const struct sockaddr_un *sun, socklen_t len,
                 judged *j) {
  sbx_monitor *m = c->m;
  const struct seccomp_notif *req = c->req;
  j->opath = -1;
  memcpy(&j->to, sun, len < sizeof j->to ? len : sizeof j->to);
  j->tolen = len;
  size_t plen = len > offsetof(struct sockaddr_un, sun_path)
                    ? len - offsetof(struct sockaddr_un, sun_path)
                    : 0;
  if (plen == 0) return 0; /* unnamed: the kernel's EINVAL */
  sock_key key;
  memset(&key, 0, sizeof key);
  char shown[PATH_MAX + 16];
  if (sun->sun_path[0] == '\0') {
    key.abstract = 1;
    key.namelen = plen - 1 < sizeof key.name ? plen - 1 : sizeof key.name;
    memcpy(key.name, sun->sun_path + 1, key.namelen);
    if (inside(m, &key)) return 0;
    shown[0] = '@';
    size_t k = key.namelen < sizeof shown - 2 ? key.namelen : sizeof shown - 2;
    memcpy(shown + 1, key.name, k); /* (escaped where it is shown) */
    shown[k + 1] = '\0';
    for (size_t i = 1; i <= k; i++)
      if (shown[i] == '\0') shown[i] = '@';
  } else {
    char path[sizeof sun->sun_path + 1];
    memcpy(path, sun->sun_path, plen < sizeof sun->sun_path ? plen : sizeof sun->sun_path);
    path[plen < sizeof sun->sun_path ? plen : sizeof sun->sun_path] = '\0';
    char full[PATH_MAX];
    int fd = resolve_target((pid_t)req->pid, path, full, sizeof full);
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG) return errno;
      snprintf(shown, sizeof shown, "%s", full);
      goto refuse; /* cannot be told: refuse */
    }
    if (fstat(fd, &key.st) < 0 || !S_ISSOCK(key.st.st_mode)) {
      close(fd);
      return ECONNREFUSED; /* what the kernel answers for a file that is no socket */
    }
    if (inside(m, &key) || named_in_policy(m, &key.st)) {
      j->opath = fd;
      j->to.sun_family = AF_UNIX;
      int w = snprintf(j->to.sun_path, sizeof j->to.sun_path, "/proc/self/fd/%d", fd);
      j->tolen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)w + 1);
      return 0;
    }
    /* the record names the socket the call would have reached, not the link it went by */
    char link[64], real[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, real, sizeof real - 1);
    if (n > 0) real[n] = '\0';
    snprintf(shown, sizeof shown, "%s", n > 0 ? real : full);
    close(fd);
  }
refuse:; /* recorded once the answer reached the caller (notify.c) */
  sbx_denial *d = refuse(c, op, EACCES, shown, NULL);
  snprintf(d->family, sizeof d->family, "AF_UNIX");
  return EACCES;
}

/* ---- performing it ---- */

typedef struct pending_connect {
  sbx_monitor *m;
  uint64_t id;
  int sock;
  judged j;
} pending_connect;

static void answer_later(sbx_monitor *m, uint64_t id, int rc, int err) {
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  if (rc < 0)
    resp.error = -err;
  else
    resp.val = rc;
  ioctl(m->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp); /* ENOENT: the caller died meanwhile */
}

/* A blocking connect waits for the listener's backlog: on a thread of its own, so the
 * session's other calls (the listener's among them) keep being served. It waits a second at a
 * time (the socket's send timeout, which bounds a unix connect; the caller's own is kept) and
 * ends once the caller is gone: a thread left waiting for each killed caller would let a
 * session pile up the host's threads, outside its own limits. */
static void *connect_thread(void *arg) {
  pending_connect *pc = arg;
  struct timeval was = {0, 0}, slice = {1, 0};
  socklen_t wl = sizeof was;
  int sliced = getsockopt(pc->sock, SOL_SOCKET, SO_SNDTIMEO, &was, &wl) == 0 && was.tv_sec == 0 &&
               was.tv_usec == 0 &&
               setsockopt(pc->sock, SOL_SOCKET, SO_SNDTIMEO, &slice, sizeof slice) == 0;
  int rc, err;
  for (;;) {
    rc = connect(pc->sock, (struct sockaddr *)&pc->j.to, pc->j.tolen);
    err = errno;
    if (!sliced || rc == 0 || err != EAGAIN) break;
    uint64_t id = pc->id;
    if (ioctl(pc->m->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0) break; /* the caller is gone */
  }
  if (sliced) setsockopt(pc->sock, SOL_SOCKET, SO_SNDTIMEO, &was, sizeof was);
  answer_later(pc->m, pc->id, rc, err);
  close(pc->sock);
  if (pc->j.opath >= 0) close(pc->j.opath);
  sbx_monitor_release(pc->m);
  free(pc);
  return NULL;
}

/* Answered in c->resp, or (c->handed_off) by a thread of its own later. */
static void do_connect(sbx_call *c, int sock, uint64_t addr, uint64_t len) {
  sbx_monitor *m = c->m;
  const struct seccomp_notif *req = c->req;
  struct seccomp_notif_resp *resp = c->resp;
  struct sockaddr_un sun;
  memset(&sun, 0, sizeof sun);
  if (len > sizeof sun) len = sizeof sun;
  if (len < sizeof(sa_family_t) || read_mem((pid_t)req->pid, addr, &sun, (size_t)len) < 0) {
    resp->error = -EFAULT;
    return;
  }
  judged j;
  int verdict = judge(c, "connect", &sun, (socklen_t)len, &j);
  if (verdict != 0) { /* refused (the record made), or the kernel's own answer */
    resp->error = -verdict;
    return;
  }
  int fl = fcntl(sock, F_GETFL);
  if (fl >= 0 && !(fl & O_NONBLOCK)) {
    pending_connect *pc = malloc(sizeof *pc);
    pthread_t t;
    pthread_attr_t at;
    if (pc != NULL) {
      *pc = (pending_connect){.m = m, .id = req->id, .sock = sock, .j = j};
      sbx_monitor_retain(m);
      pthread_attr_init(&at);
      pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
      int rc = pthread_create(&t, &at, connect_thread, pc);
      pthread_attr_destroy(&at);
      if (rc == 0) {
        c->handed_off = 1; /* the thread owns sock now */
        return;
      }
      sbx_monitor_release(m);
      free(pc);
    }
  }
  if (connect(sock, (struct sockaddr *)&j.to, j.tolen) < 0) resp->error = -errno;
  if (j.opath >= 0) close(j.opath);
}

/* One datagram: judged when it has an address, and sent by the host with the target's data
 * and descriptors (remote: the target's iovecs, already copied here). >= 0 bytes sent, or
 * -errno. Without an address it goes to the peer the socket is connected to, judged at its
 * connect: sent here too, since the target could add an address after the host's read. */
static long send_one(sbx_call *c, int sock, const char *op, uint64_t name, uint64_t namelen,
                     const struct iovec *remote, size_t niov, uint64_t ctl, uint64_t ctllen,
                     int flags) {
  pid_t pid = (pid_t)c->req->pid;
  size_t total = 0;
  for (size_t i = 0; i < niov; i++) total += remote[i].iov_len;
  if (total > MAX_DGRAM) return -EMSGSIZE;
  int fds[64], nfds = 0;
  long rc;
  char *data = NULL;
  judged j = {.opath = -1};
  if (ctllen > 0) { /* only descriptors travel: credentials would be the host's, not theirs */
    char cbuf[CMSG_SPACE(sizeof(int) * 64)];
    if (ctllen > sizeof cbuf || read_mem(pid, ctl, cbuf, (size_t)ctllen) < 0) return -EINVAL;
    struct msghdr mh = {.msg_control = cbuf, .msg_controllen = (size_t)ctllen};
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
        rc = -EINVAL;
        goto out;
      }
      int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < k && nfds < 64; i++) {
        int tfd;
        memcpy(&tfd, CMSG_DATA(cm) + i * sizeof(int), sizeof tfd);
        if ((fds[nfds] = unix_target_fd(pid, tfd)) < 0) {
          rc = -EBADF;
          goto out;
        }
        nfds++;
      }
    }
  }
  data = total ? malloc(total) : NULL;
  if (total && data == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  size_t off = 0;
  for (size_t i = 0; i < niov; i++) {
    if (remote[i].iov_len &&
        read_mem(pid, (uint64_t)(uintptr_t)remote[i].iov_base, data + off, remote[i].iov_len) < 0) {
      rc = -EFAULT;
      goto out;
    }
    off += remote[i].iov_len;
  }
  if (name != 0 && namelen > 0) {
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    if (namelen > sizeof sun) namelen = sizeof sun;
    if (namelen < sizeof(sa_family_t) || read_mem(pid, name, &sun, (size_t)namelen) < 0) {
      rc = -EFAULT;
      goto out;
    }
    int verdict = judge(c, op, &sun, (socklen_t)namelen, &j);
    if (verdict != 0) {
      rc = -verdict;
      goto out;
    }
  }
  struct iovec local = {data, total};
  char cbuf[CMSG_SPACE(sizeof(int) * 64)];
  struct msghdr mh = {.msg_iov = &local, .msg_iovlen = 1};
  if (name != 0 && namelen > 0) {
    mh.msg_name = &j.to;
    mh.msg_namelen = j.tolen;
  }
  if (nfds > 0) {
    memset(cbuf, 0, sizeof cbuf);
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
  }
  /* never wait on the host's thread: a full receiver answers EAGAIN as to a non-blocking
   * sender */
  ssize_t sent = sendmsg(sock, &mh, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
  rc = sent < 0 ? -errno : (long)sent;
out:
  if (j.opath >= 0) close(j.opath);
  free(data);
  for (int x = 0; x < nfds; x++) close(fds[x]);
  return rc;
}

static void set_result(sbx_call *c, long rc) {
  if (c->rec.op[0] != '\0') return; /* refused: answered with the record */
  c->resp->flags = 0;
  if (rc < 0)
    c->resp->error = (int)rc;
  else
    c->resp->val = rc;
}

/* Whether a send carries an address (sendto's, or sendmsg's or one of sendmmsg's msg_name),
 * as the host reads it now. */
static int stream_addressed(sbx_call *c, int nr, const __u64 *a) {
  if (nr == SYS_sendto) return a[4] != 0 && a[5] != 0;
  if (nr != SYS_sendmsg && nr != SYS_sendmmsg) return 0;
  unsigned n = nr == SYS_sendmmsg ? (unsigned)a[2] : 1;
  if (n > 1024) n = 1024;
  for (unsigned i = 0; i < n; i++) {
    struct msghdr h;
    if (read_mem((pid_t)c->req->pid, a[1] + i * (nr == SYS_sendmmsg ? sizeof(struct mmsghdr) : 0),
                 &h, sizeof h) < 0)
      return 0;
    if (h.msg_name != NULL && h.msg_namelen > 0) return 1;
  }
  return 0;
}

/* The target's call on an AF_UNIX socket (sock: the host's duplicate of it). Always answers:
 * c->resp filled, or c->handed_off when a thread answers later (it then owns sock). */
void notify_unix_call(sbx_call *c, int sock) {
  const struct seccomp_notif *req = c->req;
  const __u64 *a = req->data.args;
  pid_t pid = (pid_t)req->pid;
  int type = 0;
  socklen_t tl = sizeof type;
  getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tl);
  int nr = req->data.nr;
  if (nr == SYS_connect) {
    c->resp->flags = 0;
    do_connect(c, sock, a[1], a[2]);
    if (!c->handed_off) close(sock);
    return;
  }
  /* A stream socket refuses an address (EISCONN, EOPNOTSUPP), given here: left to the
   * kernel, a datagram socket swapped in meanwhile (dup2) would send to it unjudged. A
   * seqpacket socket sends to its peer whatever the address: refused the same way. */
  if (type != SOCK_DGRAM && stream_addressed(c, nr, a)) {
    struct sockaddr_un peer;
    socklen_t pl = sizeof peer;
    c->resp->flags = 0;
    c->resp->error = getpeername(sock, (struct sockaddr *)&peer, &pl) == 0 ? -EISCONN : -EOPNOTSUPP;
    close(sock);
    return;
  }
  /* sendto without an address goes to the peer, judged at its connect */
  if (type != SOCK_DGRAM || (nr == SYS_sendto && a[4] == 0) ||
      (nr != SYS_sendto && nr != SYS_sendmsg && nr != SYS_sendmmsg)) {
    close(sock);
    return; /* (CONTINUE) */
  }
  if (nr == SYS_sendto) {
    struct iovec one = {(void *)(uintptr_t)a[1], (size_t)a[2]};
    set_result(c, send_one(c, sock, "sendto", a[4], a[5], &one, 1, 0, 0, (int)a[3]));
    close(sock);
    return;
  }
  int many = nr == SYS_sendmmsg;
  unsigned vlen = many ? (unsigned)a[2] : 1;
  if (vlen > 1024) vlen = 1024; /* UIO_MAXIOV, as the kernel */
  int flags = (int)(many ? a[3] : a[2]);
  long done = 0, rc = 0;
  for (unsigned i = 0; i < vlen; i++) {
    struct msghdr h;
    uint64_t at = a[1] + (many ? i * sizeof(struct mmsghdr) : 0);
    struct iovec remote[MAX_IOV];
    if (read_mem(pid, at, &h, sizeof h) < 0) {
      rc = -EFAULT;
      break;
    }
    if (h.msg_iovlen > MAX_IOV) {
      rc = -EMSGSIZE;
      break;
    }
    if (h.msg_iovlen > 0 && read_mem(pid, (uint64_t)(uintptr_t)h.msg_iov, remote,
                                     sizeof(struct iovec) * h.msg_iovlen) < 0) {
      rc = -EFAULT;
      break;
    }
    rc = send_one(c, sock, many ? "sendmmsg" : "sendmsg", (uint64_t)(uintptr_t)h.msg_name,
                  h.msg_namelen, remote, h.msg_iovlen, (uint64_t)(uintptr_t)h.msg_control,
                  h.msg_controllen, flags);
    if (rc < 0) break;
    if (many) { /* msg_len of this entry, as the kernel fills it */
      unsigned len = (unsigned)rc;
      uint64_t len_at = at + offsetof(struct mmsghdr, msg_len);
      struct iovec l = {&len, sizeof len}, r = {(void *)(uintptr_t)len_at, sizeof len};
      if (process_vm_writev(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof len) break;
    }
    done++;
  }
  set_result(c, many ? (done > 0 ? done : (rc < 0 ? rc : -EINVAL)) : rc);
  close(sock);
}
