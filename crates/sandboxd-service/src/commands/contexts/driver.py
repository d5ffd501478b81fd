# The driver of a Python interpreter context: one process whose globals persist between
# runs. Requests are JSON lines on stdin: {"id": N, "code": "...", "env": {...}}, the
# environment variables set for that run only. Everything it writes to its stdout is a
# record: an ASCII record separator, one line of JSON, a newline. During a run, what
# the code prints comes as it is printed, each line (or piece of at most 4096
# characters) a record {"id": N, "stream": "stdout" | "stderr", "text": "..."}; then
# the run's reply {"id": N, "result", "error", "count"}, count being the run's number
# in the context. The value of a final expression is the result, as in a notebook.
# SIGINT interrupts a run's code (a KeyboardInterrupt in it), and nothing else.
import ast, io, json, os, signal, sys, traceback

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

#: True while a run's code is parsed, run and its value shown.
_armed = False

def _interrupt(signum, frame):
    """Raises KeyboardInterrupt in a run: while it is armed, or in the run's code (its
    frames, or what they called: code that caught an interrupt may be interrupted
    again). Raising disarms it. Between runs, or while the driver reads a request or
    reports a run, an interrupt is let go: raised there, it would lose the next request
    or end the interpreter (a second interrupt, from a client and from the server, often
    comes while the first is being reported)."""
    global _armed
    in_cell = False
    while frame is not None and not in_cell:
        in_cell, frame = frame.f_code.co_filename == "<cell>", frame.f_back
    if _armed or in_cell:
        _armed = False
        raise KeyboardInterrupt

signal.signal(signal.SIGINT, _interrupt)

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
    global _armed
    out, err, result, error = _Printed(run, "stdout"), _Printed(run, "stderr"), None, None
    sys.stdout, sys.stderr = out, err
    try:
        try:
            _armed = True
            tree = ast.parse(code, "<cell>", "exec")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, "<cell>", "exec"), _globals)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), _globals)
                if value is not None:
                    result = _cut(repr(value))
        finally:
            _armed = False
    except BaseException as exc:  # KeyboardInterrupt included: a timeout interrupts the run
        error = _error_of(exc)
    finally:
        sys.stdout, sys.stderr = _out, sys.__stderr__
        for printed in (out, err):
            printed.flush()
    return result, error

def _error_of(exc):
    try:
        shown = traceback.TracebackException.from_exception(exc)
        # The interrupt's handler is no frame of the run's.
        shown.stack = traceback.StackSummary.from_list(
            [frame for frame in shown.stack if frame.name != _interrupt.__name__])
        return {"name": type(exc).__name__, "value": _cut(str(exc)),
                "traceback": _cut("".join(shown.format()))}
    except BaseException:  # its text is the run's code too: it may raise, or be interrupted
        return {"name": type(exc).__name__, "value": "", "traceback": ""}

while True:
    line = sys.stdin.readline()
    if not line:
        break
    try:
        request = json.loads(line)
    except ValueError:
        continue
    _count += 1
    run, env = request.get("id"), request.get("env") or {}
    try:
        result, error = _with_env(env, lambda: _run(run, request.get("code", "")))
    except Exception as exc:  # an environment the OS refuses
        result, error = None, {"name": type(exc).__name__, "value": str(exc), "traceback": ""}
    _record({"id": run, "result": result, "error": error, "count": _count})
