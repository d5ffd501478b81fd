"""The API's clients checked against the committed OpenAPI document (docs/openapi.json,
itself checked against the server by the Rust suite): the Python SDK's calls and
models, the dashboard's calls, the CLI's calls and the fuzz pass's tables. Each call
names a procedure that exists with the method it is served by and sends only fields its
request has; each model reads only fields its answer has; and every procedure is
reached by each client or excluded below with the reason. A renamed field or procedure
fails here instead of for a user.

Usage: python3 tests/surface/check_clients.py   (from anywhere; no server needed)
"""
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = json.loads((ROOT / "docs" / "openapi.json").read_text())
SCHEMAS = DOCUMENT["components"]["schemas"]
PROCEDURE = re.compile(
    r"^(sandbox|snapshot|volume|template|project|environment|organization|member|apiKey|audit|server|egress)\.[A-Za-z]+$"
)

# What each client does not reach, and why. The rest of the document it must reach.
ADMINISTRATION = "administration: the CLI and the dashboard manage keys, members and servers"
NOT_REACHED = {
    "the Python SDK": {
        "sandbox.exec": "commands run over the /sandbox-exec WebSocket, streamed",
        "sandbox.execToken": "a browser's WebSocket token: the SDK sends its key",
        "sandbox.rename": "names are given at creation; renaming is the dashboard's and the CLI's",
        "sandbox.remove": "a killed sandbox's record is left to the dashboard and the CLI",
        "sandbox.templates": "templates are named by the caller (`template=`)",
        "snapshot.one": "snapshots are listed whole (snapshot.all)",
        "template.buildLog": "a build's log is followed live (template.buildLogStream)",
        "project.create": ADMINISTRATION,
        "environment.create": ADMINISTRATION,
        "organization.all": ADMINISTRATION,
        "organization.create": ADMINISTRATION,
        "member.all": ADMINISTRATION,
        "member.create": ADMINISTRATION,
        "member.update": ADMINISTRATION,
        "member.remove": ADMINISTRATION,
        "apiKey.all": ADMINISTRATION,
        "apiKey.create": ADMINISTRATION,
        "apiKey.current": ADMINISTRATION,
        "apiKey.revoke": ADMINISTRATION,
        "audit.list": ADMINISTRATION,
        "server.all": ADMINISTRATION,
        "server.one": ADMINISTRATION,
        "server.create": ADMINISTRATION,
        "server.update": ADMINISTRATION,
        "server.remove": ADMINISTRATION,
        "server.test": ADMINISTRATION,
    },
    "the dashboard": {
        "sandbox.exec": "the console runs commands over the /sandbox-exec WebSocket",
        "sandbox.execToken": "the session cookie opens the dashboard's WebSockets",
        "sandbox.writeFile": "files go up streamed (sandbox.upload)",
        "sandbox.readFile": "files come down streamed (sandbox.download)",
        "sandbox.changes": "not shown yet: the CLI's `changes` and the SDK read it",
        "sandbox.activity": "not shown yet: the CLI's `activity`, the SDK and MCP read it",
        "sandbox.recording": "not played yet: the CLI's `recording` writes it for asciinema",
        "sandbox.fork": "not offered yet: the CLI's `fork` and the SDK do it",
        "sandbox.requestEgress": "an agent's request: the dashboard decides them",
        "sandbox.setEgress": "lists are set at creation or widened by a decision",
        "snapshot.one": "snapshots are listed whole (snapshot.all)",
        "volume.one": "volumes are listed whole (volume.all)",
        "template.one": "templates are listed whole (template.all)",
        "template.context": "the build form sends the files picked in `files` (up to 64 MiB); larger contexts come from the CLI or the SDK",
        "sandbox.processStart": "processes are started from the terminal",
        "sandbox.processWait": "an agent's wait: the page polls",
        "sandbox.processSignal": "not offered yet: the CLI's `exec -i` signals",
        "sandbox.processWrite": "input goes through the terminal",
        "sandbox.contextCreate": "interpreter contexts are an agent's",
        "sandbox.contextRun": "interpreter contexts are an agent's",
        "sandbox.contextRemove": "interpreter contexts are an agent's",
        "project.create": "not offered yet: projects come from the first start",
        "environment.create": "not offered yet: environments come from the first start",
        "organization.all": "the dashboard is one organization's",
        "organization.create": "an operator's, from the CLI or the API",
        "apiKey.current": "the session is a member's, not a key's",
        "server.one": "servers are listed whole (server.all)",
        "server.create": "an operator's: registering an engine takes its SSH key",
        "server.update": "an operator's",
        "server.remove": "an operator's",
        "server.test": "an operator's",
    },
    "the CLI": {
        "sandbox.exec": "`exec` runs over the /sandbox-exec WebSocket, streamed",
        "sandbox.execToken": "a browser's WebSocket token: the CLI sends its key",
        "sandbox.writeFile": "`cp` streams files (sandbox.upload)",
        "sandbox.readFile": "`cp` streams files (sandbox.download)",
        "sandbox.contextCreate": "interpreter contexts are an agent's",
        "sandbox.contextRun": "interpreter contexts are an agent's",
        "sandbox.contextRemove": "interpreter contexts are an agent's",
        "project.create": "not offered yet",
        "environment.create": "not offered yet",
        "organization.create": "not offered yet",
        "audit.list": "read in the dashboard",
        "server.all": "servers are managed over the API (docs/remote-servers.md)",
        "server.one": "servers are managed over the API",
        "server.create": "servers are managed over the API",
        "server.update": "servers are managed over the API",
        "server.remove": "servers are managed over the API",
        "server.test": "servers are managed over the API",
    },
}

