"""An independent MCP client (the official Python SDK) against a running sandboxd:
initialize, list the tools, create -> exec -> writeFile -> readFile -> kill, a tool error
with its stable code, and an unauthenticated session refused.

Usage: python3 mcp_client.py URL KEY ENVIRONMENT_ID
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

# The tools the server lists are the committed list's (docs/mcp-tools.json).
with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "mcp-tools.json")) as listed:
    EXPECTED = sorted(tool["name"] for tool in json.load(listed))


async def call(session, tool, arguments):
    result = await session.call_tool(tool, arguments)
    return bool(result.isError), json.loads(result.content[0].text)


async def session_story(url, key, env_id):
    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {key}"}) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            names = sorted(tool.name for tool in (await session.list_tools()).tools)
            assert names == EXPECTED, names
            failed, sandbox = await call(session, "sandbox-create", {"environmentId": env_id, "template": "base"})
            assert not failed and sandbox["status"] == "running", sandbox
            sid = sandbox["sandboxId"]
            try:
                failed, out = await call(session, "sandbox-exec", {"sandboxId": sid, "cmd": "echo hi"})
                assert not failed and out["stdout"] == "hi\n", out
                failed, _ = await call(session, "sandbox-writeFile", {"sandboxId": sid, "path": "/tmp/py.txt", "content": "from python"})
                assert not failed
                failed, read_back = await call(session, "sandbox-readFile", {"sandboxId": sid, "path": "/tmp/py.txt"})
                assert not failed and read_back["content"] == "from python", read_back
                failed, exposed = await call(session, "sandbox-exposePort", {"sandboxId": sid, "port": 8000})
                assert not failed and "sandboxd_link=" in exposed["url"], exposed
            finally:
                failed, killed = await call(session, "sandbox-kill", {"sandboxId": sid})
            assert not failed and killed["status"] == "killed", killed
            failed, error = await call(session, "sandbox-exec", {"sandboxId": sid, "cmd": "echo hi"})
            assert failed and error["code"] == "PRECONDITION_FAILED", error


async def refused_without_key(url):
    try:
        async with streamablehttp_client(url) as (read, write, _):
            async with ClientSession(read, write) as session:
                await asyncio.wait_for(session.initialize(), timeout=10)
    except BaseException:  # the SDK surfaces the 401 as an exception (group)
        return
    raise AssertionError("an unauthenticated session was accepted")


def main():
    url, key, env_id = sys.argv[1:4]
    asyncio.run(session_story(url, key, env_id))
    asyncio.run(refused_without_key(url))
    print("mcp-python: 2 passed, 0 failed")


if __name__ == "__main__":
    main()
