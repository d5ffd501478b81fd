"""The fuzz pass's aim at the trust boundaries the OpenAPI document does not describe,
against the real server (`scripts/fuzz-api.sh` runs it after schemathesis): egress
lists widened with a key that may only ask, previews driven on a link's cookie from
foreign origins with every method and WebSocket upgrades, `Host` headers with trailing
dots and other odd forms, and gzip bodies that are not gzip or expand a
thousandfold. Every answer must be sandboxd's deliberate one: never a 5xx from sandboxd
(the app behind the previews answers 200 to everything, so a 5xx is sandboxd's), never
a widening accepted, never a cookie-admitted change from another origin.

    python3 tests/fuzz/boundaries.py URL OWNER_KEY FIXTURES.json [CASES]
"""

import gzip
import http.client
import json
import random
import socket
import sys
import time
import urllib.parse

url, owner, fixtures_path = sys.argv[1:4]
cases = int(sys.argv[4]) if len(sys.argv) > 4 else 200
fixtures = json.load(open(fixtures_path))
parsed = urllib.parse.urlsplit(url)
host, port = parsed.hostname, parsed.port
rng = random.Random(1)
failures = []
counts = {}


def request(method, path, body=None, headers=None, timeout=30):
    """One request over its own connection: (status, headers, body)."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def call(procedure, body=None, key=owner):
    headers = {"x-api-key": key, "content-type": "application/json"}
    data = None if body is None else json.dumps(body).encode()
    status, _, answer = request("GET" if body is None else "POST", f"/api/{procedure}", data, headers)
    try:
        return status, json.loads(answer or b"null")
    except ValueError:
        return status, answer


def check(kind, status, ok, detail):
    counts.setdefault(kind, {})
    counts[kind][status] = counts[kind].get(status, 0) + 1
    if status >= 500 or not ok:
        failures.append(f"{kind}: {status} {detail}")


def random_host_entry():
    name = rng.choice(["a", "b", "pypi", "x-y", "deep.sub", "*", "*.wild", "", "..", "127.0.0.1", "évil"])
    tld = rng.choice(["example", "test", "", "com."])
    entry = f"{name}.{tld}" if tld else name
    if rng.random() < 0.3:
        entry += f":{rng.choice([80, 443, 8443, 0, 65536, 'x'])}"
    return entry


# 1. Egress lists: a key that may use a sandbox but not decide narrows, never widens.
status, agent = call(
    "apiKey.create", {"name": "fuzz-boundaries-agent", "scopes": ["service:read", "deployment:create"]}
)
agent = agent["secret"]
for n in range(cases):
    sandbox_id = fixtures["egressSandboxes"][n % len(fixtures["egressSandboxes"])]
    _, before = call(f"sandbox.one?sandboxId={sandbox_id}")
    current = (before.get("egress") or {}).get("allow") or []
    wanted = rng.sample(current, k=rng.randint(0, len(current))) if current else []
    wanted += [random_host_entry() for _ in range(rng.choice([0, 0, 1, 3]))]
    status, answer = call("sandbox.setEgress", {"sandboxId": sandbox_id, "allow": wanted}, key=agent)
    _, after = call(f"sandbox.one?sandboxId={sandbox_id}")
    kept = (after.get("egress") or {}).get("allow") or []
    widened = [entry for entry in kept if entry not in current]
    check("setEgress by an asking key", status, not widened, f"{wanted} -> {kept}: {answer}")

# 2. Previews on a link's cookie: an app answering 200 to everything behind them.
APP = """
import http.server
class Any(http.server.BaseHTTPRequestHandler):
    def answer(self):
        length = int(self.headers.get('content-length') or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header('content-length', '2')
        self.end_headers()
        self.wfile.write(b'ok')
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_PROPFIND = answer
    def do_HEAD(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', 8000), Any).serve_forever()
"""
app_sandbox = fixtures["sandboxes"][1]
call("sandbox.writeFile", {"sandboxId": app_sandbox, "path": "/tmp/any.py", "content": APP})
call("sandbox.processStart", {"sandboxId": app_sandbox, "cmd": "exec python3 /tmp/any.py"})
_, exposed = call("sandbox.exposePort", {"sandboxId": app_sandbox, "port": 8000})
# On the preview domain (`localhost`, which the fuzz pass's server sets) the link's
# host is the preview's own; it is sent as `Host` to the server's address.
link = urllib.parse.urlsplit(exposed["url"])
base = link.path.rstrip("/")
preview_host = link.netloc
deadline = time.time() + 30
while True:
    status, headers, _ = request(
        "GET", f"{link.path}?{link.query}", headers={"sec-fetch-mode": "navigate", "host": preview_host}
    )
    if status == 303:
        break
    if time.time() > deadline:
        sys.exit(f"boundaries: the preview never answered ({status})")
    time.sleep(0.2)
cookie = headers["set-cookie"].split(";")[0]
while request("GET", "/", headers={"host": preview_host, "x-api-key": owner})[0] != 200:
    if time.time() > deadline:
        sys.exit("boundaries: the preview's app never answered")
    time.sleep(0.2)
own = f"{link.scheme}://{preview_host}"
for n in range(cases):
    method = rng.choice(["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE", "PROPFIND"])
    neighbour = f"http://9000-{preview_host.split('-', 1)[-1]}"
    origin = rng.choice([None, "null", own, own.upper(), "https://evil.example", url, neighbour, "\u00e9vil", ""])
    upgrade = rng.random() < 0.3
    fetch_site = rng.choice([None, "same-origin", "cross-site", "none"])
    headers = {"cookie": cookie, "host": preview_host}
    if origin is not None:
        headers["origin"] = origin.encode("utf-8", "replace").decode("latin-1")
    if fetch_site:
        headers["sec-fetch-site"] = fetch_site
    path = base + rng.choice(["/", "/x", "/a/../b", "/%2e%2e/", "/?q=1"])
    if upgrade:
        raw = f"GET {path} HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
              f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        raw += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        with socket.create_connection((host, port), timeout=30) as s:
            s.sendall(raw.encode("latin-1"))
            line = s.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
        status = int(line.split()[1]) if len(line.split()) > 1 else 0
        # The app is no WebSocket server: sandboxd must refuse a foreign origin itself.
        foreign = origin not in (own, own.upper()) and not (origin is None and fetch_site == "same-origin")
        check("preview upgrade on the cookie", status, not (foreign and status == 200), f"origin {origin!r}")
        continue
    status, _, _ = request(method, path, body=b"x" if method in ("POST", "PUT", "PATCH") else None, headers=headers)
    changes = method not in ("GET", "HEAD", "OPTIONS")
    foreign = origin not in (own, own.upper()) and not (origin is None and fetch_site == "same-origin")
    check(f"preview {method} on the cookie", status, not (changes and foreign and status == 200), f"origin {origin!r}")

# 3. Hosts: trailing dots and other odd forms, on sandboxd's own routes and previews.
for n in range(cases):
    name = rng.choice(["127.0.0.1", "localhost", "x.localhost", "api.e2b.localhost", f"8000-{app_sandbox.lower()}.localhost", "", "a..b", "[::1]"])
    name += rng.choice(["", ".", "..", f":{port}", f".:{port}", ":", ":x"])
    path = rng.choice(["/health", "/api/sandbox.templates", "/sandboxes", "/", base + "/"])
    try:
        status, _, _ = request("GET", path, headers={"host": name, "x-api-key": owner})
    except (http.client.HTTPException, OSError) as error:
        failures.append(f"host {name!r}: no answer: {error}")
        continue
    check("odd hosts", status, True, f"host {name!r} {path}")

# 4. E2B uploads: gzip that is not, that is cut, or that expands a thousandfold.
status, made = 0, None
connection = http.client.HTTPConnection(host, port, timeout=60)
connection.request(
    "POST", "/e2b/v2/sandboxes",
    body=json.dumps({"templateID": "base", "timeout": 300, "allow_internet_access": False}),
    headers={"x-api-key": owner, "content-type": "application/json"},
)
answer = connection.getresponse()
made = json.loads(answer.read())
connection.close()
bomb = gzip.compress(bytes(8 << 20))
for n in range(max(cases // 10, 10)):
    body = rng.choice([bomb, bomb[: len(bomb) // 2], b"not gzip", gzip.compress(b"fine") + b"trailing", gzip.compress(b"fine")])
    status, _, _ = request(
        "POST", f"/e2b/envd/files?path=/tmp/fuzz-{n}",
        body=body,
        headers={
            "e2b-sandbox-id": made["sandboxID"], "e2b-sandbox-port": "49983",
            "x-access-token": made["envdAccessToken"], "content-encoding": "gzip",
            "content-type": "application/octet-stream",
        },
    )
    check("e2b gzip uploads", status, True, f"{len(body)} bytes")

for kind, statuses in counts.items():
    print(f"boundaries: {kind}: {dict(sorted(statuses.items()))}")
if failures:
    print("boundaries: failed:", *failures[:40], sep="\n  ")
    sys.exit(1)
print("boundaries: ok")
