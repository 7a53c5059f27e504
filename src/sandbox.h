/* sandbox.h: confining a child between clone and exec. The parent prepares everything that
 * needs memory (the Landlock ruleset, the BPF programs from libseccomp, C strings); the
 * children only make system calls: the launcher's setup child the namespaces and the mount
 * layer (sandbox_ns.c, sandbox_paths.c), the program's process the fresh /proc, capability
 * drop, no_new_privs, landlock_restrict_self, and seccomp with a listener that lands in the
 * host's descriptor table. */
#ifndef LUXEC_SANDBOX_H
#define LUXEC_SANDBOX_H

#include <linux/filter.h>
#include <stddef.h>

enum { SBX_FULL = 0, SBX_READ_ONLY = 1, SBX_WORKSPACE = 2 };

/* Network by name, the transparent path: listeners the host holds in the sandbox's network
 * namespace besides the proxy's (sandbox_proxy.c) */
enum { SBX_TRANSP_TLS, SBX_TRANSP_HTTP, SBX_TRANSP_DNS, SBX_TRANSP_N };

typedef struct sandbox_spec {
  int mode;
  int network_deny;
  int best_effort;
  int evidence_net, evidence_files; /* seccomp user notification for each */
  const char **roots;               /* writable roots: absolute, canonical */
  int nroots;
  const char **ro_paths; /* read-only inside roots: git, hooks, protected config */
  int nro;
  /* new names refused inside the roots: a name without '/' anywhere (".git", ".mcp.json";
   * any case), an absolute path where it is (a missing protected file) */
  const char **reserved;
  int nreserved;
  const char **masks; /* deny_read: masked (empty, read-only) in the namespace */
  int nmasks;
  const char **unix_sockets; /* socket paths outside the sandbox it may connect to */
  int nunix;
  int proxy_port;      /* network by name: the host's proxy listens on 127.0.0.1:port inside */
  long long mount_key; /* the policy cache's key for a prepared mount tree, 0: none */
} sandbox_spec;

enum {
  SBX_T_PREPARE,  /* the host: sandbox_prepare began */
  SBX_T_PREPARED, /* ... and ended */
  SBX_T_SETUP,    /* the setup child began */
  SBX_T_USERNS,   /* the user namespace and its maps */
  SBX_T_NETNS,    /* the network namespace (and the proxy's listener) */
  SBX_T_NS,       /* the mount, pid and IPC namespaces */
  SBX_T_MOUNTS,   /* the mount layer: read-only /, the roots, protected paths, masks */
  SBX_T_DEV,      /* the sandbox's /dev */
  SBX_T_INIT,     /* the PTY and the pid namespace's init */
  SBX_T_CHILD,    /* the program's process began its sandbox */
  SBX_T_PROC,     /* its /proc */
  SBX_T_CAPS,     /* Landlock's namespace rules and the capability drop */
  SBX_T_LANDLOCK, /* no_new_privs and landlock_restrict_self */
  SBX_T_SECCOMP,  /* the seccomp filter (and its listener) */
  SBX_T_EXECVE,   /* the program's descriptors, directory and limits: execve is next */
  SBX_T_LAUNCHED, /* the host: execve done, the launcher reaped */
  SBX_T_MONITOR,  /* the host: the supervisor started */
  SBX_T_N
};

