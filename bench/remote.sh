#!/usr/bin/env bash
# Remote sessions over real OpenSSH (luxec.remote; bench/remote.lua) against plain ssh, on
# three sshd started here on loopback ports (each its own host key; in a mount namespace
# with empty /run and /var/log), for a test user created here with an empty home (no shell
# start-up files: both sides pay the same login). Root only. Rows (medians, runs alternate):
#   W4 remote    N round trips through `cat` on a remote PTY, against `ssh -tt host cat`
#                driven by pexpect (tuned; bench/remote_pexpect.py). Target <= 1.10x.
#   fan-out      60 `true` on 3 hosts (luxec: one connection per host, all at once) against
#                `xargs -P 8` of `ssh host true` (connections included). Target <= 0.3x.
#   remote pipe  BYTES written through a remote pipe session into `cat > /dev/null`, against
#                `head -c BYTES /dev/zero | ssh host 'cat > /dev/null'`. Throughput, target
#                >= 0.8x (luxec/ssh of MiB/s).
#   bench/remote.sh [RUNS [W4_COUNT [BYTES]]]      defaults 7, 2000, 1073741824
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
w4n=${2:-2000}
bytes=${3:-1073741824}
luxec=$PWD/${LUXEC:-build/bin/luxec}
[[ $(id -u) == 0 ]] || { echo "bench/remote.sh: needs root (sshd, a test user)" >&2; exit 1; }
dir=$(mktemp -d /tmp/luxec-bench-remote.XXXXXX)
user=luxec-r$$
cleanup() {
  for f in "$dir"/sshd*.pid; do
    [[ -s $f ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  userdel -f "$user" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
chmod 755 "$dir"
useradd -l -M -d "$dir/home" -s /bin/sh -p "*" "$user" # (not locked: no password)
mkdir -p "$dir/home/.ssh"
ssh-keygen -q -t ed25519 -N '' -f "$dir/client_key"
cp "$dir/client_key.pub" "$dir/home/.ssh/authorized_keys"
chown -R "$user" "$dir/home"
: >"$dir/known_hosts"
ports=()
for i in 1 2 3; do
  ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key$i"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  ports+=("$port")
  cat >"$dir/sshd$i.conf" <<CFG
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_key$i
PidFile $dir/sshd$i.pid
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowUsers $user
PrintMotd no
PrintLastLog no
LogLevel ERROR
MaxStartups 100
MaxSessions 100
CFG
  unshare --mount --propagation private sh -c "mount -t tmpfs tmpfs /run && mkdir /run/sshd &&
    mount -t tmpfs tmpfs /var/log && exec /usr/sbin/sshd -f '$dir/sshd$i.conf'"
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/host_key$i.pub")" >>"$dir/known_hosts"
  for _ in $(seq 50); do [[ -s $dir/sshd$i.pid ]] && break; sleep 0.1; done
done
ssh_args() { # PORT: ssh's argv up to the host
  echo ssh -i "$dir/client_key" -p "$1" -o UserKnownHostsFile="$dir/known_hosts" \
    -o BatchMode=yes -o LogLevel=ERROR "$user@127.0.0.1"
}
# (no -T for the pexpect side: it needs -tt)
read -r -a s1 <<<"$(ssh_args "${ports[0]}")"
read -r -a s2 <<<"$(ssh_args "${ports[1]}")"
read -r -a s3 <<<"$(ssh_args "${ports[2]}")"
serve=("$luxec" serve)
secs() { sed -n 's/^secs=//p'; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

lw=() pw=() lf=() xf=() lp=() sp=()
fan_ssh() {
  local t0 t1
  t0=$(date +%s.%N)
  for i in $(seq 60); do
    case $((i % 3)) in 0) echo "${ports[0]}" ;; 1) echo "${ports[1]}" ;; *) echo "${ports[2]}" ;; esac
  done | xargs -P 8 -I{} ssh -T -i "$dir/client_key" -p {} -o UserKnownHostsFile="$dir/known_hosts" \
    -o BatchMode=yes -o LogLevel=ERROR "$user@127.0.0.1" true
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }'
}
pipe_ssh() {
  local t0 t1
  t0=$(date +%s.%N)
  head -c "$bytes" /dev/zero | ssh -T "${s1[@]:1}" 'cat > /dev/null'
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }'
}
for ((r = 0; r < runs; r++)); do
  one_luxec() {
    lw+=("$("$luxec" bench/remote.lua w4 "$w4n" "${s1[@]:0:1}" -T "${s1[@]:1}" "${serve[@]}" | secs)")
    lf+=("$("$luxec" bench/remote.lua fan 60 "${s1[@]:0:1}" -T "${s1[@]:1}" "${serve[@]}" -- \
      "${s2[@]:0:1}" -T "${s2[@]:1}" "${serve[@]}" -- "${s3[@]:0:1}" -T "${s3[@]:1}" "${serve[@]}" | secs)")
    lp+=("$("$luxec" bench/remote.lua pipe "$bytes" "${s1[@]:0:1}" -T "${s1[@]:1}" "${serve[@]}" | secs)")
  }
  one_ssh() {
    pw+=("$(python3 bench/remote_pexpect.py "$w4n" "${s1[@]:0:1}" -tt "${s1[@]:1}" cat | secs)")
    xf+=("$(fan_ssh)")
    sp+=("$(pipe_ssh)")
  }
  if ((r % 2)); then one_luxec; one_ssh; else one_ssh; one_luxec; fi
done
row() { # NAME LUXEC... / OTHER...: medians, ratio, verdict
  local name=$1 kind=$2 target=$3 ml=$4 mo=$5
  awk -v n="$name" -v k="$kind" -v t="$target" -v a="$ml" -v b="$mo" 'BEGIN {
    if (k == "time") { r = a / b; ok = r <= t; cmp = "<=" } else { r = b / a; ok = r >= t; cmp = ">=" }
    printf "%-40s luxec %.3f s  other %.3f s  ratio %.2fx (target %s %.2fx: %s)\n", n, a, b, r,
      cmp, t, ok ? "PASS" : "MISS"
  }'
}
echo "runs: luxec w4 ${lw[*]} | pexpect ${pw[*]}"
echo "runs: luxec fan ${lf[*]} | xargs ${xf[*]}"
echo "runs: luxec pipe ${lp[*]} | ssh ${sp[*]}"
row "W4 remote ($w4n round trips, PTY)" time 1.10 "$(median "${lw[@]}")" "$(median "${pw[@]}")"
row "60 true on 3 hosts vs xargs -P 8 ssh" time 0.30 "$(median "${lf[@]}")" "$(median "${xf[@]}")"
row "$((bytes >> 20)) MiB through a remote pipe vs ssh cat" tput 0.80 "$(median "${lp[@]}")" \
  "$(median "${sp[@]}")"
