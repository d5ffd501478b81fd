"""E2B's own Python SDK (`e2b` on PyPI) inside a sandbox through sandboxd's E2B
daemon (`/e2b/envd`), set up as its users set it up: commands (output, exit codes,
environment, working directory, background processes listed, fed, reattached and
killed, a timeout), terminals (typed into, resized, killed), files (written, read,
listed to a depth, stated, made, moved, removed, with metadata), and a directory
watched.

    python3 tests/python/e2b_in_sandbox.py URL KEY
"""

import os
import sys
import time

url, key = sys.argv[1:3]
os.environ["E2B_API_URL"] = f"{url}/e2b"
os.environ["E2B_SANDBOX_URL"] = f"{url}/e2b/envd"
os.environ["E2B_API_KEY"] = key

from e2b import (  # noqa: E402
    CommandExitException,
    FileNotFoundException,
    FilesystemEventType,
    FileType,
    Sandbox,
    TimeoutException,
)
from e2b.sandbox.commands.command_handle import PtySize  # noqa: E402

sbx = Sandbox.create("base", timeout=300, allow_internet_access=False)
try:
    # Commands: output, the exit code as E2B's exception, environment and directory.
    run = sbx.commands.run("echo hello; echo oops >&2; pwd; whoami")
    assert run.stdout == "hello\n/home/user\nuser\n", run.stdout
    assert run.stderr == "oops\n", run.stderr
    assert run.exit_code == 0
    try:
        sbx.commands.run("echo partial; exit 7")
        raise AssertionError("a failing command raises")
    except CommandExitException as failed:
        assert failed.exit_code == 7 and failed.stdout == "partial\n", failed
    assert sbx.commands.run("echo $FOO", envs={"FOO": "bar"}).stdout == "bar\n"
    assert sbx.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    seen = []
    sbx.commands.run("for i in 1 2 3; do echo $i; done", on_stdout=seen.append)
    assert "".join(seen) == "1\n2\n3\n", seen

    # Background processes: listed, fed, reattached, killed.
    cat = sbx.commands.run("cat", background=True, stdin=True)
    sleeper = sbx.commands.run("sleep 60", background=True)
    pids = [p.pid for p in sbx.commands.list()]
    assert cat.pid in pids and sleeper.pid in pids, pids
    sbx.commands.send_stdin(cat.pid, "fed through stdin")
    sbx.commands.close_stdin(cat.pid)
    assert cat.wait().stdout == "fed through stdin"
    again = sbx.commands.connect(sleeper.pid)
    assert again.pid == sleeper.pid
    assert sbx.commands.kill(sleeper.pid) is True
    assert sbx.commands.kill(999999) is False
    try:
        sbx.commands.run("sleep 30", timeout=1)
        raise AssertionError("a command past its timeout raises")
    except TimeoutException:
        pass

    # A terminal: typed into, resized, ended.
    term = sbx.pty.create(PtySize(cols=80, rows=24))
    sbx.pty.resize(term.pid, PtySize(cols=100, rows=24))
    sbx.pty.send_stdin(term.pid, b"tput cols; exit\n")
    out = []
    result = term.wait(on_pty=lambda b: out.append(b.decode()))
    assert result.exit_code == 0 and "100" in "".join(out), out
    term = sbx.pty.create(PtySize(cols=80, rows=24))
    assert sbx.pty.kill(term.pid) is True

    # Files.
    info = sbx.files.write("notes/a.txt", "first", metadata={"author": "me"})
    assert info.path == "/home/user/notes/a.txt" and info.metadata == {"author": "me"}, info
    assert sbx.files.read("notes/a.txt") == "first"
    assert bytes(sbx.files.read("notes/a.txt", format="bytes")) == b"first"
    stat = sbx.files.get_info("notes/a.txt")
    assert (stat.type, stat.size, stat.mode, stat.owner, stat.metadata) == (
        FileType.FILE,
        5,
        0o644,
        "user",
        {"author": "me"},
    ), stat
    assert sbx.files.make_dir("notes/deep/er") is True
    assert sbx.files.make_dir("notes/deep/er") is False
    names = [e.path for e in sbx.files.list("notes", depth=3)]
    assert names == [
        "/home/user/notes/a.txt",
        "/home/user/notes/deep",
        "/home/user/notes/deep/er",
    ], names
    moved = sbx.files.rename("notes/a.txt", "moved/b.txt")
    assert moved.path == "/home/user/moved/b.txt" and moved.metadata == {"author": "me"}
    assert sbx.files.exists("moved/b.txt") and not sbx.files.exists("notes/a.txt")
    try:
        sbx.files.read("notes/a.txt")
        raise AssertionError("a missing file raises")
    except FileNotFoundException:
        pass
    sbx.files.remove("moved")
    # A file past 16 MiB by the SDK's default (multipart), which a body limit once cut.
    big = bytes(range(256)) * (96 * 4096)
    sbx.files.write("big.bin", big)
    assert sbx.files.get_info("big.bin").size == len(big) == 96 << 20
    assert bytes(sbx.files.read("big.bin", format="bytes")) == big
    sbx.files.remove("big.bin")
    assert not sbx.files.exists("moved")

    # A directory watched: a change made before the read is in it.
    sbx.files.make_dir("watched")
    handle = sbx.files.watch_dir("watched")
    sbx.files.write("watched/f.txt", "x")
    kinds = [(e.type, e.name) for e in handle.get_new_events()]
    assert (FilesystemEventType.CREATE, "f.txt") in kinds, kinds
    assert (FilesystemEventType.WRITE, "f.txt") in kinds, kinds
    handle.stop()
finally:
    sbx.kill()
print("e2b in-sandbox: ok")
