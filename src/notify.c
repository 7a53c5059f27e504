/* notify.c: serving seccomp user notifications and keeping the records (see notify.h). */
#include "notify.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "notify_int.h"

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#define X32_SYSCALL_BIT 0x40000000

/* Copy with truncation (a recorded path longer than the record is cut, not overflowed). */
void copy_str(char *dst, size_t size, const char *src) {
  size_t n = strnlen(src, size - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

char **notify_strv_copy(char **in, int n) {
  char **out = calloc((size_t)n + 1, sizeof(char *));
  for (int i = 0; out != NULL && i < n; i++) out[i] = strdup(in[i]);
  return out;
}

/* Whether a read of the calling task's memory failed while this thread judged its call
 * (see handle), and whether a string read was longer than size (no NUL in it). */
static _Thread_local int unreadable, too_long;

/* Read a NUL-terminated string from the target, page by page (the next page may not be
 * mapped): 0, -EFAULT where the memory cannot be read, -ENAMETOOLONG when no NUL is in the
 * first size bytes (for a path, size PATH_MAX: the kernel's own limit, its answer too). */
int read_string(pid_t pid, uint64_t addr, char *out, size_t size) {
  size_t got = 0;
  while (got < size) {
    size_t page_left = 4096 - ((addr + got) & 4095);
    size_t want = size - got < page_left ? size - got : page_left;
    struct iovec local = {out + got, want}, remote = {(void *)(uintptr_t)(addr + got), want};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      unreadable = 1;
      return -EFAULT;
    }
    if (memchr(out + got, '\0', (size_t)n) != NULL) return 0;
    got += (size_t)n;
  }
  out[size - 1] = '\0';
  too_long = 1;
  return -ENAMETOOLONG;
}

int read_mem(pid_t pid, uint64_t addr, void *out, size_t len) {
  struct iovec local = {out, len}, remote = {(void *)(uintptr_t)addr, len};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len) return 0;
  unreadable = 1;
  return -1;
}

void answer(sbx_call *c, int err) {
  c->resp->flags = 0;
  c->resp->error = -err;
}

sbx_denial *refuse(sbx_call *c, const char *op, int err, const char *path, const char *to) {
  answer(c, err);
  sbx_denial *d = &c->rec;
  memset(d, 0, sizeof *d);
  snprintf(d->op, sizeof d->op, "%s", op);
  if (path != NULL) {
    if (path != c->path) copy_str(c->path, sizeof c->path, path);
    d->path = c->path;
  }
  if (to != NULL) {
    if (to != c->to) copy_str(c->to, sizeof c->to, to);
    d->to = c->to;
  }
  d->source = "supervisor";
  d->pid = (int)c->req->pid;
  d->err = err;
  d->count = 1;
  return d;
}

/* ---- judging ---- */

static const char *refused_name(int nr) {
  switch (nr) {
    case SYS_ptrace: return "ptrace";
    case SYS_process_vm_writev: return "process_vm_writev";
    case SYS_bpf: return "bpf";
    case SYS_mount: return "mount";
    case SYS_umount2: return "umount2";
    case SYS_fsopen: return "fsopen";
    case SYS_fsconfig: return "fsconfig";
    case SYS_fsmount: return "fsmount";
    case SYS_fspick: return "fspick";
    case SYS_move_mount: return "move_mount";
    case SYS_open_tree: return "open_tree";
    case SYS_mount_setattr: return "mount_setattr";
    case SYS_pivot_root: return "pivot_root";
    case SYS_chroot: return "chroot";
    case SYS_keyctl: return "keyctl";
    case SYS_add_key: return "add_key";
    case SYS_request_key: return "request_key";
    case SYS_unshare: return "unshare";
    case SYS_setns: return "setns";
    case SYS_io_uring_setup: return "io_uring_setup";
    case SYS_io_uring_enter: return "io_uring_enter";
    case SYS_io_uring_register: return "io_uring_register";
    case SYS_clone: return "clone (new namespace)";
    case SYS_socketpair: return "socketpair";
    case SYS_perf_event_open: return "perf_event_open";
    case SYS_userfaultfd: return "userfaultfd";
    case SYS_open_by_handle_at: return "open_by_handle_at";
    case SYS_name_to_handle_at: return "name_to_handle_at";
    case SYS_kexec_load:
    case SYS_kexec_file_load: return "kexec";
    case SYS_init_module:
    case SYS_finit_module:
    case SYS_delete_module: return "module";
    case SYS_swapon:
    case SYS_swapoff: return "swap";
    case SYS_reboot: return "reboot";
    case SYS_quotactl: return "quotactl";
    case SYS_acct: return "acct";
    case SYS_iopl:
    case SYS_ioperm: return "ioperm";
    case SYS_fcntl: return "fcntl (F_SETLEASE)"; /* the only fcntl the filter sends */
    default: return NULL;
  }
}

