"""`Template`: environments described in code and built by the server.

A template is a Dockerfile and the files its `COPY` reads. Write one as text
(`Template.build(name, dockerfile=..., files=...)`) or with the builder
(`Template.from_template("base").env(X="1").copy("app/", "/app").run("make")`), then
`.build(name)`. The build's log comes live (server-sent events) to `on_log`, one
`BuildLogLine` at a time; a failed step raises `BuildFailed` with its step and last
lines. `Sandbox.create(name)` then makes sandboxes from it.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _portal
from ._config import resolve
from ._files import tar_stream
from ._http import Connection
from .errors import BuildFailed, ConnectionFailed
from .models import TemplateInfo


@dataclass(frozen=True)
class BuildLogLine:
    """One line of a build's log."""

    time: str
    #: The step (1 is `FROM`; 0: the builder's own lines after the steps).
    step: int
    #: `stdout`, `stderr` or `system` (the builder's own lines).
    stream: str
    line: str


OnLog = Callable[[BuildLogLine], Any]


class _Either:
    """A method called on the class (`Template.build(name, dockerfile=...)`) or on a
    builder (`Template.from_template("base").run("make").build(name)`)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.__doc__ = function.__doc__

    def __get__(self, instance: Any, owner: type) -> Callable[..., Any]:
        def bound(*args: Any, **kwargs: Any) -> Any:
            return self.function(instance, *args, **kwargs)

        bound.__doc__ = self.function.__doc__
        return bound


#: The most files and bytes `template.build` takes in its body; more are streamed as a
#: context (`template.context`).
_MAX_FILES = 10_000
_MAX_BYTES = 64 << 20
_MAX_BODY = 88 << 20


def _fits_the_body(files: Mapping[str, bytes], dockerfile: str) -> bool:
    """Whether `files` go in `template.build`'s body: within its bounds, and the body
    they make (base64, each name twice with its mode, the Dockerfile) within its 88 MiB."""
    encoded = sum((len(d) + 2) // 3 * 4 + 2 * (len(n.encode()) + 16) for n, d in files.items())
    return (
        len(files) <= _MAX_FILES
        and sum(len(d) for d in files.values()) <= _MAX_BYTES
        and encoded + 2 * len(dockerfile.encode()) + 4096 <= _MAX_BODY
    )


def _fill_from_files(files: Mapping[str, bytes], modes: Mapping[str, str]) -> Callable[[tarfile.TarFile], None]:
    """Writes `files` (name → bytes) into a tar, each with its mode."""

    def fill(tar: tarfile.TarFile) -> None:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = int(modes.get(name, "0644"), 8)
            tar.addfile(info, io.BytesIO(data))

    return fill


def _fill_from_directory(directory: Path) -> Callable[[tarfile.TarFile], None]:
    """Writes every file under `directory` (`.git` left out) into a tar with its mode,
    and symbolic links as links; a file linked twice goes twice, whole."""

    def fill(tar: tarfile.TarFile) -> None:
        for path in sorted(directory.rglob("*")):
            relative = path.relative_to(directory)
            if ".git" in relative.parts:
                continue
            stat = path.lstat()
            info = tarfile.TarInfo(relative.as_posix())
            info.mode = stat.st_mode & 0o7777
            info.mtime = int(stat.st_mtime)
            if path.is_symlink():
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(path)
                tar.addfile(info)
            elif path.is_file():
                info.size = stat.st_size
                with path.open("rb") as content:
                    tar.addfile(info, content)

    return fill


async def _upload_context(
    conn: Connection, fill: Callable[[tarfile.TarFile], None], project_id: str | None
) -> str:
    """Streams a tar to `template.context`; the context's id."""
    response = await conn.stream(
        "POST",
        "template.context",
        query={"projectId": project_id},
        content=tar_stream(fill),
        headers={"content-type": "application/x-tar"},
    )
    try:
        await response.aread()
        return str(response.json()["contextId"])
    finally:
        await response.aclose()


def _read_files(source: Path, prefix: str) -> tuple[dict[str, bytes], dict[str, str]]:
    """The files under `source` by name, and the modes of those not `0644` (an
    executable script stays one, as `docker build` keeps it)."""
    if source.is_file():
        paths = {f"{prefix}/{source.name}": source}
    elif source.is_dir():
        paths = {
            f"{prefix}/{path.relative_to(source).as_posix()}": path
            for path in sorted(source.rglob("*"))
            if path.is_file() and ".git" not in path.relative_to(source).parts
        }
    else:
        raise FileNotFoundError(f"{source} is neither a file nor a directory")
    found = {name: path.read_bytes() for name, path in paths.items()}
    modes = {
        name: f"{path.stat().st_mode & 0o7777:04o}"
        for name, path in paths.items()
        if path.stat().st_mode & 0o7777 != 0o644
    }
    return found, modes


