"""Files: small ones in one request (`write`, `read`, up to 10 MiB), any size and whole
trees streamed (`upload`, `download`), with constant memory on both sides; what changes
under a directory as it changes (`watch`, over the `/sandbox-watch` WebSocket)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import posixpath
import queue
import shutil
import tarfile
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _ws, errors
from .models import EntryInfo, FileChange

if TYPE_CHECKING:
    from ._handle import SandboxHandle

CHUNK = 1024 * 1024


class AsyncFiles:
    """`sandbox.files`: the sandbox's files. Relative paths are under its workdir."""

    def __init__(self, sandbox: SandboxHandle) -> None:
        self._sandbox = sandbox

    def watch(self, path: str = ".", *, recursive: bool = False) -> AsyncWatch:
        """What changes under the directory `path` (with `recursive`, under every
        directory below it too, and those made later), as it changes:
        `async with sb.files.watch("project", recursive=True) as changes: async for
        change in changes: ...`. Changes made once the `async with` is entered are
        seen; `changes.lost` counts the times some were lost (too many at once)."""
        return AsyncWatch(self._sandbox, self._sandbox._absolute(path), recursive)

    async def write(self, path: str, data: str | bytes, *, mode: int | None = None) -> None:
        """Writes a file of up to 10 MiB (parents made, owned by the sandbox user);
        larger ones go through `upload`."""
        body: dict[str, Any] = {"sandboxId": self._sandbox.id, "path": self._sandbox._absolute(path)}
        if isinstance(data, str):
            body.update(content=data, encoding="utf8")
        else:
            body.update(content=base64.b64encode(data).decode(), encoding="base64")
        body["mode"] = mode
        await self._sandbox._conn.call("sandbox.writeFile", body)

    async def read(self, path: str) -> bytes:
        """A regular file's bytes (up to 10 MiB; `download` for larger ones)."""
        answer = await self._sandbox._conn.call(
            "sandbox.readFile",
            query={"sandboxId": self._sandbox.id, "path": self._sandbox._absolute(path), "encoding": "base64"},
        )
        return base64.b64decode(answer["content"])

    async def read_text(self, path: str) -> str:
        """A regular file as text (UTF-8)."""
        return (await self.read(path)).decode()

    async def list(self, path: str = ".") -> list[EntryInfo]:
        """The entries of a directory, directories first."""
        directory = self._sandbox._absolute(path)
        answer = await self._sandbox._conn.call(
            "sandbox.listFiles", query={"sandboxId": self._sandbox.id, "path": directory}
        )
        base = answer.get("path", directory).rstrip("/")
        return [
            EntryInfo(
                name=e["name"],
                path=f"{base}/{e['name']}",
                type=e.get("type", "other"),
                size=e.get("size"),
                mode=e.get("mode"),
                modified_at=e.get("modifiedAt"),
            )
            for e in answer.get("entries", [])
        ]

    async def upload(self, local: str | os.PathLike[str], remote: str) -> dict[str, Any]:
        """Streams a local file to `remote` (renamed into place once whole), or a local
        directory's contents under the directory `remote`; what was written."""
        source = Path(local)
        target = self._sandbox._absolute(remote)
        query = {"sandboxId": self._sandbox.id, "path": target}
        if source.is_dir():
            response = await self._sandbox._conn.stream(
                "POST",
                "sandbox.upload",
                query={**query, "format": "tar"},
                content=_tar_of(source),
                headers={"content-type": "application/x-tar"},
            )
        else:
            size = source.stat().st_size
            mode = source.stat().st_mode & 0o777
            response = await self._sandbox._conn.stream(
                "POST",
                "sandbox.upload",
                query={**query, "mode": f"{mode:o}"},
                content=_chunks_of(source),
                headers={"content-length": str(size), "content-type": "application/octet-stream"},
            )
        try:
            await response.aread()
            return response.json()
        finally:
            await response.aclose()

    async def download(self, remote: str, local: str | os.PathLike[str]) -> Path:
        """Streams `remote` out: a file to `local` (written under a temporary name and
        renamed once whole), a directory's tree as the directory `local` (inside it when
        it is an existing directory; nothing there is replaced). The path written."""
        target = Path(local)
        response = await self._sandbox._conn.stream(
            "GET",
            "sandbox.download",
            query={"sandboxId": self._sandbox.id, "path": self._sandbox._absolute(remote)},
        )
        try:
            shape = response.headers.get("x-sandboxd-format", "raw")
            expected = response.headers.get("content-length")
            if shape == "raw" and target.is_dir():
                target = target / Path(remote).name
            parent = target.parent if str(target.parent) else Path(".")
            parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.")
            try:
                written = 0
                with os.fdopen(fd, "wb") as out:
                    async for chunk in response.aiter_raw(CHUNK):
                        await asyncio.to_thread(out.write, chunk)
                        written += len(chunk)
                if shape == "raw":
                    if expected is not None and int(expected) != written:
                        raise OSError(f"the download ended after {written} of {expected} bytes")
                    os.replace(temp, target)
                else:
                    target = await asyncio.to_thread(_unpack, Path(temp), target, Path(remote).name)
            finally:
                if os.path.exists(temp):
                    os.unlink(temp)
        finally:
            await response.aclose()
        return target


