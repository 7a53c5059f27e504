/* proc_input.c: what a session's program has not read of its input yet, and its terminal's
 * control characters and echo. The Lua layer decides from these when the program waits for input. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* Bytes written to the terminal that its line discipline holds unread. Data written to the
 * master reaches the slave's line discipline from a kernel work item; a poll of the slave
 * waits for that work when nothing is readable yet, so TIOCINQ after it counts every byte
 * written so far. -1 when the terminal cannot be asked. */
static long tty_unread(proc *p) {
  int master = p->out[0].fd >= 0 ? p->out[0].fd : p->in_fd;
  if (master < 0) return -1;
  int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (slave < 0) return -1;
  struct pollfd pfd = {.fd = slave, .events = POLLIN};
  int n = 0;
  while (poll(&pfd, 1, 0) < 0 && errno == EINTR) {
  }
  long r = ioctl(slave, TIOCINQ, &n) == 0 ? n : -1;
  close(slave);
  return r;
}

/* p:input_unread() -> bytes of input the program has not read yet: what the core still
 * queues plus what the pipe or the terminal holds; nil when that cannot be known (stdin
 * closed or /dev/null). */
static int proc_input_unread(lua_State *L) {
  proc *p = proc_check(L, 1);
  if (p->in_fd < 0 || p->in_err) {
    lua_pushnil(L);
    return 1;
  }
  long kernel;
  if (p->tty) {
    kernel = tty_unread(p);
  } else {
    int n = 0;
    kernel = ioctl(p->in_fd, FIONREAD, &n) == 0 ? n : -1;
  }
  if (kernel < 0) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)p->wq_bytes + kernel);
  return 1;
}

static const char *const cc_names[] = {"eof", "intr", "quit", "susp", "erase", "kill", NULL};
static const int cc_index[] = {VEOF, VINTR, VQUIT, VSUSP, VERASE, VKILL};

/* p:tty_char(name) -> the byte the terminal now takes as "eof", "intr", "quit", "susp",
 * "erase" or "kill" (its termios), or nil for a pipe session or one whose terminal has the
 * character disabled; nil, "EPIPE: ...", "EPIPE" once nobody reads the terminal (what a
 * write of that byte would get). */
static int proc_tty_char(lua_State *L) {
  proc *p = proc_check(L, 1);
  int which = luaL_checkoption(L, 2, NULL, cc_names);
  if (p->tty && p->in_err) return luxec_push_error(L, p->in_err);
  struct termios tio;
  int fd = p->out[0].fd >= 0 ? p->out[0].fd : p->in_fd;
  if (!p->tty || fd < 0 || tcgetattr(fd, &tio) != 0 ||
      tio.c_cc[cc_index[which]] == _POSIX_VDISABLE) {
    lua_pushnil(L);
    return 1;
  }
  char c = (char)tio.c_cc[cc_index[which]];
  lua_pushlstring(L, &c, 1);
  return 1;
}

/* p:tty_echo([on]) -> whether the terminal echoes (after setting it when `on` is given), or
 * nil, message, code for a pipe session or a terminal that cannot be asked. */
static int proc_tty_echo(lua_State *L) {
  proc *p = proc_check(L, 1);
  int set = !lua_isnoneornil(L, 2);
  int on = lua_toboolean(L, 2);
  struct termios tio;
  int fd = p->out[0].fd >= 0 ? p->out[0].fd : p->in_fd;
  if (!p->tty || fd < 0) return luxec_push_error(L, ENOTTY);
  if (tcgetattr(fd, &tio) != 0) return luxec_push_error(L, errno);
  if (set) {
    if (on) {
      tio.c_lflag |= ECHO;
    } else {
      tio.c_lflag &= ~(tcflag_t)ECHO;
    }
    if (tcsetattr(fd, TCSANOW, &tio) != 0) return luxec_push_error(L, errno);
  }
  lua_pushboolean(L, (tio.c_lflag & ECHO) != 0);
  return 1;
}

/* p:tty_raw(on) -> true: the terminal in raw mode (cfmakeraw: no echo, no line editing, no
 * signal characters, no output processing), or back to cooked mode with echo (as a new
 * terminal starts); nil, message, code for a pipe session or a terminal that is gone. */
static int proc_tty_raw(lua_State *L) {
  proc *p = proc_check(L, 1);
  int on = lua_toboolean(L, 2);
  struct termios tio;
  int fd = p->out[0].fd >= 0 ? p->out[0].fd : p->in_fd;
  if (!p->tty || fd < 0) return luxec_push_error(L, ENOTTY);
  if (tcgetattr(fd, &tio) != 0) return luxec_push_error(L, errno);
  if (on) {
    cfmakeraw(&tio);
  } else {
    tio.c_iflag |= ICRNL | IXON | IUTF8;
    tio.c_oflag |= OPOST | ONLCR;
    tio.c_lflag |= ECHO | ECHOE | ECHOK | ICANON | ISIG | IEXTEN | ECHOCTL | ECHOKE;
  }
  if (tcsetattr(fd, TCSANOW, &tio) != 0) return luxec_push_error(L, errno);
  p->raw = on;
  lua_pushboolean(L, 1);
  return 1;
}

/* p:tty_size() -> rows, cols as the terminal has them now (the program may have set them:
 * stty rows N), or nil, message, code for a pipe session or a terminal that is gone. */
static int proc_tty_size(lua_State *L) {
  proc *p = proc_check(L, 1);
  struct winsize ws;
  int fd = p->out[0].fd >= 0 ? p->out[0].fd : p->in_fd;
  if (!p->tty || fd < 0) return luxec_push_error(L, ENOTTY);
  if (ioctl(fd, TIOCGWINSZ, &ws) != 0) return luxec_push_error(L, errno);
  lua_pushinteger(L, ws.ws_row);
  lua_pushinteger(L, ws.ws_col);
  return 2;
}

const luaL_Reg proc_input_methods[] = {
    {"input_unread", proc_input_unread}, {"tty_size", proc_tty_size}, {"tty_raw", proc_tty_raw},
    {"tty_char", proc_tty_char},         {"tty_echo", proc_tty_echo}, {NULL, NULL}};