/* Whether this kernel runs x32 system calls at all (asked once: getpid by its x32 number). */
static int x32_kernel(void) {
  static int known = -1;
  if (known < 0) known = syscall(SYS_getpid | X32_SYSCALL_BIT) >= 0 || errno != ENOSYS;
  return known;
}

static void handle(sbx_call *c) {
  const struct seccomp_notif *req = c->req;
  c->resp->id = req->id;
  c->resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  char other[64];
  if (req->data.arch == AUDIT_ARCH_X86_64 && (req->data.nr & X32_SYSCALL_BIT) && !x32_kernel()) {
    answer(c, ENOSYS); /* no x32 in this kernel: its own answer, nothing refused */
    return;
  }
  if (req->data.arch != AUDIT_ARCH_X86_64 || (req->data.nr & X32_SYSCALL_BIT)) {
    /* another ABI (i386 int 0x80, x32) would skip every rule: never let one through */
    if (req->data.arch == AUDIT_ARCH_X86_64)
      snprintf(other, sizeof other, "syscall %d of x32", req->data.nr & ~X32_SYSCALL_BIT);
    else
      snprintf(other, sizeof other, "syscall %d of arch 0x%x", req->data.nr, req->data.arch);
    refuse(c, other, EPERM, NULL, NULL);
    return;
  }
  const char *name = refused_name(req->data.nr);
  if (name != NULL) {
    refuse(c, name, EPERM, NULL, NULL);
    return;
  }
  unreadable = too_long = 0;
  if (notify_net_call(c) || notify_file_call(c) || notify_meta_call(c)) {
    /* A path longer than the kernel takes is its ENAMETOOLONG, not the EFAULT of memory the
     * host could not read (the judges answer EFAULT for both): no refusal, no record. */
    if (too_long && !unreadable && !c->handed_off && c->resp->flags == 0 &&
        c->resp->error == -EFAULT && c->rec.op[0] == '\0')
      c->resp->error = -ENAMETOOLONG;
    /* Never let a call go on whose arguments the host could not read: the kernel may read
     * what the host cannot (memory of another kind, or changed meanwhile) and then act on
     * arguments nobody judged. Where the kernel cannot read them either, EFAULT is its own
     * answer. */
    if (unreadable && !c->handed_off && (c->resp->flags & SECCOMP_USER_NOTIF_FLAG_CONTINUE))
      answer(c, EFAULT);
    return;
  }
  /* a notified call nobody judges would pass unseen: refuse it, and say which */
  snprintf(other, sizeof other, "syscall %d", req->data.nr);
  refuse(c, other, EPERM, NULL, NULL);
}

static long long clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A session with a cpu limit: the serving thread's CPU for it (used_ns for the last call) is
 * taken from a credit that grows by the quota each period, up to one quota; past it the
 * thread waits before its next call until the credit is back to zero — the session's calls
 * wait with it, as its processes wait when the kernel throttles them. Without this a session
 * limited to a little CPU made the host spend seconds a second for it (a path of 4,000 bytes
 * of "a/../" costs the host ~6 ms to resolve and the caller nothing). The wait ends at once
 * when the session stops it. */