failures = []


def fail(where, message):
    failures.append(f"{where}: {message}")


def operation(name):
    """The procedure's (method, operation) from the document."""
    item = DOCUMENT["paths"].get(f"/api/{name}")
    if item is None:
        return None
    (method, op), = item.items()
    return method, op


def resolved(schema):
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def fields(schema):
    """The property names of an object schema (through references, allOf and flattening)."""
    schema = resolved(schema)
    names = set(schema.get("properties", {}))
    for part in schema.get("allOf", []) + schema.get("oneOf", []) + schema.get("anyOf", []):
        names |= fields(part)
    return names


def request_fields(name):
    """Its query parameters and its JSON body's fields."""
    _, op = operation(name)
    names = {p["name"] for p in op.get("parameters", [])}
    body = op.get("requestBody", {}).get("content", {}).get("application/json")
    return names | (fields(body["schema"]) if body else set())


def check_call(where, name, method, sent):
    """A call of `name` by `method` ("get"/"post"/None: either) sending `sent` (None:
    not known here)."""
    found = operation(name)
    if found is None:
        fail(where, f"{name} is not a procedure of the document")
        return
    served, _ = found
    if method is not None and method != served:
        fail(where, f"{name} is served by {served.upper()}, called by {method.upper()}")
    if sent:
        unknown = set(sent) - request_fields(name)
        if unknown:
            fail(where, f"{name} has no field {sorted(unknown)}")


def reached_all(client, reached):
    procedures = {p[len("/api/"):] for p in DOCUMENT["paths"] if p.startswith("/api/")}
    excluded = NOT_REACHED[client]
    for name in sorted(procedures - reached - set(excluded)):
        fail(client, f"{name} is neither reached nor excluded with a reason")
    for name in sorted(set(excluded) & reached):
        fail(client, f"{name} is reached but listed as not reached")
    for name in sorted(set(excluded) - procedures):
        fail(client, f"{name} is excluded but is no procedure")


# The Python SDK: `conn.call(name, body)` (POST), `conn.call(name, query=...)` (GET),
# `conn.stream(method, name, query=...)`; models' `from_json` reads of `data`.
def dict_keys(node, function):
    """The string keys of a dict literal, or of the dict a name was last given in
    `function` (with its `name["key"] = ...` assignments)."""
    if isinstance(node, ast.Dict):
        return {k.value for k in node.keys if isinstance(k, ast.Constant)}
    if isinstance(node, ast.Name) and function is not None:
        keys = None
        for inner in ast.walk(function):
            if isinstance(inner, ast.Assign):
                for target in inner.targets:
                    if isinstance(target, ast.Name) and target.id == node.id and isinstance(inner.value, ast.Dict):
                        keys = dict_keys(inner.value, None)
                    if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                            and target.value.id == node.id and isinstance(target.slice, ast.Constant)):
                        keys = (keys or set()) | {target.slice.value}
        return keys
    return None


