/* launch.h: start one child with its own session, terminal or pipes, cgroup and nothing
 * inherited; report exec failure with its errno. */
#ifndef LUXEC_LAUNCH_H
#define LUXEC_LAUNCH_H

#include <sys/resource.h>
#include <sys/types.h>

#include "sandbox.h"

typedef struct launch_req {
  const char *path;  /* resolved program path */
  char *const *argv; /* argv[0] may be arg0 */
  char *const *envp;
  const char *cwd; /* NULL: inherit */
  int tty;         /* 1: new PTY with rows x cols */
  unsigned short rows, cols;
  int no_echo;      /* tty only: the terminal starts without echo */
  int raw;          /* tty only: the terminal starts in raw mode (cfmakeraw) */
  int stdin_pipe;   /* pipes only: 1 pipe, 0 /dev/null */
  int stderr_apart; /* pipes only: 1 separate stderr pipe, 0 merged into stdout */
  int cgroup_fd;    /* -1, or the session's cgroup (v2 directory): the child is born in it,
                        * or moves itself in (its cgroup.procs) where clone3 cannot do that */
  int cgroup_born;  /* it may be born in it: luxec never killed that cgroup (cgroup.h) */
  int inits_fd;     /* -1, or the cgroup a sandbox's pid namespace init lives in (cgroup.h) */
  int ncgroup_more; /* more cgroup.procs to join (cgroup v1 hierarchies of limits) */
  int cgroup_more_fds[3];
  int nrlimits; /* rlimits set right before exec (limits and the mark without a cgroup) */
  int rlimit_res[4];
  struct rlimit rlimit_val[4];
  sandbox_prep *sandbox; /* NULL, or the layers to apply before exec */
} launch_req;

/* What a running session holds in the host: its pidfd and the descriptors below. 2 on a PTY
 * (pidfd, master) and on pipes with stdin = "null" and stderr merged (pidfd, output); 3 on the
 * default pipes, whose stdin is a pipe (its write end is how the program gets EOF); 4 with
 * stderr apart. No cgroup file stays open (its directory only for the launch). While terminate
 * waits for a tree without a cgroup, one pidfd per process of it (proc_end.c). */
typedef struct launch_res {
  pid_t pid;
  int pidfd;
  int in_fd;         /* write end of stdin, or the PTY master (the same descriptor as
                            * out_fd, not a second one); -1 for null */
  int out_fd;        /* read end of stdout (merged), or the PTY master */
  int err_fd;        /* read end of stderr when apart, else -1 */
  int listener_fd;   /* the sandbox's seccomp listener, or -1 */
  pid_t init_pid;    /* the init of the sandbox's pid namespace (a child of the host), or
                            * -1; killing it kills everything in the namespace */
  void *init_stack;  /* its stack (LAUNCH_INIT_STACK bytes): unmap once it is killed */
  int err;           /* on failure: the errno */
  const char *stage; /* on failure: what failed ("exec", "cwd", "pty", ...) */
} launch_res;

#define LAUNCH_INIT_STACK (16 * 1024)

/* Release a sandbox init's stack once the init is killed (it runs no more code). */
/* reaped: the init ended (its stack may serve another); else it was only killed */
void launch_init_stack_free(void *stack, int reaped);

/* 0 on success; -1 with res->err and res->stage set (nothing left running or open). */
int launch(const launch_req *req, launch_res *res);

/* Search PATH (from envp, else the host's) like execvp; writes the path into out. Returns 0
 * or an errno (ENOENT, EACCES, ENAMETOOLONG). */
int launch_resolve(const char *file, char *const *envp, char *out, size_t size);

#endif
