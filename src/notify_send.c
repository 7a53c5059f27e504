/* notify_send.c: sends the host makes for a sandboxed caller (the restricted modes).
 *
 * Judging the caller's arguments and answering CONTINUE is no enforcement for a send that may
 * carry an address: the kernel would look the descriptor up again and read the address (and
 * a message's header) again, and another thread of the caller can put a unix socket at that
 * descriptor (dup2) and write a unix address there in between, reaching a socket file nobody
 * judged. So the host makes every sendmsg, sendmmsg and addressed sendto itself: on its
 * duplicate of the caller's socket (pidfd_getfd: the very socket it looked at), with its own
 * copy of the address (judged by the socket family's judge), the data and the control
 * (descriptors translated for AF_UNIX, other control copied as it is). The host's calls are
 * made without effective capabilities, so that the kernel weighs a control message as the
 * caller's, not a root host's. A send that has to wait (a blocking socket, a full peer) waits
 * on a thread of its own, a second at a time, and ends once the caller is gone; the session's
 * other calls go on being served meanwhile. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "notify_int.h"

#define CHUNK (64 * 1024)      /* a stream's data is read from the caller this much at a time */
#define MAX_DGRAM (256 * 1024) /* more than a datagram can carry (wmem_max) */
#define MAX_CTL 20480          /* optmem_max's default: the kernel's ENOBUFS above it */
#define MAX_FDS 253            /* SCM_MAX_FD */
#define MAX_IOV 1024           /* UIO_MAXIOV */

int send_read_addr(sbx_call *c, uint64_t addr, uint64_t len, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (len > sizeof *ss) return EINVAL;
  if (len > 0 && read_mem((pid_t)c->req->pid, addr, ss, (size_t)len) < 0) return EFAULT;
  return 0;
}

/* ---- sends ---- */

/* One message of the caller's, on its way out. */
typedef struct send_job {
  sbx_monitor *m;
  uint64_t id;
  pid_t tid;
  int sock, stream, flags; /* the caller's flags */
  sbx_dest d;              /* d.len 0: no address */
  char *ctl;               /* the control, sent with the first bytes (NULL: none) */
  size_t ctllen;
  int fds[MAX_FDS], nfds; /* AF_UNIX: the host's duplicates of the descriptors it carries */
  struct iovec *remote;   /* the caller's data */
  size_t niov, total, done;
  char *buf;       /* a datagram: all of it; a stream: the next chunk */
  uint64_t len_at; /* sendmmsg: where the caller's msg_len is (0: sendmsg, sendto) */
  int nr, tfd;     /* the call, and the caller's descriptor */
  uint64_t arg;    /* the caller's msghdr (sendmsg) or buffer (sendto) */
  struct cut *cut; /* its entry while a thread sends it (a stream's) */
} send_job;

/* ---- a stream send cut short ----
 * A blocking send on a stream that the caller's signal handler interrupts when part of the
 * data went cannot tell the caller how much: the kernel makes the same call again (or the
 * caller, told EINTR, does). Each stream send that waits on a thread is listed here with
 * what went so far, and stays listed a while after its caller was interrupted: the same call
 * of the same thread on the same socket, for as many bytes, goes on after that part instead
 * of sending it twice. A thread makes one call at a time, so a new call of the thread means
 * the listed one ended: its waiting thread stops (taken). */
typedef struct cut {
  struct cut *next;
  const sbx_monitor *m;
  pid_t tid;
  int nr, tfd;
  uint64_t arg;
  ino_t ino;
  size_t total, done;
  int live, taken; /* a thread still sends it; a new call took it over */
  int answering;   /* its thread answers the caller: whether that reached it is not known */
  long long at;    /* when its thread ended */
} cut;

enum { CUT_MS = 2000, CUTS_ENDED = 64 }; /* (made again at once, or never) */
static cut *cuts;
static int cuts_ended;
static pthread_mutex_t cuts_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cuts_answered = PTHREAD_COND_INITIALIZER;