sdk_reached = set()
sdk = ROOT / "sdk" / "python" / "src" / "sandboxd"
for path in sorted(sdk.glob("*.py")):
    tree = ast.parse(path.read_text())
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in functions:
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            args = node.args
            query = next((k.value for k in node.keywords if k.arg == "query"), None)
            if node.func.attr == "call" and args and isinstance(args[0], ast.Constant):
                name = args[0].value
                if not isinstance(name, str) or not PROCEDURE.match(name):
                    continue
                sdk_reached.add(name)
                if len(args) > 1:
                    check_call(where, name, "post", dict_keys(args[1], function))
                else:
                    check_call(where, name, "get", dict_keys(query, function) if query is not None else None)
            elif node.func.attr == "stream" and len(args) > 1 and isinstance(args[1], ast.Constant):
                name = args[1].value
                sdk_reached.add(name)
                method = args[0].value.lower() if isinstance(args[0], ast.Constant) else None
                check_call(where, name, method, dict_keys(query, function) if query is not None else None)
reached_all("the Python SDK", sdk_reached)

# The SDK's models: the schema each reads.
MODELS = {
    "ActivityEntry": "ActivityEntryView",
    "EgressEntry": "EgressEntryView",
    "EgressRequest": "EgressRequestView",
    "SandboxInfo": "SandboxView",
    "SnapshotInfo": "SnapshotView",
    "VolumeInfo": "VolumeView",
    "TemplateInfo": "BuiltTemplateView",
    "VolumeMount": "VolumeMount",
    "Change": "ChangeEntry",
    "Changes": "ChangesResult",
    "SandboxStats": "SandboxStats",
    "MetricReading": "MetricReading",
    "ExposedPort": "ExposedPortView",
    "ProcessInfo": "ProcessView",
}
models = ast.parse((sdk / "models.py").read_text())
seen_models = set()
for cls in (n for n in models.body if isinstance(n, ast.ClassDef)):
    reader = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "from_json"), None)
    if reader is None:
        continue
    if cls.name not in MODELS:
        fail("sdk/python/src/sandboxd/models.py", f"{cls.name} reads JSON but names no schema in MODELS")
        continue
    seen_models.add(cls.name)
    known = fields({"$ref": f"#/components/schemas/{MODELS[cls.name]}"})
    for node in ast.walk(reader):
        key = None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "data" and node.args
                and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "data"
                and isinstance(node.slice, ast.Constant)):
            key = node.slice.value
        if key is not None and key not in known:
            fail(f"models.py:{node.lineno}", f"{cls.name} reads {key!r}, which {MODELS[cls.name]} has not")
for name in sorted(set(MODELS) - seen_models):
    fail("models.py", f"MODELS names {name}, which reads no JSON")


# The dashboard: `api.get(name, {...})` and `api.post(name, {...})`; any other string
# naming a procedure (`freeze("sandbox.pause")`) must name one.
def object_keys(text):
    """The top-level keys of a JS object literal's text (`{ a: 1, b }`)."""
    depth, part, parts = 0, "", []
    for ch in text.strip()[1:-1]:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += ch
    parts.append(part)
    keys = set()
    for part in (p.strip() for p in parts if p.strip()):
        if part.startswith("..."):
            return None  # spread: not known here
        match = re.match(r"^([A-Za-z_$][\w$]*)\s*(:|$)", part)
        if match:
            keys.add(match.group(1))
    return keys


def balanced(text, start):
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


dashboard_reached = set()
dashboard = ROOT / "crates" / "sandboxd-server" / "dashboard"
for path in sorted(dashboard.glob("*.js")):
    text = path.read_text()
    for match in re.finditer(r"\"([A-Za-z]+\.[A-Za-z]+)\"", text):
        if PROCEDURE.match(match.group(1)):
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
            dashboard_reached.add(match.group(1))
            check_call(where, match.group(1), None, None)
    for match in re.finditer(r"api\.(get|post)\(\"([\w.]+)\",\s*(\{)", text):
        where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        literal = balanced(text, match.start(3))
        check_call(where, match.group(2), match.group(1), object_keys(literal) if literal else None)
    for match in re.finditer(r"api\.(get|post)\(\"([\w.]+)\"\)", text):
        where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        check_call(where, match.group(2), match.group(1), None)
    # Links and uploads name the path itself.
    for match in re.finditer(r"/api/([\w.]+)", text):
        if PROCEDURE.match(match.group(1)):
            dashboard_reached.add(match.group(1))
            check_call(str(path.relative_to(ROOT)), match.group(1), None, None)
