/* sandbox_netpool.c: network namespaces made ahead of use, and used again. Making one costs
 * the kernel about half a millisecond of CPU (the loopback device, every protocol's
 * per-namespace state) and as much again to take it down; joining one costs a setns. The next
 * namespace is made while sessions run, off the launch's critical path, and held as a
 * descriptor only: no process has been in it and nothing is configured in it. It is handed
 * to one launch at a time.
 *
 * A session's namespace comes back (sandbox_netns_release) once every process of the session
 * is gone (its pid namespace's init reaped: the kernel ends that only after every other
 * process in it) and the host's own socket in it is closed. It is handed out again only if it
 * is as a new one is: not a socket of any family left in it (the kernel's per-namespace count
 * of sockets: none in flight in a message, none a process outside holds, none closing) and no
 * TCP connection's remains; else it is let go. Nothing else a session can change stays with a
 * namespace: interfaces, routes, filters and the net sysctls need CAP_NET_ADMIN (its process
 * has no capability; /proc is read-only inside). Only a network-denied session's namespace
 * without the proxy's listener comes back (network.md: that one is configured).
 *
 * As root, a thread of the host makes them and looks at those that come back. A normal user's
 * sessions need their namespaces to belong to a user namespace the user owns: a keeper
 * process (forked once, when the first such session starts) makes one user namespace, with
 * the host's uid and gid mapped to themselves as a session's own would have, and then each
 * network namespace inside it, and passes both over a socket; those that come back go to it
 * over the same socket, to look at. A session joins that user namespace and its network
 * namespace, then makes its mount, pid and IPC namespaces there (as it did in a user
 * namespace of its own; its process keeps no capability in it). The keeper holds nothing but
 * those: it ends with the host however the host ends (PR_SET_PDEATHSIG, and EOF on the
 * socket), and with it every namespace not handed out. Anything failing on the way only means
 * no namespace is ready: the setup child then makes its own, as without the pool. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdlib.h>

#define BACK_MAX 16 /* namespaces come back, waiting to be looked at (more are let go) */
#define CLEAN_MAX 4 /* looked at and as new, waiting for a launch (more are let go) */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t taken = PTHREAD_COND_INITIALIZER;
/* A network namespace and the host's sock_diag socket in it (notify_unix.c looks there for the
 * unix sockets made inside; made with it, it goes with it, and is the one socket it has while
 * it is as new), or -1. */
typedef struct {
  int net, diag;
} netns_pair;
static const netns_pair none = {-1, -1};
static netns_pair ready = {-1, -1}; /* made ahead */
static int state = 0;    /* 0: no thread yet, 1: the thread runs, -1: it failed and ended */
static pid_t owner = -1; /* the process whose thread it is (a forked copy has none) */
/* root's: come back (the thread looks at them) and found as new; a normal user's come back
 * to be sent to the keeper (on the loop's thread: the keeper's socket is the loop's) */
static netns_pair back[BACK_MAX], clean[CLEAN_MAX], kback[BACK_MAX];
static int nback, nclean, nkback;

static void pair_close(netns_pair p) {
  if (p.net >= 0) close(p.net);
  if (p.diag >= 0) close(p.diag);
}

/* In the namespace to be made: a new one, and its sock_diag socket (-1 if none could be
 * made); the caller is there afterwards. */
static netns_pair pair_make(void) {
  netns_pair p = none;
  if (unshare(CLONE_NEWNET) < 0) return p;
  p.net = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  p.diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  return p;
}

/* The maker runs at the lowest priority: woken as a launch ends, it must not take the CPU
 * from the host (whose next steps are the session's), only what is left idle. */
static void lowest_priority(void) {
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
}

/* The number after key in text, or -1. (System calls and plain loops only: the keeper runs
 * it, a fork of a host that had threads.) */
