#!/usr/bin/env bash
# ssh login + N commands + logout: luxec.ssh (bench/ssh.lua) against pexpect's pxssh
# (bench/ssh_pxssh.py), alternating, on an sshd started here on a loopback port with its own
# host key (in a mount namespace with empty /run and /var/log: no privilege separation
# directory or login records left behind), for a test user created here; both are removed at
# the end. Root only.
#   bench/ssh.sh [RUNS [N]]        medians of RUNS runs a side (default 7), N commands (100)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
n=${2:-100}
luxec=${LUXEC:-build/bin/luxec}
[[ $(id -u) == 0 ]] || { echo "bench/ssh.sh: needs root (sshd, a test user)" >&2; exit 1; }
dir=$(mktemp -d /tmp/luxec-bench-ssh.XXXXXX)
user=luxec-b$$
cleanup() {
  if [[ -s $dir/sshd.pid ]]; then
    pid=$(cat "$dir/sshd.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  userdel -f "$user" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
chmod 755 "$dir"
ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
useradd -l -M -d "$dir/home" -s /bin/bash "$user"
mkdir "$dir/home" && chown "$user" "$dir/home"
password=pw-$RANDOM$RANDOM
echo "$user:$password" | chpasswd
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$dir/sshd_config" <<CFG
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_key
PidFile $dir/sshd.pid
UsePAM no
PasswordAuthentication yes
KbdInteractiveAuthentication no
AllowUsers $user
PrintMotd no
PrintLastLog no
LogLevel ERROR
CFG
unshare --mount --propagation private sh -c "mount -t tmpfs tmpfs /run && mkdir /run/sshd &&
  mount -t tmpfs tmpfs /var/log && exec /usr/sbin/sshd -f '$dir/sshd_config'"
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/host_key.pub")" > "$dir/known_hosts"
for _ in 1 2 3 4 5 6 7 8 9 10; do [[ -s $dir/sshd.pid ]] && break; sleep 0.1; done
# The floor: OpenSSH's client alone, the password given by SSH_ASKPASS, the same commands
# piped to the remote shell (no prompt waited for), timed the same way (seconds).
printf '#!/bin/sh\nprintf "%%s\\n" "$BENCH_PW"\n' > "$dir/askpass" && chmod 755 "$dir/askpass"
{ for ((i = 1; i <= n; i++)); do echo "echo $i"; done; echo exit; } > "$dir/commands"
floor() {
  local t0 t1
  t0=$(date +%s%N)
  TERM=dumb BENCH_PW=$password SSH_ASKPASS=$dir/askpass SSH_ASKPASS_REQUIRE=force DISPLAY= \
    setsid -w ssh -tt -F /dev/null -p "$port" -o "UserKnownHostsFile=$dir/known_hosts" \
    -o PubkeyAuthentication=no -o IdentityAgent=none -l "$user" 127.0.0.1 \
    < "$dir/commands" > "$dir/floor.out" 2>&1
  t1=$(date +%s%N)
  sed 's/\x1b\[[?0-9;]*[a-zA-Z]//g; s/\r//g' "$dir/floor.out" | grep -qx "$n" ||
    { echo "bench/ssh.sh: the floor run did not run its commands" >&2; exit 1; }
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", (b - a) / 1e9 }'
}
l=() p=() f=()
for ((r = 0; r < runs; r++)); do
  f+=("$(floor)")
  if ((r % 2)); then
    l+=("$("$luxec" bench/ssh.lua "$port" "$user" "$password" "$dir/known_hosts" "$n")")
    p+=("$(TERM=dumb python3 bench/ssh_pxssh.py "$port" "$user" "$password" "$dir/known_hosts" "$n")")
  else
    p+=("$(TERM=dumb python3 bench/ssh_pxssh.py "$port" "$user" "$password" "$dir/known_hosts" "$n")")
    l+=("$("$luxec" bench/ssh.lua "$port" "$user" "$password" "$dir/known_hosts" "$n")")
  fi
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ml=$(median "${l[@]}") mp=$(median "${p[@]}") mf=$(median "${f[@]}")
echo "luxec.ssh: ${l[*]} (median $ml s)"
echo "pxssh:     ${p[*]} (median $mp s)"
echo "floor:     ${f[*]} (median $mf s: ssh -tt alone, the commands piped, no prompt waited for)"
awk -v a="$ml" -v b="$mp" -v f="$mf" -v n="$n" 'BEGIN {
  r = a / b
  printf "ssh login + %d commands + logout: luxec/pxssh = %.2fx (target <= 0.50x: %s)\n", n, r,
    r <= 0.5 ? "PASS" : "MISS"
  printf "luxec/floor = %.2fx, pxssh/floor = %.2fx, floor/pxssh = %.2fx (the least any " \
    "client of the OpenSSH client can reach)\n", a / f, b / f, f / b
}'