reached_all("the dashboard", dashboard_reached)


# The CLI: `client.get(name, ...)`, `client.post(name, &json!({...}))`, and every string
# naming a procedure (`freeze(&common, "sandbox.pause", ...)`, typed calls by definition).
def json_keys(text):
    keys = set()
    depth = 0
    for match in re.finditer(r"[{}]|\"([A-Za-z_]\w*)\"\s*:", text):
        if match.group(0) == "{":
            depth += 1
        elif match.group(0) == "}":
            depth -= 1
        elif depth == 1:
            keys.add(match.group(1))
    return keys


def rust_definitions():
    """Definition type name -> procedure name, from the core's `define!` blocks."""
    names = {}
    for path in (ROOT / "crates" / "sandboxd-core" / "src" / "api" / "procedures").glob("*.rs"):
        for match in re.finditer(r"\n    (\w+) \{\n        name: \"([\w.]+)\"", path.read_text()):
            names[match.group(1)] = match.group(2)
    return names


DEFINED = rust_definitions()
cli_reached = set()
cli = ROOT / "crates" / "sandboxd" / "src"
for path in sorted(cli.rglob("*.rs")):
    text = path.read_text()
    for match in re.finditer(r"\"([A-Za-z]+\.[A-Za-z]+)\"", text):
        if PROCEDURE.match(match.group(1)):
            cli_reached.add(match.group(1))
            check_call(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}", match.group(1), None, None)
    for match in re.finditer(r"procedures::(\w+)>", text):
        if match.group(1) in DEFINED:
            cli_reached.add(DEFINED[match.group(1)])
    for match in re.finditer(r"\.(get|post)\(\s*\"([\w.]+)\",\s*&json!\((\{)", text):
        literal = balanced(text, match.start(3))
        where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        check_call(where, match.group(2), match.group(1), json_keys(literal) if literal else None)
    # A body built first: `let mut body = json!({...});` and `body["key"] = ...;`.
    for match in re.finditer(r"\.post\(\s*\"([\w.]+)\",\s*&(\w+)\)", text):
        variable = match.group(2)
        made = list(re.finditer(r"let (?:mut )?%s\b[^=]*=\s*(json!\((\{))?" % variable, text[:match.start()]))
        if not made or made[-1].group(1) is None or "fn " in text[made[-1].start():match.start()]:
            continue  # made some other way, or elsewhere
        literal = balanced(text, made[-1].start(2))
        between = text[made[-1].start():match.start()]
        keys = (json_keys(literal) if literal else set()) | set(
            re.findall(r"\b%s\[\"(\w+)\"\]\s*=" % variable, between))
        where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        check_call(where, match.group(1), "post", keys)
    for match in re.finditer(r"\.get\(\s*\"([\w.]+)\",\s*&\[([^\]]*)\]", text):
        where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        check_call(where, match.group(1), "get", set(re.findall(r"\(\s*\"(\w+)\"", match.group(2))))
reached_all("the CLI", cli_reached)

# The fuzz pass's tables and fixtures name procedures (or, to match several, the start
# of their names: "sandbox.process").
prefixes = {p[len("/api/"):len("/api/") + n] for p in DOCUMENT["paths"] for n in range(len(p))}
for path in sorted((ROOT / "tests" / "fuzz").glob("*.py")):
    text = path.read_text()
    for match in re.finditer(r"\"([A-Za-z]+\.[A-Za-z]+)\"", text):
        if PROCEDURE.match(match.group(1)) and not (
            match.group(1) in prefixes and operation(match.group(1)) is None
            and re.search(r"startswith\(\s*$", text[:match.start()].rsplit("\n", 1)[-1])
        ):
            check_call(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}", match.group(1), None, None)

if failures:
    print("clients and the API document disagree:", file=sys.stderr)
    for failure in failures:
        print(f"  {failure}", file=sys.stderr)
    sys.exit(1)
print(f"clients agree with docs/openapi.json: the SDK reaches {len(sdk_reached)} procedures, "
      f"the dashboard {len(dashboard_reached)}, the CLI {len(cli_reached)}")
