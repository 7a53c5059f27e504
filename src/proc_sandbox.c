/* proc_sandbox.c: the sandbox of a session: the spawn option the Lua policy computed, the
 * layers that were applied, and the denials recorded. */
#include "proc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"
#include "notify.h"
#include "sandbox.h"

static const char **strings(lua_State *L, int t, const char *field, int *n) {
  lua_getfield(L, t, field);
  *n = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
  const char **a = lua_newuserdatauv(L, sizeof(char *) * (size_t)(*n + 1), 0);
  for (int i = 1; i <= *n; i++) {
    lua_rawgeti(L, -2, i);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "bad sandbox field '%s' to 'spawn' (strings expected)", field);
    a[i - 1] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  a[*n] = NULL;
  lua_rotate(L, -2, 1); /* keep both the table and the array below the top */
  return a;
}

int proc_sandbox_prepare(lua_State *L, int opts, sandbox_prep *prep, proc_sandbox_info *info) {
  memset(info, 0, sizeof *info);
  lua_getfield(L, opts, "sandbox");
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  luaL_checktype(L, -1, LUA_TTABLE);
  int t = lua_gettop(L);
  sandbox_spec spec;
  memset(&spec, 0, sizeof spec);
  static const char *const modes[] = {"read-only", "workspace-write", "full-access", NULL};
  static const int mode_of[] = {SBX_READ_ONLY, SBX_WORKSPACE, SBX_FULL};
  static const char *const networks[] = {"deny", "allow", NULL};
  int m = proc_opt_enum(L, t, "mode", modes, "sandbox.mode");
  spec.mode = mode_of[m];
  snprintf(info->mode, sizeof info->mode, "%s", modes[m]);
  spec.network_deny = proc_opt_enum(L, t, "network", networks, "sandbox.network") == 0;
  snprintf(info->network, sizeof info->network, "%s", spec.network_deny ? "deny" : "allow");
  spec.best_effort = proc_opt_bool(L, t, "best_effort", "sandbox.best_effort");
  spec.evidence_net = proc_opt_bool(L, t, "evidence_net", "sandbox.evidence_net");
  spec.evidence_files = proc_opt_bool(L, t, "evidence_files", "sandbox.evidence_files");
  spec.roots = strings(L, t, "roots", &spec.nroots);
  spec.unix_sockets = strings(L, t, "unix_sockets", &spec.nunix);
  spec.ro_paths = strings(L, t, "ro_paths", &spec.nro);
  spec.masks = strings(L, t, "masks", &spec.nmasks);
  spec.reserved = strings(L, t, "reserved", &spec.nreserved);
  lua_getfield(L, t, "proxy_port"); /* network by name (luxec.sandbox.proxy) */
  spec.proxy_port = (int)luaL_optinteger(L, -1, 0);
  lua_pop(L, 1);
  lua_getfield(L, t, "mount_key"); /* luxec.sandbox.deps: a prepared mount tree's key */
  spec.mount_key = (long long)luaL_optinteger(L, -1, 0);
  lua_pop(L, 1);
  char err[512] = "";
  int rc = sandbox_prepare(&spec, prep, err, sizeof err);
  lua_settop(L, t - 1);
  if (rc < 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "sandbox: %s", err);
    lua_pushliteral(L, "ENOTSUP");
    return -1;
  }
  info->used = 1;
  info->landlock_abi = prep->ruleset_fd >= 0 ? prep->landlock_abi : 0;
  info->seccomp = prep->prog_plain.len > 0;
  return 0;
}

/* Each layer's cost: from the stamp before it to its own (µs), -1 for a layer not made. */
static void layer_costs(proc_sandbox_info *info, const sandbox_prep *prep) {
  for (int i = 0; i < SBX_T_N; i++) {
    info->setup_us[i] = -1;
    if (i == SBX_T_PREPARE || prep->t_ns[i] == 0) continue;
    int before = i - 1;
    while (before > 0 && prep->t_ns[before] == 0) before--;
    if (prep->t_ns[before] == 0 || prep->t_ns[i] < prep->t_ns[before]) continue;
    info->setup_us[i] = (long long)((prep->t_ns[i] - prep->t_ns[before]) / 1000);
  }
}

