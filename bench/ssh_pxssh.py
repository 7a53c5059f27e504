# pexpect's pxssh doing what bench/ssh.lua does (tuned: no delay before sends, no timing of
# the original prompt); prints the seconds it took.
#   python3 bench/ssh_pxssh.py PORT USER PASSWORD KNOWN_HOSTS [N]
import sys, time
from pexpect import pxssh

port, user, password, known = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
n = int(sys.argv[5]) if len(sys.argv) > 5 else 100
t0 = time.monotonic()
s = pxssh.pxssh(options={"UserKnownHostsFile": known, "PubkeyAuthentication": "no",
                         "IdentityAgent": "none"}, encoding="utf-8")
s.delaybeforesend = None
s.login("127.0.0.1", user, password, port=port, sync_original_prompt=False)
for i in range(1, n + 1):
    s.sendline("echo %d" % i)
    s.prompt()
    out = s.before.split("\r\n", 1)[1]
    assert out == "%d\r\n" % i, repr(s.before)
s.logout()
print("%.4f" % (time.monotonic() - t0))