async def _chunks_of(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as file:
        while chunk := await asyncio.to_thread(file.read, CHUNK):
            yield chunk


class _Stopped(Exception):
    """The sending side stopped reading."""


def _put(
    pieces: queue.Queue[bytes | BaseException | None],
    piece: bytes | BaseException | None,
    stop: threading.Event,
) -> None:
    """Puts `piece` on the queue, unless the sending side stopped reading."""
    while not stop.is_set():
        try:
            pieces.put(piece, timeout=0.2)
            return
        except queue.Full:
            continue
    raise _Stopped


class _QueueWriter:
    """A file object whose writes go to a bounded queue (the tar side of a pipe); it
    stops (raising) once the sending side has."""

    def __init__(self, pieces: queue.Queue[bytes | BaseException | None], stop: threading.Event) -> None:
        self.pieces = pieces
        self.stop = stop

    def write(self, data: bytes) -> int:
        _put(self.pieces, bytes(data), self.stop)
        return len(data)


async def _tar_of(directory: Path) -> AsyncIterator[bytes]:
    """A tar of `directory`'s contents, made on a thread as it is sent."""

    def fill(tar: tarfile.TarFile) -> None:
        for child in sorted(directory.iterdir()):
            tar.add(child, arcname=child.name)

    async for piece in tar_stream(fill):
        yield piece


async def tar_stream(fill: Callable[[tarfile.TarFile], None]) -> AsyncIterator[bytes]:
    """A tar that `fill` writes, made on a thread as it is sent; the thread ends (and
    lets go of what it reads) when the sending side stops early, as on a refusal."""
    pieces: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=16)
    stop = threading.Event()

    def make() -> None:
        try:
            with tarfile.open(fileobj=_QueueWriter(pieces, stop), mode="w|", bufsize=CHUNK) as tar:  # type: ignore[call-overload]
                fill(tar)
            _put(pieces, None, stop)
        except _Stopped:
            return
        except BaseException as error:  # handed to the sending side
            try:
                _put(pieces, error, stop)
            except _Stopped:
                return

    def next_piece() -> bytes | BaseException | None:
        while True:
            try:
                return pieces.get(timeout=0.2)
            except queue.Empty:
                if stop.is_set():
                    return None

    threading.Thread(target=make, daemon=True).start()
    try:
        while True:
            piece = await asyncio.to_thread(next_piece)
            if piece is None:
                return
            if isinstance(piece, BaseException):
                raise piece
            yield piece
    finally:
        stop.set()


