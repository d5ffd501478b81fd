"""E2B's own Python SDK builds a template with its `Template` builder against sandboxd
(`/e2b`): files copied with their modes and owners, a link as a link, commands as `user` and as `root`,
variables kept as written, a workdir, a start command with its ready command; the
build's log carries a command's output; `Sandbox.create(name)` makes a sandbox of it
that shows each, ready when the create answers. An unchanged rebuild is served from
the cache; a failing step fails the build with its output; an image the server does not
allow is refused. The template is removed at the end (sandboxd's `template.remove`).

    python3 tests/python/e2b_templates.py URL KEY
"""

import json
import os
import sys
import tempfile
import time
import urllib.request
import uuid

url, key = sys.argv[1:3]
os.environ["E2B_API_URL"] = f"{url}/e2b"
os.environ["E2B_SANDBOX_URL"] = f"{url}/e2b/envd"
os.environ["E2B_API_KEY"] = key

from e2b import Sandbox, Template, wait_for_file  # noqa: E402
from e2b.exceptions import BuildException  # noqa: E402


def api(procedure, body=None):
    """sandboxd's own API: a POST with a body, else a GET."""
    request = urllib.request.Request(
        f"{url}/api/{procedure}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"x-api-key": key, "content-type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        text = answer.read()
        return json.loads(text) if text else None


context = tempfile.mkdtemp()
os.makedirs(f"{context}/app")
with open(f"{context}/app/run.sh", "w") as f:
    f.write("#!/bin/sh\necho ran-as-$(id -u)\n")
os.chmod(f"{context}/app/run.sh", 0o755)
# A link is copied as a link (E2B's default, resolve_symlinks=False).
os.symlink("run.sh", f"{context}/app/run-link.sh")
with open(f"{context}/data.txt", "w") as f:
    f.write("hello")

name = f"e2b-built-{uuid.uuid4().hex[:8]}"


def template():
    return (
        Template(file_context_path=context)
        .from_base_image()
        .copy("app/", "/home/user/app/")
        .copy("data.txt", "/opt/data.txt", user="root", mode=0o604)
        .run_cmd("echo building-as-$(id -u)")
        .run_cmd("touch /opt/root-made", user="root")
        .set_envs({"GREETING": "it's $HOME"})
        .set_workdir("/home/user/work")
        .set_start_cmd("sleep 1; touch /tmp/ready; sleep 1000", wait_for_file("/tmp/ready"))
    )


built = None
try:
    logs = []
    started = time.monotonic()
    built = Template.build(template(), name, on_build_logs=logs.append)
    first = time.monotonic() - started
    messages = [entry.message for entry in logs]
    assert any("building-as-1000" in m for m in messages), messages
    assert Template.exists(name), "the template exists once built"
    assert not Template.exists(f"{name}-not"), "an unknown name does not"

    sandbox = Sandbox.create(name, timeout=120)
    try:
        # The ready command succeeded before the create answered.
        ready = sandbox.commands.run("test -f /tmp/ready && echo ready")
        assert ready.stdout.strip() == "ready", ready
        shown = sandbox.commands.run(
            "../app/run.sh; echo \"$GREETING\"; pwd; stat -c '%a %u' /opt/data.txt "
            "/home/user/app/run.sh; stat -c %u /opt/root-made; cat /opt/data.txt; echo; "
            "touch made-here && stat -c %u .; readlink /home/user/app/run-link.sh"
        )
        assert shown.stdout.strip().split("\n") == [
            "ran-as-1000",
            "it's $HOME",
            "/home/user/work",
            "604 0",
            "755 1000",
            "0",
            "hello",
            "1000",
            "run.sh",
        ], shown.stdout
    finally:
        sandbox.kill()

    logs = []
    started = time.monotonic()
    again = Template.build(template(), name, on_build_logs=logs.append)
    cached = time.monotonic() - started
    assert again.template_id == built.template_id, (again, built)
    assert sum("cached" in entry.message for entry in logs) >= 5, [e.message for e in logs]
    print(f"e2b-python: template built in {first:.1f} s, rebuilt from the cache in {cached:.1f} s")

    # Tags: a build asked for as `name` is its `default`, which the newest build takes;
    # more tags go on the build a `name:tag` names, are listed with it, and come off.
    tagged = Template.assign_tags(f"{name}:default", ["production", "stable"])
    assert tagged.build_id == again.build_id, (tagged, again)
    assert set(tagged.tags) == {"production", "stable"}, tagged
    listed = {tag.tag: tag.build_id for tag in Template.get_tags(name)}
    assert listed == {
        "default": again.build_id,
        "production": again.build_id,
        "stable": again.build_id,
    }, listed
    Template.remove_tags(name, "stable")
    assert "stable" not in {tag.tag for tag in Template.get_tags(name)}
    # A sandbox of the build a tag names; a tag that names none is not found.
    tagged_sandbox = Sandbox.create(f"{name}:production", timeout=60)
    try:
        assert tagged_sandbox.commands.run("cat /opt/data.txt").stdout.strip() == "hello"
    finally:
        tagged_sandbox.kill()
    try:
        Sandbox.create(f"{name}:no-such-tag", timeout=60)
        raise SystemExit("a tag that names no build made a sandbox")
    except Exception as missing:
        assert "not found" in str(missing).lower() or "404" in str(missing), missing
    for bad in [":no-name", f"{name}:"]:
        try:
            Template.assign_tags(f"{name}:default", bad)
            raise SystemExit(f"a bad tag {bad!r} was taken")
        except Exception as refused:  # the SDK's TemplateException, or its check
            assert "tag" in str(refused).lower(), refused

    try:
        Template.build(
            Template().from_template(name).run_cmd("echo boom-out; exit 3"), f"{name}-fails"
        )
        raise SystemExit("a failing step built")
    except BuildException as error:
        assert "exited with code 3" in str(error) and "boom-out" in str(error), error

    try:
        Template.build(Template().from_image("registry.example/x:1").run_cmd("true"), f"{name}-x")
        raise SystemExit("an image the server does not allow built")
    except BuildException as error:
        assert "registry.example/x:1" in str(error), error
finally:
    if built is not None:
        api("template.remove", {"templateId": built.template_id})
    for template_id in [t["templateId"] for t in api("template.all")]:
        api("template.remove", {"templateId": template_id})
print("e2b-python: E2B's Template builder built and used a template")