static long number_after(const char *text, const char *key) {
  size_t k = strlen(key);
  for (const char *t = text; *t; t++) {
    if (strncmp(t, key, k) != 0) continue;
    long n = -1;
    for (t += k; *t >= '0' && *t <= '9'; t++) n = (n < 0 ? 0 : n * 10) + (*t - '0');
    return n;
  }
  return -1;
}

/* Whether the network namespace is as a new one: no socket of any family in it but its
 * sock_diag socket ("sockets: used" counts every socket made in a namespace until it is
 * freed) and no TCP connection's remains ("tw"). What the socket was sent and not read goes.
 * The calling thread joins the namespace to look, then home: 1 as new, 0 not (or not known),
 * -1 when home could not be joined again. */
static int netns_as_new(netns_pair p, int home) {
  char junk[256];
  while (p.diag >= 0 && recv(p.diag, junk, sizeof junk, MSG_DONTWAIT) >= 0) {
  }
  if (setns(p.net, CLONE_NEWNET) < 0) return 0;
  char text[512];
  ssize_t n = -1;
  int stat = open("/proc/thread-self/net/sockstat", O_RDONLY | O_CLOEXEC);
  if (stat >= 0) {
    n = read(stat, text, sizeof text - 1);
    close(stat);
  }
  if (setns(home, CLONE_NEWNET) < 0) return -1;
  if (n <= 0) return 0;
  text[n] = '\0';
  return number_after(text, "sockets: used ") == (p.diag >= 0) && number_after(text, " tw ") == 0;
}

static void *maker(void *arg) {
  (void)arg;
  lowest_priority();
  int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  pthread_mutex_lock(&lock);
  while (home >= 0) {
    while (nback == 0 && (ready.net >= 0 || nclean > 0)) pthread_cond_wait(&taken, &lock);
    if (nback > 0) { /* one that came back: as new, or let go */
      netns_pair p = back[--nback];
      int room = nclean < CLEAN_MAX;
      pthread_mutex_unlock(&lock);
      int as_new = room ? netns_as_new(p, home) : 0;
      pthread_mutex_lock(&lock);
      if (as_new == 1 && nclean < CLEAN_MAX) {
        clean[nclean++] = p;
        p = none;
      }
      pair_close(p); /* (the kernel takes it down later, on a worker of its own) */
      if (as_new < 0) break;
      continue;
    }
    pthread_mutex_unlock(&lock);
    netns_pair p = pair_make();
    /* back home, or this thread ends where it is (it does nothing else) */
    if (setns(home, CLONE_NEWNET) < 0 || p.net < 0) {
      pair_close(p);
      p = none;
    }
    pthread_mutex_lock(&lock);
    if (p.net < 0) break;
    ready = p;
  }
  state = -1; /* no more made ahead: each setup child makes its own, as without the pool */
  pthread_mutex_unlock(&lock);
  if (home >= 0) close(home);
  return NULL;
}

static netns_pair thread_take(void) {
  netns_pair p = none;
  pthread_mutex_lock(&lock);
  if (state == 1 && owner != getpid()) state = -1; /* a forked copy: the thread is not here */
  if (state == 0) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 64 * 1024);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* no signal handler runs on it */
    pthread_t t;
    state = pthread_create(&t, &at, maker, NULL) == 0 ? 1 : -1;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    owner = getpid();
  } else if (state == 1 && nclean > 0) {
    p = clean[--nclean];
  } else if (state == 1 && ready.net >= 0) {
    p = ready;
    ready = none;
  }
  pthread_mutex_unlock(&lock);
  return p;
}

/* ---- a normal user's: the keeper ---- */

static int keeper_fd = -1;   /* the host's end of the socket, or -1 */
static pid_t keeper = -1;    /* its pid */
static int keeper_state = 0; /* 0: not started, 1: runs, -1: gone */
static int keeper_asked = 0; /* a namespace was asked for and not received yet */

static int write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* One byte, and n descriptors with it (0 to 3): what the host and the keeper send each other. */
static ssize_t send_fds(int sock, char byte, const int *fds, int n, int flags) {
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(3 * sizeof(int))];
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (n > 0) {
    msg.msg_control = u.buf;
    msg.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
  }
  return sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
}