static ino_t sock_ino(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* Unlink *pp (cuts_lock held). */
static void cut_drop(cut **pp) {
  cut *k = *pp;
  *pp = k->next;
  if (!k->live) cuts_ended--;
  free(k);
}

/* j's entry, made as its thread starts; NULL when none could be made. */
static cut *cut_list(const send_job *j) {
  cut *k = calloc(1, sizeof *k);
  if (k == NULL) return NULL;
  *k = (cut){.m = j->m,
             .tid = j->tid,
             .nr = j->nr,
             .tfd = j->tfd,
             .arg = j->arg,
             .ino = sock_ino(j->sock),
             .total = j->total,
             .done = j->done,
             .live = 1};
  pthread_mutex_lock(&cuts_lock);
  k->next = cuts;
  cuts = k;
  pthread_mutex_unlock(&cuts_lock);
  return k;
}

/* j's thread ends: its entry stays (what went, for the call made again) when its caller was
 * interrupted after some of it went. */
static void cut_end(cut *k, int kept) {
  long long now = later_now_ms();
  pthread_mutex_lock(&cuts_lock);
  k->answering = 0;
  pthread_cond_broadcast(&cuts_answered);
  for (cut **pp = &cuts; *pp != NULL;) {
    cut *e = *pp;
    if (e == k && (!kept || e->taken)) {
      cut_drop(pp);
    } else if (e == k) {
      e->live = 0;
      e->at = now;
      cuts_ended++;
      pp = &e->next;
    } else if (!e->live && (now - e->at > CUT_MS || cuts_ended > CUTS_ENDED)) {
      cut_drop(pp); /* (the oldest are last) */
    } else {
      pp = &e->next;
    }
  }
  pthread_mutex_unlock(&cuts_lock);
}

/* The part of j's call that went before it was cut short: j->done. */
static void cut_take(send_job *j) {
  ino_t ino = sock_ino(j->sock);
  pthread_mutex_lock(&cuts_lock);
  /* A call the thread's earlier one is being answered with: a new call if that answer
   * reached it (a run of sends with one msghdr has the same key), the same one made again
   * if not. Known once the answer is made. */
  for (cut *e = cuts; e != NULL;) {
    if (e->answering && e->m == j->m && e->tid == j->tid) {
      pthread_cond_wait(&cuts_answered, &cuts_lock);
      e = cuts;
    } else {
      e = e->next;
    }
  }
  for (cut **pp = &cuts; *pp != NULL;) {
    cut *e = *pp;
    if (e->m != j->m || e->tid != j->tid) {
      pp = &e->next;
      continue;
    }
    /* the thread's earlier call has ended: its thread stops; the same call goes on */
    if (e->nr == j->nr && e->tfd == j->tfd && e->arg == j->arg && e->ino == ino &&
        e->total == j->total && !e->taken)
      j->done = e->done;
    if (e->live) {
      e->taken = 1;
      pp = &e->next;
    } else {
      cut_drop(pp);
    }
  }
  pthread_mutex_unlock(&cuts_lock);
  if (j->done > 0 && j->ctl != NULL) { /* the control went with the first bytes */
    free(j->ctl);
    j->ctl = NULL;
    j->ctllen = 0;
  }
}

static void job_free(send_job *j) {
  if (j->d.hold >= 0) close(j->d.hold);
  for (int i = 0; i < j->nfds; i++) close(j->fds[i]);
  free(j->ctl);
  free(j->remote);
  free(j->buf);
  free(j);
}

/* n bytes of the caller's data from offset off into j->buf. 0 or -EFAULT. */
static int job_copy(send_job *j, size_t off, size_t n) {
  size_t at = 0, got = 0;
  for (size_t i = 0; i < j->niov && got < n; i++) {
    size_t len = j->remote[i].iov_len;
    if (off >= at + len) {
      at += len;
      continue;
    }
    size_t from = off > at ? off - at : 0, k = len - from;
    if (k > n - got) k = n - got;
    uint64_t src = (uint64_t)(uintptr_t)j->remote[i].iov_base + from;
    if (read_mem(j->tid, src, j->buf + got, k) < 0) return -EFAULT;
    got += k;
    off += k;
    at += len;
  }
  return 0;
}

/* The caller's control at (addr, len): copied as it is, or for AF_UNIX rebuilt with the
 * host's duplicates of the descriptors it names (only descriptors travel: credentials would
 * be the host's, not the caller's). 0 or -errno. */
static int job_control(send_job *j, const sbx_sock *sk, uint64_t addr, size_t len) {
  if (len == 0) return 0;
  if (len > MAX_CTL) return -ENOBUFS;
  char *in = malloc(len);
  if (in == NULL) return -ENOMEM;
  if (read_mem(j->tid, addr, in, len) < 0) {
    free(in);
    return -EFAULT;
  }
  if (sk->family != AF_UNIX) {
    j->ctl = in;
    j->ctllen = len;
    return 0;
  }
  /* each header checked as the kernel does (a length past the control's end is EINVAL):
   * never read past the copy */
  int rc = 0;
  for (size_t off = 0; rc == 0 && off + sizeof(struct cmsghdr) <= len;) {
    struct cmsghdr h;
    memcpy(&h, in + off, sizeof h);
    if (h.cmsg_len < sizeof h || h.cmsg_len > len - off || h.cmsg_level != SOL_SOCKET ||
        h.cmsg_type != SCM_RIGHTS) {
      rc = -EINVAL;
      break;
    }
    size_t k = (h.cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int tfd;
      memcpy(&tfd, in + off + CMSG_LEN(0) + i * sizeof(int), sizeof tfd);
      if (j->nfds == MAX_FDS) {
        rc = -EINVAL; /* the kernel's answer past SCM_MAX_FD */
        break;
      }
      if ((j->fds[j->nfds] = unix_target_fd(j->m, j->id, j->tid, tfd)) < 0) {
        rc = -EBADF;
        break;
      }
      j->nfds++;
    }
    off += CMSG_ALIGN(h.cmsg_len);
  }
  free(in);
  if (rc < 0 || j->nfds == 0) return rc;
  j->ctllen = CMSG_SPACE(sizeof(int) * (size_t)j->nfds);
  if ((j->ctl = calloc(1, j->ctllen)) == NULL) return -ENOMEM;
  struct msghdr out = {.msg_control = j->ctl, .msg_controllen = j->ctllen};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&out);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)j->nfds);
  memcpy(CMSG_DATA(cm), j->fds, sizeof(int) * (size_t)j->nfds);
  return 0;
}

