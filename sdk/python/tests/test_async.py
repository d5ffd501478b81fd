"""The async API against a live server and the real engine."""

from __future__ import annotations

import asyncio

import pytest

from held_sockets import sockets_to

from sandboxd import AsyncSandbox, SandboxNotRunning

pytestmark = pytest.mark.anyio


async def test_an_async_sandbox_streams_and_cleans_up(server):
    chunks: list[str] = []

    async def collect(data: str) -> None:
        chunks.append(data)

    async with await AsyncSandbox.create("base") as sb:
        result = await sb.commands.run("for i in 1 2 3; do echo $i; sleep 0.2; done", on_stdout=collect)
        assert result.exit_code == 0 and "".join(chunks) == "1\n2\n3\n"
        assert len(chunks) >= 2, "output came as it was produced"
        # Several commands at once, each on its own session.
        outs = await asyncio.gather(*(sb.commands.run(f"echo {i}") for i in range(5)))
        assert [o.stdout for o in outs] == [f"{i}\n" for i in range(5)]
        await sb.files.write("x.txt", "async")
        assert await sb.files.read_text("x.txt") == "async"
        sandbox_id = sb.id
    again = await AsyncSandbox.connect(sandbox_id)
    try:
        with pytest.raises(SandboxNotRunning):
            await again.commands.run("true")
    finally:
        await again.close()
    listed = await AsyncSandbox.list()
    assert any(s.sandbox_id == sandbox_id and s.status == "killed" for s in listed)


async def test_an_async_terminal_and_code(server):
    async with await AsyncSandbox.create("python") as sb:
        async with await sb.pty.open() as terminal:
            await terminal.send("python3 -c 'print(6*7)'\n")
            assert b"42" in await terminal.read_until("42")
        ran = await sb.run_code("import sys; sys.version_info[0]")
        assert ran.result == "3"


async def test_a_stream_left_early_kills_its_command(server):
    async with await AsyncSandbox.create("base") as sb:
        async with sb.commands.stream("echo started; sleep 300") as command:
            async for chunk in command:
                assert chunk.data == "started\n"
                break
        for _ in range(100):
            left = await sb.commands.run("ps -eo args | grep -c '^sleep 300' || true")
            if left.stdout.strip() == "0":
                break
            await asyncio.sleep(0.05)
        assert left.stdout.strip() == "0", "the command outlived its session"


async def test_a_create_given_up_on_kills_what_it_made(server):
    # Given up while the server makes it: once its row is listed (`creating`) and before
    # its answer. A create that answered first (a fast engine) is killed and tried again.
    for attempt in range(5):
        name = f"given-up-{id(server)}-{attempt}"
        task = asyncio.ensure_future(AsyncSandbox.create("base", name=name))
        while not task.done() and not [s for s in await AsyncSandbox.list() if s.name == name]:
            await asyncio.sleep(0.005)
        if not task.cancel():  # it had answered
            await (await task).kill()
            continue
        with pytest.raises(asyncio.CancelledError):
            await task
        break
    else:
        pytest.fail("every create answered before it was listed")
    for _ in range(200):
        mine = [s for s in await AsyncSandbox.list() if s.name == name]
        if mine and all(s.status == "killed" for s in mine):
            break
        await asyncio.sleep(0.05)
    assert mine and all(s.status == "killed" for s in mine), mine


async def test_a_context_run_given_up_on_is_interrupted(server):
    async with await AsyncSandbox.create("python") as sb:
        context = await sb.create_context()
        await sb.run_code("state = 'kept'", context=context)
        slow = asyncio.ensure_future(sb.run_code("import time; time.sleep(60)", context=context))
        await asyncio.sleep(1)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        loop = asyncio.get_running_loop()
        started = loop.time()
        after = await sb.run_code("state", context=context, timeout=20)
        assert after.result == "'kept'", after
        assert loop.time() - started < 10, "the next run waited for the abandoned one"


async def test_env_values_the_server_cannot_carry_whole_are_refused(server):
    from sandboxd import ConfigurationError

    for env in ({"K": "two\nlines"}, {"K": "trailing "}, {"1K": "v"}):
        with pytest.raises(ConfigurationError):
            await AsyncSandbox.create("base", env=env)


async def test_sandboxes_share_one_connection_and_a_killed_one_keeps_nothing_open(server):
    port = int(server.url.rsplit(":", 1)[1])
    a = await AsyncSandbox.create("base", timeout=60)
    b = await AsyncSandbox.create("base", timeout=60)
    try:
        assert a._conn.http is b._conn.http, "one client per server and key"
        assert (await a.commands.run("true")).exit_code == 0
        kept = a.commands._sessions._idle
        assert kept is not None
        for _ in range(3):
            assert (await a.commands.run("echo again")).stdout == "again\n"
        assert a.commands._sessions._idle is kept, "the exec session is reused"
        assert (await b.commands.run("true")).exit_code == 0
        # One kept-alive HTTP connection (more only while requests overlap) and one
        # exec session per sandbox.
        assert sockets_to(port) <= 4
    finally:
        await a.kill()
        await b.kill()
    assert sockets_to(port) == 0, "a killed sandbox keeps no connection or session"
    # A killed sandbox can still be asked about: it takes a share again.
    assert (await a.refresh()).status == "killed"
    await a.close()
    assert sockets_to(port) == 0


async def test_a_port_is_exposed_as_a_link_then_publicly_then_not_at_all(server):
    import httpx

    async with await AsyncSandbox.create("python") as sb:
        await sb.files.write("/tmp/www/index.html", "served from inside\n")
        await sb.commands.run(
            "exec python3 -m http.server 8000 --bind 127.0.0.1 -d /tmp/www", background=True
        )
        async with httpx.AsyncClient() as anyone:
            keyed = sb.get_host(8000)
            for _ in range(100):
                page = await anyone.get(keyed, headers={"x-api-key": server.key})
                if page.status_code == 200:
                    break
                await asyncio.sleep(0.1)
            assert page.text == "served from inside\n"
            assert (await anyone.get(keyed)).status_code == 401, "private without a key"

            link = await sb.ports.expose(8000, ttl=600)
            assert not link.public and "sandboxd_link=" in link.url
            page = await anyone.get(link.url)
            assert page.status_code == 200 and page.text == "served from inside\n"

            public = await sb.ports.expose(8000, public=True)
            assert public.url == keyed
            assert (await anyone.get(keyed)).status_code == 200
            assert [p.port for p in await sb.ports.list()] == [8000]

            assert await sb.ports.unexpose(8000)
            assert (await anyone.get(keyed)).status_code == 401
            assert (await anyone.get(link.url)).status_code == 401
            assert await sb.ports.list() == []
