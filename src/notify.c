/* notify.c: serving seccomp user notifications (see notify.h). */
#include "notify.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "luxec.h"
#include "notify_int.h"

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* Copy with truncation (a recorded path longer than the record is cut, not overflowed). */
void copy_str(char *dst, size_t size, const char *src) {
  size_t n = strnlen(src, size - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static char **copy(char **in, int n) {
  char **out = calloc((size_t)n + 1, sizeof(char *));
  for (int i = 0; out != NULL && i < n; i++) out[i] = strdup(in[i]);
  return out;
}

/* Read a NUL-terminated string from the target, page by page (the next page may not be
 * mapped). */
int read_string(pid_t pid, uint64_t addr, char *out, size_t size) {
  size_t got = 0;
  while (got < size - 1) {
    size_t page_left = 4096 - ((addr + got) & 4095);
    size_t want = size - 1 - got < page_left ? size - 1 - got : page_left;
    struct iovec local = {out + got, want}, remote = {(void *)(uintptr_t)(addr + got), want};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) return -1;
    if (memchr(out + got, '\0', (size_t)n) != NULL) return 0;
    got += (size_t)n;
  }
  out[size - 1] = '\0';
  return 0;
}

int read_mem(pid_t pid, uint64_t addr, void *out, size_t len) {
  struct iovec local = {out, len}, remote = {(void *)(uintptr_t)addr, len};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* The record for a new denial (NULL past SBX_KEEP); filled by the caller, so the slot is
 * published under the lock only once complete: see commit(). */
sbx_denial *record(sbx_monitor *m, const char *op, pid_t pid) {
  pthread_mutex_lock(&m->lock);
  m->total++;
  int full = m->ndenials >= SBX_KEEP;
  pthread_mutex_unlock(&m->lock);
  if (full) return NULL;
  sbx_denial *d = &m->pending;
  memset(d, 0, sizeof *d);
  snprintf(d->op, sizeof d->op, "%s", op);
  d->pid = pid;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, d->comm, sizeof d->comm - 1);
    close(fd);
    if (n > 0) d->comm[strcspn(d->comm, "\n")] = '\0';
  }
  return d;
}