typedef struct sandbox_prep {
  int ruleset_fd; /* Landlock, -1 when not used */
  int landlock_abi;
  struct sock_fprog prog_notify; /* with SECCOMP_RET_USER_NOTIF rules, or len 0 */
  struct sock_fprog prog_plain;  /* the same with ERRNO instead of notifications */
  /* namespaces, made by the launcher's setup child (sandbox_ns_setup) before the program's
   * process is cloned into them */
  int want_userns;  /* not root: every other namespace comes through a user namespace */
  int want_mountns; /* read-only /, writable roots, fresh /proc, a /dev of its own */
  int want_pidns, want_ipcns, want_netns;
  int netns_fd;     /* a network namespace made ahead (sandbox_netns_take) to join, or -1; after
                 * the launch, one the session may give back (sandbox_netns_lease) */
  int userns_fd;    /* a normal user's: the user namespace it belongs to, joined first, or -1 */
  int dev_template; /* the shared part of /dev made once (sandbox_dev_template; not owned) */
  /* the mount tree prepared for the policy (sandbox_template.c): mount_key names it; the
   * launch copies mnt_template (not owned), or with mnt_make builds one first and leaves it in
   * mnt_made (the host's table) for the host to keep */
  long long mount_key;
  int mnt_template, mnt_make;
  volatile int mnt_made, mnt_copied, mnt_bad; /* (mnt_bad: mnt_template could not be joined) */
  int drop_caps, best_effort;
  int last_cap;       /* the highest capability this kernel knows (63 when unknown) */
  int evidence_files; /* every file call is judged by the host (else the reserved names) */
  int shm_root;       /* /dev/shm is a writable root (the sandbox's private one) */
  unsigned uid, gid;  /* the host's ids, mapped to themselves in the user namespace */
  char **roots;
  int nroots;
  char **ro_paths;
  int nro;
  char **reserved;
  int nreserved;
  char **masks;
  int nmasks;
  char **unix_sockets;
  int nunix;
  /* the file each of unix_sockets named when the session was prepared, before the program
   * ran (dev, ino; both 0: none): a connect reaches that socket only, whatever the path
   * names by the time of the call (a symlink put in its place, a directory above renamed) */
  unsigned long long (*unix_ids)[2];
  /* written by the children, read by the parent after the launch */
  const char *failed_path; /* the path the mount layer could not make */
  volatile int diag_fd;    /* sock_diag in the sandbox's network namespace (the host's table) */
  int proxy_port;          /* network by name: listen on 127.0.0.1:port in the namespace */
  volatile int proxy_fd;   /* that listener (the host's table), or -1 */
  volatile int transp_fd[SBX_TRANSP_N]; /* the transparent path's (sandbox_proxy.c), or -1 */
  volatile int got_listener, listener_fd;
  volatile int listener_killable; /* a caller's non-fatal signals wait for the answer */
  volatile int userns_ok, mountns_ok, pidns_ok, ipcns_ok, netns_ok, caps_dropped;
  volatile int degraded_notify, degraded_ns;
  /* when each layer was done (CLOCK_MONOTONIC, ns; 0: not made), written by whoever made it:
   * what a spawn's sandbox cost, layer by layer (the report's setup_us) */
  volatile unsigned long long t_ns[SBX_T_N];
} sandbox_prep;

/* Stamp layer i of p now (async-signal-safe: the vDSO's clock). */
void sandbox_stamp(sandbox_prep *p, int i);

/* The best Landlock ABI of this kernel (0: none). */
int sandbox_landlock_abi(void);
/* Whether this process may make mount and network namespaces (CAP_SYS_ADMIN). */
int sandbox_can_unshare(void);
/* Whether an unprivileged user namespace can be made here: 0, or an errno and a reason. */
int sandbox_userns_probe(char *why, size_t size);
/* Parent side. 0, or -1 with a message naming the layer that is missing. */
int sandbox_prepare(const sandbox_spec *spec, sandbox_prep *prep, char *err, size_t errlen);
/* Empty: nothing to free, every descriptor -1. */
void sandbox_prep_init(sandbox_prep *prep);
void sandbox_prep_free(sandbox_prep *prep);
/* Whether the launch goes through namespaces (the setup child, sandbox_ns_setup). */
int sandbox_contains(const sandbox_prep *prep);
/* Setup child side (sandbox_ns.c), async-signal-safe: the user namespace and its id maps, then
 * the other namespaces and the mount layer. The program's process is cloned afterwards, into
 * them. 0, or -1 with errno set and *stage naming the layer. */
int sandbox_ns_setup(sandbox_prep *prep, const char **stage);
/* Program side, async-signal-safe, last before exec: fresh /proc (inside the pid namespace),
 * capabilities, no_new_privs, Landlock, seccomp. 0, or -1 with errno set and *stage. */
