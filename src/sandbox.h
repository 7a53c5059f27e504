/* sandbox.h: confining a child between clone and exec. The parent prepares everything that
 * needs memory (the Landlock ruleset, the BPF programs from libseccomp, C strings); the
 * child only makes system calls: mount namespace, capability drop, no_new_privs,
 * landlock_restrict_self, seccomp with a listener it hands to the host. */
#ifndef LUXEC_SANDBOX_H
#define LUXEC_SANDBOX_H

#include <linux/filter.h>
#include <stddef.h>

enum { SBX_FULL = 0, SBX_READ_ONLY = 1, SBX_WORKSPACE = 2 };

typedef struct sandbox_spec {
  int mode;
  int network_deny;
  int best_effort;
  int evidence_net, evidence_files; /* seccomp user notification for each */
  const char **roots;               /* writable roots: absolute, canonical */
  int nroots;
  const char **ro_paths;            /* read-only inside roots (.git) */
  int nro;
} sandbox_spec;

typedef struct sandbox_prep {
  int ruleset_fd;       /* Landlock, -1 when not used */
  int landlock_abi;
  struct sock_fprog prog_notify; /* with SECCOMP_RET_USER_NOTIF rules, or len 0 */
  struct sock_fprog prog_plain;  /* the same with ERRNO instead of notifications */
  int want_mountns, want_netns, drop_caps, best_effort;
  char **roots;
  int nroots;
  char **ro_paths;
  int nro;
  int sock_child;       /* the child sends the listener here (SCM_RIGHTS) */
  int sock_parent;
  /* written by the child, read by the parent after the launch */
  volatile int got_listener, mountns_ok, netns_ok, caps_dropped;
  volatile int degraded_notify, degraded_mountns, degraded_netns;
} sandbox_prep;

/* The best Landlock ABI of this kernel (0: none). */
int sandbox_landlock_abi(void);
/* Whether this process may make mount and network namespaces (CAP_SYS_ADMIN). */
int sandbox_can_unshare(void);
/* Parent side. 0, or -1 with a message naming the layer that is missing. */
int sandbox_prepare(const sandbox_spec *spec, sandbox_prep *prep, char *err, size_t errlen);
void sandbox_prep_free(sandbox_prep *prep);
/* Child side, async-signal-safe. 0, or -1 with errno set and *stage naming the layer. */
int sandbox_child_apply(sandbox_prep *prep, const char **stage);
/* The message the child hands the listener over with (sandbox_filter.c lets only this one
 * through unnotified). */
struct msghdr;
extern struct msghdr sandbox_handoff_msg;
/* Parent side (sandbox_filter.c): the BPF program for spec; with notify, the calls the host
 * records go to a listener (handoff_fd: the descriptor the listener is sent over). */
int sandbox_build_filter(const sandbox_spec *s, int notify, int netns, int handoff_fd,
                         struct sock_fprog *out);
/* Child side (sandbox_ns.c): the read-only mount layer. 0, or -1 with errno set. */
int sandbox_mount_layer(sandbox_prep *p);
/* Parent side after the launch: the listener the child sent, or -1. */
int sandbox_take_listener(sandbox_prep *prep);

#endif
