package claude

import "syscall"

// syscallNonblock opens files an agent can replace without blocking on a
// FIFO (C14).
const syscallNonblock = syscall.O_NONBLOCK