/* The message h of the caller (its pointers the caller's) made ready: its iovecs read, a
 * datagram's data copied, the address judged, the control copied. 0 or -errno. */
static int job_prepare(sbx_call *c, send_job *j, const sbx_sock *sk, sbx_judge judge,
                       const char *op, const struct msghdr *h) {
  if (h->msg_iovlen > MAX_IOV) return -EMSGSIZE;
  if (h->msg_iovlen > 0) {
    j->remote = malloc(sizeof(struct iovec) * h->msg_iovlen);
    if (j->remote == NULL) return -ENOMEM;
    if (read_mem(j->tid, (uint64_t)(uintptr_t)h->msg_iov, j->remote,
                 sizeof(struct iovec) * h->msg_iovlen) < 0)
      return -EFAULT;
    j->niov = h->msg_iovlen;
  }
  for (size_t i = 0; i < j->niov; i++) {
    if (j->remote[i].iov_len > (size_t)INT32_MAX - j->total) return -EINVAL;
    j->total += j->remote[i].iov_len;
  }
  if (!j->stream && j->total > MAX_DGRAM) return -EMSGSIZE;
  size_t room = j->stream ? (j->total < CHUNK ? j->total : CHUNK) : j->total;
  if ((j->buf = malloc(room ? room : 1)) == NULL) return -ENOMEM;
  if (!j->stream && job_copy(j, 0, j->total) < 0) return -EFAULT;
  if (h->msg_name != NULL && h->msg_namelen > 0) {
    struct sockaddr_storage ss;
    socklen_t nl = h->msg_namelen; /* a message's is cut to the largest (sendto's is EINVAL) */
    if (j->nr != SYS_sendto && nl > sizeof ss) nl = sizeof ss;
    int e = send_read_addr(c, (uint64_t)(uintptr_t)h->msg_name, nl, &ss);
    if (e == 0) e = judge(c, op, sk, j->flags, &ss, nl, &j->d);
    if (e != 0) return -e;
  }
  return job_control(j, sk, (uint64_t)(uintptr_t)h->msg_control, h->msg_controllen);
}

/* Send what is left of the message without waiting: 0 when all of it went, -EAGAIN when the
 * socket is full, or -errno (j->done: what went). */