void proc_sandbox_started(proc *p, sandbox_prep *prep, int listener, uv_loop_t *loop) {
  proc_sandbox_info *info = p->sbx_info; /* (made by the spawn of a sandboxed session) */
  sandbox_stamp(prep, SBX_T_LAUNCHED);
  info->userns = prep->userns_ok;
  info->mountns = prep->mountns_ok;
  info->mount_copied = prep->mnt_copied;
  info->pidns = prep->pidns_ok;
  info->ipcns = prep->ipcns_ok;
  info->netns = prep->netns_ok;
  info->caps_dropped = prep->caps_dropped;
  info->degraded_notify = prep->degraded_notify;
  info->degraded_ns = prep->degraded_ns;
  p->proxy_fd = prep->proxy_fd; /* the proxy's listener: the session's now */
  p->proxy_port = prep->proxy_port;
  prep->proxy_fd = -1;
  for (int i = 0; i < SBX_TRANSP_N; i++) {
    p->transp_fd[i] = prep->transp_fd[i];
    prep->transp_fd[i] = -1;
  }
  /* the network namespace, with the host's sock_diag socket in it, comes back once the init
   * is reaped (proc_tree.c) and the monitor, which uses that socket when it judges unix
   * sockets, is done */
  int judged = listener >= 0 && info->mode[0] != 'f';
  if (prep->netns_fd >= 0 && p->init_pid > 0) {
    p->netns = sandbox_netns_lease(prep->netns_fd, prep->diag_fd, prep->want_userns, 1 + judged);
    if (p->netns != NULL) prep->diag_fd = -1;
  } else if (prep->netns_fd >= 0) {
    close(prep->netns_fd);
  }
  prep->netns_fd = -1;
  if (listener >= 0) {
    (void)loop;
    /* the restricted modes: AF_UNIX calls are judged by the host (notify_unix.c) */
    sbx_unix_cfg u = {.netns_private = prep->netns_ok,
                      .diag_fd = p->netns ? sandbox_netns_diag(p->netns) : prep->diag_fd,
                      .prog_pid = p->pid,
                      .init_pid = p->init_pid,
                      .allowed = prep->unix_sockets,
                      .allowed_ids = prep->unix_ids,
                      .nallowed = prep->nunix,
                      .reserved = prep->reserved,
                      .nreserved = prep->nreserved,
                      .netns = judged ? p->netns : NULL,
                      .files_evidence = prep->evidence_files,
                      .killable = prep->listener_killable};
    if (judged) prep->diag_fd = -1; /* the monitor's now (not full-access) */
    /* a masked path is a read-only mount too: a write there is refused, as in a repository */
    int nro = prep->nro + prep->nmasks;
    char **ro = malloc(sizeof(char *) * (size_t)(nro + 1));
    for (int i = 0; ro != NULL && i < prep->nro; i++) ro[i] = prep->ro_paths[i];
    for (int i = 0; ro != NULL && i < prep->nmasks; i++) ro[prep->nro + i] = prep->masks[i];
    p->sbx = ro == NULL
                 ? NULL
                 : sbx_monitor_start(listener, prep->roots, prep->nroots, ro, nro, prep->mountns_ok,
                                     strcmp(info->network, "deny") == 0, prep->proxy_port,
                                     p->transp_fd[SBX_TRANSP_TLS] >= 0, judged ? &u : NULL,
                                     p->lim ? p->lim->want.cpu_quota_us : 0,
                                     p->lim ? p->lim->want.cpu_period_us : 0);
    if (ro == NULL) { /* (out of memory: what the monitor would have taken goes) */
      close(listener);
      if (u.netns == NULL && u.diag_fd >= 0) close(u.diag_fd);
      sandbox_netns_release(u.netns, 0);
    }
    free(ro);
    info->notify = p->sbx != NULL;
    sandbox_stamp(prep, SBX_T_MONITOR);
  }
  layer_costs(info, prep);
}

