"""E2B's own Python SDK (`e2b` on PyPI) set up as E2B's users set it up for a
deployment of their own: `E2B_DOMAIN` and a key, nothing else. The SDK then calls
`https://api.<domain>` and `https://49983-<id>.<domain>`, which a TLS proxy sends
to sandboxd (`e2b_domain`). Commands and files through the domain, the signed file
URLs the SDK makes (`download_url`, `upload_url`), opened with no header at all, and
the code interpreter at `49999-<id>.<domain>`, and a template built with E2B's `Template`
(its files uploaded to the URL the server answers, on the domain).

    E2B_DOMAIN=<domain>[:port] E2B_API_KEY=<key> SSL_CERT_FILE=<proxy's cert> \
        python3 tests/python/e2b_domain.py

(the domain's names must reach the proxy: tests/python/e2b_domain_site does that on
loopback).
"""

import json
import os
import tempfile
import urllib.error
import urllib.request

from e2b import Sandbox, Template
from e2b_code_interpreter import Sandbox as CodeInterpreter

assert "E2B_API_URL" not in os.environ and "E2B_SANDBOX_URL" not in os.environ

sbx = Sandbox.create("base", timeout=120, allow_internet_access=False)
try:
    domain = os.environ["E2B_DOMAIN"]
    assert sbx.sandbox_domain == domain, sbx.sandbox_domain
    assert sbx.commands.run("echo hi from the domain").stdout == "hi from the domain\n"
    sbx.files.write("notes.txt", "kept")
    assert sbx.files.read("notes.txt") == "kept"

    # A signed download URL, opened by a client that knows nothing of the sandbox.
    url = sbx.download_url("notes.txt", "user")
    assert url.startswith(f"https://49983-{sbx.sandbox_id}.{domain}/files?"), url
    assert "signature=v1_" in url, url
    with urllib.request.urlopen(url) as answer:
        assert answer.status == 200 and answer.read() == b"kept"
    with urllib.request.urlopen(sbx.download_url("notes.txt", "user", 60)) as answer:
        assert answer.read() == b"kept"

    # Expired: refused as E2B's daemon refuses it.
    try:
        urllib.request.urlopen(sbx.download_url("notes.txt", "user", use_signature_expiration=-120))
        raise AssertionError("an expired URL is refused")
    except urllib.error.HTTPError as refused:
        assert refused.code == 401
        assert json.loads(refused.read()) == {"code": 401, "message": "signature is already expired"}

    # A signed upload URL takes a raw body.
    upload = sbx.upload_url("/tmp/uploaded.txt", "user", 60)
    request = urllib.request.Request(upload, data=b"sent unsigned-in", method="POST",
                                     headers={"content-type": "application/octet-stream"})
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 200, answer.status
    assert sbx.files.read("/tmp/uploaded.txt") == "sent unsigned-in"

    # A download URL does not write.
    request = urllib.request.Request(url, data=b"x", method="POST")
    try:
        urllib.request.urlopen(request)
        raise AssertionError("a read URL does not write")
    except urllib.error.HTTPError as refused:
        assert refused.code == 401, refused.code

    # Reconnecting by id goes through the domain too.
    again = Sandbox.connect(sbx.sandbox_id)
    assert again.files.read("notes.txt") == "kept"

    # The code interpreter, at 49999-<id>.<domain>.
    interpreter = CodeInterpreter.connect(sbx.sandbox_id)
    assert interpreter.run_code("6 * 7").text == "42"
    assert [c.language for c in interpreter.list_code_contexts()] == ["python", "javascript"]

    # A template built through the domain: the SDK uploads its files to the URL the
    # server answers, the domain's own over TLS.
    context = tempfile.mkdtemp()
    with open(f"{context}/hello.txt", "w") as f:
        f.write("copied through the domain")
    Template.build(
        Template(file_context_path=context).from_base_image().copy("hello.txt", "/home/user/"),
        "e2b-domain-built",
    )
    built = Sandbox.create("e2b-domain-built", timeout=60)
    try:
        assert built.files.read("/home/user/hello.txt") == "copied through the domain"
    finally:
        built.kill()
finally:
    sbx.kill()
print("e2b over E2B_DOMAIN: ok")
