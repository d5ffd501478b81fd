"""E2B's own Python SDK (`e2b` on PyPI) against sandboxd's E2B control plane, set up as
its users set it up: E2B_API_URL at sandboxd's `/e2b`, a sandboxd key made in E2B's form
(`e2b_` and hex) as E2B_API_KEY.
Creates, reads, lists by metadata, extends, connects to and kills a sandbox; a wrong
key and an unknown sandbox fail as the SDK's own exceptions.

    python3 tests/python/e2b_control_plane.py URL KEY
"""

import os
import re
import sys

url, key = sys.argv[1:3]
# The key is one sandboxd made in E2B's form: what E2B's SDKs check a key against.
assert re.fullmatch(r"e2b_[0-9a-f]{64}", key), key
os.environ["E2B_VALIDATE_API_KEY"] = "true"
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

    # Metrics over an interval: the readings sandboxd keeps every 5 s.
    import datetime
    import time

    began = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)
    deadline = time.monotonic() + 30
    metrics = []
    while time.monotonic() < deadline:
        metrics = sandbox.get_metrics(start=began)
        if len(metrics) >= 2:
            break
        time.sleep(1)
    assert len(metrics) >= 2, metrics
    stamps = [m.timestamp.timestamp() for m in metrics]
    assert stamps == sorted(stamps) and stamps[0] >= began.timestamp() - 1, stamps
    assert all(m.mem_total == 512 * 1024 * 1024 and m.mem_used > 0 for m in metrics), metrics
    assert sandbox.get_metrics(end=began - datetime.timedelta(hours=1)) == []

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
