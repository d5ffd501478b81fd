"""The sync API against a live server and the real engine."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from sandboxd import (
    AuthenticationError,
    BuildFailed,
    CommandExitError,
    Conflict,
    Egress,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    Sandbox,
    SandboxNotRunning,
    Template,
    VolumeMount,
)


def test_a_sandbox_runs_commands_and_is_killed_at_the_end_of_its_block(server):
    with Sandbox.create("base", timeout=120, env={"GREETING": "hello"}, labels={"team": "a"}) as sb:
        assert sb.info.status == "running"
        assert sb.info.labels == {"team": "a"}
        assert sb.refresh().labels == {"team": "a"}
        result = sb.commands.run("echo $GREETING; echo oops >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "hello\n", "oops\n")
        with pytest.raises(CommandExitError):
            result.check()
        there = sb.commands.run("pwd && cat f.txt", cwd="/tmp", env={"X": "1"})
        assert there.exit_code == 1 and there.stdout == "/tmp\n"
        sandbox_id = sb.id
    again = Sandbox.connect(sandbox_id)
    assert again.info.status == "killed"
    again.close()


def test_an_exception_in_the_block_still_kills_the_sandbox(server):
    with pytest.raises(RuntimeError, match="boom"):
        with Sandbox.create("base") as sb:
            sandbox_id = sb.id
            raise RuntimeError("boom")
    again = Sandbox.connect(sandbox_id)
    assert again.info.status == "killed"
    with pytest.raises(SandboxNotRunning):
        again.commands.run("true")
    again.close()


def test_output_reaches_the_callbacks_before_the_command_ends(server):
    seen: list[tuple[float, str]] = []
    with Sandbox.create("base") as sb:
        started = time.monotonic()
        result = sb.commands.run(
            "echo first; sleep 2; echo second >&2",
            on_stdout=lambda data: seen.append((time.monotonic() - started, data)),
            on_stderr=lambda data: seen.append((time.monotonic() - started, "err:" + data)),
        )
        ended = time.monotonic() - started
    assert [data for _, data in seen] == ["first\n", "err:second\n"]
    assert seen[0][0] < ended - 1.5, (seen, ended)
    assert result.stdout == "first\n"


def test_a_command_past_its_timeout_is_killed(server):
    with Sandbox.create("base") as sb:
        result = sb.commands.run("sleep 30", timeout=1)
        assert result.timed_out and result.exit_code == 124


def test_background_processes_take_input_and_are_waited_for(server):
    with Sandbox.create("base") as sb:
        process = sb.commands.run("read line; echo got $line; echo done >&2", background=True, stdin=True)
        assert process.pid > 0
        assert [p.process_id for p in sb.commands.list()] == [process.id]
        process.send_stdin("hi\n", close=True)
        result = process.wait(timeout=20)
        assert (result.exit_code, result.stdout, result.stderr) == (0, "got hi\n", "done\n")
        sleeper = sb.commands.run("sleep 300", background=True)
        with pytest.raises(TimeoutError):
            sleeper.wait(timeout=1)
        sleeper.kill()
        assert sleeper.wait(timeout=20).exit_code != 0


def test_files_small_and_large_and_trees_round_trip(server, tmp_path: Path):
    with Sandbox.create("base") as sb:
        sb.files.write("notes/a.txt", "héllo\n")
        sb.files.write("/tmp/bin.dat", bytes(range(256)), mode=0o600)
        assert sb.files.read_text("notes/a.txt") == "héllo\n"
        assert sb.files.read("/tmp/bin.dat") == bytes(range(256))
        listed = {e.name: e for e in sb.files.list("notes")}
        assert listed["a.txt"].type == "file" and listed["a.txt"].path == f"{sb.info.workdir}/notes/a.txt"
        with pytest.raises(NotFound):
            sb.files.read("missing.txt")

        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(48 << 20))
        done = sb.files.upload(big, "data/big.bin")
        assert done["bytes"] == 48 << 20
        back = sb.files.download("data/big.bin", tmp_path / "back.bin")
        digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
        assert digest(back) == digest(big)

        tree = tmp_path / "project"
        for i in range(50):
            (tree / f"d{i % 5}").mkdir(parents=True, exist_ok=True)
            (tree / f"d{i % 5}" / f"f{i}.txt").write_text(f"file {i}\n")
        sb.files.upload(tree, "project")
        assert sb.commands.run("find project -type f | wc -l").stdout == "50\n"
        out = sb.files.download("project", tmp_path / "copy")
        assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.txt")) == sorted(
            p.relative_to(tree).as_posix() for p in tree.rglob("*.txt")
        )
        assert (out / "d3" / "f8.txt").read_text() == "file 8\n"


def test_the_timeout_is_extended(server):
    with Sandbox.create("base", timeout=60) as sb:
        before = sb.info.expires_at
        info = sb.set_timeout(3600)
        assert info.timeout_ms == 3_600_000 and info.expires_at > before


def test_a_fixed_timeout_is_not_extended_by_activity(server):
    with Sandbox.create("base", timeout=60, fixed_timeout=True) as sb:
        before = sb.info.expires_at
        assert sb.info.fixed_timeout
        assert sb.commands.run("true").exit_code == 0
        assert sb.refresh().expires_at == before
        assert sb.set_timeout(120).expires_at > before, "setting it moves it"


def test_a_paused_sandbox_keeps_its_processes_and_any_call_resumes_it(server):
    with Sandbox.create("base", auto_pause=True, paused_timeout=600) as sb:
        assert sb.info.auto_pause and sb.info.paused_timeout_ms == 600_000
        sleeper = sb.commands.run("sleep 300", background=True)
        info = sb.pause()
        assert info.status == "paused" and info.paused_at is not None
        assert sb.pause().status == "paused"
        # A command on a paused sandbox resumes it first.
        assert sb.commands.run("echo awake").stdout == "awake\n"
        assert sb.refresh().status == "running"
        assert sb.pause().status == "paused"
        info = sb.resume()
        assert info.status == "running" and info.paused_at is None
        assert [p.process_id for p in sb.commands.list()] == [sleeper.id]


def test_a_gvisor_sandbox_paused_to_disk_comes_back_with_its_processes(server):
    with Sandbox.create("base", isolation="gvisor") as sb:
        sleeper = sb.commands.run("sleep 300", background=True)
        sb.commands.run("echo kept > /tmp/mark")
        info = sb.pause(memory="disk")
        assert info.status == "paused" and info.paused_to == "disk"
        assert info.hibernated_bytes and info.hibernated_bytes > 0
        info = sb.resume()
        assert info.status == "running" and info.paused_to is None
        assert [p.process_id for p in sb.commands.list()] == [sleeper.id]
        assert sb.files.read_text("/tmp/mark") == "kept\n"
        with pytest.raises(ValueError):
            sb.pause(memory="swap")


def test_a_gvisor_sandbox_forked_with_its_memory_continues_its_processes_in_each_fork(server):
    with Sandbox.create("base", isolation="gvisor") as sb:
        sleeper = sb.commands.run("sleep 300", background=True)
        sb.commands.run("echo kept > /tmp/mark")
        forks = sb.fork(2, memory=True)
        snaps = []
        try:
            assert len(forks) == 2
            for fork in forks:
                # The agent's record of the background process came with its memory.
                assert [p.process_id for p in fork.commands.list()] == [sleeper.id]
                assert fork.files.read_text("/tmp/mark") == "kept\n"
            snaps = [s for s in Sandbox.list_snapshots() if s.sandbox_id == sb.id]
            assert snaps and snaps[0].memory_bytes and snaps[0].memory_bytes > 0
        finally:
            for fork in forks:
                fork.kill()
        assert [p.process_id for p in sb.commands.list()] == [sleeper.id]
        for snap in snaps:
            Sandbox.remove_snapshot(snap)


def test_a_snapshot_starts_sandboxes_with_its_files_and_a_fork_copies_them(server):
    with Sandbox.create("base", env={"TOKEN": "sdk-secret"}) as sb:
        sb.files.write("notes.txt", "kept")
        snap = sb.snapshot(name="sdk")
        assert snap.name == "sdk" and snap.sandbox_id == sb.id and snap.size_bytes > 0
        assert snap.snapshot_id in [s.snapshot_id for s in Sandbox.list_snapshots()]
        with Sandbox.create(snapshot=snap) as made:
            assert made.files.read("notes.txt") == b"kept"
            assert made.commands.run("echo ${TOKEN:-none}").stdout == "none\n"
            with pytest.raises(Conflict):
                Sandbox.remove_snapshot(snap)
        forks = sb.fork(2, env={"N": "forked"})
        try:
            assert len(forks) == 2 and len({f.id for f in forks}) == 2
            for fork in forks:
                assert fork.files.read("notes.txt") == b"kept"
                assert fork.commands.run("echo $N").stdout == "forked\n"
        finally:
            for fork in forks:
                fork.kill()
    Sandbox.remove_snapshot(snap.snapshot_id)
    assert snap.snapshot_id not in [s.snapshot_id for s in Sandbox.list_snapshots()]
    for snapshot in Sandbox.list_snapshots():
        if snapshot.name.startswith("fork of"):
            Sandbox.remove_snapshot(snapshot)


def test_a_volume_keeps_what_one_sandbox_wrote_for_the_next(server):
    volume = Sandbox.create_volume("sdk-cache", size_mb=64)
    assert volume.size_mb == 64 and volume.sandboxes == [] and volume.status == "ready"
    with pytest.raises(TypeError):
        Sandbox.create("base", volumes=volume.volume_id)
    try:
        with Sandbox.create("base", volumes={"/data": volume}) as sb:
            assert sb.info.volumes == [VolumeMount(volume.volume_id, "/data", False)]
            sb.files.write("/data/result.txt", "kept")
            assert Sandbox.get_volume(volume.volume_id).sandboxes == [sb.id]
            with pytest.raises(Conflict):
                Sandbox.remove_volume(volume)
        mounts = [VolumeMount(volume.volume_id, "/in", read_only=True)]
        with Sandbox.create("base", volumes=mounts) as reader:
            assert reader.files.read("/in/result.txt") == b"kept"
            assert reader.commands.run("touch /in/other").exit_code != 0
        assert volume.volume_id in [v.volume_id for v in Sandbox.list_volumes()]
    finally:
        Sandbox.remove_volume(volume)
    assert volume.volume_id not in [v.volume_id for v in Sandbox.list_volumes()]


def test_changes_list_what_the_sandbox_wrote(server, tmp_path):
    with Sandbox.create("base") as sb:
        assert sb.changes().changes == []
        sb.files.write("made.txt", "12 bytes now")
        sb.commands.run("mkdir -p out && echo hi > out/a")
        found = sb.changes()
        assert [(c.path, c.kind, c.type, c.size) for c in found.changes] == [
            ("/home/user/made.txt", "added", "file", 12),
            ("/home/user/out", "added", "directory", None),
            ("/home/user/out/a", "added", "file", 3),
        ]
        assert found.total_bytes == 15 and not found.truncated
        assert found.areas[0] == "/home/user"
        assert sb.changes(all=True).areas == ["/"]
        sb.commands.run("rm made.txt")
        archive = sb.download_changes(tmp_path / "work.tar")
        with tarfile.open(archive) as tar:
            assert tar.getnames() == ["home/user/out", "home/user/out/a"]
            assert tar.extractfile("home/user/out/a").read() == b"hi\n"


def test_stats_show_cpu_memory_and_processes(server):
    with Sandbox.create("base", cpu=1, memory_mb=256) as sb:
        idle = sb.stats()
        assert idle.cpu_limit == 1.0 and idle.memory_limit_bytes == 256 * 1024 * 1024
        assert idle.pids >= 1 and idle.memory_bytes > 0
        sb.commands.run("while :; do :; done", background=True)
        busiest = max(sb.stats().cpu_percent for _ in range(8))
        assert busiest > 50, busiest
        # The history: a reading every 5 s while it runs, the busy ones among them.
        deadline = time.monotonic() + 30
        readings = []
        while time.monotonic() < deadline:
            readings = sb.metrics()
            # Two at least: kept ones, not the one taken now when none is kept yet.
            if len(readings) >= 2 and any(r.cpu_percent > 50 for r in readings):
                break
            time.sleep(1)
        assert any(r.cpu_percent > 50 for r in readings), readings
        assert all(r.memory_bytes > 0 and r.pids >= 1 for r in readings), readings
        last = readings[-1].time
        assert sb.metrics(start=last)[-1].time == last
        assert sb.metrics(end="2000-01-01T00:00:00Z") == []


def test_the_activity_timeline_says_what_ran_and_follows_what_comes(server):
    with Sandbox.create("base", timeout=120, env={"API_TOKEN": "sdk-s3cr3t-41"}) as sb:
        sb.commands.run("echo $API_TOKEN; exit 4")
        deadline = time.monotonic() + 20
        while True:
            page = sb.activity(kinds=["command"])
            if page.entries or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        (ran,) = page.entries
        assert ran.kind == "command" and ran.failed
        assert ran.detail["exitCode"] == 4
        assert ran.detail["stdout"]["firstLines"] == ["***"]
        assert ran.by is not None and ran.by["keyId"]
        assert sb.activity(latest=True, limit=1).entries[0].entry_id == ran.entry_id
        # Followed: what is done after the cursor comes as it is written.
        follow = sb.follow_activity(kinds=["file"], cursor=page.next_cursor, every=0.1)
        sb.files.write("/tmp/followed.txt", "x")
        entry = next(follow)
        follow.close()
        assert (entry.kind, entry.action, entry.detail["path"]) == ("file", "write", "/tmp/followed.txt")
        assert not entry.failed


def test_errors_are_typed(server):
    with pytest.raises(AuthenticationError, match="SANDBOXD_KEY"):
        Sandbox.create("base", key="sbx_wrong_key_0000000000000000000000000")
    with pytest.raises(NotFound):
        Sandbox.connect("nosuchsandbox0000000")
    with pytest.raises(InvalidRequest) as refused:
        Sandbox.create("base", cpu=1000)
    assert refused.value.status == 400 and refused.value.issues
    assert any("cpu" in str(issue.get("path")) for issue in refused.value.issues)


def test_a_terminal_runs_what_is_typed_and_follows_its_size(server):
    with Sandbox.create("base") as sb:
        with sb.pty.open(cols=100, rows=30) as terminal:
            terminal.send("echo $((6*7)); stty size\n")
            shown = terminal.read_until("42", timeout=20)
            assert b"42" in shown
            assert b"30 100" in terminal.read_until("30 100", timeout=20)
            terminal.resize(120, 40)
            terminal.send("stty size\n")
            assert b"40 120" in terminal.read_until("40 120", timeout=20)
            terminal.send("exit 5\n")
            assert terminal.wait(timeout=20) == 5
        with sb.pty.open(cmd="printf 'one\\ntwo\\n'") as terminal:
            shown = b""
            while chunk := terminal.read(timeout=20):
                shown += chunk
            assert shown.replace(b"\r\n", b"\n") == b"one\ntwo\n"
            assert terminal.exit_code == 0
        # Both sessions are on the timeline once closed, and recorded.
        deadline = time.monotonic() + 20
        while True:
            closed = [e for e in sb.activity(kinds=["terminal"]).entries if e.action == "close"]
            if len(closed) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert [e.detail["cols"] for e in closed] == [100, 80]
        cast = ""
        while "40 120" not in cast and time.monotonic() < deadline:
            cast = sb.recording(closed[0].detail["terminalId"])
            time.sleep(0.2)
        header = json.loads(cast.splitlines()[0])
        assert (header["version"], header["width"], header["height"]) == (2, 100, 30)
        assert "40 120" in cast and '"120x40"' in cast


def test_code_keeps_its_state_per_context(server):
    with Sandbox.create("python") as sb:
        assert sb.run_code("x = 41 + 1").error is None
        first = sb.run_code("print('x is', x); x * 2")
        assert (first.stdout, first.result, first.error) == ("x is 42\n", "84", None)
        assert first.execution_count == 2
        other = sb.create_context()
        failed = sb.run_code("x", context=other)
        assert failed.error is not None and failed.error.name == "NameError"
        assert "NameError" in failed.error.traceback
        slow = sb.run_code("import time; time.sleep(30)", context=other, timeout=1)
        assert slow.timed_out
        assert sb.run_code("'still here'", context=other).result == "'still here'"
        sb.remove_context(other)
        with pytest.raises(Conflict, match="ended"):
            sb.run_code("1", context=other)


def test_code_shows_figures_and_tables_and_runs_javascript_and_bash(server):
    with Sandbox.create("code-interpreter-v1") as sb:
        shown = sb.run_code(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.title('t')\nplt.show()\n"
            "import pandas as pd\npd.DataFrame({'a': [1, 2]})"
        )
        figure, frame = shown.results
        assert figure.png and not figure.is_main_result
        assert figure.chart["type"] == "line" and figure.chart["title"] == "t"
        assert frame.is_main_result and frame.table == {"a": [1, 2]} and "<table" in frame.html
        js = sb.create_context("javascript")
        assert sb.run_code("const a = [1, 2].map((n) => n * 2); a.length", context=js).result == "2"
        bash = sb.create_context("bash")
        assert sb.run_code("cd /tmp; echo $PWD", context=bash).stdout == "/tmp\n"
        assert sb.run_code("pwd", context=bash).stdout == "/tmp\n"


def test_a_stream_hands_over_output_as_it_comes(server):
    with Sandbox.create("base") as sb:
        with sb.commands.stream("echo one; sleep 1; echo two >&2; exit 4") as command:
            seen = []
            for chunk in command:
                seen.append((chunk.stream, chunk.data, time.monotonic()))
        assert [(s, d) for s, d, _ in seen] == [("stdout", "one\n"), ("stderr", "two\n")]
        assert seen[1][2] - seen[0][2] > 0.5, "the first chunk came only with the second"
        assert command.result is not None and command.result.exit_code == 4


def test_refusals_of_the_real_server_are_typed(server):
    import socket

    import httpx

    from sandboxd import ConnectionFailed, PermissionDenied, TooLarge

    made = httpx.post(
        f"{server.url}/api/apiKey.create",
        headers={"x-api-key": server.key},
        json={"name": "read-only", "scopes": ["service:read"]},
    )
    assert made.status_code == 200, made.text
    with pytest.raises(PermissionDenied) as denied:
        Sandbox.create("base", key=made.json()["secret"])
    assert denied.value.status == 403
    with Sandbox.create("base") as sb:
        with pytest.raises(TooLarge) as large:
            sb.files.write("big.bin", b"\0" * (11 * 1024 * 1024))
        assert large.value.status == 413
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(ConnectionFailed, match="cannot reach"):
        Sandbox.list(url=closed, key=server.key)


def test_every_status_maps_to_its_class():
    from sandboxd import errors

    cases = {
        400: errors.InvalidRequest,
        401: errors.AuthenticationError,
        403: errors.PermissionDenied,
        404: errors.NotFound,
        409: errors.Conflict,
        412: errors.SandboxNotRunning,
        413: errors.TooLarge,
        429: errors.RateLimited,
        500: errors.ServerError,
        502: errors.ServerError,
        503: errors.Unavailable,
    }
    for status, cls in cases.items():
        mapped = errors.from_answer(status, {"message": "m"})
        assert type(mapped) is cls and mapped.status == status, status
    # The stable code wins over the status; the retry hint is kept.
    assert type(errors.from_answer(400, {"code": "CONFLICT", "message": "m"})) is errors.Conflict
    limited = errors.from_answer(429, {"code": "TOO_MANY_REQUESTS"}, "2.5")
    assert isinstance(limited, errors.RateLimited) and limited.retry_after == 2.5
    assert errors.from_answer(429, None, "soon").retry_after is None  # type: ignore[attr-defined]


def test_a_sync_call_from_an_output_callback_is_refused_not_a_deadlock(server):
    with Sandbox.create("base") as sb:
        seen: list[BaseException] = []

        def callback(_: str) -> None:
            try:
                sb.files.write("x.txt", "from a callback")
            except RuntimeError as error:
                seen.append(error)

        sb.commands.run("echo hi", on_stdout=callback)
        assert seen and "async API" in str(seen[0])


def test_a_terminal_is_iterated_and_keeps_what_a_timeout_cut(server):
    with Sandbox.create("base") as sb:
        with sb.pty.open(cmd="printf 'ready\\n'; sleep 1; printf 'done\\n'") as terminal:
            with pytest.raises(TimeoutError):
                terminal.read_until("done", timeout=0.5)
            shown = b"".join(terminal)
        assert b"ready" in shown and b"done" in shown, shown


def test_a_result_keeps_a_bounded_part_of_a_flood_and_callbacks_see_it_all(server):
    with Sandbox.create("base") as sb:
        seen = []
        result = sb.commands.run(
            "head -c 3145728 /dev/zero | tr '\\0' a", on_stdout=lambda d: seen.append(len(d))
        )
        assert result.exit_code == 0 and result.truncated
        assert 0 < len(result.stdout) <= 1024 * 1024
        assert sum(seen) == 3 * 1024 * 1024


def test_a_tree_from_a_sandbox_comes_down_without_set_id_bits(server, tmp_path):
    with Sandbox.create("base") as sb:
        made = sb.commands.run(
            "mkdir -p out/sub && cp /bin/sh out/evil && chmod 4755 out/evil && chmod 2777 out/sub && echo ok"
        )
        assert made.stdout == "ok\n", made
        out = sb.files.download("out", tmp_path)
        assert out == tmp_path / "out"
        assert os.stat(out / "evil").st_mode & 0o7777 == 0o755
        assert os.stat(out / "sub").st_mode & 0o7000 == 0
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
        with pytest.raises(FileExistsError):
            sb.files.download("out", tmp_path)


def test_an_archive_is_held_to_the_named_tree(tmp_path):
    import io
    import tarfile

    from sandboxd._files import _unpack

    def archive(*members: tuple[str, bytes | None, str | None]) -> Path:
        path = tmp_path / f"a{len(list(tmp_path.iterdir()))}.tar"
        with tarfile.open(path, "w") as tar:
            for name, data, link in members:
                info = tarfile.TarInfo(name)
                if link is not None:
                    info.type, info.linkname = tarfile.SYMTYPE, link
                    tar.addfile(info)
                elif data is None:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                else:
                    info.size, info.mode = len(data), 0o4755
                    tar.addfile(info, io.BytesIO(data))
        return path

    kept = _unpack(archive(("out", None, None), ("out/a", b"a", None), (".bashrc", b"x", None)), tmp_path / "one", "out")
    assert sorted(p.name for p in kept.iterdir()) == ["a"]
    assert os.stat(kept / "a").st_mode & 0o7000 == 0
    assert not (tmp_path / ".bashrc").exists()
    with pytest.raises(tarfile.FilterError):
        _unpack(archive(("out", None, None), ("out/l", None, "../.bashrc")), tmp_path / "two", "out")
    assert not (tmp_path / "two").exists()
    with pytest.raises((OSError, tarfile.TarError)):
        _unpack(archive(("out", None, "."),), tmp_path / "three", "out")
    assert not (tmp_path / "three").exists()
    # A chain of links that each look inside, in either order.
    for order in ([("s", "../.."), ("t", "s/../..")], [("t", "s/../.."), ("s", "../..")]):
        members = [("out", None, None), ("out/a", None, None), ("out/a/b", None, None)]
        members += [(f"out/a/b/{n}", None, link) for n, link in order]
        with pytest.raises(tarfile.TarError):
            _unpack(archive(*members), tmp_path / "four", "out")
        assert not (tmp_path / "four").exists()


def test_ports_are_exposed_listed_and_unexposed(server):
    with Sandbox.create("base") as sb:
        exposed = sb.ports.expose(8000, ttl=60)
        assert exposed.port == 8000 and "sandboxd_link=" in exposed.url
        assert exposed.url.startswith(sb.get_host(8000))
        assert [p.port for p in sb.ports.list()] == [8000]
        assert sb.ports.unexpose(8000) is True
        assert sb.ports.list() == []


def test_an_allowlist_sandbox_keeps_its_list_and_it_is_replaced(server):
    with Sandbox.create("base", network=Egress(allow=["PyPI.org", "*.pythonhosted.org"])) as sb:
        assert sb.info.network_mode == "allowlist"
        assert sb.info.egress == ["pypi.org", "*.pythonhosted.org"]
        assert sb.egress.set(["api.example.com:8443"]) == ["api.example.com:8443"]
        assert sb.egress.list() == ["api.example.com:8443"]
        assert sb.refresh().egress == ["api.example.com:8443"]
        with pytest.raises(InvalidRequest):
            sb.egress.set(["10.0.0.1"])
        assert sb.commands.run("echo $HTTPS_PROXY").stdout == "http://127.0.0.1:49980\n"
        # A host off the list is refused by the proxy, and the refusal is in the log.
        sb.commands.run("curl -s http://blocked.example/ || true")
        refused = []
        for _ in range(50):
            log = sb.egress.log()
            refused = [e for e in log.entries if e.host == "blocked.example"]
            if refused:
                break
            time.sleep(0.1)
        assert [(e.port, e.decision) for e in refused] == [(80, "refused")]
        assert "not in the sandbox's egress list" in (refused[0].reason or "")
        assert sb.egress.log(cursor=log.next_cursor).entries == []
        # A request, asked once however often; the key that asked cannot decide it.
        asked = sb.egress.request("Blocked.example", reason="to test")
        assert (asked.host, asked.status, asked.reason) == ("blocked.example", "pending", "to test")
        assert sb.egress.request("blocked.example").request_id == asked.request_id
        assert [r.request_id for r in sb.egress.requests()] == [asked.request_id]
        with pytest.raises(PermissionDenied):
            sb.egress.decide(asked.request_id, approve=True)
    with Sandbox.create("base") as plain:
        assert plain.info.egress is None and plain.egress.list() == []


def _remove_build_images() -> None:
    # By name: a step's image is the parent of the next one's, and an id with children
    # is not removed; a name goes in any order.
    for repository in ("sandboxd-templates", "sandboxd-build-cache"):
        listed = subprocess.run(
            ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}",
             "--filter", f"reference={repository}:*"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if listed:
            subprocess.run(["docker", "rmi", *listed], capture_output=True, check=False)
    # A sandbox's container removed in the background may still have held one.
    for _ in range(50):
        left = subprocess.run(
            ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}",
             "--filter", "reference=sandboxd-build-cache:*"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if not left:
            return
        subprocess.run(["docker", "rmi", *left], capture_output=True, check=False)
        time.sleep(0.2)


def test_a_template_built_in_code_makes_sandboxes(server, tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "a.txt").write_text("from-sdk")
    (tmp_path / "app" / "run.sh").write_text("#!/bin/sh\ncat /srv/app/a.txt\n")
    (tmp_path / "app" / "run.sh").chmod(0o755)
    lines = []
    template = (
        Template.from_template("base")
        .env(GREETING="hi there")
        .copy(tmp_path / "app", "/srv/app")
        .run("/srv/app/run.sh > /srv/out && echo ran")
        .workdir("/srv")
    )
    try:
        info = template.build("sdk-tpl", on_log=lines.append)
        assert info.version == 1 and info.workdir == "/srv"
        assert any(l.stream == "stdout" and l.line == "ran" and l.step == 4 for l in lines)
        assert lines[0].line == "Step 1/5 : FROM base"
        with Sandbox.create("sdk-tpl") as sb:
            assert sb.commands.run("cat /srv/out").stdout == "from-sdk"
            assert sb.commands.run("echo $GREETING").stdout.strip() == "hi there"
        with pytest.raises(BuildFailed) as failed:
            Template.build("sdk-broken", dockerfile="FROM base\nRUN echo last words && exit 4\n")
        assert failed.value.step == 2 and "last words" in str(failed.value)
        assert "sdk-tpl" in [t.name for t in Template.list()]
        Template.remove(Template.get("sdk-tpl"))
        with pytest.raises(NotFound):
            Template.get("sdk-tpl")
    finally:
        for name in ("sdk-tpl", "sdk-broken"):
            try:
                Template.remove(Template.get(name))
            except NotFound:
                pass
        _remove_build_images()


def test_a_template_built_from_a_context_directory(server, tmp_path):
    # A directory streamed as a tar (`template.context`): modes and links kept, `.git`
    # left out; files over the body's 64 MiB go the same way on their own.
    (tmp_path / "ctx" / "bin").mkdir(parents=True)
    (tmp_path / "ctx" / "bin" / "tool").write_text("#!/bin/sh\necho tool\n")
    (tmp_path / "ctx" / "bin" / "tool").chmod(0o755)
    (tmp_path / "ctx" / "latest").symlink_to("bin/tool")
    (tmp_path / "ctx" / ".git").mkdir()
    (tmp_path / "ctx" / ".git" / "HEAD").write_text("ref")
    big = {f"many/{i}": b"x" for i in range(10_001)}
    try:
        info = Template.build(
            "sdk-ctx", dockerfile="FROM base\nCOPY . /c/\nRUN /c/latest\n", context=tmp_path / "ctx"
        )
        assert info.version == 1
        with Sandbox.create("sdk-ctx") as sb:
            shown = sb.commands.run("readlink /c/latest; stat -c %a /c/bin/tool; ls -a /c")
            assert shown.stdout.split("\n")[:2] == ["bin/tool", "755"]
            assert ".git" not in shown.stdout
        with pytest.raises(TypeError):
            Template.build("sdk-ctx", dockerfile="FROM base\n", files={"a": b"a"}, context=tmp_path)
        many = Template.build(
            "sdk-many", dockerfile="FROM base\nCOPY many/ /m/\nRUN ls /m | wc -l > /count\n", files=big
        )
        assert many.version == 1
        with Sandbox.create("sdk-many") as sb:
            assert sb.commands.run("cat /count").stdout.strip() == "10001"
    finally:
        for name in ("sdk-ctx", "sdk-many"):
            try:
                Template.remove(Template.get(name))
            except NotFound:
                pass
        _remove_build_images()


def test_a_watch_sees_each_change_as_it_is_made(server):
    with Sandbox.create("base") as sb:
        sb.commands.run("mkdir -p w/deep")
        with sb.files.watch("w", recursive=True) as changes:
            sb.files.write("w/deep/a.txt", "hello")
            seen = []
            for change in changes:
                seen.append(change)
                if change.path.endswith("/w/deep/a.txt"):
                    break
        last = seen[-1]
        assert last.name == "deep/a.txt" and last.change in ("create", "write", "rename"), seen
        with pytest.raises(InvalidRequest, match="not a directory"):
            with sb.files.watch("/etc/passwd"):
                pass