int sandbox_child_apply(sandbox_prep *prep, const char **stage);
/* Parent side (sandbox_filter.c): the BPF program for spec; with notify, the calls the host
 * judges go to a listener. Built once for each combination of the flags it depends on: the
 * program is the cache's, never freed. */
int sandbox_build_filter(const sandbox_spec *s, int notify, int netns, struct sock_fprog *out);
/* Parent side (sandbox_paths.c): copies the read-only paths and masks into prep; -1 with a
 * message when they need a mount namespace this process cannot make (and not best_effort). */
int sandbox_paths_prepare(const sandbox_spec *s, sandbox_prep *p, char *err, size_t errlen);
void sandbox_paths_free(sandbox_prep *p);
/* Child side (sandbox_paths.c), after the writable roots are bound back: the read-only
 * paths, then the masks. 0, or -1 with errno set and p->failed_path naming the path. */
int sandbox_paths_apply(sandbox_prep *p);
/* Parent side after the launch: the listener the program's process made in the host's
 * descriptor table (it shared it until then), or -1. */
int sandbox_take_listener(sandbox_prep *prep);
/* Setup child side (sandbox_proxy.c), in the new network namespace: lo up, and the proxy's
 * listener on 127.0.0.1:prep->proxy_port in prep->proxy_fd. 0, or -1 with errno set. */
int sandbox_proxy_listen(sandbox_prep *prep);
void sandbox_proxy_close(volatile int *fds); /* the SBX_TRANSP_N transparent ones, set to -1 */
/* Host side (sandbox_netpool.c): a network namespace as a new one is (made ahead of use, or
 * one a session gave back that was found so), which the caller owns and joins once; -1 when
 * none is ready (the setup child then makes one). As root
 * (in_userns 0) a thread of the host makes it; for a normal user a keeper process makes it in
 * a user namespace of the user's (uid and gid mapped to themselves), returned in *userns_fd
 * (the caller's too) to be joined first. *diag_fd: the host's sock_diag socket in it (the
 * caller's), or -1. */
int sandbox_netns_take(int in_userns, unsigned uid, unsigned gid, int *userns_fd, int *diag_fd);
/* After the launch that took one, or a session's end (on the loop's thread): the next is made
 * now if none is ready (on the thread), and those given back go to the keeper. */
void sandbox_netns_refill(void);
/* A session's network namespace until it comes back: holds is how many must let go of it
 * (sandbox_netns_release) before it does; takes fd and diag_fd (its sock_diag socket, or -1),
 * which goes with it. NULL when out of memory (fd closed, diag_fd still the caller's). */
typedef struct netns_lease netns_lease;
netns_lease *sandbox_netns_lease(int fd, int diag_fd, int in_userns, int holds);
/* Its sock_diag socket (the lease's: lent while a hold is held), or -1. */
int sandbox_netns_diag(const netns_lease *lease);
/* One hold lets go (any thread). gone: every process of the session has ended, or this hold
 * no longer uses the sock_diag socket; 0: not known (the namespace is not used again). */
void sandbox_netns_release(netns_lease *lease, int gone);
/* Host side (sandbox_dev.c), root only: the part of every session's /dev that is alike, made
 * once and held as a detached mount tree; -1 when it could not be made. */
int sandbox_dev_template(void);
/* Setup child side, in the session's mount namespace: the part of its /dev every session has
 * alike (a clone of the template, or built), read-only. 0, or -1 with errno set. */
int sandbox_dev_shared(const sandbox_prep *prep);
/* ... and the session's own part: a devpts instance and a /dev/shm. 0, or -1 with errno. */
int sandbox_dev_private(void);
/* Host side (sandbox_template.c), before the launch: whether it copies a mount tree prepared
 * for its policy (mnt_template) or prepares one (mnt_make). */
void sandbox_template_pick(sandbox_prep *prep);
/* After the launch: the tree it prepared (mnt_made), kept for the next launches. */
void sandbox_template_keep(sandbox_prep *prep);

#endif
