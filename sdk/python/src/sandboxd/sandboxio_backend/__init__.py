"""sandboxd as a backend of sandboxio: `sandboxio.create("sandboxd://python")`.

Installed with `pip install "./sdk/python[sandboxio]"`, it is found through the
`sandboxio.backends` entry point under the name `sandboxd`. The DSN's template is a
sandboxd template (`base`, `python`, `node`) or an image; `sandboxd://python@host:port`
names the server (http on loopback addresses, https elsewhere). Otherwise the server
and key come from `SANDBOXD_URL` and `SANDBOXD_KEY`, the `sandboxd login` profile, or
the local server's defaults. What sandboxio has no capability for (terminals, background
processes with input, the SDK's own calls) is on `sandbox.native`, the SDK's
`AsyncSandbox`.
"""

from ._backend import CAPABILITIES, SandboxdBackend
from ._process import SandboxdProcess
from ._sandbox import SandboxdSandbox

__all__ = ["CAPABILITIES", "SandboxdBackend", "SandboxdProcess", "SandboxdSandbox"]
