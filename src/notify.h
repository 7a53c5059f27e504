/* notify.h: the host end of a session's seccomp listener, served on the shared loop. Each
 * denied network call is answered EPERM and recorded with its address; each write-intent
 * file call is recorded when it falls outside the writable roots and let through (CONTINUE)
 * for the kernel's layers to refuse. A thread of its own serves each listener (the loop's
 * wake-ups cost several times more per call); it touches no Lua and no loop handle. */
#ifndef LUXEC_NOTIFY_H
#define LUXEC_NOTIFY_H

#include <pthread.h>
#include <uv.h>

#define SBX_KEEP 100 /* denials kept; all are counted */

typedef struct sbx_denial {
  char op[48];
  char path[512];
  char family[16];
  char addr[64];
  int port, type, protocol, pid;
  char comm[17];
} sbx_denial;

typedef struct sbx_monitor {
  pthread_t thread;
  pthread_mutex_t lock; /* guards the denials and counts below */
  int fd;
  int stop_fd;          /* an eventfd: written to end the thread */
  int mountns;    /* chmod/chown/utime outside the roots fail only with the mount layer */
  int force;      /* record the call being handled even inside a root */
  char **roots;
  int nroots;
  char **ro_paths;
  int nro;
  sbx_denial denials[SBX_KEEP];
  sbx_denial pending;   /* the one being filled by the thread, published by commit() */
  /* AF_UNIX calls (notify_unix.c) */
  int mediate_unix;     /* judge and perform them (the restricted modes) */
  int netns_private;    /* the sandbox has its own network namespace */
  int diag_fd;          /* NETLINK_SOCK_DIAG in the sandbox's network namespace, or -1 */
  pid_t prog_pid, init_pid; /* the session's program and its pid namespace's init (or -1) */
  char **unix_allowed;  /* socket paths the policy names */
  int nunix;
  int refs;             /* the session, and each connect still waiting on its own thread */
  int ndenials;
  long long total;
  unsigned long long served;
} sbx_monitor;

/* How AF_UNIX calls are judged (notify_unix.c); NULL: not at all (full access). */
typedef struct sbx_unix_cfg {
  int netns_private;
  int diag_fd;          /* taken */
  pid_t prog_pid, init_pid;
  char **allowed;       /* copied */
  int nallowed;
} sbx_unix_cfg;

/* Takes ownership of fd; roots are copied. NULL on failure (fd closed). */
sbx_monitor *sbx_monitor_start(int fd, char **roots, int nroots, char **ro_paths, int nro,
                               int mountns, const sbx_unix_cfg *unix_cfg);
void sbx_monitor_retain(sbx_monitor *m);
void sbx_monitor_release(sbx_monitor *m);
/* Stop serving, close the listener and free the monitor. Call only after the session's
 * processes are gone (a live one would get ENOSYS). */
void sbx_monitor_close(sbx_monitor *m);

#endif
