/* proc_spawn.c: luxec.core.spawn — the options the Lua layer checked, turned into a launch,
 * and the new session's native state. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"
#include "procfs.h"
#include "sandbox.h"

static const char *opt_string(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  const char *s = lua_isnil(L, -1) ? NULL : lua_tostring(L, -1);
  if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "bad option '%s' to 'spawn' (string expected, got %s)", k, luaL_typename(L, -1));
  lua_pop(L, 1);
  return s;
}

/* A value the Lua layer always passes: missing is an error, never a default of C's. */
static void required(lua_State *L, int t, const char *k, int type, const char *label) {
  int got = lua_getfield(L, t, k);
  if (got != type)
    luaL_error(L, "bad option '%s' to 'spawn' (%s expected, got %s)", label ? label : k,
               lua_typename(L, type), luaL_typename(L, -1));
}

/* One of the names in list (index), or an error naming the option and the value. */
int proc_opt_enum(lua_State *L, int t, const char *k, const char *const list[], const char *label) {
  required(L, t, k, LUA_TSTRING, label);
  const char *v = lua_tostring(L, -1);
  for (int i = 0; list[i] != NULL; i++) {
    if (strcmp(list[i], v) == 0) {
      lua_pop(L, 1);
      return i;
    }
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; list[i] != NULL; i++) {
    luaL_addstring(&b, i > 0 ? ", \"" : "\"");
    luaL_addstring(&b, list[i]);
    luaL_addchar(&b, '"');
  }
  luaL_pushresult(&b);
  return luaL_error(L, "bad option '%s' to 'spawn' (one of %s expected, got \"%s\")",
                    label ? label : k, lua_tostring(L, -1), v);
}

