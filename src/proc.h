/* proc.h: a session's native state, shared by the files that implement its methods. */
#ifndef LUXEC_PROC_H
#define LUXEC_PROC_H

#include "cgroup.h"
#include "cgroup_limits.h"
#include "luxec.h"
#include "outbuf.h"
#include "wqueue.h"

#define PROC_MT "luxec.proc"
/* A stream's target as /proc names it: "/dev/pts/N" or "pipe:[inode]" (a 64-bit inode). */
#define PROC_TARGET_MAX 32

struct proc;
struct sbx_monitor;
struct sandbox_prep;

typedef struct proc_sandbox_info {
  int used, landlock_abi, seccomp, notify, userns, mountns, pidns, ipcns, netns, caps_dropped;
  int degraded_notify, degraded_ns;
  int mount_copied; /* its mount tree was copied from one prepared for the policy */
  char mode[24], network[8];
  long long setup_us[20]; /* each layer's cost (sandbox.h's SBX_T_*), -1: not made */
} proc_sandbox_info;

typedef struct pstream {
  uv_poll_t poll; /* data NULL: found with container_of */
  struct proc *proc;
  int fd; /* -1 once at EOF and closed */
  int eof;
  int poll_open;
  int grown; /* its pipe was made larger (proc_io.c) */
  outbuf buf;
  char target[PROC_TARGET_MAX]; /* what holders of this stream's write side have open ("": not
                          * looked up yet, proc_tree.c) */
} pstream;

struct pbox;

typedef struct proc {
  struct proc *next, *prev; /* the live list the host's shutdown walks */
  struct pbox *box;         /* its Lua handle while that is alive (it outlives a host close) */
  lua_State *L;
  luxec_host *host; /* L's host (found once: a turn of a wait needs it) */
  int self_ref;     /* anchors the userdata while something holds it (ref) and it runs */
  pid_t pid;
  int pidfd;
  pid_t init_pid;  /* the init of the sandbox's pid namespace (the host's child), or -1 */
  int init_killed; /* SIGKILLed: the namespace is ending; a zombie is the sweep's */
  void *init_stack;
  struct netns_lease *netns; /* its network namespace, to give back at its end, or NULL */
  int exit_poll_open;
  int tty;
  int nout;           /* output streams: 1 (a terminal, or pipes merged) or 2 (stderr apart) */
  int in_fd;          /* -1: /dev/null or closed */
  uv_poll_t *in_poll; /* a pipe's stdin: made by the first write that has to wait, or NULL */
  int in_poll_open, in_polling;
  wqueue wq; /* input not written yet, in order */
  size_t wq_bytes;
  uint64_t in_dropped;  /* bytes written that the program never took (its input ended first) */
  int in_err;           /* sticky errno of a failed write (EPIPE, EIO) */
  int close_in_pending; /* close stdin once the queue has drained */
  int stdin_closed;
  char in_target[PROC_TARGET_MAX]; /* the child's stdin as /proc shows it, for input waits */
  int exited, code, termsig, core_dumped, reaped;
  char killed_by[32];
  char marker[64]; /* without a cgroup: "LUXEC_SESSION=..." in the child's environment */
  uint64_t mark;   /* and its RLIMIT_RTTIME mark (procfs.h), 0 when it could not be set */
  unsigned long long start_ticks; /* without a cgroup: when it started, as /proc's start times */
  int raw;    /* a terminal made raw on request (tty = {raw = true}, p:set_raw()) */
  int ending; /* its end was asked (terminate, kill, close): no longer a claim on orphans */
  cg_session cg;
  int limited;             /* the sandbox policy set limits: lim says how each is enforced */
  cg_limits_state *lim;    /* allocated only then (it is large and most sessions have none) */
  int pending_closes;      /* handles whose close callback has not run yet */
  int closed;              /* closed from Lua or by the host: no more methods */
  int referenced;          /* keeps the loop alive (uv_ref): lua_ref or waiting */
  int lua_ref;             /* the Lua side holds it (p:ref(true)): also anchored */
  int waiting;             /* a top-level wait (p:run_once) runs the loop for it */
  int want_output;         /* Lua wants an "output" event per read (someone waits or listens) */
  struct tree_end *te;     /* watching the tree end (proc_end.c), or NULL */
  struct sbx_monitor *sbx; /* the seccomp listener's host end, or NULL */
  int proxy_fd;            /* network by name: the proxy's listener until Lua takes it, or -1 */
  int proxy_port;
  int transp_fd[3]; /* network by name, transparent path: 443, 80, 53 (sandbox.h), or -1 */
  proc_sandbox_info *sbx_info; /* NULL without a sandbox (most sessions) */
  /* out[nout]: allocated with the proc (PROC_SIZE), so a session with one stream does not
   * carry a second */
  pstream out[];
} proc;

#define PROC_SIZE(nout) (sizeof(proc) + (size_t)(nout) * sizeof(pstream))

typedef struct pbox {
  proc *p;
} pbox;

