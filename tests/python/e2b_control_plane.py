"""E2B's own Python SDK (`e2b` on PyPI) against sandboxd's E2B control plane, set up as
its users set it up: E2B_API_URL at sandboxd's `/e2b`, a sandboxd key as E2B_API_KEY.
Creates, reads, lists by metadata, extends, connects to and kills a sandbox; a wrong
key and an unknown sandbox fail as the SDK's own exceptions.

    python3 tests/python/e2b_control_plane.py URL KEY
"""

import os
import sys

url, key = sys.argv[1:3]
os.environ["E2B_API_URL"] = f"{url}/e2b"
os.environ["E2B_SANDBOX_URL"] = f"{url}/e2b/envd"
os.environ["E2B_API_KEY"] = key

from e2b import Sandbox, SandboxQuery  # noqa: E402
from e2b.exceptions import AuthenticationException, SandboxException, SandboxNotFoundException  # noqa: E402

sandbox = Sandbox.create(
    "base", timeout=120, metadata={"suite": "e2b-control-plane"}, allow_internet_access=False
)
try:
    info = sandbox.get_info()
    assert info.sandbox_id == sandbox.sandbox_id, info
    assert info.template_id == "base", info
    assert info.metadata == {"suite": "e2b-control-plane"}, info.metadata
    assert str(info.state).lower().endswith("running"), info.state
    end = info.end_at
    sandbox.set_timeout(3600)
    assert sandbox.get_info().end_at > end, "set_timeout moves the end"

    found = Sandbox.list(query=SandboxQuery(metadata={"suite": "e2b-control-plane"})).next_items()
    assert [s.sandbox_id for s in found] == [sandbox.sandbox_id], found

    again = Sandbox.connect(sandbox.sandbox_id)
    assert again.sandbox_id == sandbox.sandbox_id
finally:
    assert sandbox.kill() is True
assert Sandbox.kill(sandbox.sandbox_id) is False, "a killed sandbox is gone"
try:
    Sandbox.get_info(sandbox.sandbox_id)
    raise SystemExit("get_info of a killed sandbox answered")
except SandboxNotFoundException:
    pass

os.environ["E2B_API_KEY"] = "sbx_not_a_key"
try:
    Sandbox.list().next_items()
    raise SystemExit("a wrong key was let in")
except (AuthenticationException, SandboxException) as error:
    assert "401" in str(error) or isinstance(error, AuthenticationException), error
print("e2b-python: the official SDK's control plane calls passed")
