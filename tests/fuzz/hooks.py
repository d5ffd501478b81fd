"""Schemathesis hooks of the API fuzz pass (`scripts/fuzz-api.sh`). Generated ids find
nothing, so on their own most cases end in a 404 before the code behind the id runs.
Before each call, three cases in four get real ids in place of the generated ones
(from `fixtures.py`; the rest keep what was generated), so that the pass reaches the
service, the agent and the engine with everything else still fuzzed. Destructive
operations only ever aim at objects made for them, with a key made for them: the
fuzzer can never revoke, narrow or kill what it runs on. Commands are kept short so
that no case outlives the request timeout.
"""

import io
import json
import os
import tarfile
import zlib

import schemathesis

FIXTURES = json.load(open(os.environ["SANDBOXD_FUZZ_FIXTURES"]))
OWNER_KEY = os.environ["SANDBOXD_FUZZ_KEY"]

# Which pool each operation's `sandboxId` is taken from.
SANDBOX_POOL = {
    "sandbox.kill": "killSandboxes",
    "sandbox.remove": "removeSandboxes",
    "sandbox.setTimeout": "timeoutSandboxes",
    "sandbox.pause": "pauseSandboxes",
    "sandbox.resume": "pauseSandboxes",
    "sandbox.setEgress": "egressSandboxes",
    "sandbox.requestEgress": "egressSandboxes",
    "sandbox.snapshot": "snapshotSandboxes",
    "sandbox.fork": "snapshotSandboxes",
}
# Which pool each operation's `serverId` is taken from.
SERVER_POOL = {"server.remove": "removeServers"}
DESTRUCTIVE = {
    "apiKey.revoke",
    "member.remove",
    "member.update",
    "sandbox.kill",
    "sandbox.remove",
    "sandbox.setTimeout",
    "sandbox.processSignal",
    "sandbox.contextRemove",
    "server.remove",
    "server.update",
    "egress.decide",
    "snapshot.remove",
    "volume.remove",
    "template.remove",
}
# Time limits fields may ask for, at most, in milliseconds.
MAX_WAIT_MS = {"sandbox.exec": 5_000, "sandbox.contextRun": 5_000, "sandbox.processWait": 2_000}


def pick(pool, seed):
    values = FIXTURES[pool]
    return values[seed % len(values)]


def substitutes(operation, seed):
    """The real value of each id field for this operation."""
    values = {
        "sandboxId": pick(SANDBOX_POOL.get(operation, "sandboxes"), seed),
        "environmentId": FIXTURES["environmentId"],
        "projectId": FIXTURES["projectId"],
        "processId": pick(
            "signalProcesses" if operation == "sandbox.processSignal" else "processes", seed
        ),
        "contextId": pick(
            "removeContexts" if operation == "sandbox.contextRemove" else "contexts", seed
        ),
        "terminalId": pick("terminals", seed),
        "keyId": pick("victimKeys", seed),
        "userId": pick("removeMembers" if operation == "member.remove" else "members", seed),
        "serverId": pick(SERVER_POOL.get(operation, "servers"), seed),
        # Made by the owner's key, decided with the destroyer's (never the one that asked).
        "requestId": pick("decideRequests", seed),
        "snapshotId": pick(
            "removeSnapshots" if operation == "snapshot.remove" else "snapshots", seed
        ),
        "volumeId": pick("removeVolumes" if operation == "volume.remove" else "volumes", seed),
        "buildId": pick("builds", seed),
        "templateId": pick(
            "removeTemplates" if operation == "template.remove" else "templates", seed
        ),
    }
    # The fixtures' processes, contexts and terminal session all sit in the first
    # sandbox; new processes start elsewhere, so that they never crowd those out.
    if operation == "sandbox.processStart":
        values["sandboxId"] = pick("startSandboxes", seed)
    elif operation == "sandbox.contextCreate":
        values["sandboxId"] = pick("contextSandboxes", seed)
    elif operation.startswith("sandbox.process") or operation.startswith("sandbox.context"):
        values["sandboxId"] = FIXTURES["sandboxes"][0]
    elif operation == "sandbox.recording":
        # The fixtures' terminal session ran there.
        values["sandboxId"] = FIXTURES["sandboxes"][0]
    return values


