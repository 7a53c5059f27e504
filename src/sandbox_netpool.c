/* sandbox_netpool.c: network namespaces made ahead of use. Making one costs the kernel about
 * half a millisecond (the loopback device, every protocol's per-namespace state); joining one
 * made earlier costs a setns. The next namespace is made while sessions run, off the launch's
 * critical path, and held as a descriptor only: no process of a session has been in it and
 * nothing is configured in it. Each one is handed out once (every session still gets a
 * network namespace of its own, empty), and the next one is made once the launch that took
 * it is done (not while its setup competes for the CPU).
 *
 * As root, a thread of the host makes them. A normal user's sessions need their namespaces
 * to belong to a user namespace the user owns: a keeper process (forked once, when the first
 * such session starts) makes one user namespace, with the host's uid and gid mapped to
 * themselves as a session's own would have, and then each network namespace inside it, and
 * passes both over a socket. A session joins that user namespace and its network namespace,
 * then makes its mount, pid and IPC namespaces there (as it did in a user namespace of its
 * own; its process keeps no capability in it). The keeper holds nothing but those: it ends
 * with the host however the host ends (PR_SET_PDEATHSIG, and EOF on the socket), and with it
 * every namespace not handed out. Anything failing on the way only means no namespace is
 * ready: the setup child then makes its own, as without the pool. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t taken = PTHREAD_COND_INITIALIZER;
static int ready = -1;   /* a namespace made ahead, or -1 */
static int state = 0;    /* 0: no thread yet, 1: the thread runs, -1: it failed and ended */
static pid_t owner = -1; /* the process whose thread it is (a forked copy has none) */

/* The maker runs at the lowest priority: woken as a launch ends, it must not take the CPU
 * from the host (whose next steps are the session's), only what is left idle. */
static void lowest_priority(void) {
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
}

static void *maker(void *arg) {
  (void)arg;
  lowest_priority();
  int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  pthread_mutex_lock(&lock);
  while (home >= 0) {
    while (ready >= 0) pthread_cond_wait(&taken, &lock);
    pthread_mutex_unlock(&lock);
    int fd = -1;
    if (unshare(CLONE_NEWNET) == 0) {
      fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
      /* back home, or this thread ends where it is (it does nothing else) */
      if (setns(home, CLONE_NEWNET) < 0 && fd >= 0) {
        close(fd);
        fd = -1;
      }
    }
    pthread_mutex_lock(&lock);
    if (fd < 0) break;
    ready = fd;
  }
  state = -1; /* no more made ahead: each setup child makes its own, as without the pool */
  pthread_mutex_unlock(&lock);
  if (home >= 0) close(home);
  return NULL;
}

static int thread_take(void) {
  int fd = -1;
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
  } else if (state == 1 && ready >= 0) {
    fd = ready;
    ready = -1;
  }
  pthread_mutex_unlock(&lock);
  return fd;
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

static void send_two(int sock, int a, int b) {
  char byte = 'n';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(2 * sizeof(int))];
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  int fds[2] = {a, b};
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  if (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) _exit(0); /* the host is gone */
}

/* The forked keeper: system calls only (the host had threads). All signals stay blocked as
 * the host blocked them around the fork: only SIGKILL ends it, or EOF. */
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
  char byte;
  while (read(sock, &byte, 1) == 1) {
    if (unshare(CLONE_NEWNET) < 0) _exit(1);
    int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(home, CLONE_NEWNET) < 0) _exit(1);
    send_two(sock, user, fd);
    close(fd);
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

static void keeper_ask(void) {
  if (keeper_state != 1 || keeper_asked) return;
  if (write(keeper_fd, "n", 1) == 1)
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

static int keeper_take(unsigned uid, unsigned gid, int *userns_fd) {
  if (keeper_state == 0) {
    keeper_start(uid, gid);
    return -1; /* the first is made meanwhile */
  }
  if (keeper_state != 1 || !keeper_asked) return -1;
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(2 * sizeof(int))];
  } u;
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  ssize_t n = recvmsg(keeper_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return -1; /* not ready yet */
  struct cmsghdr *c = n == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
  if (c == NULL || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int))) {
    keeper_gone(); /* EOF, or not what it sends: no more from it */
    return -1;
  }
  int fds[2];
  memcpy(fds, CMSG_DATA(c), sizeof fds);
  keeper_asked = 0;
  *userns_fd = fds[0];
  return fds[1];
}

int sandbox_netns_take(int in_userns, unsigned uid, unsigned gid, int *userns_fd) {
  *userns_fd = -1;
  return in_userns ? keeper_take(uid, gid, userns_fd) : thread_take();
}

void sandbox_netns_refill(void) {
  pthread_mutex_lock(&lock);
  if (state == 1 && ready < 0) pthread_cond_signal(&taken);
  pthread_mutex_unlock(&lock);
  keeper_ask();
}
