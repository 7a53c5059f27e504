/* cgroup.h: one cgroup v2 per session under a directory of this host's, killed as a whole;
 * a watchdog process kills them all if the host dies without cleaning up (even SIGKILL). */
#ifndef LUXEC_CGROUP_H
#define LUXEC_CGROUP_H

#include <sys/types.h>

typedef struct cg_session {
  int dir_fd;     /* the session's cgroup directory, -1 when none */
  int procs_fd;   /* its cgroup.procs, open for the child to move itself in */
  int events_fd;  /* its cgroup.events, pollable (priority) on "populated" changes */
  unsigned id;
  int fresh;      /* made for this session alone (limits: counters from zero); never pooled */
} cg_session;

/* Whether sessions can have cgroups here; the first call sets up the host's directory and
 * the watchdog. reason (when not) says why. */
int cg_available(const char **reason);
/* 0 or -errno; fresh: a new directory, never one from the pool nor put back in it (a session
 * with limits, whose event counters must start at zero) */
int cg_session_create(cg_session *s, int fresh);
int cg_session_populated(const cg_session *s); /* 1, 0, or -errno */
int cg_session_kill(const cg_session *s);      /* SIGKILL everything in it; 0 or -errno */
int cg_session_wait_empty(const cg_session *s, int timeout_ms); /* 0, or -ETIMEDOUT */
int cg_session_signal(const cg_session *s, int sig); /* every process in it; count or -errno */
int cg_session_pids(const cg_session *s, pid_t *out, int max);
void cg_session_remove(cg_session *s);         /* back to the pool when empty, else destroy */
void cg_session_destroy(cg_session *s);        /* rmdir (must be empty) and close */
void cg_shutdown(void);                        /* remove the host's directory, stop the watchdog */
pid_t cg_watchdog_pid(void);
/* Make a controller ("memory", "pids", "cpu") usable in every session cgroup: enabled in the
 * host's directory, and first in the cgroup the host lives in when it is not already. 0, or
 * -1 with why (naming the file and the errno). */
int cg_enable_controller(const char *name, char *why_out, size_t len);
const char *cg_host_dir(void);

/* Write text to the control file name in dir_fd: 0, or -errno. */
int cg_write_text(int dir_fd, const char *name, const char *text);
/* The whole of a small file in dir_fd (NUL-terminated): 0, or -errno. */
int cg_read_text(int dir_fd, const char *name, char *buf, size_t size);

#endif