static void set_bool(lua_State *L, const char *k, int v) {
  lua_pushboolean(L, v);
  lua_setfield(L, -2, k);
}

static void set_str(lua_State *L, const char *k, const char *v) {
  if (v == NULL || v[0] == '\0') return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

/* One record as a table (no Lua error can happen half-way: all fields are plain). */
static void push_denial(lua_State *L, const sbx_denial *d) {
  lua_createtable(L, 0, 10);
  set_str(L, "op", d->op);
  set_str(L, "source", d->source);
  set_str(L, "error", strerrorname_np(d->err));
  set_int(L, "count", __atomic_load_n(&d->count, __ATOMIC_RELAXED));
  set_str(L, "path", d->path);
  set_str(L, "to", d->to);
  set_str(L, "family", d->family);
  if (d->addr[0]) {
    set_str(L, "addr", d->addr);
    set_int(L, "port", d->port);
  }
  if (strcmp(d->op, "socket") == 0 || (d->addr[0] && d->type != 0)) {
    set_int(L, "type", d->type);
    set_int(L, "protocol", d->protocol);
  }
  set_int(L, "pid", d->pid);
  lua_pushstring(L, d->comm); /* may be empty: the process was gone */
  lua_setfield(L, -2, "comm");
}

/* p:sandbox_report() -> nil (no sandbox) | {mode, network, layers = {landlock = ABI,
 * seccomp, notify, mountns, netns, userns, caps_dropped}, degraded = {...}, denials =
 * {{op, source, error, count, path, to | family, addr, port, pid, comm}}, denials_total,
 * denials_overflow = {[op] = refusals past the kept records}} */
static int proc_sandbox_report(lua_State *L) {
  proc *p = proc_check(L, 1);
  proc_sandbox_info *info = p->sbx_info;
  if (info == NULL || !info->used) {
    lua_pushnil(L);
    return 1;
  }
  lua_createtable(L, 0, 6);
  lua_pushstring(L, info->mode);
  lua_setfield(L, -2, "mode");
  lua_pushstring(L, info->network);
  lua_setfield(L, -2, "network");
  lua_createtable(L, 0, 7);
  if (info->landlock_abi)
    lua_pushinteger(L, info->landlock_abi);
  else
    lua_pushboolean(L, 0);
  lua_setfield(L, -2, "landlock");
  set_bool(L, "seccomp", info->seccomp);
  set_bool(L, "notify", info->notify);
  set_bool(L, "mountns", info->mountns);
  set_bool(L, "pidns", info->pidns);
  set_bool(L, "ipcns", info->ipcns);
  set_bool(L, "netns", info->netns);
  set_bool(L, "userns", info->userns);
  set_bool(L, "caps_dropped", info->caps_dropped);
  lua_setfield(L, -2, "layers");
  if (info->mountns) set_bool(L, "mount_copied", info->mount_copied);
  lua_newtable(L);
  int k = 0;
  if (info->degraded_notify) {
    lua_pushliteral(L,
                    "notify: the seccomp listener was refused (nested filter): no evidence, "
                    "and unix socket files are not judged: the host's are reachable");
    lua_rawseti(L, -2, ++k);
  }
  if (info->degraded_ns) {
    lua_pushliteral(L,
                    "userns: no user namespace could be made: no mount, pid, IPC or network "
                    "namespace (git repositories, protected paths, deny_read masks, metadata, "
                    "host processes, IPC and other terminals are not protected)");
    lua_rawseti(L, -2, ++k);
  }
  lua_setfield(L, -2, "degraded");
  sbx_monitor *m = p->sbx;
  int n = 0, nover = 0;
  long long total = 0;
  sbx_overflow over[SBX_OVERFLOW_OPS];
  if (m != NULL) {          /* its thread appends meanwhile: take what is published */
    sbx_monitor_settled(m); /* every refusal the session has seen is kept by now */
    pthread_mutex_lock(&m->lock);
    n = m->ndenials;
    total = m->total;
    nover = m->noverflow;
    memcpy(over, m->overflow, sizeof over);
    for (int i = 0; i < nover; i++) { /* (its strings change once the lock is let go) */
      over[i].last.path = over[i].last.path ? strdup(over[i].last.path) : NULL;
      over[i].last.to = over[i].last.to ? strdup(over[i].last.to) : NULL;
    }
    pthread_mutex_unlock(&m->lock);
  }
  lua_createtable(L, n + nover, 0);
  for (int i = 0; i < n; i++) {
    push_denial(L, sbx_record(m, i));
    lua_rawseti(L, -2, i + 1);
  }
  /* then the latest refusal past the limits of each op: none hides the last one */
  for (int i = 0; i < nover; i++) {
    push_denial(L, &over[i].last);
    set_bool(L, "latest", 1);
    lua_rawseti(L, -2, n + i + 1);
    free(over[i].last.path);
    free(over[i].last.to);
  }
  lua_setfield(L, -2, "denials");
  lua_createtable(L, 0, nover);
  for (int i = 0; i < nover; i++) {
    lua_pushinteger(L, over[i].count);
    lua_setfield(L, -2, over[i].op);
  }
  lua_setfield(L, -2, "denials_overflow");
  static const char *const layer_names[SBX_T_N] = {
      NULL,       "prepare", "launch",   "userns", "netns",  "namespaces",
      "mounts",   "dev",     "pid_init", "clone",  "proc",   "caps",
      "landlock", "seccomp", "fds",      "exec",   "monitor"};
  lua_createtable(L, 0, SBX_T_N);
  for (int i = 0; i < SBX_T_N; i++)
    if (layer_names[i] && info->setup_us[i] >= 0) set_int(L, layer_names[i], info->setup_us[i]);
  lua_setfield(L, -2, "setup_us");
  lua_pushinteger(L, total);
  lua_setfield(L, -2, "denials_total");
  lua_pushinteger(L, m ? (lua_Integer)m->served : 0);
  lua_setfield(L, -2, "notified"); /* calls the host looked at, denied or not */
  proc_limits_report(L, p, lua_gettop(L));
  return 1;
}

/* core.sandbox_layers() -> {landlock = ABI, can_unshare = bool, userns = bool, userns_reason}
 * for sandbox-check: userns is what a spawn by this host would find (probed once) */
static int core_sandbox_layers(lua_State *L) {
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, sandbox_landlock_abi());
  lua_setfield(L, -2, "landlock");
  set_bool(L, "can_unshare", sandbox_can_unshare());
  char why[320];
  int userns = sandbox_userns_probe(why, sizeof why) == 0;
  set_bool(L, "userns", userns);
  if (!userns) {
    lua_pushstring(L, why);
    lua_setfield(L, -2, "userns_reason");
  }
  return 1;
}

const luaL_Reg proc_sandbox_methods[] = {{"sandbox_report", proc_sandbox_report}, {NULL, NULL}};

int core_sandbox_scan(lua_State *L);     /* sandbox_scan.c */
int core_sandbox_deps_new(lua_State *L); /* sandbox_deps.c */
int core_sandbox_deps_add(lua_State *L);
int core_sandbox_deps_valid(lua_State *L);
int core_sandbox_deps_free(lua_State *L);
int core_sandbox_template_forget(lua_State *L); /* sandbox_template.c */

const luaL_Reg proc_sandbox_functions[] = {
    {"sandbox_deps_add", core_sandbox_deps_add},
    {"sandbox_deps_free", core_sandbox_deps_free},
    {"sandbox_deps_new", core_sandbox_deps_new},
    {"sandbox_deps_valid", core_sandbox_deps_valid},
    {"sandbox_layers", core_sandbox_layers},
    {"sandbox_scan", core_sandbox_scan},
    {"sandbox_template_forget", core_sandbox_template_forget},
    {NULL, NULL}};