def _inside(name: str) -> Callable[[tarfile.TarInfo, str], tarfile.TarInfo | None]:
    """tarfile's `data` filter (no set-id bits, no owners, no devices, nothing outside
    the staging directory), held further to the tree under `name`, the only part that
    is moved into place: other entries are skipped, and a link must lead inside it."""

    def under(path: str) -> bool:
        return path == name or path.startswith(name + "/")

    def check(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        member = tarfile.data_filter(member, dest)
        if not under(posixpath.normpath(member.name)):
            return None
        if member.issym():
            leads = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
            if not under(leads):
                raise tarfile.LinkOutsideDestinationError(member, leads)
        if member.islnk() and not under(posixpath.normpath(member.linkname)):
            raise tarfile.LinkOutsideDestinationError(member, member.linkname)
        return member

    return check


def _links_stay_inside(tree: Path) -> None:
    """Every link of `tree` leads inside it, resolved through the tree's own links: each
    was checked alone as it was extracted, which a chain of them (`s -> ..`, then
    `t -> s/..`, in either order) can fool."""
    base = os.path.realpath(tree)
    for parent, dirs, files in os.walk(tree):
        for entry in dirs + files:
            path = os.path.join(parent, entry)
            if os.path.islink(path):
                leads = os.path.realpath(path)
                if leads != base and not leads.startswith(base + os.sep):
                    raise tarfile.LinkOutsideDestinationError(tarfile.TarInfo(entry), leads)


def _unpack(archive: Path, target: Path, name: str) -> Path:
    """Unpacks a directory's tar (its entries under `name`) as `target`, or inside it
    when it is an existing directory; never outside it, never over what is there."""
    if target.is_dir():
        target = target / name
    if target.exists():
        raise FileExistsError(f"{target} exists")
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".sandboxd-"))
    try:
        with tarfile.open(archive, mode="r:") as tar:
            tar.extractall(staging, filter=_inside(name))
        # Only the named directory is moved into place: whatever else the archive held
        # stays in the staging directory and goes with it.
        source = staging / name
        if source.is_symlink() or not source.is_dir():
            raise OSError(f"the archive has no directory {name}")
        _links_stay_inside(source)
        os.replace(source, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


class AsyncWatch:
    """A watch of a directory over the `/sandbox-watch` WebSocket; see
    `AsyncFiles.watch`."""

    def __init__(self, sandbox: SandboxHandle, path: str, recursive: bool) -> None:
        self._sandbox = sandbox
        self.path = path
        self.recursive = recursive
        self.lost = 0
        self._ws: Any = None

    async def __aenter__(self) -> AsyncWatch:
        conn = self._sandbox._conn
        query = {"sandboxId": self._sandbox.id, "path": self.path, "recursive": str(self.recursive).lower()}
        try:
            self._ws = await _ws.open_session(conn, "/sandbox-watch", query)
            ready = json.loads(await self._ws.recv())
        except BaseException as error:  # noqa: BLE001 - mapped, then raised
            if self._ws is not None:
                await _ws.close(self._ws)
            raise _ws.failure(error, conn.target.url, self._sandbox.id) from error
        if ready.get("type") != "ready":
            await _ws.close(self._ws)
            raise errors.InvalidRequest(ready.get("message", "the watch was refused"), status=400)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._ws is not None:
            await _ws.close(self._ws)
            self._ws = None

    async def __aiter__(self) -> AsyncIterator[FileChange]:
        if self._ws is None:
            raise RuntimeError("enter the watch first: async with sb.files.watch(...) as changes")
        conn = self._sandbox._conn
        while True:
            try:
                message = json.loads(await self._ws.recv())
            except BaseException as error:  # noqa: BLE001 - mapped, then raised
                raise _ws.failure(error, conn.target.url, self._sandbox.id) from error
            kind = message.get("type")
            if kind == "event":
                yield FileChange(change=message["change"], path=message["path"], name=message["name"])
            elif kind == "overflow":
                self.lost += 1
            elif kind == "error":
                raise errors.CommandError(message.get("message", "the watch failed"))
