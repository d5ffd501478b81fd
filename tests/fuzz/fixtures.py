"""Makes the real objects the API fuzz pass aims at, through the API itself, and writes
their ids as JSON: sandboxes (some to use, some for each destructive operation), a
background process and an interpreter context, keys and members to revoke or change,
and a key of its own for the destructive operations, so that the fuzzer never revokes
or narrows the key it runs with.

    python3 tests/fuzz/fixtures.py URL OWNER_KEY ENVIRONMENT_ID OUT.json
"""

import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

url, owner, environment_id, out = sys.argv[1:5]


def call(procedure, body=None, key=owner):
    request = urllib.request.Request(
        f"{url}/api/{procedure}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"x-api-key": key, "content-type": "application/json"},
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        sys.exit(f"fixtures: {procedure} answered {error.code}: {error.read().decode()}")


def sandbox(**extra):
    # Room for the many processes and interpreter contexts the fuzzer starts.
    body = {
        "environmentId": environment_id,
        "template": "base",
        "timeoutMs": 3_600_000,
        "memoryMb": 2048,
        "pidsLimit": 1024,
        **extra,
    }
    return call("sandbox.create", body)["sandboxId"]


fixtures = {"environmentId": environment_id}
fixtures["projectId"] = call("project.all")[0]["projectId"]
# Sandboxes every non-destructive operation uses; one for setTimeout alone (it may set a
# short timeout), and pools consumed by kill and remove.
fixtures["sandboxes"] = [sandbox(), sandbox()]
fixtures["timeoutSandboxes"] = [sandbox() for _ in range(3)]
# Pause and resume go back and forth on sandboxes of their own.
fixtures["pauseSandboxes"] = [sandbox() for _ in range(2)]
# setEgress changes only `allowlist` sandboxes.
fixtures["egressSandboxes"] = [
    sandbox(networkMode="allowlist", egress={"allow": ["example.com"]}) for _ in range(2)
]
# Starts go to sandboxes of their own: a sandbox runs at most 64 background processes
# (contexts included), and the fixtures' own must keep their room.
fixtures["startSandboxes"] = [sandbox()]
fixtures["contextSandboxes"] = [sandbox()]
fixtures["killSandboxes"] = [sandbox() for _ in range(4)]
# Every pool a one-shot operation (remove) aims at holds 16: at most one success per
# member, and the floor asks for 5% of about 120 cases.
fixtures["removeSandboxes"] = [sandbox() for _ in range(16)]
home = fixtures["sandboxes"][0]
call("sandbox.writeFile", {"sandboxId": home, "path": "/tmp/fuzz.txt", "content": "fuzz\n"})
call("sandbox.writeFile", {"sandboxId": home, "path": "/tmp/fuzz-read/a.txt", "content": "read only\n"})
fixtures["processes"] = [
    call("sandbox.processStart", {"sandboxId": home, "cmd": "cat"})["processId"]
]
fixtures["signalProcesses"] = [
    call("sandbox.processStart", {"sandboxId": home, "cmd": "sleep 100000"})["processId"]
    for _ in range(3)
]
fixtures["contexts"] = [
    call("sandbox.contextCreate", {"sandboxId": home, "language": "python"})["contextId"]
]
fixtures["removeContexts"] = [
    call("sandbox.contextCreate", {"sandboxId": home, "language": "python"})["contextId"]
    for _ in range(2)
]


def terminal_session(sandbox_id):
    """A terminal session on `sandbox_id` that prints a line and ends (a WebSocket to
    /sandbox-pty, read until the server closes it): its id, once it is recorded."""
    parsed = urllib.parse.urlparse(url)
    query = urllib.parse.urlencode({"sandboxId": sandbox_id, "cmd": "echo fuzz-terminal"})
    handshake = (
        f"GET /sandbox-pty?{query} HTTP/1.1\r\nHost: {parsed.netloc}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
        f"x-api-key: {owner}\r\n\r\n"
    )
    with socket.create_connection((parsed.hostname, parsed.port), timeout=20) as connection:
        connection.sendall(handshake.encode())
        try:
            while connection.recv(65536):
                pass
        except socket.timeout:
            pass
    query = urllib.parse.urlencode({"sandboxId": sandbox_id, "kinds": "terminal"})
    for _ in range(200):
        closed = [e for e in call(f"sandbox.activity?{query}")["entries"] if e["action"] == "close"]
        if closed:
            terminal_id = closed[-1]["terminal"]["terminalId"]
            recording = urllib.parse.urlencode({"sandboxId": sandbox_id, "terminalId": terminal_id})
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(
                        f"{url}/api/sandbox.recording?{recording}", headers={"x-api-key": owner}
                    ),
                    timeout=20,
                ):
                    return terminal_id
            except urllib.error.HTTPError:
                pass
        time.sleep(0.1)
    sys.exit("fixtures: a terminal session was not recorded")


