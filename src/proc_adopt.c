/* proc_adopt.c: the zombies a closed session leaves behind (its program when it had not been
 * reaped, orphans found in its tree that came back to the host) are reaped when SIGCHLD says
 * they ended, never waited for. A pid is remembered with its start time, so a pid another
 * reaper took and the kernel gave to a new process is told apart and left alone. */
#include "proc.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "procfs.h"

#define MAX_ADOPTED 4096

static uv_signal_t chld;      /* reaps what closed sessions left */
static uv_check_t chld_check; /* once per turn of the loop, however many SIGCHLDs came */
static int chld_open = 0;
static struct {
  pid_t pid;
  unsigned long long start;
} adopted[MAX_ADOPTED];
static int nadopted = 0;

/* when pid started (clock ticks after boot), which tells a reused pid apart; 0 when gone */
static unsigned long long start_of(pid_t pid) {
  char buf[1024];
  if (pfs_read(pid, "stat", buf, sizeof buf) < 0) return 0;
  char *q = strrchr(buf, ')');
  unsigned long long start = 0;
  for (int field = 2; q != NULL && field <= 21; field++) q = strchr(q + 1, ' ');
  if (q != NULL) start = strtoull(q + 1, NULL, 10);
  return start;
}

/* Reap the adopted zombies. Only one that has ended is looked at (a look that reaps
 * nothing): the others cost one system call each. */
static void reap_adopted(void) {
  for (int i = 0; i < nadopted;) {
    siginfo_t si;
    si.si_pid = 0;
    pid_t r = 0;
    if (waitid(P_PID, (id_t)adopted[i].pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
      r = -1; /* not the host's child any more */
    else if (si.si_pid == 0)
      r = 0; /* still running */
    else if (start_of(adopted[i].pid) == adopted[i].start)
      r = waitpid(adopted[i].pid, NULL, WNOHANG);
    else
      r = -1;
    if (r > 0) proc_orphans_forget(adopted[i].pid); /* (a session's first process: its id) */
    if (r != 0)
      adopted[i] = adopted[--nadopted];
    else
      i++;
  }
}

/* Nothing left to reap: SIGCHLD goes back to its default, so the ends of later sessions
 * (reaped through their pidfds) run no handler in the host, and their programs start without
 * one more disposition to reset. proc_adopt catches it again before it looks. */
static void let_go_if_none(void) {
  if (nadopted == 0 && chld_open) uv_signal_stop(&chld);
}

static void chld_check_cb(uv_check_t *h) {
  uv_check_stop(h);
  reap_adopted();
  let_go_if_none();
}

/* Many children ending together send many SIGCHLDs in one turn: one look, after them. */
static void chld_cb(uv_signal_t *h, int sig) {
  (void)h, (void)sig;
  uv_check_start(&chld_check, chld_check_cb);
}

void proc_adopt(uv_loop_t *loop, pid_t pid) {
  unsigned long long start = start_of(pid); /* unreaped, so still this process */
  if (start == 0) return;
  /* SIGCHLD is caught before the look below: a child that ends between the look and the
   * catching would leave no signal to say so, and its zombie would wait for another's */
  if (!chld_open && uv_signal_init(loop, &chld) == 0) {
    chld_open = 1;
    uv_check_init(loop, &chld_check);
    uv_unref((uv_handle_t *)&chld_check);
    uv_unref((uv_handle_t *)&chld);
  }
  if (chld_open && !uv_is_active((uv_handle_t *)&chld)) uv_signal_start(&chld, chld_cb, SIGCHLD);
  if (waitpid(pid, NULL, WNOHANG) == pid) {
    proc_orphans_forget(pid);
  } else if (nadopted < MAX_ADOPTED) {
    adopted[nadopted].pid = pid;
    adopted[nadopted++].start = start;
  }
  let_go_if_none();
}

void proc_adopt_shutdown(void) {
  if (!chld_open) return;
  chld_open = 0;
  uv_close((uv_handle_t *)&chld, NULL);
  uv_close((uv_handle_t *)&chld_check, NULL);
  reap_adopted(); /* what died already; the rest is init's once the host is gone */
}
