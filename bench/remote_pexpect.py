# W4's round trips through `cat` on a remote PTY, driven by pexpect over `ssh -tt HOST cat`
# (tuned: no delay before sends, plain-string expects); prints secs=SECONDS.
#   python3 bench/remote_pexpect.py N SSH_ARGV...
import sys, time
import pexpect

n = int(sys.argv[1])
argv = sys.argv[2:]
# (echo on: ssh passes the terminal modes on, so the remote terminal echoes as luxec's does)
child = pexpect.spawn(argv[0], argv[1:], encoding=None)
child.delaybeforesend = None
# the remote terminal is ready once it echoes a first line back (the local terminal may echo
# it too, before ssh makes it raw: each copy of a line is expected on its own)
child.send(b"ready\n")
child.expect_exact(b"ready\r\n", timeout=30)
child.expect_exact(b"ready\r\n", timeout=30)
t0 = time.monotonic()
for i in range(n):
    line = b"rt%06d" % i
    child.send(line + b"\n")
    child.expect_exact(line + b"\r\n", timeout=10)
    child.expect_exact(line + b"\r\n", timeout=10)
secs = time.monotonic() - t0
child.sendcontrol("d")
child.expect(pexpect.EOF, timeout=10)
child.close()
print("secs=%.6f" % secs)
