# An impostor agent, run by a sandbox's own code: it kills the real agent's worker (the
# supervisor, PID 1, cannot be signalled and restarts it, so the impostor races it and
# kills it again until it wins), connects to the agent socket and introduces itself
# with the agent key given as argv[2] (the test reads it on the host: the sandbox's
# code has no way to it, so this stands for an agent that is itself compromised), then
# misbehaves as argv[1] says: `flood` answers a request with an unbounded range and
# endless 1 MiB frames, `deaf` never reads what the server sends, `drip` answers with a
# frame every half second and never finishes, `greedy` answers a download with a file it
# says is 1 GiB and sends it without waiting for credit, `stingy` takes an upload and
# never grants it credit, `portflood` answers a connection to a port as made and sends
# endless 1 MiB frames without waiting for credit. `pose` presents the key given (none
# when empty), with how long to wait for a refusal as argv[3] and how many tries as
# argv[4] (20 unless given): it prints how many of its connections the server closed,
# and ends.
import json
import os
import signal
import socket
import struct
import sys
import time

mode = sys.argv[1]
key = sys.argv[2] if len(sys.argv) > 2 else ""
# How long a connection is given to be closed by the server (a loaded machine's server
# may take longer than the default to read a Hello and refuse it).
PATIENCE = float(sys.argv[3]) if len(sys.argv) > 3 else 0.3
# How many times `pose` tries.
TRIES = int(sys.argv[4]) if len(sys.argv) > 4 else 20
IMPOSTOR_PID = 999999
time.sleep(0.5)  # lets the command that started this one get its reply



def kill_workers():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"sandboxd-agent") and argv[1:2] == [b"serve"]:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def frame(channel, kind, payload):
    return struct.pack(">IIB", len(payload), channel, kind) + payload


def closed_by_server(sock):
    """The server closes at once a connection made while the real agent's still
    counted as live, or one without the key; an open one has nothing to read yet, or a
    request. Looked at until it is closed, for at most PATIENCE seconds."""
    deadline = time.monotonic() + PATIENCE
    sock.setblocking(False)
    try:
        while True:
            try:
                if sock.recv(1, socket.MSG_PEEK) == b"":
                    return True
                return False
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.05)
            except OSError:
                return True
    finally:
        sock.setblocking(True)


def pose():
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.connect("/.sandboxd/run/agent.sock")
        # The pid it announces tells the test that the impostor holds the connection.
        hello = {"version": 3, "pid": IMPOSTOR_PID, "uid": os.getuid(), "gid": os.getgid()}
        if key:
            hello["key"] = key
        sock.sendall(frame(0, 0, json.dumps(hello).encode()))
    except OSError:
        sock.close()
        return None
    return sock


if mode == "pose":
    refused = 0
    for _ in range(TRIES):
        kill_workers()
        sock = pose()
        if sock is None or closed_by_server(sock):
            refused += 1
        if sock is not None:
            sock.close()
    print(f"refused {refused} of {TRIES}")
    sys.exit(0)

for _ in range(100):
    kill_workers()
    sock = pose()
    if sock is None:
        time.sleep(0.05)
        continue
    if not closed_by_server(sock):
        break
    sock.close()
# Keep the restarted real worker out: it is refused while this connection lives, and
# killed whenever it shows up.
if os.fork() == 0:
    while True:
        kill_workers()
        time.sleep(0.2)

if mode == "deaf":
    while True:
        time.sleep(60)

buffered = b""


def next_frame():
    global buffered
    while True:
        if len(buffered) >= 9:
            length, channel, kind = struct.unpack(">IIB", buffered[:9])
            if len(buffered) >= 9 + length:
                payload = buffered[9 : 9 + length]
                buffered = buffered[9 + length :]
                return channel, kind, payload
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit(0)
        buffered += chunk


megabyte = b"x" * (1 << 20)
while True:
    channel, kind, payload = next_frame()
    if kind != 1:
        continue
    try:
        if mode == "greedy":
            start = {"shape": "raw", "size": 1 << 30}
            sock.sendall(frame(channel, 6, json.dumps(start).encode()))
            while True:
                sock.sendall(frame(channel, 6, megabyte))
        elif mode == "stingy":
            continue
        elif mode == "portflood":
            sock.sendall(frame(channel, 11, json.dumps({"bytes": 1 << 30}).encode()))
            while True:
                sock.sendall(frame(channel, 6, megabyte))
        elif mode == "flood":
            unbounded = {"start": 0, "end": 2**64 - 1}
            sock.sendall(frame(channel, 6, json.dumps(unbounded).encode()))
            while True:
                sock.sendall(frame(channel, 6, megabyte))
        elif mode == "drip":
            while True:
                sock.sendall(frame(channel, 6, b"[]"))
                time.sleep(0.5)
    except OSError:
        sys.exit(0)