/* proc.c */
proc *proc_check(lua_State *L, int idx); /* raises on a closed handle */
void proc_emit(proc *p, const char *event, int a, lua_Integer b);
void proc_maybe_release(proc *p);
void proc_close_handle(proc *p, uv_handle_t *h);
int proc_reap(proc *p, int block);        /* 1 once the child is reaped */
void proc_exit_reaped(proc *p);           /* after a reap: the exit told (p may be freed) */
void proc_started(proc *p, lua_State *L); /* the handle on top of L's stack, popped */
int proc_exits_ready(uv_loop_t *loop);    /* the host's watch of exits: 0 or an errno */
proc *proc_live(void);

/* proc_orphans.c */
/* Before the first session without a cgroup starts: the host the child subreaper (an orphan
 * its program makes at once comes back to it) and the watchdog started. */
void proc_orphans_ready(void);
void proc_orphans_session(proc *p, uv_loop_t *loop); /* a session without a cgroup started */
void proc_orphans_forget(pid_t pid);                 /* its first process was reaped */
void proc_orphans_init_done(proc *p);                /* its sandbox's init is the host's */
void proc_orphans_reap(void);
/* Whether kid, a child of the host (its subreaper), is a session's orphan whose marks were
 * taken away (environment cleared, session left, RLIMIT_RTTIME lowered below the host's)
 * that no live session without a cgroup but `except` can claim: one started no later, not
 * being ended (with claim_ending, one being ended claims it too). */
int proc_orphans_unclaimed(pid_t kid, proc *except, int claim_ending);
void proc_orphans_kill_unmarked(void); /* SIGKILL every such child of the host (its exit) */
void proc_orphans_close(void);

/* proc_spawn.c */
int proc_core_spawn(lua_State *L);
/* opts[k] as the index of its name in the NULL-terminated list; a missing or unknown value
 * raises an error naming the option, the names and the value (nothing falls back) */
int proc_opt_enum(lua_State *L, int t, const char *k, const char *const list[], const char *label);
int proc_opt_bool(lua_State *L, int t, const char *k, const char *label); /* required */
void luxec_open_proc(lua_State *L);
void luxec_procs_shutdown(void);
void luxec_procs_kill_all(void); /* async-signal-safe */

proc *proc_live(void); /* the first of every proc not yet freed (then ->next) */

/* proc_tree.c */
void proc_ns_kill(proc *p);    /* async-signal-safe */
void proc_ns_release(proc *p); /* kill, then reap and unmap its init on the loop */
void proc_ns_shutdown(void);
const char *proc_signame(int sig);
int proc_checksignal(lua_State *L, int idx);
int proc_tree_signal(proc *p, int sig);       /* every process of the tree: how many */
int proc_tree_signal_group(proc *p, int sig); /* the program's group: 1 when sent */
int proc_tree_signal_led(proc *p, int sig,
                         int led); /* the rest of the tree (led: the group had it) */
extern const luaL_Reg proc_tree_methods[];
extern const luaL_Reg proc_tree_functions[];

/* proc_end.c: ending a tree without waiting on the loop */
int proc_end_members(proc *p, pid_t *out);      /* the program (unless reaped) and its tree */
int proc_end_kill(proc *p, const char *reason); /* SIGKILL all of it now: how many */
int proc_end_watch(proc *p); /* 1 gone; 0: a "tree_empty" event follows; -errno */
/* Kill what is alive, stop watching; 1 when the cgroup is known to be empty already. */
int proc_end_close(proc *p, const char *why);
/* The pidfd closed now, the cgroup removed once empty (known_empty: from proc_end_close) */
void proc_end_release(proc *p, int known_empty);
void proc_end_shutdown(void); /* the host's handles, after every session closed */
/* proc_adopt.c: a closed session's zombie to be (pid, unreaped), reaped when it ends */
void proc_adopt(uv_loop_t *loop, pid_t pid);
void proc_adopt_shutdown(void); /* at host exit: the ones ended already */
extern const luaL_Reg proc_end_methods[];
extern const luaL_Reg proc_end_functions[];

/* proc_sandbox.c */
int proc_sandbox_prepare(lua_State *L, int opts, struct sandbox_prep *prep,
                         proc_sandbox_info *info); /* -1: the error triple is pushed */
void proc_sandbox_started(proc *p, struct sandbox_prep *prep, int listener, uv_loop_t *loop);
extern const luaL_Reg proc_sandbox_methods[];
/* proc_proxy.c */
extern const luaL_Reg proc_proxy_methods[];
extern const luaL_Reg proc_sandbox_functions[];

/* proc_limits.c */
int proc_limits_parse(lua_State *L, int opts, cg_limits *out); /* 1 when a limit is asked */
void proc_limits_report(lua_State *L, proc *p, int report);    /* fills report.limits, .degraded */

/* proc.c: whether p's handles keep the loop alive (p:ref without the anchoring) */
void proc_loop_ref(proc *p, int keep);

pbox *proc_checkbox(lua_State *L, int idx); /* a handle, open or closed */

/* proc_wait.c */
extern const luaL_Reg proc_wait_methods[];
void proc_wait_shutdown(void); /* the wait's timer, once every session closed */

/* proc_io.c */
void proc_io_start(proc *p);
void proc_io_exited(proc *p); /* after the reap: the streams read; may call into Lua */
void proc_io_stop_input(proc *p);
void proc_io_free_queue(proc *p);
extern const luaL_Reg proc_io_methods[];

/* proc_input.c */
extern const luaL_Reg proc_input_methods[];

#endif