static int job_try(send_job *j) {
  if (j->stream && j->total > 0 && j->done == j->total) return 0; /* (went before a cut) */
  if (!j->stream && j->buf == NULL) { /* (a datagram that waits is read again each try) */
    if ((j->buf = malloc(j->total ? j->total : 1)) == NULL) return -ENOMEM;
    if (job_copy(j, 0, j->total) < 0) return -EFAULT;
  }
  do {
    size_t n = j->total - j->done;
    if (j->stream) {
      if (n > CHUNK) n = CHUNK;
      if (n > 0 && job_copy(j, j->done, n) < 0) return -EFAULT;
    }
    struct iovec l = {j->buf, n};
    struct msghdr mh = {.msg_iov = &l, .msg_iovlen = 1};
    if (j->d.len > 0) {
      mh.msg_name = &j->d.to;
      mh.msg_namelen = j->d.len;
    }
    mh.msg_control = j->ctl;
    mh.msg_controllen = j->ctllen;
    ssize_t s = sendmsg(j->sock, &mh, j->flags | MSG_DONTWAIT | MSG_NOSIGNAL);
    if (s < 0) return -errno;
    if (j->ctl != NULL) { /* it went with these bytes */
      free(j->ctl);
      j->ctl = NULL;
      j->ctllen = 0;
    }
    j->done += (size_t)s;
    if (!j->stream) return 0;
    if ((size_t)s < n) return -EAGAIN;
  } while (j->done < j->total);
  return 0;
}

/* The call's result for the message: what went, or the error. */
static long job_result(const send_job *j, int rc) {
  return rc == 0 || j->done > 0 ? (long)j->done : rc;
}

/* sendmmsg: the caller's msg_len of the message, as the kernel fills it. */
static void job_len_back(const send_job *j) {
  unsigned len = (unsigned)j->done;
  struct iovec l = {&len, sizeof len}, r = {(void *)(uintptr_t)j->len_at, sizeof len};
  process_vm_writev(j->tid, &l, 1, &r, 1, 0);
}

static int blocking(const send_job *j) {
  int fl = fcntl(j->sock, F_GETFL);
  return !(j->flags & MSG_DONTWAIT) && fl >= 0 && !(fl & O_NONBLOCK);
}

/* A blocking send waits for room a second at a time, until the socket's send timeout (the
 * caller's own, if it set one), or until the caller is gone. */
static void *send_thread(void *arg) {
  send_job *j = arg;
  if (!j->stream) { /* (read again at the next try: a waiting datagram holds no copy) */
    free(j->buf);
    j->buf = NULL;
  }
  emu_state caps;
  emu_drop_caps(&caps);
  struct timeval to = {0, 0};
  socklen_t tl = sizeof to;
  getsockopt(j->sock, SOL_SOCKET, SO_SNDTIMEO, &to, &tl);
  long long deadline =
      to.tv_sec || to.tv_usec ? later_now_ms() + to.tv_sec * 1000 + to.tv_usec / 1000 : 0;
  int rc = -EAGAIN, idle = 0, gone = 0;
  cut *k = j->cut;
  while (rc == -EAGAIN) {
    int ms = 1000;
    if (deadline) {
      long long left = deadline - later_now_ms();
      if (left <= 0) break;
      if (left < ms) ms = (int)left;
    }
    struct pollfd p = {.fd = j->sock, .events = POLLOUT};
    /* a socket that says it has room and takes nothing (a datagram to a full receiver it is
     * not connected to): looked at again after a pause, not at once */
    int ready = idle ? poll(NULL, 0, idle < ms ? idle : ms) >= 0 : poll(&p, 1, ms) > 0;
    if (later_gone(j->m, j->id)) {
      gone = 1;
      break;
    }
    if (!ready && !idle) continue;
    size_t before = j->done;
    if (k != NULL) pthread_mutex_lock(&cuts_lock);
    if (k != NULL && k->taken) {
      gone = 1;
    } else {
      rc = job_try(j);
      if (k != NULL) k->done = j->done;
      if (rc == -EAGAIN && !j->stream) { /* the copy is not kept while it waits */
        free(j->buf);
        j->buf = NULL;
      }
    }
    if (k != NULL) pthread_mutex_unlock(&cuts_lock);
    if (gone) break;
    idle = rc == -EAGAIN && j->done == before ? (idle ? (idle < 200 ? idle * 2 : 200) : 10) : 0;
  }
  long res = job_result(j, rc);
  if (j->len_at && res >= 0) {
    job_len_back(j);
    res = 1;
  }
  if (k != NULL) {
    pthread_mutex_lock(&cuts_lock);
    k->answering = 1;
    pthread_mutex_unlock(&cuts_lock);
  }
  int pipe = !gone && res == -EPIPE && !(j->flags & MSG_NOSIGNAL);
  if (pipe && j->m->killable) syscall(SYS_tkill, j->tid, SIGPIPE); /* (as serve() does) */
  int answered = !gone && later_answer(j->m, j->id, res) == 0;
  if (answered && pipe && !j->m->killable) syscall(SYS_tkill, j->tid, SIGPIPE);
  if (k != NULL) cut_end(k, !answered && j->done > 0);
  later_done(j->m);
  close(j->sock);
  job_free(j);
  return NULL;
}