class Template:
    """A Dockerfile under construction, or the `template.*` calls."""

    def __init__(self, base: str) -> None:
        self._lines = [f"FROM {base}"]
        self._files: dict[str, bytes] = {}
        self._modes: dict[str, str] = {}
        self._network: str | None = None

    @classmethod
    def from_template(cls, name: str) -> Template:
        """Starts from a configured template (`base`, `python`, ...) or one built in the
        project."""
        return cls(name)

    @classmethod
    def from_image(cls, image: str) -> Template:
        """Starts from an image the server allows builds on (`[builds] base_images`)."""
        return cls(image)

    def run(self, command: str | Iterable[str]) -> Template:
        """`RUN`: a shell command, or an argument list run without a shell."""
        if isinstance(command, str):
            self._lines.append(f"RUN {command}")
        else:
            self._lines.append(f"RUN {json.dumps(list(command))}")
        return self

    def pip_install(self, packages: Iterable[str]) -> Template:
        """`RUN pip install` of `packages` (the build gets the internet for it)."""
        quoted = " ".join(shlex.quote(p) for p in packages)
        self._network = "internet"
        return self.run(f"pip install --no-cache-dir {quoted}")

    def env(self, values: Mapping[str, str] | None = None, **more: str) -> Template:
        """`ENV`: variables of the template's sandboxes (and of the steps after it)."""
        pairs = {**(values or {}), **more}
        if pairs:
            self._lines.append(
                "ENV " + " ".join(f"{k}={json.dumps(str(v))}" for k, v in pairs.items())
            )
        return self

    def workdir(self, path: str) -> Template:
        """`WORKDIR`: made if missing; the sandboxes' working directory."""
        self._lines.append(f"WORKDIR {path}")
        return self

    def user(self, user: str) -> Template:
        """`USER`: who the steps after it and the sandboxes run as (`uid:gid`)."""
        self._lines.append(f"USER {user}")
        return self

    def copy(self, source: str | Path, destination: str, *, owner: str | None = None) -> Template:
        """`COPY` of a local file or directory (its contents) to `destination`."""
        prefix = f"context{len(self._lines)}"
        source = Path(source)
        found, modes = _read_files(source, prefix)
        self._files.update(found)
        self._modes.update(modes)
        chown = f"--chown={owner} " if owner else ""
        name = f"{prefix}/{source.name}" if source.is_file() else f"{prefix}/"
        self._lines.append(f"COPY {chown}{json.dumps([name, destination])}")
        return self

    def copy_content(self, content: str | bytes, destination: str) -> Template:
        """`COPY` of `content` to the file `destination`."""
        name = f"content{len(self._lines)}"
        self._files[name] = content.encode() if isinstance(content, str) else content
        self._lines.append(f"COPY {json.dumps([name, destination])}")
        return self

    def cmd(self, argv: Iterable[str]) -> Template:
        """`CMD`: the command started in each sandbox made from the template."""
        self._lines.append(f"CMD {json.dumps(list(argv))}")
        return self

    def dockerfile(self) -> str:
        """The Dockerfile written so far."""
        return "\n".join(self._lines) + "\n"

    @property
    def files(self) -> dict[str, bytes]:
        """The files its `COPY` lines read, by name."""
        return dict(self._files)

    @_Either
    def build(self: Template | None, name: str, **options: Any) -> TemplateInfo:
        """Builds a new version of template `name` and waits for it: from this builder,
        or (called on the class) from `dockerfile=` and `files=` (name → bytes or str) or
        `context=` (a directory whose files `COPY` reads, with their modes and links, as
        `docker build DIR`). Files over 64 MiB or 10,000 in all, and a `context=`, are
        streamed to the server as a tar first (`template.context`).
        `on_log` gets each log line as it comes; `network_mode="internet"` lets `RUN`
        reach the internet; `project_id`, `cpu`, `memory_mb`, `isolation`, `url`, `key`.
        Raises `BuildFailed` when a step fails."""
        return _portal.run(Template._build(self, name, **options))

    @_Either
    async def abuild(self: Template | None, name: str, **options: Any) -> TemplateInfo:
        """`build`, for asyncio."""
        return await Template._build(self, name, **options)

    @staticmethod
    async def _build(
        builder: Template | None,
        name: str,
        *,
        dockerfile: str | None = None,
        files: Mapping[str, bytes | str] | None = None,
        context: str | os.PathLike[str] | None = None,
        on_log: OnLog | None = None,
        network_mode: str | None = None,
        project_id: str | None = None,
        cpu: float | None = None,
        memory_mb: int | None = None,
        isolation: str | None = None,
        url: str | None = None,
        key: str | None = None,
    ) -> TemplateInfo:
        modes: dict[str, str] = {}
        if builder is not None:
            dockerfile = builder.dockerfile()
            files = {**builder._files, **(files or {})}
            modes = dict(builder._modes)
            network_mode = network_mode or builder._network
        if dockerfile is None:
            raise TypeError("Template.build needs dockerfile= (or a builder)")
        if context is not None and files:
            raise TypeError("Template.build reads its files from files= or from context=, not both")
        raw = {
            path: data.encode() if isinstance(data, str) else data
            for path, data in (files or {}).items()
        }
        body: dict[str, Any] = {
            "name": name,
            "dockerfile": dockerfile,
            "networkMode": network_mode,
            "projectId": project_id,
            "cpu": cpu,
            "memoryMb": memory_mb,
            "isolation": isolation,
        }
        fill: Callable[[tarfile.TarFile], None] | None = None
        if context is not None:
            directory = Path(context)
            if not directory.is_dir():
                raise NotADirectoryError(f"{directory} is not a directory")
            fill = _fill_from_directory(directory)
        elif not _fits_the_body(raw, dockerfile):
            fill = _fill_from_files(raw, modes)
        else:
            body["files"] = {path: base64.b64encode(data).decode() for path, data in raw.items()}
            body["fileModes"] = modes or None
        conn = Connection(resolve(url, key))
        try:
            if fill is not None:
                body["contextId"] = await _upload_context(conn, fill, project_id)
            started = await conn.call(
                "template.build", {k: v for k, v in body.items() if v is not None}
            )
            end = await _follow(conn, started["buildId"], on_log)
            if end.get("status") != "ready":
                error = end.get("error") or {}
                raise BuildFailed(
                    f"the build of {name} failed at step {error.get('step')}: {error.get('message')}",
                    step=int(error.get("step") or 0),
                    build_id=started["buildId"],
                )
            info = await conn.call("template.one", query={"templateId": started["templateId"]})
        finally:
            await conn.close()
        return TemplateInfo.from_json(info)

    @staticmethod
    def list(*, url: str | None = None, key: str | None = None) -> list[TemplateInfo]:
        """The templates built in the projects the key sees."""
        return _portal.run(Template.alist(url=url, key=key))

    @staticmethod
    async def alist(*, url: str | None = None, key: str | None = None) -> list[TemplateInfo]:
        """`list`, for asyncio."""
        conn = Connection(resolve(url, key))
        try:
            return [TemplateInfo.from_json(t) for t in await conn.call("template.all")]
        finally:
            await conn.close()

    @staticmethod
    def get(name: str, *, url: str | None = None, key: str | None = None) -> TemplateInfo:
        """One built template by name (`NotFound` when there is none)."""
        return _portal.run(Template.aget(name, url=url, key=key))

    @staticmethod
    async def aget(name: str, *, url: str | None = None, key: str | None = None) -> TemplateInfo:
        """`get`, for asyncio."""
        conn = Connection(resolve(url, key))
        try:
            return TemplateInfo.from_json(await conn.call("template.one", query={"name": name}))
        finally:
            await conn.close()

    @staticmethod
    def remove(
        template: TemplateInfo | str, *, url: str | None = None, key: str | None = None
    ) -> None:
        """Removes a template (by its info or id) and every version (`Conflict` while a
        sandbox uses it)."""
        return _portal.run(Template.aremove(template, url=url, key=key))

    @staticmethod
    async def aremove(
        template: TemplateInfo | str, *, url: str | None = None, key: str | None = None
    ) -> None:
        """`remove`, for asyncio."""
        template_id = template.template_id if isinstance(template, TemplateInfo) else template
        conn = Connection(resolve(url, key))
        try:
            await conn.call("template.remove", {"templateId": template_id})
        finally:
            await conn.close()


async def _follow(conn: Connection, build_id: str, on_log: OnLog | None) -> dict[str, Any]:
    """Reads a build's log stream to its `end` event, giving each line to `on_log`."""
    response = await conn.stream(
        "GET", "template.buildLogStream", query={"buildId": build_id, "offset": 0}
    )
    try:
        event, data = "", ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif line == "":
                if event == "entry" and on_log is not None:
                    entry = json.loads(data)
                    on_log(
                        BuildLogLine(
                            time=entry["time"],
                            step=int(entry["step"]),
                            stream=entry["stream"],
                            line=entry["line"],
                        )
                    )
                elif event == "end":
                    return dict(json.loads(data))
                event, data = "", ""
    finally:
        await response.aclose()
    raise ConnectionFailed(f"the log of build {build_id} ended before the build did")