static void throttle(sbx_monitor *m, struct server *sv, long long used_ns) {
  long long now = clock_ns(CLOCK_MONOTONIC);
  if (m->cpu_refill_at == 0) m->cpu_refill_at = now;
  long long credit =
      m->cpu_credit_ns - used_ns + (now - m->cpu_refill_at) * m->cpu_quota_ns / m->cpu_period_ns;
  m->cpu_refill_at = now;
  if (credit > m->cpu_quota_ns) credit = m->cpu_quota_ns;
  m->cpu_credit_ns = credit;
  if (credit >= 0) return;
  long long wait_ns = -credit * m->cpu_period_ns / m->cpu_quota_ns;
  struct pollfd pf = {.fd = sv->wake_fd, .events = POLLIN}; /* (read by serve's poll) */
  int ms = (int)(wait_ns / 1000000) + 1;
  if (!__atomic_load_n(&m->stopping, __ATOMIC_ACQUIRE)) poll(&pf, 1, ms);
}

/* Serve m's calls until the session stops it or no process can call any more. */
static void serve(sbx_monitor *m, struct server *sv) {
  struct pollfd pf[2] = {{.fd = m->fd, .events = POLLIN}, {.fd = sv->wake_fd, .events = POLLIN}};
  for (;;) {
    /* looked at each time round, not only when the wake descriptor is readable: the one
     * read that took the session's assignment may have taken its stop along (the count of
     * both) */
    if (__atomic_load_n(&m->stopping, __ATOMIC_ACQUIRE)) break;
    if (poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pf[1].revents & POLLIN) {
      uint64_t n;
      if (read(sv->wake_fd, &n, sizeof n) < 0 && errno != EAGAIN) break;
      continue; /* (a stop, or a count left from an earlier session's) */
    }
    /* every filtered process is gone, and no process can take the filter again: nothing more
     * comes (closing the session then finds this thread done with it, with nothing to wait
     * for) */
    if ((pf[0].revents & (POLLHUP | POLLERR)) && !(pf[0].revents & POLLIN)) break;
    if (!(pf[0].revents & POLLIN)) continue;
    struct seccomp_notif req;
    memset(&req, 0, sizeof req);
    if (ioctl(m->fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) continue; /* ENOENT: caller died */
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    sbx_call c;
    c.m = m; /* (c's buffers are only read once written: no memset of 8 KiB a call) */
    c.req = &req;
    c.resp = &resp;
    c.rec.op[0] = '\0';
    c.handed_off = 0;
    c.sigpipe = 0;
    long long cpu0 = m->cpu_quota_ns ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
    handle(&c);
    m->served++;
    if (m->cpu_quota_ns) throttle(m, sv, clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0);
    if (c.handed_off) continue; /* a connect that may wait answers from its own thread */
    if (c.rec.op[0] != '\0') record_comm(&c.rec); /* while the caller surely lives */
    /* a refusal is kept only once it reached the caller: if the caller died or was
     * interrupted meanwhile, nothing was refused (and its memory may be another's) */
    pthread_mutex_lock(&m->answering); /* see sbx_monitor_settled */
    /* SIGPIPE as the kernel sends it, before the call returns: with the caller's wait
     * killable only, a handled one waits for the answer (and an unhandled one ends it as the
     * kernel's would); else it would cut the call short, and it follows the answer */
    if (c.sigpipe && m->killable) syscall(SYS_tkill, (pid_t)req.pid, SIGPIPE);
    int sent = ioctl(m->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) == 0;
    if (sent && c.rec.op[0] != '\0') record_keep(m, &c.rec);
    pthread_mutex_unlock(&m->answering);
    /* after the answer: a signal while the caller waits for it would interrupt the call */
    if (sent && c.sigpipe && !m->killable) syscall(SYS_tkill, (pid_t)req.pid, SIGPIPE);
  }
}

/* ---- the serving threads ----
 * A session's listener gets a thread of its own while it runs (sessions are judged in
 * parallel, and one that floods its thread slows no other), but the thread is not made and
 * ended with each session: one done with its session waits, idle, for the next (making a
 * thread, ending it and joining it cost ~0.1 ms of CPU a session here, and a wake-up of the
 * loop's thread). At most MAX_IDLE wait; more end. */

#define MAX_IDLE 4
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct server *idle = NULL;
static int nidle = 0;

/* Take an idle server off the list; 0 when it is not there (a session was given to it). */
static int leave_idle(struct server *sv) {
  pthread_mutex_lock(&pool_lock);
  int found = 0;
  for (struct server **pp = &idle; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == sv) {
      *pp = sv->next;
      nidle--;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&pool_lock);
  return found;
}

static void *server_main(void *arg) {
  struct server *sv = arg;
  for (;;) {
    pthread_mutex_lock(&pool_lock);
    sbx_monitor *m = sv->m;
    pthread_mutex_unlock(&pool_lock);
    if (m != NULL) {
      serve(m, sv);
      /* Done with m: no call can come any more (its processes are gone) or the session
       * stopped it. The listener is closed here, off the loop's thread, unless a connect
       * still waiting on its own thread needs it: the close frees the kernel's copy of the
       * filter, and the worker the kernel wakes for that ran on the loop's CPU before the
       * loop went on (~0.2 ms a session here). */
      int fd = -1;
      pthread_mutex_lock(&m->lock);
      if (m->refs == 1 + !m->closed) { /* this thread's and the session's holds only */
        fd = m->fd;
        m->fd = -1;
        sbx_monitor_drop_diag(m); /* (its network namespace may then serve another) */
      }
      pthread_mutex_unlock(&m->lock);
      if (fd >= 0) close(fd);
      emu_thread_reset(); /* nothing of the session's stays with the thread */
      unix_target_forget();
      pthread_mutex_lock(&pool_lock);
      sv->m = NULL;
      m->server = NULL;
      pthread_mutex_unlock(&pool_lock);
      sbx_monitor_release(m);
      pthread_mutex_lock(&pool_lock);
      int keep = nidle < MAX_IDLE;
      if (keep) {
        sv->next = idle;
        idle = sv;
        nidle++;
      }
      pthread_mutex_unlock(&pool_lock);
      if (!keep) break;
    }
    struct pollfd pf = {.fd = sv->wake_fd, .events = POLLIN};
    if (poll(&pf, 1, -1) < 0 && errno != EINTR) {
      if (leave_idle(sv)) break; /* (else a session was just given to it) */
      continue;
    }
    uint64_t n;
    if (pf.revents & POLLIN) (void)!read(sv->wake_fd, &n, sizeof n);
  }
  close(sv->wake_fd);
  free(sv);
  return NULL;
}

/* Give m a thread: an idle one, else a new one. 0, or -1 (nothing serves m). */
static int server_take(sbx_monitor *m) {
  pthread_mutex_lock(&pool_lock);
  struct server *sv = idle;
  if (sv != NULL) {
    idle = sv->next;
    nidle--;
    sv->m = m;
    m->server = sv;
    m->refs++; /* the thread's hold, until it is done with m (m is not shared yet) */
    uint64_t one = 1;
    if (write(sv->wake_fd, &one, sizeof one) != sizeof one) { /* (it never wakes: undone) */
      sv->m = NULL;
      m->server = NULL;
      m->refs--;
      sv->next = idle;
      idle = sv;
      nidle++;
      pthread_mutex_unlock(&pool_lock);
      return -1;
    }
    pthread_mutex_unlock(&pool_lock);
    return 0;
  }
  pthread_mutex_unlock(&pool_lock);
  sv = calloc(1, sizeof *sv);
  if (sv == NULL) return -1;
  sv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  sv->m = m;
  m->server = sv;
  m->refs++;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  /* the host's signal handlers run on its main thread, never on this one */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int rc = sv->wake_fd < 0 ? -1 : pthread_create(&t, &at, server_main, sv);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&at);
  if (rc != 0) {
    if (sv->wake_fd >= 0) close(sv->wake_fd);
    free(sv);
    m->server = NULL;
    m->refs--;
    return -1;
  }
  return 0;
}

