/* launch_int.h: what the direct launch (launch.c) and the launch into a sandbox's namespaces
 * (launch_ns.c) share. */
#ifndef LUXEC_LAUNCH_INT_H
#define LUXEC_LAUNCH_INT_H

#include "launch.h"

#include <stdint.h>

#define CHILD_STACK (64 * 1024)

/* The kernel's struct sigaction for rt_sigaction, called directly: no libc wrapper (which
 * refuses the C library's own signals, 32 and 33) or sanitizer interceptor in between. */
struct kernel_sigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  unsigned long mask;
};

typedef struct child_ctx {
  const launch_req *req;
  pid_t parent;
  int fd0, fd1, fd2; /* what becomes 0, 1, 2 */
  int ctty;          /* the PTY slave to make the controlling terminal, or -1 */
  volatile int err;  /* written by the child before _exit, read by the parent */
  volatile const char *stage;
  int report_fd;        /* -1, or the write end of the failure pipe when memory is not shared */
  int contained;        /* cloned into a sandbox's pid namespace: its parent is outside it */
  int files_shared;     /* started on the host's descriptor table (CLONE_FILES) */
  int in_cgroup;        /* born in the session's cgroups (the setup child joined them) */
  uint64_t reset;       /* the signals to put back to their default (bit n - 1: signal n) */
  volatile int started; /* the child ran (a child killed at its birth never does) */
  int born_in_cgroup;   /* born in the session's cgroup v2 (clone3): its v1 ones still to join */
  int null_inside;      /* stdin is /dev/null: opened again inside the sandbox's mount tree */
} child_ctx;

/* The program's side of a launch: from clone to exec (async-signal-safe). */
int launch_child_main(void *arg);
/* A stack for a child that shares the host's memory (the i-th of a few fixed ones: children
 * made during one launch run one at a time or use different ones). */
char *launch_stack(int i);
/* Clear ASan's shadow of a child stack before a clone (a no-op without ASan). */
void launch_stack_clean(char *stack);
void launch_stack_clean_size(void *stack, size_t size);
/* The PTY's slave side: IUTF8 and the window size. 0 or -1. */
int launch_pty_slave_setup(const launch_req *req, int slave);
int launch_set_nonblock(int fd);
/* Move the calling process into the cgroup (v2 directory) through its cgroup.procs: 0 or -1
 * (errno). Async-signal-safe. */
int launch_join_cgroup(int cgroup_fd);
/* Into the sandbox's namespaces (launch_ns.c); same contract as launch(). pipes: the child's
 * 0, 1, 2 when not a PTY. */
int launch_contained(const launch_req *req, launch_res *res, child_ctx *g);

#endif
