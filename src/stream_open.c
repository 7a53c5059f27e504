/* stream_open.c: what a stream session's target is opened or connected as, and what kind of
 * descriptor it turned out to be (stream.c makes the session of it). */
#include "stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Open or connect what spec names; the descriptor (non-blocking, close-on-exec), or -errno.
 * *connecting is set for a TCP connect still under way. */
int stream_open_target(lua_State *L, int *connecting, int *rdonly) {
  int fd = -1;
  *connecting = 0;
  if (lua_getfield(L, 1, "fd") == LUA_TNUMBER) {
    fd = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    int fl = fcntl(fd, F_GETFL);
    if (fd < 0 || fl < 0) return -EBADF;
    if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
      return -errno;
    *rdonly = (fl & O_ACCMODE) == O_RDONLY;
    return fd;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 1, "tcp") == LUA_TSTRING) { /* a numeric address (the Lua side resolved it) */
    const char *addr = lua_tostring(L, -1);
    int port = (int)(lua_getfield(L, 1, "port"), lua_tointeger(L, -1));
    lua_pop(L, 2);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
      a4->sin_family = AF_INET;
      a4->sin_port = htons((uint16_t)port);
      len = sizeof *a4;
    } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
      a6->sin6_family = AF_INET6;
      a6->sin6_port = htons((uint16_t)port);
      len = sizeof *a6;
    } else {
      return -EINVAL;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
      if (errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
      }
      *connecting = 1;
    }
    return fd;
  }
  lua_pop(L, 1);
  int is_unix = lua_getfield(L, 1, "unix") == LUA_TSTRING;
  const char *path = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (!is_unix) {
    lua_getfield(L, 1, "path");
    path = luaL_checkstring(L, -1);
    lua_pop(L, 1);
    struct stat st;
    if (stat(path, &st) < 0) return -errno;
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return -EINVAL;
    is_unix = S_ISSOCK(st.st_mode);
    if (!is_unix) {
      fd = open(path, (*rdonly ? O_RDONLY : O_RDWR) | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
      return fd < 0 ? -errno : fd;
    }
  }
  struct sockaddr_un un;
  memset(&un, 0, sizeof un);
  un.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof un.sun_path) return -ENAMETOOLONG;
  strcpy(un.sun_path, path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (struct sockaddr *)&un, sizeof un) < 0) {
    int e = errno;
    close(fd);
    return -(e == EAGAIN ? ECONNREFUSED : e);
  }
  return fd;
}

void stream_describe(int fd, int *socket_, int *tty, char kind[8]) {
  struct stat st;
  int type = 0;
  socklen_t tl = sizeof type;
  if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
    *socket_ = 1;
    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_UNIX)
      strcpy(kind, "unix");
    else
      strcpy(kind, "tcp");
  } else if (isatty(fd)) {
    *tty = 1;
    strcpy(kind, "tty");
  } else if (S_ISFIFO(st.st_mode)) {
    strcpy(kind, "fifo");
  } else {
    strcpy(kind, "device");
  }
}
