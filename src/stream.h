/* stream.h: what stream.c and stream_open.c share. */
#ifndef LUXEC_STREAM_H
#define LUXEC_STREAM_H

#include "luxec.h"

/* Open or connect the target in the table at index 1 (fd, tcp + port, unix, or path; a path
 * opened for reading only with *rdonly): the descriptor, non-blocking and close-on-exec, or
 * -errno. *connecting is set for a TCP connect still under way; for an adopted descriptor
 * *rdonly says whether it was opened for reading only. */
int stream_open_target(lua_State *L, int *connecting, int *rdonly);
/* What fd is: "tcp", "unix", "tty", "fifo" or "device", and whether a socket or terminal. */
void stream_describe(int fd, int *socket_, int *tty, char kind[8]);

#endif
