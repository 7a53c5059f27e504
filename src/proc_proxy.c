/* proc_proxy.c: the host's end of a session's network-by-name bridge (see sandbox_proxy.c):
 * the proxy's listener handed to the Lua side as a luv TCP handle (no descriptor reaches
 * Lua), and who inside the sandbox made a connection to it (the evidence of a refusal names
 * the pid and the command). */
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "procfs.h"
#include "sandbox.h"

#define PEER_MAX_PIDS 65536

void proxy_dns_start(lua_State *L, int *fd, int cb_idx); /* proxy_dns.c */

/* A luv tcp handle on *fd (which becomes the handle's: -1), pushed; or nil, err. */
static int push_tcp(lua_State *L, int *fd) {
  if (*fd < 0) {
    lua_pushnil(L);
    return 1;
  }
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE); /* loaded */
  if (lua_getfield(L, -1, "luv") != LUA_TTABLE) return luaL_error(L, "luv is not loaded");
  lua_getfield(L, -1, "new_tcp"); /* loaded luv new_tcp */
  lua_call(L, 0, 1);              /* loaded luv tcp */
  int tcp = lua_gettop(L);
  lua_getfield(L, tcp, "open"); /* ... tcp open */
  lua_pushvalue(L, tcp);
  lua_pushinteger(L, *fd);
  lua_call(L, 2, 2);              /* ... tcp ok err */
  if (lua_isnil(L, -2)) return 3; /* (the handle is collected; the fd stays the session's) */
  *fd = -1;                       /* the handle's now: closed with it */
  lua_settop(L, tcp);
  lua_replace(L, tcp - 2);
  lua_settop(L, tcp - 2);
  return 1;
}

/* h:sandbox_proxy() -> a luv tcp handle listening in the sandbox's network namespace (once),
 * or nil when the session has none */
static int proc_sandbox_proxy(lua_State *L) {
  return push_tcp(L, &proc_check(L, 1)->proxy_fd);
}

/* h:sandbox_transparent(dns_cb) -> tls, http, dns: the transparent path's listeners (luv tcp
 * handles on 443 and 80 of every address of the namespace) and its DNS server (port 53,
 * proxy_dns.c: dns_cb(query) -> answer or nil); nil when the session has none (once) */
static int proc_sandbox_transparent(lua_State *L) {
  proc *p = proc_check(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (p->transp_fd[SBX_TRANSP_TLS] < 0) {
    lua_pushnil(L);
    return 1;
  }
  if (push_tcp(L, &p->transp_fd[SBX_TRANSP_TLS]) != 1) return 3;
  if (push_tcp(L, &p->transp_fd[SBX_TRANSP_HTTP]) != 1) return 3;
  proxy_dns_start(L, &p->transp_fd[SBX_TRANSP_DNS], 2);
  return 3;
}

/* The inode of the socket in the namespace of pid whose local port is port and whose peer is
 * the proxy (/proc/<pid>/net/tcp), or 0. */
static unsigned long peer_inode(pid_t pid, int port, int proxy_port) {
  static const char *const files[] = {"tcp", "tcp6"};
  for (int f = 0; f < 2; f++) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, files[f]);
    FILE *in = fopen(path, "re");
    if (in == NULL) continue;
    unsigned long found = 0;
    while (found == 0 && fgets(line, sizeof line, in)) {
      unsigned lport, rport, state;
      unsigned long inode;
      if (sscanf(line, " %*s %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%x %x %*s %*s %*s %*s %*s %lu", &lport,
                 &rport, &state, &inode) == 4 &&
          (int)lport == port && (int)rport == proxy_port)
        found = inode;
    }
    fclose(in);
    if (found) return found;
  }
  return 0;
}

static int same_netns(pid_t pid, const char *ns) {
  char path[64], link[64];
  snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n < 0) return 0;
  link[n] = '\0';
  return strcmp(link, ns) == 0;
}

/* h:sandbox_peer(port [, to]) -> pid, comm: the process inside the sandbox holding the socket
 * whose local port is port and whose peer's port is to (default: the proxy's); nil, reason when none is found (it closed
 * the socket, or exited). */
static int proc_sandbox_peer(lua_State *L) {
  proc *p = proc_check(L, 1);
  int port = (int)luaL_checkinteger(L, 2);
  int to = (int)luaL_optinteger(L, 3, p->proxy_port); /* the port it connected to */
  pid_t nspid = p->init_pid > 0 ? p->init_pid : p->pid;
  char path[64], ns[64];
  snprintf(path, sizeof path, "/proc/%d/ns/net", (int)nspid);
  ssize_t n = readlink(path, ns, sizeof ns - 1);
  if (n < 0 || p->proxy_port <= 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "the session's network namespace is gone");
    return 2;
  }
  ns[n] = '\0';
  unsigned long inode = peer_inode(nspid, port, to);
  if (inode == 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "no socket of the sandbox has that port");
    return 2;
  }
  pid_t *all = malloc(sizeof(pid_t) * PEER_MAX_PIDS);
  if (all == NULL) return luaL_error(L, "out of memory");
  int nall = pfs_all_pids(all, PEER_MAX_PIDS), k = 0;
  for (int i = 0; i < nall; i++)
    if (all[i] != nspid && same_netns(all[i], ns)) all[k++] = all[i];
  char target[64];
  snprintf(target, sizeof target, "socket:[%lu]", inode);
  pid_t holder;
  int found = pfs_holders(all, k, target, &holder, 1);
  free(all);
  if (found < 1) {
    lua_pushnil(L);
    lua_pushliteral(L, "no process of the sandbox holds that socket");
    return 2;
  }
  char comm[32] = "", cpath[64];
  snprintf(cpath, sizeof cpath, "/proc/%d/comm", (int)holder);
  FILE *c = fopen(cpath, "re");
  if (c != NULL) {
    if (fgets(comm, sizeof comm, c)) comm[strcspn(comm, "\n")] = '\0';
    fclose(c);
  }
  lua_pushinteger(L, holder);
  lua_pushstring(L, comm);
  return 2;
}

const luaL_Reg proc_proxy_methods[] = {{"sandbox_peer", proc_sandbox_peer},
                                       {"sandbox_proxy", proc_sandbox_proxy},
                                       {"sandbox_transparent", proc_sandbox_transparent},
                                       {NULL, NULL}};