int notif_valid(const sbx_monitor *m, uint64_t id) {
  return ioctl(m->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Calls the filter refuses outright: recorded by name and answered EPERM. */
static int refused(sbx_monitor *m, const struct seccomp_notif *req,
                   struct seccomp_notif_resp *resp) {
  int nr = req->data.nr;
  const char *name = NULL;
  char other[48];
  if (req->data.arch != AUDIT_ARCH_X86_64) {
    snprintf(other, sizeof other, "syscall %d of arch 0x%x", nr, req->data.arch);
    name = other;
  } else {
    switch (nr) {
      case SYS_ptrace: name = "ptrace"; break;
      case SYS_process_vm_writev: name = "process_vm_writev"; break;
      case SYS_bpf: name = "bpf"; break;
      case SYS_mount: name = "mount"; break;
      case SYS_umount2: name = "umount2"; break;
      case SYS_fsopen: name = "fsopen"; break;
      case SYS_fsconfig: name = "fsconfig"; break;
      case SYS_fsmount: name = "fsmount"; break;
      case SYS_fspick: name = "fspick"; break;
      case SYS_move_mount: name = "move_mount"; break;
      case SYS_open_tree: name = "open_tree"; break;
      case SYS_mount_setattr: name = "mount_setattr"; break;
      case SYS_pivot_root: name = "pivot_root"; break;
      case SYS_chroot: name = "chroot"; break;
      case SYS_keyctl: name = "keyctl"; break;
      case SYS_add_key: name = "add_key"; break;
      case SYS_request_key: name = "request_key"; break;
      case SYS_unshare: name = "unshare"; break;
      case SYS_setns: name = "setns"; break;
      case SYS_io_uring_setup: name = "io_uring_setup"; break;
      case SYS_io_uring_enter: name = "io_uring_enter"; break;
      case SYS_io_uring_register: name = "io_uring_register"; break;
      case SYS_clone: name = "clone (new namespace)"; break;
      case SYS_socketpair: name = "socketpair"; break;
      case SYS_perf_event_open: name = "perf_event_open"; break;
      case SYS_userfaultfd: name = "userfaultfd"; break;
      case SYS_open_by_handle_at: name = "open_by_handle_at"; break;
      case SYS_name_to_handle_at: name = "name_to_handle_at"; break;
      case SYS_kexec_load: case SYS_kexec_file_load: name = "kexec"; break;
      case SYS_init_module: case SYS_finit_module: case SYS_delete_module: name = "module"; break;
      case SYS_swapon: case SYS_swapoff: name = "swap"; break;
      case SYS_reboot: name = "reboot"; break;
      case SYS_quotactl: name = "quotactl"; break;
      case SYS_acct: name = "acct"; break;
      case SYS_iopl: case SYS_ioperm: name = "ioperm"; break;
      default: return 0;
    }
  }
  resp->flags = 0;
  resp->error = -EPERM;
  record(m, name, (pid_t)req->pid);
  return 1;
}

static void handle(sbx_monitor *m, const struct seccomp_notif *req,
                   struct seccomp_notif_resp *resp, int *handed_off) {
  resp->id = req->id;
  resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE; /* file evidence only looks */
  resp->error = 0;
  resp->val = 0;
  if (refused(m, req, resp)) return;
  if (notify_net_call(m, req, resp, handed_off)) return;
  notify_file_call(m, req, resp);
}

/* Publish the denial record() handed out, if any. */
static void commit(sbx_monitor *m, long long before) {
  pthread_mutex_lock(&m->lock);
  if (m->total > before && m->pending.op[0] != '\0' && m->ndenials < SBX_KEEP) {
    m->denials[m->ndenials++] = m->pending;
  }
  pthread_mutex_unlock(&m->lock);
  m->pending.op[0] = '\0';
}

static void *serve(void *arg) {
  sbx_monitor *m = arg;
  struct pollfd pf[2] = {{.fd = m->fd, .events = POLLIN}, {.fd = m->stop_fd, .events = POLLIN}};
  int nfds = 2;
  for (;;) {
    if (poll(pf + (nfds == 1), (nfds_t)nfds, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pf[1].revents & POLLIN) break;
    if (nfds == 2 && (pf[0].revents & (POLLHUP | POLLERR)) && !(pf[0].revents & POLLIN)) {
      nfds = 1; /* every filtered process is gone: wait for the stop */
      continue;
    }
    if (!(pf[0].revents & POLLIN)) continue;
    struct seccomp_notif req;
    memset(&req, 0, sizeof req);
    if (ioctl(m->fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) continue; /* ENOENT: caller died */
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    pthread_mutex_lock(&m->lock);
    long long before = m->total;
    pthread_mutex_unlock(&m->lock);
    int handed_off = 0; /* a connect that may wait answers from its own thread */
    handle(m, &req, &resp, &handed_off);
    commit(m, before);
    m->served++;
    if (!handed_off) ioctl(m->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp); /* ENOENT: died meanwhile */
  }
  return NULL;
}

sbx_monitor *sbx_monitor_start(int fd, char **roots, int nroots, char **ro_paths, int nro,
                               int mountns, const sbx_unix_cfg *u) {
  sbx_monitor *m = calloc(1, sizeof *m);
  if (m == NULL) {
    close(fd);
    return NULL;
  }
  m->fd = fd;
  m->refs = 1;
  m->diag_fd = -1;
  m->prog_pid = m->init_pid = -1;
  if (u != NULL) { /* before the thread starts: no call is served unjudged */
    m->mediate_unix = 1;
    m->netns_private = u->netns_private;
    m->diag_fd = u->diag_fd;
    m->prog_pid = u->prog_pid;
    m->init_pid = u->init_pid;
    m->unix_allowed = copy(u->allowed, u->nallowed);
    m->nunix = m->unix_allowed ? u->nallowed : 0;
  }
  m->mountns = mountns;
  m->roots = copy(roots, nroots);
  m->nroots = nroots;
  m->ro_paths = copy(ro_paths, nro);
  m->nro = nro;
  /* the target wakes on the host's core when answered: ~5 µs instead of ~50 a call */
  uint64_t flags = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
  ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags);
  pthread_mutex_init(&m->lock, NULL);
  m->stop_fd = eventfd(0, EFD_CLOEXEC);
  /* the host's signal handlers run on its main thread, never on this one */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = m->stop_fd < 0 ? -1 : pthread_create(&m->thread, NULL, serve, m);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    m->stop_fd >= 0 ? (void)close(m->stop_fd) : (void)0;
    m->stop_fd = -1;
    sbx_monitor_close(m);
    return NULL;
  }
  return m;
}

void sbx_monitor_retain(sbx_monitor *m) {
  pthread_mutex_lock(&m->lock);
  m->refs++;
  pthread_mutex_unlock(&m->lock);
}

void sbx_monitor_release(sbx_monitor *m) {
  pthread_mutex_lock(&m->lock);
  int last = --m->refs == 0;
  pthread_mutex_unlock(&m->lock);
  if (!last) return;
  close(m->fd);
  if (m->diag_fd >= 0) close(m->diag_fd);
  pthread_mutex_destroy(&m->lock);
  for (int i = 0; i < m->nroots; i++) free(m->roots[i]);
  for (int i = 0; i < m->nro; i++) free(m->ro_paths[i]);
  for (int i = 0; i < m->nunix; i++) free(m->unix_allowed[i]);
  free(m->roots);
  free(m->ro_paths);
  free(m->unix_allowed);
  free(m);
}

/* The serving thread stops here; a connect still waiting on its own thread (its peer in the
 * sandbox is gone, so it ends soon) keeps the rest until it answers. */
void sbx_monitor_close(sbx_monitor *m) {
  if (m == NULL) return;
  if (m->stop_fd >= 0) {
    uint64_t one = 1;
    if (write(m->stop_fd, &one, sizeof one) == sizeof one) pthread_join(m->thread, NULL);
    close(m->stop_fd);
    m->stop_fd = -1;
  }
  sbx_monitor_release(m);
}
