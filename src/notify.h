/* notify.h: the host end of a session's seccomp listener. A record is made only for a call
 * the sandbox refused: the listener's thread judges each notified call with the rules the
 * kernel layers enforce and, when the policy refuses it, answers it itself with the errno the
 * kernel would give (the call never runs) and records it; every other call goes on to the
 * kernel (CONTINUE) unrecorded. Records are distinct (op, target) pairs with a count, so a
 * flood of one kind cannot push a later, different refusal out. A thread of its own serves
 * each listener while it runs (the loop's wake-ups cost several times more per call), taken
 * from the threads earlier sessions let go; it touches no Lua and no loop handle. */
#ifndef LUXEC_NOTIFY_H
#define LUXEC_NOTIFY_H

#include <pthread.h>
#include <sys/types.h>

#define SBX_KEEP 512       /* distinct records kept in all */
#define SBX_KEEP_PER_OP 32 /* of one op and kind (a family, or a path): past it, only counted */
/* The first records of each named op are kept past SBX_KEEP, in SBX_KEEP_SPARE more slots: a
 * flood of many kinds must not hide the first refusal of another (a connect after 512
 * distinct file refusals). Ops of another ABI ("syscall N of x32", one per number) do not
 * get them. */
#define SBX_KEEP_FIRST 2
#define SBX_KEEP_SPARE 256
#define SBX_OVERFLOW_OPS 32
#define SBX_CHUNK 32 /* records are allocated in chunks that never move */

typedef struct sbx_denial {
  char op[64];
  const char *source; /* "supervisor": it answered the call itself; "kernel": a kernel log */
  char *path, *to;    /* file calls: the path the kernel would have used; rename/link: both */
  char family[16];
  char addr[64];
  int port, type, protocol;
  int pid; /* the first caller (host pid of its thread) */
  int err; /* the errno the call got */
  char comm[17];
  long long count; /* calls refused with this same (op, target); atomic */
} sbx_denial;

typedef struct sbx_overflow {
  char op[64];
  long long count;
  /* the latest refusal counted here (its count: of that same target in a row), so that a
   * flood of distinct targets cannot hide the one after it; its strings are replaced under
   * the monitor's lock */
  sbx_denial last;
} sbx_overflow;

struct server {          /* a serving thread (notify.c) */
  int wake_fd;           /* an eventfd: a session given to it, or its session's stop */
  struct sbx_monitor *m; /* the session it serves, or NULL (idle) */
  struct server *next;   /* in the idle list */
};

/* A session's calls that may wait long (a fifo opened for writing before any reader, a
 * blocking connect or send) wait on threads of their own, at most this many at once: past
 * it they wait on the session's serving thread, so a session cannot fill the host with
 * threads and descriptors (a thousand writers of readerless fifos took 1,100 of each). */
#define SBX_LATER_MAX 32

typedef struct sbx_monitor {
  struct server *server;     /* the thread serving it, until it is done with it */
  int stopping;              /* the session stops it (atomic) */
  int closed;                /* the session let go of it (under lock) */
  pthread_mutex_t lock;      /* guards the records and counts below */
  pthread_mutex_t answering; /* held from answering a call to keeping its record */
  int fd;
  int mountns;     /* the read-only mount layer is in place */
  int net_deny;    /* the network is denied (in a network namespace) */
  int proxy_port;  /* network by name: connects to 127.0.0.1:port (the proxy) go on */
  int transparent; /* network by name: TCP to 443 and 80, UDP to 53 of any address go on */
  char **roots;
  int nroots;
  char **ro_paths;
  int nro;
  /* the records, in chunks allocated on demand: entries below ndenials never change but
   * for their count, so a reader needs the lock only to read ndenials */
  sbx_denial *chunks[(SBX_KEEP + SBX_KEEP_SPARE) / SBX_CHUNK];
  int ndenials;
  sbx_overflow overflow[SBX_OVERFLOW_OPS]; /* refusals past the limits, per op */
  int noverflow;
  long long total; /* every refusal */
  unsigned long long served;
  /* AF_UNIX calls (notify_unix.c) */
  int mediate_unix;          /* judge and perform them (the restricted modes) */
  int netns_private;         /* the sandbox has its own network namespace */
  int diag_fd;               /* NETLINK_SOCK_DIAG in the sandbox's network namespace, or -1 */
  struct netns_lease *netns; /* a hold on that namespace, let go with diag_fd, or NULL */
  pid_t prog_pid, init_pid;  /* the session's program and its pid namespace's init (or -1) */
  char **unix_allowed;       /* socket paths the policy names */
  unsigned long long (*unix_ids)[2]; /* the socket each named when the session was made */
  int nunix;
  /* new names refused in the roots (see sandbox_spec.reserved) */
  char **reserved;
  int nreserved;
  int reserve_only; /* file calls are notified for the reserved names only (no evidence) */
  int killable;     /* a caller's non-fatal signals wait for its answer (sbx_unix_cfg) */
  int refs;         /* the session, and each connect still waiting on its own thread */
  int later;        /* calls waiting on threads of their own (at most SBX_LATER_MAX) */
  /* the session's cpu limit, which the serving thread's work for it counts against: the
   * host's CPU spent judging and making its calls (0: no limit) */
  long long cpu_quota_ns, cpu_period_ns;
  long long cpu_credit_ns; /* what the thread may still spend now (below 0: it waits) */
  long long cpu_refill_at; /* CLOCK_MONOTONIC ns of the last refill */
} sbx_monitor;

static inline sbx_denial *sbx_record(sbx_monitor *m, int i) {
  return &m->chunks[i / SBX_CHUNK][i % SBX_CHUNK];
}

/* How AF_UNIX calls are judged (notify_unix.c); NULL: not at all (full access). */
typedef struct sbx_unix_cfg {
  int netns_private;
  int diag_fd;               /* taken */
  struct netns_lease *netns; /* a hold on diag_fd's network namespace, taken, or NULL */
  pid_t prog_pid, init_pid;
  char **allowed;                       /* copied */
  unsigned long long (*allowed_ids)[2]; /* copied: the socket (dev, ino) each named then */
  int nallowed;
  char **reserved; /* copied */
  int nreserved;
  int files_evidence; /* every file call is judged (else only the reserved names) */
  int killable;       /* a caller's non-fatal signals wait for its answer */
} sbx_unix_cfg;

/* Takes ownership of fd; roots are copied. NULL on failure (fd closed). */
sbx_monitor *sbx_monitor_start(int fd, char **roots, int nroots, char **ro_paths, int nro,
                               int mountns, int net_deny, int proxy_port, int transparent,
                               const sbx_unix_cfg *unix_cfg, long long cpu_quota_us,
                               long long cpu_period_us);
/* Stop serving and drop the session's hold: the listener closes and the monitor is freed once
 * no connect waits on its own thread. Call only after the session's processes are gone (a
 * live one would get ENOSYS). */
void sbx_monitor_close(sbx_monitor *m);
/* Wait until a refusal already answered is kept: the caller may have seen its answer (and
 * exited) before the serving thread, descheduled right after the answer, kept the record. */
void sbx_monitor_settled(sbx_monitor *m);
void sbx_monitor_retain(sbx_monitor *m);
/* notify_unix.c: diag_fd closed and the namespace's hold let go (m's lock held, or m alone). */
void sbx_monitor_drop_diag(sbx_monitor *m);
void sbx_monitor_release(sbx_monitor *m);

#endif
