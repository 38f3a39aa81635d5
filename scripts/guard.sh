# shellcheck shell=bash
# Process handling for the start scripts (scripts/dev, scripts/serve): `source scripts/guard.sh`.
#
# A server started with `guard_start` runs in a session of its own, led by a guard process. The guard holds the
# read end of a pipe whose only write end stays in the calling script; when the script ends in any way (normal
# exit, a trapped signal, or SIGKILL, where no trap runs) the kernel closes that end, the guard reads EOF and
# ends its whole session: the server and everything it started (wrangler's workerd children included). The
# guard ends too when the server exits on its own, with the server's status. Nothing outlives the script.
#
#   guard_port_taken HOST PORT   status 0 when something already listens on PORT (any address when HOST is
#                                0.0.0.0 or ss is there; HOST itself otherwise)
#   guard_free_port              prints a TCP port nothing listens on
#   guard_start CMD [ARG]...     starts CMD under a guard; sets GUARD_PID. With GUARD_REMOVE set to a path, the
#                                guard removes it once the server has ended (the script's own files, such as a
#                                generated config, are gone then even when the script was killed by SIGKILL)
#   guard_alive                  status 0 while the guard (and so the server) runs
#   guard_owns_listener PORT     status 0 when the process listening on PORT is in the guard's session
#   guard_stop                   closes the pipe and waits for the guard; returns its status

GUARD_PID=""
GUARD_FD=""

guard_port_taken() {
  local host="$1" port="$2"
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]
    return
  fi
  [ "$host" = "0.0.0.0" ] && host=127.0.0.1
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

guard_free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The guard (run by bash -c in a new session; its stdin is the pipe, kept as fd 3 since a background job's
# stdin is /dev/null): start the server with stdin from /dev/null, wait for the server to exit or the pipe to
# close, then TERM the session's process group, give it ten seconds, and KILL what is left (the guard itself
# excepted). Exits with the server's status.
# shellcheck disable=SC2016 # expanded by the guard's bash, not here
GUARD_BODY='
exec 3<&0
"$@" </dev/null 3<&- &
server=$!
cat <&3 >/dev/null &
watch=$!
done_pid=""
rc=0
wait -n -p done_pid "$server" "$watch" || rc=$?
if [ "$done_pid" != "$server" ]; then
  trap "" TERM
  kill -TERM 0 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  rc=0
  wait "$server" 2>/dev/null || rc=$?
fi
for p in $(pgrep -g 0); do [ "$p" != "$$" ] && kill -KILL "$p" 2>/dev/null; done
[ -n "${GUARD_REMOVE:-}" ] && rm -rf "$GUARD_REMOVE"
exit "$rc"'

guard_start() {
  local dir fifo
  dir="$(mktemp -d "${TMPDIR:-/tmp}/queen-edge-guard.XXXXXX")"
  fifo="$dir/pipe"
  mkfifo "$fifo"
  # The guard is forked before this script opens the write end, so neither it nor the server holds one.
  # -w: should setsid have to fork (a process group leader calling it), GUARD_PID still lives as long as
  # the guard.
  setsid -w bash -c "$GUARD_BODY" guard "$@" <"$fifo" &
  GUARD_PID=$!
  exec {GUARD_FD}>"$fifo"
  rm -rf "$dir"
}

guard_alive() {
  [ -n "$GUARD_PID" ] && kill -0 "$GUARD_PID" 2>/dev/null
}

# Session id of PID (field 6 of /proc/PID/stat, counted after the command name).
guard_session_of() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  # shellcheck disable=SC2086 # split the fields
  set -- $stat
  echo "$4"
}

guard_owns_listener() {
  local port="$1" sid pids p
  command -v ss >/dev/null 2>&1 || return 0 # no ss: the free-port check before the start has to do
  sid="$(guard_session_of "$GUARD_PID")" || return 1
  pids="$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u)"
  [ -n "$pids" ] || return 1
  for p in $pids; do
    [ "$(guard_session_of "$p")" = "$sid" ] || return 1
  done
}

guard_stop() {
  local rc=0
  [ -n "$GUARD_PID" ] || return 0
  if [ -n "$GUARD_FD" ]; then
    exec {GUARD_FD}>&-
    GUARD_FD=""
  fi
  wait "$GUARD_PID" 2>/dev/null || rc=$?
  GUARD_PID=""
  return "$rc"
}