static lua_Integer opt_int(lua_State *L, int t, const char *k, int need) {
  lua_getfield(L, t, k);
  lua_Integer v = 0;
  if (!lua_isnil(L, -1) || need) {
    int ok;
    v = lua_tointegerx(L, -1, &ok);
    if (!ok)
      luaL_error(L, "bad option '%s' to 'spawn' (integer expected, got %s)", k,
                 luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

int proc_opt_bool(lua_State *L, int t, const char *k, const char *label) {
  required(L, t, k, LUA_TBOOLEAN, label);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* A NULL-terminated array of the strings in the table at t (kept alive by the table). */
static const char **string_array(lua_State *L, int t, const char *what) {
  lua_Integer n = luaL_len(L, t);
  const char **a = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, t, i);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "bad %s entry #%d (string expected)", what, (int)i);
    a[i - 1] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  a[n] = NULL;
  return a;
}

/* core.spawn(argv, opts) -> proc, pid | nil, message, code.
 * opts (already validated by luxec.process): env (array of "K=V"), cwd, arg0, tty, rows,
 * cols, no_echo, raw, stdin ("pipe"|"null"), stderr ("merge"|"pipe"), head, tail, log, log_stderr, log_max,
 * cgroup (bool: use one when available), marker (the "K=V" entry of the environment that
 * tells this session's orphans apart when there is no cgroup: part of env when env is given,
 * else added to the host's environment here), on_event (function). */
/* Without a cgroup: the session's mark (procfs.h) as its RLIMIT_RTTIME, unless a lower hard
 * limit is set already (it cannot be raised: that session goes without a mark). */
static void set_mark(proc *p, const char *marker, launch_req *req) {
  /* (when it starts, before its program does: in /proc/<pid>/stat's ticks since boot) */
  struct timespec ts;
  long hz = sysconf(_SC_CLK_TCK);
  if (hz > 0 && clock_gettime(CLOCK_BOOTTIME, &ts) == 0)
    p->start_ticks = (unsigned long long)ts.tv_sec * (unsigned long long)hz +
                     (unsigned long long)ts.tv_nsec / (1000000000ULL / (unsigned long long)hz);
  const char *dot = strrchr(marker, '.');
  uint64_t mark = pfs_mark_make(getpid(), dot ? strtoul(dot + 1, NULL, 10) : 0);
  struct rlimit now;
  if (getrlimit(RLIMIT_RTTIME, &now) != 0) return;
  if (now.rlim_max != RLIM_INFINITY && now.rlim_max < mark) return;
  int i = req->nrlimits++;
  req->rlimit_res[i] = RLIMIT_RTTIME;
  req->rlimit_val[i].rlim_max = mark;
  req->rlimit_val[i].rlim_cur =
      now.rlim_cur == RLIM_INFINITY || now.rlim_cur > mark ? mark : now.rlim_cur;
  p->mark = mark;
}

int proc_core_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  if (luaL_len(L, 1) < 1) return luaL_argerror(L, 1, "argv is empty");
  const char **argv = string_array(L, 1, "argv"); /* 3 */
  lua_getfield(L, 2, "env");                      /* 4 */
  const char **envp = NULL;
  if (lua_istable(L, 4)) {
    envp = string_array(L, 4, "env"); /* 5 */
  } else {
    lua_pushnil(L);
  }
  required(L, 2, "on_event", LUA_TFUNCTION, NULL); /* 6 */
  static const char *const stdin_modes[] = {"null", "pipe", NULL};
  static const char *const stderr_modes[] = {"merge", "pipe", NULL};
  launch_req req = {0};
  req.cwd = opt_string(L, 2, "cwd");
  const char *arg0 = opt_string(L, 2, "arg0");
  req.tty = proc_opt_bool(L, 2, "tty", NULL);
  req.no_echo = proc_opt_bool(L, 2, "no_echo", NULL);
  req.raw = proc_opt_bool(L, 2, "raw", NULL);
  lua_Integer rows = opt_int(L, 2, "rows", 1), cols = opt_int(L, 2, "cols", 1);
  if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535)
    return luaL_error(L, "bad option 'rows'/'cols' to 'spawn' (1..65535 expected)");
  req.rows = (unsigned short)rows;
  req.cols = (unsigned short)cols;
  req.stdin_pipe = proc_opt_enum(L, 2, "stdin", stdin_modes, NULL) == 1;
  req.stderr_apart = proc_opt_enum(L, 2, "stderr", stderr_modes, NULL) == 1;
  lua_Integer head = opt_int(L, 2, "head", 1), tail = opt_int(L, 2, "tail", 1);
  if (head < 0 || tail < 0) return luaL_error(L, "bad option 'head'/'tail' to 'spawn' (negative)");
  const char *logs[2] = {opt_string(L, 2, "log"), opt_string(L, 2, "log_stderr")};
  lua_Integer log_max = opt_int(L, 2, "log_max", 0); /* nil: no limit */
  if (log_max < 0) return luaL_error(L, "bad option 'log_max' to 'spawn' (negative)");
  int want_cgroup = proc_opt_bool(L, 2, "cgroup", NULL);
  const char *marker = opt_string(L, 2, "marker");
  req.cgroup_fd = req.inits_fd = -1;

  char path[4096];
  int rerr = launch_resolve(argv[0], (char *const *)envp, path, sizeof path);
  if (rerr != 0) {
    luxec_push_error(L, rerr);
    lua_pushfstring(L, "%s (exec: %s)", lua_tostring(L, -2), argv[0]);
    lua_replace(L, -3);
    return 3;
  }
  req.path = path;
  extern char **environ;
  req.envp = envp ? (char *const *)envp : environ;
  if (envp == NULL && marker != NULL) { /* the host's environment and the marker, no copies */
    size_t n = 0;
    while (environ[n] != NULL) n++;
    const char **e = lua_newuserdatauv(L, sizeof(char *) * (n + 2), 0);
    lua_replace(L, 5); /* kept in env's slot, nil until now */
    memcpy(e, environ, sizeof(char *) * n);
    e[n] = marker;
    e[n + 1] = NULL;
    req.envp = (char *const *)e;
  }
  if (arg0 != NULL) argv[0] = arg0;
  req.argv = (char *const *)argv;

  cg_limits limits;
  int limited = proc_limits_parse(L, 2, &limits);
  sandbox_prep prep;
  proc_sandbox_info sbx_info;
  sandbox_prep_init(&prep);
  if (proc_sandbox_prepare(L, 2, &prep, &sbx_info) < 0) return 3;
  if (sbx_info.used) req.sandbox = &prep;

  /* The host's watch of exits exists before any child runs (a child may lower the host's
   * descriptor limit before the host watches its exit). */
  int werr = proc_exits_ready(&luxec_gethost(L)->loop);
  if (werr != 0) {
    sandbox_prep_free(&prep);
    return luxec_push_error(L, werr);
  }
  pbox *box = lua_newuserdatauv(L, sizeof(pbox), 1); /* 7: created closed */
  box->p = NULL;
  luaL_setmetatable(L, PROC_MT);
  int nout = req.tty || !req.stderr_apart ? 1 : 2;
  proc *p = calloc(1, PROC_SIZE(nout));
  if (p == NULL) {
    sandbox_prep_free(&prep);
    return luxec_push_error(L, ENOMEM);
  }
  p->host = luxec_gethost(L);
  if (sbx_info.used && (p->sbx_info = malloc(sizeof sbx_info)) == NULL) {
    free(p);
    sandbox_prep_free(&prep);
    return luxec_push_error(L, ENOMEM);
  }
  if (sbx_info.used) *p->sbx_info = sbx_info;
  p->L = luxec_gethost(L)->L;
  p->self_ref = LUA_NOREF;
  p->pidfd = p->in_fd = p->proxy_fd = -1;
  p->transp_fd[0] = p->transp_fd[1] = p->transp_fd[2] = -1;
  p->init_pid = -1;
  p->cg.dir_fd = -1;
  p->tty = req.tty;
  p->raw = req.tty && req.raw;
  if (marker != NULL) snprintf(p->marker, sizeof p->marker, "%s", marker);
  p->nout = nout;
  for (int i = 0; i < nout; i++) {
    p->out[i].fd = -1;
    p->out[i].proc = p;
    outbuf_init(&p->out[i].buf, (size_t)head, (size_t)tail);
  }
  for (int i = 0; i < p->nout; i++) {
    p->out[i].buf.log_max = (uint64_t)log_max;
    int rc = logs[i] ? outbuf_open_log(&p->out[i].buf, logs[i]) : 0;
    if (rc < 0) {
      for (int j = 0; j < nout; j++) outbuf_free(&p->out[j].buf);
      free(p->sbx_info);
      free(p);
      sandbox_prep_free(&prep);
      luxec_push_error(L, -rc);
      lua_pushfstring(L, "%s (%s: %s)", lua_tostring(L, -2), i == 0 ? "log" : "log_stderr",
                      logs[i]);
      lua_replace(L, -3);
      return 3;
    }
  }
  if (want_cgroup && cg_session_create(&p->cg, limited) == 0)
    req.cgroup_fd = cg_session_dir(&p->cg);
  req.cgroup_born = !p->cg.killed;
  if (req.cgroup_fd >= 0 && req.sandbox != NULL) req.inits_fd = cg_inits_dir();
  if (req.cgroup_fd < 0 && p->cg.id != 0) cg_session_destroy(&p->cg);
  if (limited) { /* fail closed: a limit the host cannot enforce is refused unless best_effort */
    char err[1024] = "out of memory";
    p->lim = calloc(1, sizeof *p->lim);
    if (p->lim == NULL || cgl_setup(p->lim, &limits, &p->cg, want_cgroup, err, sizeof err) < 0) {
      cg_session_launched(&p->cg, req.cgroup_fd);
      sandbox_prep_free(&prep);
      cg_session_destroy(&p->cg);
      for (int j = 0; j < nout; j++) outbuf_free(&p->out[j].buf);
      free(p->lim);
      free(p->sbx_info);
      free(p);
      lua_pushnil(L);
      lua_pushfstring(L, "sandbox: %s", err);
      lua_pushliteral(L, "ENOTSUP");
      return 3;
    }
    p->limited = 1;
    req.ncgroup_more = cgl_open_procs(p->lim, req.cgroup_more_fds);
    req.nrlimits = cgl_rlimits(p->lim, req.rlimit_res, req.rlimit_val);
  }
  if (marker != NULL) set_mark(p, marker, &req);
  if (p->cg.id == 0) proc_orphans_ready();
  launch_res res;
  int launched = launch(&req, &res);
  for (int i = 0; i < req.ncgroup_more; i++) close(req.cgroup_more_fds[i]);
  cg_session_launched(&p->cg, req.cgroup_fd);
  if (launched < 0) {
    luxec_push_error(L, res.err); /* (named before prep's strings are freed) */
    const char *what = strcmp(res.stage, "cwd") == 0 ? req.cwd
                       : strcmp(res.stage, "sandbox mount namespace") == 0 && prep.failed_path
                           ? prep.failed_path
                       : strcmp(res.stage, "pty") == 0 && res.err == ENOSPC
                           ? "every terminal the kernel allows is open (kernel.pty.max)"
                           : argv[0];
    lua_pushfstring(L, "%s (%s: %s)", lua_tostring(L, -2), res.stage, what);
    lua_replace(L, -3);
    sandbox_prep_free(&prep);
    cg_session_destroy(&p->cg);
    if (p->limited) cgl_release(p->lim);
    for (int j = 0; j < nout; j++) outbuf_free(&p->out[j].buf);
    free(p->lim);
    free(p->sbx_info);
    free(p);
    return 3;
  }
  p->pid = res.pid;
  p->pidfd = res.pidfd;
  p->init_pid = res.init_pid;
  p->init_stack = res.init_stack;
  if (req.sandbox != NULL) {
    proc_sandbox_started(p, &prep, res.listener_fd, &luxec_gethost(L)->loop);
    sandbox_prep_free(&prep);
  }
  p->in_fd = res.in_fd;
  p->out[0].fd = res.out_fd;
  if (p->nout == 2) p->out[1].fd = res.err_fd;
  box->p = p;
  p->box = box;
  lua_pushvalue(L, 6); /* the event function, in the handle's user value */
  lua_setiuservalue(L, 7, 1);
  lua_pushvalue(L, 7);
  proc_started(p, L);
  lua_settop(L, 7);
  lua_pushinteger(L, p->pid);
  return 2;
}