sbx_monitor *sbx_monitor_start(int fd, char **roots, int nroots, char **ro_paths, int nro,
                               int mountns, int net_deny, int proxy_port, int transparent,
                               const sbx_unix_cfg *u, long long cpu_quota_us,
                               long long cpu_period_us) {
  sbx_monitor *m = calloc(1, sizeof *m);
  if (m == NULL) {
    close(fd);
    if (u != NULL) unix_cfg_drop(u);
    return NULL;
  }
  m->fd = fd;
  m->refs = 1;
  m->diag_fd = -1;
  m->prog_pid = m->init_pid = -1;
  if (u != NULL) unix_cfg_take(m, u); /* before the thread starts: none served unjudged */
  if (cpu_quota_us > 0 && cpu_period_us > 0) {
    m->cpu_quota_ns = cpu_quota_us * 1000;
    m->cpu_period_ns = cpu_period_us * 1000;
    m->cpu_credit_ns = m->cpu_quota_ns;
  }
  m->mountns = mountns;
  m->net_deny = net_deny;
  m->proxy_port = proxy_port;
  m->transparent = transparent;
  m->roots = notify_strv_copy(roots, nroots);
  m->nroots = nroots;
  m->ro_paths = notify_strv_copy(ro_paths, nro);
  m->nro = nro;
  /* the target wakes on the host's core when answered: ~5 µs instead of ~50 a call */
  uint64_t flags = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
  ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags);
  pthread_mutex_init(&m->lock, NULL);
  pthread_mutex_init(&m->answering, NULL);
  if (server_take(m) < 0) {
    sbx_monitor_close(m);
    return NULL;
  }
  return m;
}