void send_call(sbx_call *c, sbx_sock *sk, sbx_judge judge) {
  const __u64 *a = c->req->data.args;
  int nr = c->req->data.nr, many = nr == SYS_sendmmsg;
  const char *op = nr == SYS_sendto ? "sendto" : many ? "sendmmsg" : "sendmsg";
  unsigned vlen = many ? (unsigned)a[2] : 1;
  if (vlen > MAX_IOV) vlen = MAX_IOV; /* as the kernel */
  int flags = (int)(nr == SYS_sendmsg ? a[2] : a[3]);
  long sent = 0, rc = 0;
  emu_state caps;
  send_job *part = NULL;
  for (unsigned i = 0; i < vlen; i++) {
    send_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
      rc = -ENOMEM;
      break;
    }
    *j = (send_job){.m = c->m,
                    .id = c->req->id,
                    .tid = (pid_t)c->req->pid,
                    .sock = sk->fd,
                    .stream = sk->type == SOCK_STREAM,
                    .flags = flags,
                    .d = {.hold = -1},
                    .nr = nr,
                    .tfd = (int)a[0],
                    .arg = a[1]};
    struct msghdr h;
    uint64_t at = a[1] + (many ? i * sizeof(struct mmsghdr) : 0);
    if (nr == SYS_sendto) {
      struct iovec one = {(void *)(uintptr_t)a[1], (size_t)a[2]};
      h = (struct msghdr){.msg_name = (void *)(uintptr_t)a[4], .msg_namelen = (socklen_t)a[5]};
      if ((j->remote = malloc(sizeof one)) != NULL) {
        j->remote[0] = one;
        j->niov = 1;
        rc = job_prepare(c, j, sk, judge, op, &h);
      } else {
        rc = -ENOMEM;
      }
    } else if (read_mem(j->tid, at, &h, sizeof h) < 0) {
      rc = -EFAULT;
    } else {
      rc = job_prepare(c, j, sk, judge, op, &h);
    }
    if (rc == 0 && j->stream && !many) cut_take(j);
    if (rc == 0) {
      emu_drop_caps(&caps);
      rc = job_try(j);
      emu_end(&caps);
    }
    if (rc == -EAGAIN && i == 0 && blocking(j)) { /* the first message waits for room */
      j->len_at = many ? at + offsetof(struct mmsghdr, msg_len) : 0;
      /* listed before the caller can make its next call (this thread serves that one) */
      if (j->stream && !many) j->cut = cut_list(j);
      if (later_thread(c->m, send_thread, j) == 0) {
        c->handed_off = 1; /* the thread owns the socket and the message now */
        return;
      }
      if (j->cut != NULL) cut_end(j->cut, 0);
    }
    rc = job_result(j, (int)rc);
    if (rc >= 0 && many) {
      j->len_at = at + offsetof(struct mmsghdr, msg_len);
      job_len_back(j);
    }
    if (!many && j->stream && j->done > 0)
      part = j;
    else
      job_free(j);
    if (rc == -EPIPE && !(flags & MSG_NOSIGNAL)) c->sigpipe = 1;
    if (rc < 0) break;
    sent = many ? sent + 1 : rc;
  }
  c->resp->flags = 0;
  if (rc < 0 && !(many && sent > 0)) { /* (a later message's error: the count of those sent) */
    c->resp->error = (int)rc;
  } else {
    c->resp->error = 0;
    c->resp->val = sent;
  }
  /* Part of a stream went: answered here, and listed when the answer finds the caller
   * interrupted meanwhile (what went is not sent again by the call made again). */
  if (part != NULL && c->rec.op[0] == '\0') {
    int pipe = c->sigpipe;
    if (pipe && c->m->killable) syscall(SYS_tkill, part->tid, SIGPIPE); /* (as serve() does) */
    if (ioctl(c->m->fd, SECCOMP_IOCTL_NOTIF_SEND, c->resp) == 0) {
      if (pipe && !c->m->killable) syscall(SYS_tkill, part->tid, SIGPIPE);
    } else {
      cut *k = cut_list(part);
      if (k != NULL) cut_end(k, 1);
    }
    c->handed_off = 1;
  }
  if (part != NULL) job_free(part);
  close(sk->fd);
}
