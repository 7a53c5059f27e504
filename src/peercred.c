/* peercred.c: who is on the other end of a unix socket (SO_PEERCRED), for `luxec serve`,
 * which decides in Lua whom it serves.
 *   core.peer_cred(pipe) -> pid, uid, gid | nil, message
 * `pipe` is a luv pipe handle (uv.new_pipe) that accepted a connection. */
#include "luxec.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

static int core_peer_cred(lua_State *L) {
  uv_pipe_t *pipe = *(uv_pipe_t **)luaL_checkudata(L, 1, "uv_pipe");
  uv_os_fd_t fd;
  int rc = uv_fileno((uv_handle_t *)pipe, &fd);
  if (rc != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "the connection has no socket: %s", uv_strerror(rc));
    return 2;
  }
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "SO_PEERCRED: %s", strerror(errno));
    return 2;
  }
  lua_pushinteger(L, cred.pid);
  lua_pushinteger(L, cred.uid);
  lua_pushinteger(L, cred.gid);
  return 3;
}

void luxec_open_peercred(lua_State *L) {
  lua_pushcfunction(L, core_peer_cred);
  lua_setfield(L, -2, "peer_cred");
}
