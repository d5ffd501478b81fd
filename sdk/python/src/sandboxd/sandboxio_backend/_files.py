"""`SandboxdFiles`: sandboxio's file system of a sandbox. Relative paths are under
`/work`, for files and commands alike."""

from __future__ import annotations

import os
import posixpath
import shlex
import tempfile
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
from sandboxio.errors import FileSystemError, PathNotFound
from sandboxio.models import Capability, FileInfo

from .. import errors as sdk
from . import _errors

if TYPE_CHECKING:
    from ._owner import SandboxOwner

T = TypeVar("T")

#: Larger writes go up as a streamed upload instead of one request.
INLINE_WRITE = 8 * 1024 * 1024


class SandboxdFiles:
    def __init__(self, sandbox: SandboxOwner) -> None:
        self._sandbox = sandbox

    def _op(self, event: str, path: str) -> Any:
        return self._sandbox._operation(self._sandbox._record(event, argv=[path]))

    async def _bounded(self, call: Callable[[], Awaitable[T]]) -> T:
        """`call` within what is left of the sandbox's lifetime (and the server's bound
        on one operation)."""
        limit, lifetime = await self._sandbox._limit(None)
        try:
            with anyio.fail_after(limit):
                return await call()
        except TimeoutError as error:
            await self._sandbox._timed_out(limit, lifetime, error)

    def _mapped(self, error: sdk.SandboxdError, path: str) -> Exception:
        return _errors.on_files(error, self._sandbox.id, path)

    async def read(self, path: str) -> bytes:
        async with self._op("file_read", path) as record:
            try:
                data = await self._bounded(lambda: self._sandbox.native.files.read(path))
            except sdk.SandboxdError as error:
                raise self._mapped(error, path) from error
            record.bytes_out = len(data)
            record.exit_code = 0
        return data

    async def write(self, path: str, data: bytes | str) -> None:
        payload = data.encode() if isinstance(data, str) else bytes(data)
        async with self._op("file_write", path) as record:
            try:
                if len(payload) <= INLINE_WRITE:
                    await self._bounded(lambda: self._sandbox.native.files.write(path, payload))
                else:
                    await self._bounded(lambda: self._write_large(path, payload))
            except sdk.SandboxdError as error:
                raise self._mapped(error, path) from error
            record.bytes_in = len(payload)
            record.exit_code = 0

    async def _write_large(self, path: str, payload: bytes) -> None:
        handle, name = tempfile.mkstemp(prefix="sandboxd-write-")
        try:
            await anyio.to_thread.run_sync(_write_all, handle, payload)
            await self._sandbox.native.files.upload(name, path)
        finally:
            os.unlink(name)

    async def upload(self, local: str | Path, remote: str) -> None:
        self._sandbox._need(Capability.UPLOAD_DOWNLOAD)
        async with self._op("file_upload", remote) as record:
            try:
                await self._bounded(lambda: self._sandbox.native.files.upload(local, remote))
            except sdk.SandboxdError as error:
                raise self._mapped(error, remote) from error
            except FileNotFoundError as error:
                raise FileSystemError(f"no local file {str(local)!r} to upload") from error
            record.exit_code = 0

    async def download(self, remote: str, local: str | Path) -> None:
        self._sandbox._need(Capability.UPLOAD_DOWNLOAD)
        async with self._op("file_download", remote) as record:
            try:
                await self._bounded(lambda: self._sandbox.native.files.download(remote, local))
            except sdk.SandboxdError as error:
                raise self._mapped(error, remote) from error
            record.exit_code = 0

    async def ls(self, path: str = ".") -> list[FileInfo]:
        async with self._op("file_ls", path) as record:
            try:
                entries = await self._bounded(lambda: self._sandbox.native.files.list(path))
            except sdk.SandboxdError as error:
                raise self._mapped(error, path) from error
            record.exit_code = 0
        return sorted(
            (
                FileInfo(e.path, 0 if e.type == "directory" else int(e.size or 0), e.type == "directory")
                for e in entries
            ),
            key=lambda info: info.path,
        )

    async def mkdir(self, path: str, *, parents: bool = False) -> None:
        flags = ["-p"] if parents else []
        result = await self._shell("file_mkdir", path, ["mkdir", *flags, "--", path])
        if result.exit_code != 0:
            if "No such file" in result.stderr:
                raise PathNotFound(posixpath.dirname(path.rstrip("/")))
            raise FileSystemError(f"mkdir {path!r} failed: {result.stderr.strip()}")

    async def remove(self, path: str) -> None:
        result = await self._shell("file_remove", path, ["rm", "-r", "--", path])
        if result.exit_code != 0:
            if "No such file" in result.stderr:
                raise PathNotFound(path)
            raise FileSystemError(f"rm {path!r} failed: {result.stderr.strip()}")

    async def _shell(self, event: str, path: str, argv: list[str]) -> Any:
        limit, lifetime = await self._sandbox._limit(60)
        async with self._op(event, path) as record:
            result = await self._sandbox._exec(shlex.join(argv), None, limit, lifetime)
            record.exit_code = result.exit_code
        return result


def _write_all(handle: int, payload: bytes) -> None:
    with os.fdopen(handle, "wb") as file:
        file.write(payload)