def aim(fields, part, operation, seed, forced):
    if not isinstance(fields, dict):
        return
    for name, value in substitutes(operation, seed).items():
        if name in fields and (forced or seed % 4 != 0):
            fields[name] = value
    limit = MAX_WAIT_MS.get(operation)
    if limit is not None and part == "body" and (
        not isinstance(fields.get("timeoutMs"), int) or not 0 < fields["timeoutMs"] <= limit
    ):
        fields["timeoutMs"] = limit
    if operation == "sandbox.setTimeout" and seed % 4 != 0 and part == "body":
        # Mostly a timeout that keeps the sandbox alive for the rest of the run.
        fields["timeoutMs"] = 3_600_000
    if operation in ("sandbox.snapshot", "sandbox.fork") and seed % 4 != 0 and part == "body":
        # Mostly files only: the fixtures' sandboxes are of the container tier, whose
        # memory is refused by design (400), and a save of memory takes seconds.
        fields["memory"] = False
    if operation == "sandbox.setEgress" and seed % 4 != 0 and part == "body":
        # Mostly a list the policy takes (a generated string is rarely a host name).
        fields["allow"] = [["example.com"], ["*.example.org:8443", "api.example.com"], []][seed % 3]
    if operation == "sandbox.requestEgress" and seed % 4 != 0 and part == "body":
        # Mostly a host the policy takes, with a plain reason; hosts no list of the
        # fixtures holds, few enough that a sandbox never has too many waiting.
        fields["host"] = ["pypi.org", "*.pythonhosted.org", "files.example.net:8443"][seed % 3]
        fields["reason"] = "fuzz"
    if operation == "template.one" and seed % 4 != 0 and part == "query":
        # Mostly one of the two ways to name a template (both, or neither, is a 400).
        if seed % 2:
            fields["templateId"] = pick("templates", seed)
            fields.pop("name", None)
        else:
            fields["name"] = "fuzz-template"
            fields.pop("templateId", None)
    if operation == "template.build" and seed % 4 != 0 and part == "body":
        # Mostly a Dockerfile that builds (a generated one rarely does), from a few that
        # the cache soon holds, so that cases do not queue behind the builds they start.
        fields["dockerfile"] = [
            "FROM base\nENV FUZZ=1\n",
            "FROM base\nLABEL fuzz=yes\n",
            "FROM base\nENV FUZZ=1\nUSER 1000:1000\n",
        ][seed % 3]
        fields["name"] = f"fuzz-built-{seed % 3}"
        for name in ("files", "contextId", "isolation", "networkMode", "cpu", "memoryMb"):
            fields.pop(name, None)
    path = fields.get("path")
    if operation == "sandbox.readFile" and seed % 2 == 0:
        fields["path"] = "/tmp/fuzz.txt"
    elif operation == "sandbox.writeFile" and seed % 4 != 0 and isinstance(path, str):
        # Under a directory the sandbox user may write, the generated name kept.
        fields["path"] = "/tmp/fuzz/" + (path.lstrip("/") or "file")
    if operation == "sandbox.upload" and part == "query" and seed % 4 != 0:
        # Mostly a file under a directory the sandbox user may write: any body is a
        # file's bytes (a generated body is rarely a tar).
        name = "".join(c for c in str(path or "") if c.isalnum())[:32] or "file"
        fields["path"] = "/tmp/fuzz/up-" + name
        fields["format"] = "raw"
        if not (isinstance(fields.get("mode"), str) and fields["mode"].isdigit()
                and set(fields["mode"]) <= set("01234567") and len(fields["mode"]) <= 4):
            fields.pop("mode", None)
    if operation == "sandbox.download" and part == "query":
        # A small file, a small directory, or a name under it (mostly missing), in a
        # tree no other case writes: a generated `/` would stream a whole filesystem,
        # past the request timeout, and a file rewritten while it is sent cuts the
        # answer short (its length was promised).
        name = "".join(c for c in str(path or "") if c.isalnum())[:32]
        fields["path"] = ["/tmp/fuzz-read/a.txt", "/tmp/fuzz-read", "/tmp/fuzz-read/" + (name or "x")][seed % 3]
        if seed % 5 == 0:
            # The tar of the sandbox's changes instead of a path.
            fields.pop("path", None)
            fields["changes"] = "true"
            fields.pop("format", None)
    if operation == "sandbox.processWrite":
        # Closing the one process's input would end it for every later case.
        fields["close"] = False
    if operation.startswith("server.") and part == "body":
        aim_server(fields, seed)
    if operation == "sandbox.create" and "serverId" in fields:
        # The fixtures' servers are unreachable on purpose (503); sandboxes on a
        # remote server are the end-to-end suite's.
        del fields["serverId"]
    if operation == "sandbox.create" and seed % 2 == 0:
        # Half the creates use a template the server has (or, one in four, the
        # fixtures' snapshot), the rest fuzz the image.
        if seed % 4 == 0:
            fields["snapshotId"] = FIXTURES["snapshots"][0]
            fields.pop("template", None)
        else:
            fields["template"] = "base"
            fields.pop("snapshotId", None)
        fields.pop("image", None)
    if operation == "sandbox.create" and part == "body" and seed % 8 == 2:
        # Now and then the fixtures' volume, read-only (the generated mounts name none).
        fields["volumes"] = [{"volumeId": FIXTURES["volumes"][0], "path": "/mnt/fuzz", "readOnly": True}]
    if operation == "volume.create" and part == "body" and "serverId" in fields:
        # As for sandbox.create: every server the fuzzer knows is unreachable on
        # purpose (503), and schemathesis reuses ids from earlier answers.
        del fields["serverId"]
    if operation == "volume.create" and part == "body" and seed % 4 != 0:
        # Mostly a name the API takes, in the fixtures' project (the fuzzer makes
        # projects of its own, and with several in sight a volume needs one named).
        fields["name"] = f"fuzz-{seed}"
        fields["projectId"] = FIXTURES["projectId"]
        fields.pop("serverId", None)
        if not (isinstance(fields.get("sizeMb"), int) and 1 <= fields["sizeMb"] <= 4096):
            fields.pop("sizeMb", None)
    if operation == "sandbox.fork" and part == "body":
        # Few short-lived forks at a time (each is a sandbox); counts out of bounds are
        # kept for validation to refuse.
        count = fields.get("count")
        if seed % 4 != 0 or not isinstance(count, int) or 1 <= count <= 20:
            fields["count"] = 1 + seed % 2
            fields["timeoutMs"] = 10_000


