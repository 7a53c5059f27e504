/* sandbox_netpool.c: network namespaces made ahead of use. Making one costs the kernel about
 * half a millisecond (the loopback device, every protocol's per-namespace state); joining one
 * made earlier costs a setns. A thread of the host makes the next namespace while sessions
 * run, off the launch's critical path, and holds it as a descriptor only: no process lives in
 * it, nothing is configured in it, and no session has seen it. Each one is handed out once
 * (every session still gets a network namespace of its own, empty), and the next one is
 * made once the launch that took it is done (not while its setup competes for the CPU). The thread and the descriptor go with the host's process however it
 * ends: nothing outlives it.
 *
 * Only for a host that may make network namespaces itself (CAP_SYS_ADMIN, no user namespace
 * in between): a normal user's session makes its network namespace inside the user namespace
 * of its own, which a namespace made here would not belong to. */
#include "sandbox.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t taken = PTHREAD_COND_INITIALIZER;
static int ready = -1;   /* a namespace made ahead, or -1 */
static int state = 0;    /* 0: no thread yet, 1: the thread runs, -1: it failed and ended */
static pid_t owner = -1; /* the process whose thread it is (a forked copy has none) */

static void *maker(void *arg) {
  (void)arg;
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

int sandbox_netns_take(void) {
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

void sandbox_netns_refill(void) {
  pthread_mutex_lock(&lock);
  if (state == 1 && ready < 0) pthread_cond_signal(&taken);
  pthread_mutex_unlock(&lock);
}
