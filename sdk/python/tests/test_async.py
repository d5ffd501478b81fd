"""The async API against a live server and the real engine."""

from __future__ import annotations

import asyncio

import pytest

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
    name = f"given-up-{id(server)}"
    task = asyncio.ensure_future(AsyncSandbox.create("base", name=name))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
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