void sbx_monitor_settled(sbx_monitor *m) {
  pthread_mutex_lock(&m->answering);
  pthread_mutex_unlock(&m->answering);
}

void sbx_monitor_retain(sbx_monitor *m) {
  pthread_mutex_lock(&m->lock);
  m->refs++;
  pthread_mutex_unlock(&m->lock);
}

static void monitor_free(sbx_monitor *m);

void sbx_monitor_release(sbx_monitor *m) {
  pthread_mutex_lock(&m->lock);
  int last = --m->refs == 0;
  pthread_mutex_unlock(&m->lock);
  if (last) monitor_free(m);
}

static void monitor_free(sbx_monitor *m) {
  if (m->fd >= 0) close(m->fd);
  sbx_monitor_drop_diag(m);
  pthread_mutex_destroy(&m->lock);
  pthread_mutex_destroy(&m->answering);
  for (int i = 0; i < m->nroots; i++) free(m->roots[i]);
  for (int i = 0; i < m->nro; i++) free(m->ro_paths[i]);
  for (int i = 0; i < m->nunix; i++) free(m->unix_allowed[i]);
  for (int i = 0; i < m->nreserved; i++) free(m->reserved[i]);
  free(m->reserved);
  records_free(m);
  free(m->roots);
  free(m->ro_paths);
  free(m->unix_allowed);
  free(m->unix_ids);
  free(m);
}

void sbx_monitor_close(sbx_monitor *m) {
  if (m == NULL) return;
  /* its thread, if it still serves it (else it is done: its processes are gone), lets go of
   * it when it wakes; nothing here waits for that */
  pthread_mutex_lock(&pool_lock);
  if (m->server != NULL) {
    __atomic_store_n(&m->stopping, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    (void)!write(m->server->wake_fd, &one, sizeof one);
  }
  pthread_mutex_unlock(&pool_lock);
  pthread_mutex_lock(&m->lock); /* (one step: the thread sees both or neither) */
  m->closed = 1;
  int last = --m->refs == 0;
  pthread_mutex_unlock(&m->lock);
  if (last) monitor_free(m);
}
