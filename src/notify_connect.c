/* notify_connect.c: a sandboxed caller's connect, made by the host (the restricted modes), and
 * what the calls answered later by a thread of their own share (notify_send.c's too).
 *
 * The host makes every connect itself, on its duplicate of the caller's socket with its own
 * copy of the address (judged by the socket family's judge: notify_net.c, notify_unix.c):
 * left to the kernel, the call would look the descriptor and the address up again, and
 * another thread of the caller could swap a unix socket and a unix address in between. The
 * call is made without the host's effective capabilities. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "notify_int.h"

long long later_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 0 once the answer reached the caller. */
int later_answer(sbx_monitor *m, uint64_t id, long rc) {
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  if (rc < 0)
    resp.error = (int)rc;
  else
    resp.val = rc;
  return ioctl(m->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp); /* ENOENT: the caller is gone */
}

int later_gone(sbx_monitor *m, uint64_t id) {
  return ioctl(m->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0;
}

/* Run fn(arg) on a detached thread that holds m; -1 when none could be made. */
int later_take(sbx_monitor *m) {
  pthread_mutex_lock(&m->lock);
  int ok = m->later < SBX_LATER_MAX;
  if (ok) m->later++, m->refs++;
  pthread_mutex_unlock(&m->lock);
  return ok ? 0 : -1;
}

void later_done(sbx_monitor *m) {
  pthread_mutex_lock(&m->lock);
  m->later--;
  pthread_mutex_unlock(&m->lock);
  sbx_monitor_release(m);
}

int later_thread(sbx_monitor *m, void *(*fn)(void *), void *arg) {
  if (later_take(m) < 0) return -1;
  pthread_t t;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&at, 256 * 1024);
  int rc = pthread_create(&t, &at, fn, arg);
  pthread_attr_destroy(&at);
  if (rc == 0) return 0;
  later_done(m);
  return -1;
}

/* ---- connect ----
 * A blocking connect can wait long (a full backlog, a handshake to a silent address). It
 * waits on a thread of its own, woken each second by a signal aimed at that thread (a timer;
 * the handler does nothing and has no SA_RESTART, so the connect returns EINTR) to see
 * whether its caller still waits; the caller's socket options are never touched. A connect
 * on a non-blocking socket is made at once, on the serving thread, under a 50 ms timer: the
 * caller can make the socket blocking meanwhile, and then a thread goes on with it. */

#define TICK_SIG (SIGRTMIN + 4)
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static void tick(int sig) {
  (void)sig;
}

static pthread_once_t tick_once = PTHREAD_ONCE_INIT;

static void tick_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = tick; /* (no SA_RESTART: the call it lands in returns EINTR) */
  sigemptyset(&sa.sa_mask);
  sigaction(TICK_SIG, &sa, NULL);
}

typedef struct ticker {
  timer_t t;
  int ok;
  sigset_t old;
} ticker;

/* Signals to this thread after first_ms, then every every_ms (0: once). */
static void ticker_start(ticker *k, long first_ms, long every_ms) {
  pthread_once(&tick_once, tick_install);
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = TICK_SIG;
  ev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
  k->ok = timer_create(CLOCK_MONOTONIC, &ev, &k->t) == 0;
  if (k->ok) {
    struct itimerspec its = {{every_ms / 1000, (every_ms % 1000) * 1000000},
                             {first_ms / 1000, (first_ms % 1000) * 1000000}};
    timer_settime(k->t, 0, &its, NULL);
  }
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, TICK_SIG);
  pthread_sigmask(SIG_UNBLOCK, &one, &k->old);
}

static void ticker_stop(ticker *k) {
  if (k->ok) timer_delete(k->t);
  pthread_sigmask(SIG_SETMASK, &k->old, NULL); /* (a tick left pending: a spurious EINTR later) */
}

typedef struct conn_job {
  sbx_monitor *m;
  uint64_t id;
  int sock, family;
  sbx_dest d;
} conn_job;

static void conn_free(conn_job *j) {
  close(j->sock);
  if (j->d.hold >= 0) close(j->d.hold);
}

/* The connect, waiting as long as the caller does: its result (0 or -errno). The caller's
 * own send timeout bounds it as the kernel's would (EAGAIN for unix, EINPROGRESS for inet). */
static long conn_run(conn_job *j) {
  struct timeval to = {0, 0};
  socklen_t tl = sizeof to;
  getsockopt(j->sock, SOL_SOCKET, SO_SNDTIMEO, &to, &tl);
  long long deadline =
      to.tv_sec || to.tv_usec ? later_now_ms() + to.tv_sec * 1000 + to.tv_usec / 1000 : 0;
  ticker k;
  ticker_start(&k, 1000, 1000);
  long rc;
  for (;;) {
    rc = connect(j->sock, (struct sockaddr *)&j->d.to, j->d.len) < 0 ? -errno : 0;
    if (rc != -EINTR) break;
    if (later_gone(j->m, j->id)) break;
    if (deadline && later_now_ms() >= deadline) {
      rc = j->family == AF_UNIX ? -EAGAIN : -EINPROGRESS;
      break;
    }
  }
  ticker_stop(&k);
  return rc;
}

static void *connect_thread(void *arg) {
  conn_job *j = arg;
  emu_state caps;
  emu_drop_caps(&caps); /* (this thread's own, for its life) */
  later_answer(j->m, j->id, conn_run(j));
  conn_free(j);
  later_done(j->m);
  free(j);
  return NULL;
}

void send_connect(sbx_call *c, sbx_sock *sk, sbx_dest *d) {
  conn_job one = {.m = c->m, .id = c->req->id, .sock = sk->fd, .family = sk->family, .d = *d};
  emu_state caps;
  c->resp->flags = 0;
  int fl = fcntl(sk->fd, F_GETFL);
  ticker k;
  k.ok = 0;
  if (fl >= 0 && (fl & O_NONBLOCK)) {
    ticker_start(&k, 50, 0);
    if (!k.ok) ticker_stop(&k); /* (the mask back) */
  }
  /* (without the timer, which a process of the same user can keep from being made by using up
   * the user's pending signals, never on this thread) */
  if (k.ok) {
    emu_drop_caps(&caps);
    int rc = connect(sk->fd, (struct sockaddr *)&d->to, d->len);
    int err = errno;
    emu_end(&caps);
    ticker_stop(&k);
    if (rc == 0 || err != EINTR) {
      answer(c, rc < 0 ? err : 0);
      conn_free(&one);
      return;
    }
    /* it waited: the caller made the socket blocking meanwhile */
  }
  conn_job *j = malloc(sizeof *j);
  if (j != NULL) {
    *j = one;
    if (later_thread(c->m, connect_thread, j) == 0) {
      c->handed_off = 1; /* the thread owns the descriptors now */
      return;
    }
    free(j);
  }
  emu_drop_caps(&caps); /* no thread: waited for here */
  long rc = conn_run(&one);
  emu_end(&caps);
  answer(c, rc < 0 ? (int)-rc : 0);
  conn_free(&one);
}