/* A byte and the descriptors that came with it (at most 3, *n of them); what recvmsg gave. */
static ssize_t recv_fds(int sock, char *byte, int *fds, int *n, int flags) {
  struct iovec iov = {.iov_base = byte, .iov_len = 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(3 * sizeof(int))];
  } u;
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  ssize_t r = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  *n = 0;
  struct cmsghdr *c = r == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
  if (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
    *n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    if (*n > 3) *n = 3;
    memcpy(fds, CMSG_DATA(c), (size_t)*n * sizeof(int));
  }
  return r;
}

/* The forked keeper: system calls only (the host had threads). All signals stay blocked as
 * the host blocked them around the fork: only SIGKILL ends it, or EOF. It answers "n" (a
 * namespace, please) with the user namespace, a network namespace and its sock_diag socket,
 * one that came back as new if it has one; "r" brings one back (the last two). */
static void keeper_main(int sock, pid_t host, const char *uid_map, const char *gid_map) {
  /* a session of its own first: no signal for the host's terminal group reaches it, and a
   * luxec that adopts it when this host is gone (a subreaper) tells it from its own processes
   * and reaps it, even when it ends at once below (in the host's session it could not) */
  setsid();
  prctl(PR_SET_NAME, "luxec-netns"); /* (ps shows what it is) */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != host) _exit(0);
  lowest_priority();
  if (sock > 0) syscall(SYS_close_range, 0U, (unsigned)sock - 1, 0U);
  syscall(SYS_close_range, (unsigned)sock + 1, ~0U, 0U);
  if (unshare(CLONE_NEWUSER) < 0) _exit(1);
  if (write_text("/proc/self/setgroups", "deny") < 0 && errno != ENOENT) _exit(1);
  if (write_text("/proc/self/uid_map", uid_map) < 0 ||
      write_text("/proc/self/gid_map", gid_map) < 0)
    _exit(1);
  int user = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
  /* its own network namespace to come back to (never handed out) */
  if (user < 0 || unshare(CLONE_NEWNET) < 0) _exit(1);
  int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) _exit(1);
  netns_pair as_new[CLEAN_MAX];
  int nnew = 0;
  char byte;
  int got[3], ngot;
  while (recv_fds(sock, &byte, got, &ngot, 0) == 1) {
    if (byte == 'r' && ngot == 2) {
      netns_pair p = {got[0], got[1]};
      int r = nnew < CLEAN_MAX ? netns_as_new(p, home) : 0;
      if (r < 0) _exit(1);
      if (r == 1)
        as_new[nnew++] = p;
      else
        pair_close(p);
      continue;
    }
    for (int i = 0; i < ngot; i++) close(got[i]);
    if (byte != 'n') continue;
    netns_pair p = nnew > 0 ? as_new[--nnew] : none;
    if (p.net < 0) {
      p = pair_make();
      if (p.net < 0 || p.diag < 0 || setns(home, CLONE_NEWNET) < 0) _exit(1);
    }
    int three[3] = {user, p.net, p.diag};
    if (send_fds(sock, 'n', three, 3, 0) < 0) _exit(0); /* the host is gone */
    pair_close(p);
  }
  _exit(0);
}

