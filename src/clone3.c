/* clone3.c: a child that shares the host's memory, started by clone3 directly in its
 * cgroup. clone3 has no C library wrapper that runs a function on a new stack (glibc's
 * clone does that for clone only), so the child's first instructions are here: on the stack
 * it was given, it calls fn(arg) and exits with what fn returns (fn normally execs). Being
 * born in the cgroup (CLONE_INTO_CGROUP) takes the kernel a read lock; moving in afterwards
 * (a write to cgroup.procs) takes the write side of the lock every fork in the system
 * takes, which waits for an RCU grace period: from tens of microseconds on an idle machine
 * to milliseconds on a busy one, in every launch. */
#include "clone3.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_clone3
#define SYS_clone3 435
#endif

/* The kernel's struct clone_args (CLONE_ARGS_SIZE_VER2, Linux 5.7). */
struct clone3_args {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
  uint64_t set_tid, set_tid_size, cgroup;
};

#define CLONE_INTO_CGROUP_FLAG 0x200000000ULL

static int unusable; /* clone3 or CLONE_INTO_CGROUP is not there: not asked again */

#if defined(__x86_64__)
/* The system call; in the child (rax 0, on its own stack) fn(arg), then exit with its
 * result. fn and arg ride in r12 and r13, which the kernel keeps for both. */
static long clone3_call(struct clone3_args *ca, int (*fn)(void *), void *arg) {
  long ret;
  register int (*r12)(void *) __asm__("r12") = fn;
  register void *r13 __asm__("r13") = arg;
  __asm__ volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"
      "movq %%r13, %%rdi\n\t"
      "callq *%%r12\n\t"
      "movl %%eax, %%edi\n\t"
      "movl $60, %%eax\n\t" /* exit */
      "syscall\n\t"
      "hlt\n\t"
      "1:\n\t"
      : "=a"(ret)
      : "0"((long)SYS_clone3), "D"(ca), "S"(sizeof *ca), "r"(r12), "r"(r13)
      : "rcx", "r11", "memory", "cc");
  return ret;
}
#define HAVE_CLONE3_CALL 1
#endif

/* A child clone3 made that never ran: reaped, and clone3 not used again. */
static void killed_at_birth(pid_t pid, int *pidfd) {
  while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR) {
  }
  if (pidfd != NULL && *pidfd >= 0) close(*pidfd);
  if (pidfd != NULL) *pidfd = -1;
  unusable = 1;
}

/* clone3 into cgroup_fd: the pid, or -errno (-ENOSYS without a call once it is unusable). */
static pid_t clone_into(int (*fn)(void *), char *stack, size_t size, unsigned long flags, void *arg,
                        int *pidfd, int cgroup_fd) {
#ifdef HAVE_CLONE3_CALL
  if (unusable) return -ENOSYS;
  struct clone3_args ca;
  memset(&ca, 0, sizeof ca);
  ca.flags = (uint64_t)(flags & ~0xffUL) | CLONE_INTO_CGROUP_FLAG;
  ca.exit_signal = flags & 0xff;
  ca.pidfd = (uint64_t)(uintptr_t)pidfd;
  /* the top of the stack 16-byte aligned, as the call in the child needs */
  ca.stack = (uint64_t)(uintptr_t)stack;
  ca.stack_size = (uint64_t)(((uintptr_t)stack + size) & ~(uintptr_t)15) - (uintptr_t)stack;
  ca.cgroup = (uint64_t)cgroup_fd;
  long ret = clone3_call(&ca, fn, arg);
  if (ret >= 0) return (pid_t)ret;
  /* no clone3 (before Linux 5.3, or refused by a seccomp filter), or no CLONE_INTO_CGROUP
   * (before 5.7: the larger struct is refused) */
  if (ret == -ENOSYS || ret == -E2BIG) unusable = 1;
  return (pid_t)ret;
#else
  (void)fn, (void)stack, (void)size, (void)flags, (void)arg, (void)pidfd, (void)cgroup_fd;
  return -ENOSYS;
#endif
}

pid_t luxec_clone_in(int (*fn)(void *), char *stack, size_t size, int flags, void *arg, int *pidfd,
                     int cgroup_fd, int *born, volatile int *started) {
  pid_t pid = -1;
  if (cgroup_fd >= 0) {
    *born = 1;
    pid = clone_into(fn, stack, size, (unsigned long)flags, arg, pidfd, cgroup_fd);
    if (pid >= 0 && !*started) {
      killed_at_birth(pid, pidfd);
      pid = -1;
    }
  }
  if (pid >= 0) return pid;
  *born = 0; /* (no child: the next one joins the cgroup itself) */
  return clone(fn, stack + size, flags, arg, pidfd);
}
