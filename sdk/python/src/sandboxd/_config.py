"""Which server and key a client uses: the arguments, else `SANDBOXD_URL` and
`SANDBOXD_KEY`, else the profile `sandboxd login` wrote, else the local defaults that
`sandboxd serve` makes on its first start (`http://127.0.0.1:3000` and
`./sandboxd-data/owner.key`, sent only to a loopback address)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .errors import ConfigurationError

DEFAULT_URL = "http://127.0.0.1:3000"
LOCAL_KEY_FILE = Path("sandboxd-data") / "owner.key"


@dataclass(frozen=True)
class Target:
    """A server and the key to present to it."""

    url: str
    key: str = ""

    def __repr__(self) -> str:
        return f"Target(url={self.url!r}, key=***)"


def _profile() -> dict[str, str] | None:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    path = Path(base) / "sandboxd" / "profile.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"{path} is not a sandboxd profile: {error}") from error
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path} is not a sandboxd profile")
    return {k: v for k, v in data.items() if isinstance(v, str)}


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def resolve(url: str | None = None, key: str | None = None) -> Target:
    """The target of a client made with `url` and `key` (either may be omitted)."""
    url = url or os.environ.get("SANDBOXD_URL") or None
    key = key or os.environ.get("SANDBOXD_KEY") or None
    profile = _profile() if url is None or key is None else None
    if profile and url is None:
        url = profile.get("url")
    # A profile's key goes to the profile's server only.
    if profile and key is None and url == profile.get("url"):
        key = profile.get("key")
    url = (url or DEFAULT_URL).rstrip("/")
    if urlsplit(url).scheme not in ("http", "https"):
        raise ConfigurationError(f"{url} is not an http:// or https:// URL")
    if key is None and _is_loopback(url) and LOCAL_KEY_FILE.is_file():
        key = LOCAL_KEY_FILE.read_text().strip()
    return Target(url=url, key=key or "")