# Recorded terminal sessions, for sandbox.recording.
fixtures["terminals"] = [terminal_session(home)]
# Snapshots: one to read and start sandboxes from, and some for snapshot.remove; the
# fuzzer's own snapshots and forks are taken of a sandbox of their own.
# That sandbox is of the `python` template, whose image the suite makes the small busybox
# one: a snapshot commits its filesystem, which the engine walks whole where its storage
# driver cannot diff layers (fuse-overlayfs on CI's machine: 3 s for Debian's).
fixtures["snapshotSandboxes"] = [sandbox(template="python")]
fixtures["snapshots"] = [call("sandbox.snapshot", {"sandboxId": home})["snapshotId"]]
fixtures["removeSnapshots"] = [
    call("sandbox.snapshot", {"sandboxId": home, "name": f"fuzz-leaving-{i}"})["snapshotId"]
    for i in range(16)
]
# Volumes: one to read and mount, and some for volume.remove.
fixtures["volumes"] = [call("volume.create", {"name": "fuzz-volume"})["volumeId"]]
fixtures["removeVolumes"] = [
    call("volume.create", {"name": f"fuzz-leaving-volume-{i}", "sizeMb": 16})["volumeId"]
    for i in range(16)
]
# Templates: one built to read, and some for template.remove (a Dockerfile that only
# sets a variable: no step runs).
def template(name):
    started = call("template.build", {"name": name, "dockerfile": "FROM base\nENV FUZZ=1\n"})
    # One at a time: an organization runs only so many builds at once.
    for _ in range(600):
        query = urllib.parse.urlencode({"buildId": started["buildId"]})
        if call(f"template.buildLog?{query}")["status"] != "building":
            break
        time.sleep(0.1)
    return started


built = template("fuzz-template")
fixtures["builds"] = [built["buildId"]]
fixtures["templates"] = [built["templateId"]]
fixtures["removeTemplates"] = [
    template(f"fuzz-leaving-template-{i}")["templateId"] for i in range(16)
]
fixtures["victimKeys"] = [call("apiKey.create", {"name": f"fuzz-victim-{i}"})["keyId"] for i in range(8)]
fixtures["members"] = [call("member.create", {"name": f"fuzz-member-{i}"})["userId"] for i in range(3)]
fixtures["removeMembers"] = [
    call("member.create", {"name": f"fuzz-leaver-{i}"})["userId"] for i in range(16)
]
# Remote servers at a closed port of loopback: every connection the fuzzer makes sandboxd
# attempt is refused at once, and none leaves the machine.
with tempfile.TemporaryDirectory() as keys:
    path = os.path.join(keys, "key")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)
    fixtures["privateKey"] = open(path).read()
    fixtures["hostKey"] = open(path + ".pub").read().strip()


def server(name):
    body = {
        "name": name,
        "address": "127.0.0.1",
        "port": 1,
        "privateKey": fixtures["privateKey"],
        "hostKey": fixtures["hostKey"],
    }
    return call("server.create", body)["serverId"]


fixtures["servers"] = [server("fuzz-server")]
fixtures["removeServers"] = [server(f"fuzz-leaving-server-{i}") for i in range(16)]
fixtures["destroyerKey"] = call("apiKey.create", {"name": "fuzz-destroyer"})["secret"]
# Egress requests made with the owner's key, for egress.decide (with the destroyer's).
fixtures["decideRequests"] = [
    call(
        "sandbox.requestEgress",
        {"sandboxId": fixtures["egressSandboxes"][i % 2], "host": f"decide-{i}.example", "reason": "fuzz"},
    )["requestId"]
    for i in range(16)
]
with open(out, "w") as file:
    json.dump(fixtures, file)
print(
    "fixtures: {} sandboxes, {} processes, {} contexts, {} keys, {} members".format(
        sum(len(v) for k, v in fixtures.items() if k.endswith("andboxes")),
        len(fixtures["processes"]) + len(fixtures["signalProcesses"]),
        len(fixtures["contexts"]) + len(fixtures["removeContexts"]),
        len(fixtures["victimKeys"]) + 1,
        len(fixtures["members"]) + len(fixtures["removeMembers"]),
    )
)