def aim_server(fields, seed):
    """Every server the fuzzer makes or changes is at a closed port of loopback, so no
    connection leaves the machine; three cases in four get usable keys."""
    if "address" in fields or "serverId" not in fields:
        fields["address"] = "127.0.0.1"
    if "port" in fields or "serverId" not in fields:
        fields["port"] = 1
    if seed % 4 != 0:
        if "privateKey" in fields or "serverId" not in fields:
            fields["privateKey"] = FIXTURES["privateKey"]
        if "hostKey" in fields:
            fields["hostKey"] = FIXTURES["hostKey"]
        for name in ("dockerSocket", "remoteDir", "cpu", "memoryMb"):
            fields.pop(name, None)
        if isinstance(fields.get("name"), str):
            fields["name"] = f"fuzz-{seed}-" + "".join(c for c in fields["name"] if c.isalnum())[:32]


def _small_tar(seed):
    """A tar of one file named and filled after the seed."""
    content = str(seed).encode()
    info = tarfile.TarInfo(f"fuzz/{seed % 97}.txt")
    info.size = len(content)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    operation = case.operation.path.rsplit("/", 1)[-1]
    seed = zlib.crc32(repr((case.body, case.query)).encode())
    # Destructive operations aim at their own fixtures only, whatever was generated:
    # schemathesis also sends ids it saw in earlier answers (its own key's among them).
    forced = operation in DESTRUCTIVE
    aim(case.body, "body", operation, seed, forced)
    aim(case.query, "query", operation, seed, forced)
    if operation == "template.context" and seed % 4 != 0:
        # Mostly a small tar (a generated body is rarely one).
        case.body = _small_tar(seed)
    if case.headers is None:
        case.headers = {}
    case.headers["x-api-key"] = (
        FIXTURES["destroyerKey"] if operation in DESTRUCTIVE else OWNER_KEY
    )
