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
 * The connect, and every send that could carry an address (sendto with one, sendmsg,
 * sendmmsg), is then made by the host (notify_send.c): left to the kernel, it would read the
 * descriptor and the address again. */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/unix_diag.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify_int.h"
#include "procfs.h"
#include "sandbox.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

/* The serving thread's last pidfd, of the last caller (its calls come in runs): a pidfd
 * refers to one task, so once that task is gone it fails (ESRCH) and is opened again. */
static _Thread_local pid_t last_tid;
static _Thread_local int last_pidfd = -1;

void unix_target_forget(void) {
  if (last_pidfd >= 0) close(last_pidfd);
  last_pidfd = -1;
  last_tid = 0;
}

int unix_target_fd(sbx_monitor *m, uint64_t id, pid_t tid, int fd) {
  if (last_pidfd >= 0 && last_tid == tid) {
    int dup = (int)syscall(SYS_pidfd_getfd, last_pidfd, fd, 0);
    if (dup >= 0 || errno != ESRCH) return dup;
  }
  unix_target_forget();
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
  /* the caller still waits for this call, so the number still names it (not another
   * process that took the number after the caller died) */
  if (ioctl(m->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0) {
    close(pidfd);
    errno = ESRCH;
    return -1;
  }
  last_pidfd = pidfd;
  last_tid = tid;
  return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
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
    struct stat st; /* a cwd removed; " (deleted)" can also be a directory's own name */
    if (n > 10 && strcmp(base + n - 10, " (deleted)") == 0 &&
        (stat(link, &st) < 0 || st.st_nlink == 0)) {
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
static int bound_sockets(int diag_fd, const sock_key *key, unsigned long *inos, int *types,
                         int max) {
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
      if (match && n < max) {
        if (types != NULL) types[n] = msg->udiag_type;
        inos[n++] = msg->udiag_ino;
      }
    }
  }
}

/* Whether the socket bound at key belongs to the sandbox: 1, 0, or -1 when no socket holds
 * that abstract name (the kernel's ECONNREFUSED: nothing was refused). A socket file's may be
 * held in another network namespace, which the dump does not see. */
/* The inode of the network namespace socket a lives in; 0 when it cannot be told. */
static ino_t netns_of(int a) {
  int ns = a < 0 ? -1 : ioctl(a, SIOCGSKNS);
  struct stat st;
  ino_t ino = ns >= 0 && fstat(ns, &st) == 0 ? st.st_ino : 0;
  if (ns >= 0) close(ns);
  return ino;
}

/* An abstract name is looked up in the network namespace of the socket that connects: the
 * sandbox's own for a socket made inside, but a socket passed in from outside (a host
 * service's, over SCM_RIGHTS) is the host's. */
static int own_abstract(const sbx_monitor *m, int sock) {
  ino_t mine = netns_of(m->diag_fd);
  return mine != 0 && netns_of(sock) == mine;
}

static int inside(sbx_monitor *m, const sock_key *key, int sock) {
  if (key->abstract && m->netns_private) return own_abstract(m, sock); /* its own names */
  int diag = m->diag_fd;
  if (diag < 0) {
    diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (diag < 0) return 0;
    m->diag_fd = diag;
  }
  unsigned long inos[16];
  int n = bound_sockets(diag, key, inos, NULL, 16);
  if (n <= 0) return n == 0 && key->abstract ? -1 : 0;
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

/* The type of the socket bound at the socket file of key in the host's own network namespace
 * (this thread's; where a host daemon's are): SOCK_*, 0 when none is there, -1 when it
 * cannot be told. */
static int host_bound_type(const sock_key *key) {
  int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (diag < 0) return -1;
  unsigned long inos[4];
  int types[4];
  int n = bound_sockets(diag, key, inos, types, 4);
  close(diag);
  return n < 0 ? -1 : n == 0 ? 0 : types[0];
}

static int named_in_policy(const sbx_monitor *m, const struct stat *st) {
  for (int i = 0; i < m->nunix; i++) {
    const unsigned long long *id = m->unix_ids[i];
    if ((id[0] | id[1]) != 0 && id[0] == (unsigned long long)st->st_dev &&
        id[1] == (unsigned long long)st->st_ino)
      return 1;
  }
  return 0;
}

/* ---- judging an address ---- */

/* 0: allowed, j filled; else the errno to answer (a refusal is recorded). */
static int judge(sbx_call *c, const char *op, const sbx_sock *sk, const struct sockaddr_un *sun,
                 socklen_t len, sbx_dest *j) {
  int type = sk->type;
  sbx_monitor *m = c->m;
  const struct seccomp_notif *req = c->req;
  j->hold = -1;
  if (len > sizeof(struct sockaddr_un)) return EINVAL;
  memcpy(&j->to, sun, len < sizeof(struct sockaddr_un) ? len : sizeof(struct sockaddr_un));
  j->len = len;
  size_t plen = len > offsetof(struct sockaddr_un, sun_path)
                    ? len - offsetof(struct sockaddr_un, sun_path)
                    : 0;
  /* unnamed, or another family (AF_UNSPEC: a datagram socket's disconnect): the kernel's
   * answer to the host's call, which names no file */
  if (plen == 0 || sun->sun_family != AF_UNIX) return 0;
  sock_key key;
  memset(&key, 0, sizeof key);
  char shown[PATH_MAX + 16];
  if (sun->sun_path[0] == '\0') {
    key.abstract = 1;
    key.namelen = plen - 1 < sizeof key.name ? plen - 1 : sizeof key.name;
    memcpy(key.name, sun->sun_path + 1, key.namelen);
    int in = inside(m, &key, sk->fd);
    if (in != 0) return in > 0 ? 0 : ECONNREFUSED;
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
      /* a loop of symbolic links is the kernel's ELOOP; through /proc it may be a magic link
       * this walk does not follow (refused: it cannot be told where it leads) */
      if (errno == ELOOP && strncmp(full, "/proc/", 6) != 0) return ELOOP;
      snprintf(shown, sizeof shown, "%s", full);
      goto refuse; /* cannot be told: refuse */
    }
    if (fstat(fd, &key.st) < 0 || !S_ISSOCK(key.st.st_mode)) {
      close(fd);
      return ECONNREFUSED; /* what the kernel answers for a file that is no socket */
    }
    if (inside(m, &key, sk->fd) || named_in_policy(m, &key.st)) {
      j->hold = fd;
      struct sockaddr_un *to = (struct sockaddr_un *)&j->to;
      to->sun_family = AF_UNIX;
      int w = snprintf(to->sun_path, sizeof to->sun_path, "/proc/self/fd/%d", fd);
      j->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)w + 1);
      return 0;
    }
    /* a host socket of another type: the kernel's EPROTOTYPE, nothing refused. (None bound
     * in the host's network namespace says nothing: the socket may be another namespace's,
     * another session's say, which the kernel would reach.) */
    int bound = host_bound_type(&key);
    if (bound > 0 && type > 0 && bound != type) {
      close(fd);
      return EPROTOTYPE;
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

/* ---- the calls ---- */

/* An address given with a send on the unix socket sk: a datagram's is judged; a stream
 * socket refuses one (the kernel's EISCONN or EOPNOTSUPP), a seqpacket socket ignores it. */
static int judge_send(sbx_call *c, const char *op, const sbx_sock *sk, int flags,
                      const struct sockaddr_storage *ss, socklen_t len, sbx_dest *d) {
  (void)flags;
  d->hold = -1;
  d->len = 0;
  if (sk->type == SOCK_SEQPACKET) return 0;
  if (sk->type == SOCK_STREAM) {
    struct sockaddr_un peer;
    socklen_t pl = sizeof peer;
    return getpeername(sk->fd, (struct sockaddr *)&peer, &pl) == 0 ? EISCONN : EOPNOTSUPP;
  }
  return judge(c, op, sk, (const struct sockaddr_un *)ss, len, d);
}

/* The target's call on an AF_UNIX socket (sk->fd: the host's duplicate of it). Always
 * answers: c->resp filled, or c->handed_off when a thread answers later (it then owns the
 * descriptor). */
void notify_unix_call(sbx_call *c, sbx_sock *sk) {
  const __u64 *a = c->req->data.args;
  int nr = c->req->data.nr;
  if (nr == SYS_connect) {
    struct sockaddr_storage ss;
    sbx_dest d = {.hold = -1};
    int e = send_read_addr(c, a[1], a[2], &ss);
    if (e == 0 && a[2] < sizeof(sa_family_t)) e = EINVAL;
    if (e == 0) e = judge(c, "connect", sk, (const struct sockaddr_un *)&ss, (socklen_t)a[2], &d);
    if (e != 0) { /* refused (the record made), or the kernel's own answer */
      answer(c, e);
      close(sk->fd);
      return;
    }
    send_connect(c, sk, &d);
    return;
  }
  /* sendto without an address (a register: not raceable) goes to the peer, judged at its
   * connect */
  if (nr != SYS_sendmsg && nr != SYS_sendmmsg && (nr != SYS_sendto || a[4] == 0)) {
    close(sk->fd);
    return; /* (CONTINUE) */
  }
  send_call(c, sk, judge_send);
}

void unix_cfg_take(sbx_monitor *m, const sbx_unix_cfg *u) {
  m->mediate_unix = 1;
  m->netns_private = u->netns_private;
  m->diag_fd = u->diag_fd;
  m->netns = u->netns;
  m->prog_pid = u->prog_pid;
  m->init_pid = u->init_pid;
  m->unix_allowed = notify_strv_copy(u->allowed, u->nallowed);
  m->nunix = m->unix_allowed ? u->nallowed : 0;
  size_t ids = (size_t)m->nunix * sizeof *m->unix_ids;
  m->unix_ids = m->nunix > 0 ? malloc(ids) : NULL;
  if (m->unix_ids) memcpy(m->unix_ids, u->allowed_ids, ids);
  if (m->unix_ids == NULL) m->nunix = 0; /* (none allowed: refused, never let through) */
  m->reserved = notify_strv_copy(u->reserved, u->nreserved);
  m->nreserved = m->reserved ? u->nreserved : 0;
  m->reserve_only = !u->files_evidence;
  m->killable = u->killable;
}

/* (diag_fd is the lease's when there is one, lent; else the monitor's own) */
void unix_cfg_drop(const sbx_unix_cfg *u) {
  if (u->netns == NULL && u->diag_fd >= 0) close(u->diag_fd);
  sandbox_netns_release(u->netns, 1);
}

/* Once no call of the session's can come (its processes are gone): its network namespace
 * may then serve another session, once found as new. */
void sbx_monitor_drop_diag(sbx_monitor *m) {
  if (m->netns == NULL && m->diag_fd >= 0) close(m->diag_fd);
  m->diag_fd = -1;
  sandbox_netns_release(m->netns, 1);
  m->netns = NULL;
}