static void keeper_gone(void) {
  if (keeper_fd >= 0) close(keeper_fd);
  keeper_fd = -1;
  keeper_state = -1;
  /* our unreaped child, so the pid is still its: ended (EOF), or ended here; then reaped */
  if (keeper > 0 && waitpid(keeper, NULL, WNOHANG) == 0) {
    kill(keeper, SIGKILL);
    while (waitpid(keeper, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  keeper = -1;
}

/* On the loop's thread: those that came back go to the keeper to look at; a namespace is
 * asked for if none is. */
static void keeper_ask(void) {
  for (;;) {
    pthread_mutex_lock(&lock);
    netns_pair p = nkback > 0 ? kback[--nkback] : none;
    pthread_mutex_unlock(&lock);
    if (p.net < 0) break;
    /* (not waited for: one the keeper has no room for now is let go) */
    int two[2] = {p.net, p.diag};
    if (keeper_state == 1 && p.diag >= 0 && send_fds(keeper_fd, 'r', two, 2, MSG_DONTWAIT) < 0 &&
        errno != EAGAIN)
      keeper_gone();
    pair_close(p);
  }
  if (keeper_state != 1 || keeper_asked) return;
  if (send_fds(keeper_fd, 'n', NULL, 0, 0) == 1)
    keeper_asked = 1;
  else
    keeper_gone();
}

static void keeper_start(unsigned uid, unsigned gid) {
  keeper_state = -1;
  char uid_map[32], gid_map[32];
  snprintf(uid_map, sizeof uid_map, "%u %u 1\n", uid, uid);
  snprintf(gid_map, sizeof gid_map, "%u %u 1\n", gid, gid);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) return;
  pid_t host = getpid();
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = fork();
  if (pid == 0) keeper_main(sv[1], host, uid_map, gid_map);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return;
  }
  keeper = pid;
  keeper_fd = sv[0];
  keeper_state = 1;
  keeper_ask();
}

static netns_pair keeper_take(unsigned uid, unsigned gid, int *userns_fd) {
  if (keeper_state == 0) {
    keeper_start(uid, gid);
    return none; /* the first is made meanwhile */
  }
  if (keeper_state != 1 || !keeper_asked) return none;
  char byte;
  int fds[3], n;
  ssize_t r = recv_fds(keeper_fd, &byte, fds, &n, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return none; /* not ready yet */
  if (r != 1 || byte != 'n' || n != 3) {
    for (int i = 0; i < n; i++) close(fds[i]);
    keeper_gone(); /* EOF, or not what it sends: no more from it */
    return none;
  }
  keeper_asked = 0;
  *userns_fd = fds[0];
  return (netns_pair){fds[1], fds[2]};
}

int sandbox_netns_take(int in_userns, unsigned uid, unsigned gid, int *userns_fd, int *diag_fd) {
  *userns_fd = -1;
  netns_pair p = in_userns ? keeper_take(uid, gid, userns_fd) : thread_take();
  *diag_fd = p.diag;
  return p.net;
}

void sandbox_netns_refill(void) {
  pthread_mutex_lock(&lock);
  if (state == 1 && ready.net < 0 && nclean == 0) pthread_cond_signal(&taken);
  pthread_mutex_unlock(&lock);
  keeper_ask();
}

/* ---- a session's namespace, until it comes back ---- */

struct netns_lease {
  netns_pair p;
  int in_userns, holds, as_new;
};

netns_lease *sandbox_netns_lease(int fd, int diag_fd, int in_userns, int holds) {
  netns_lease *l = malloc(sizeof *l);
  if (l == NULL) {
    close(fd);
    return NULL;
  }
  *l = (netns_lease){.p = {fd, diag_fd}, .in_userns = in_userns, .holds = holds, .as_new = 1};
  return l;
}

int sandbox_netns_diag(const netns_lease *l) {
  return l ? l->p.diag : -1;
}

void sandbox_netns_release(netns_lease *l, int gone) {
  if (l == NULL) return;
  pthread_mutex_lock(&lock);
  if (!gone) l->as_new = 0;
  int last = --l->holds == 0;
  netns_pair p = l->p;
  if (last && l->as_new && !l->in_userns && state == 1 && owner == getpid() && nback < BACK_MAX) {
    back[nback++] = p;
    p = none;
    pthread_cond_signal(&taken);
  } else if (last && l->as_new && l->in_userns && nkback < BACK_MAX) {
    kback[nkback++] = p; /* (sent to the keeper at the next launch's end) */
    p = none;
  }
  pthread_mutex_unlock(&lock);
  if (!last) return;
  pair_close(p);
  free(l);
}
