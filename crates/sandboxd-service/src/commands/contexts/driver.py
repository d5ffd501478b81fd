# The driver of a Python interpreter context: one process whose globals persist between
# runs. Requests are JSON lines on stdin: {"id": N, "code": "...", "env": {...}}, the
# environment variables set for that run only. Everything it writes to its stdout is a
# record: an ASCII record separator, one line of JSON, a newline. During a run, what
# the code prints comes as it is printed, each line (or piece of at most 4096
# characters) a record {"id": N, "stream": "stdout" | "stderr", "text": "..."}; then
# the run's reply {"id": N, "result", "error", "count"}, count being the run's number
# in the context. The value of a final expression is the result, as in a notebook.
import ast, io, json, os, sys, traceback

_out, _globals, _count = sys.stdout, {"__name__": "__main__"}, 0
_PIECE, _MAX_TEXT = 4096, 1024 * 1024

def _record(value):
    _out.write("\x1e" + json.dumps(value) + "\n")
    _out.flush()

class _Printed(io.TextIOBase):
    """A run's stdout or stderr: written as records, a line (or a piece) at a time."""

    def __init__(self, run, stream):
        self._run, self._stream, self._pending = run, stream, ""

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        self._pending += text
        if "\n" in text or len(self._pending) >= _PIECE:
            self.flush()
        return len(text)

    def flush(self):
        while self._pending:
            piece, self._pending = self._pending[:_PIECE], self._pending[_PIECE:]
            _record({"id": self._run, "stream": self._stream, "text": piece})

def _cut(text):
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "…"

def _with_env(env, run):
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        return run()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

def _run(run, code):
    out, err, result, error = _Printed(run, "stdout"), _Printed(run, "stderr"), None, None
    sys.stdout, sys.stderr = out, err
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<cell>", "exec"), _globals)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), _globals)
            if value is not None:
                result = _cut(repr(value))
    except BaseException as exc:  # KeyboardInterrupt included: a timeout interrupts the run
        error = {"name": type(exc).__name__, "value": _cut(str(exc)),
                 "traceback": _cut(traceback.format_exc())}
    finally:
        sys.stdout, sys.stderr = _out, sys.__stderr__
        for printed in (out, err):
            try:
                printed.flush()
            except BaseException:  # an interrupt while the last piece went out
                pass
    return result, error

while True:
    try:
        line = sys.stdin.readline()
        if not line:
            break
        request = json.loads(line)
    except KeyboardInterrupt:  # an interrupt that came after its run had ended
        continue
    except ValueError:
        continue
    _count += 1
    run, env = request.get("id"), request.get("env") or {}
    try:
        result, error = _with_env(env, lambda: _run(run, request.get("code", "")))
    except Exception as exc:  # an environment the OS refuses
        result, error = None, {"name": type(exc).__name__, "value": str(exc), "traceback": ""}
    while True:  # an interrupt that came as the reply went out: it goes out again whole
        try:
            _record({"id": run, "result": result, "error": error, "count": _count})
            break
        except KeyboardInterrupt:
            continue
