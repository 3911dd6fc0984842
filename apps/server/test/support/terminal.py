"""Runs a command on a terminal of its own, as a terminal window runs it: a new pseudo-terminal whose session
the command leads. What the command writes there is copied to stdout. A line on stdin closes the terminal as
closing the window does (the kernel hangs it up: SIGHUP to the command, EIO for its writes); then the command's
exit is printed as `exit <code>` (a negative code: killed by that signal)."""
import os
import pty
import select
import sys

pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])

while True:
    ready, _, _ = select.select([fd, sys.stdin.fileno()], [], [])
    if sys.stdin.fileno() in ready:
        break
    try:
        data = os.read(fd, 65536)
    except OSError:  # the command exited: its terminal reads EIO
        data = b''
    if not data:
        break
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
os.close(fd)
_, status = os.waitpid(pid, 0)
print(f'\nexit {os.waitstatus_to_exitcode(status)}', flush=True)
