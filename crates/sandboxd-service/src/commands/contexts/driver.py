# The driver of an interpreter context: one process whose state persists between runs,
# Python (through IPython when the image has it, as a notebook runs code: notebook.py,
# given before this file with charts.py; plain Python otherwise) or, given the argument `bash`, a bash shell. Requests are JSON lines on
# stdin: {"id": N, "code": "...", "env": {...}}, the environment variables set for that
# run only. Everything it writes to its stdout is a record: an ASCII record separator,
# one line of JSON, a newline. During a run, what the code prints comes as it is
# printed, each line (or piece of at most 4096 characters) a record {"id": N,
# "stream": "stdout" | "stderr", "text": "..."}, and what it displays (a figure shown,
# display()) a record {"id": N, "display": {MIME type: value}}; then the run's reply
# {"id": N, "result", "bundle", "error", "count"}, count being the run's number in the
# context, result the text of a final expression's value and bundle that value in each
# format it has. SIGINT interrupts a run's code (a KeyboardInterrupt in it), and
# nothing else. What programs the code starts write to the process's own stdout and
# stderr is caught too, and comes as the run's output.
import ast, base64, io, json, math, os, re, secrets, signal, subprocess, sys, tempfile
import threading, traceback

_PIECE, _MAX_TEXT, _MAX_FORMAT = 4096, 1024 * 1024, 4 * 1024 * 1024
_lock, _run_id, _count = threading.Lock(), None, 0
_out = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="replace")


def _record(value):
    try:
        line = json.dumps(value, default=_plain, allow_nan=False)
    except ValueError:  # a NaN that came of a number of numpy's
        line = json.dumps(_finite(json.loads(json.dumps(value, default=_plain))), allow_nan=False)
    line = "\x1e" + line + "\n"
    with _lock:
        _out.write(line)
        _out.flush()


def _plain(value):
    """What json cannot write as it is: numpy's numbers and arrays, dates, anything
    else as its text."""
    for method in ("item", "tolist", "isoformat"):
        if hasattr(value, method):
            try:
                return getattr(value, method)()
            except Exception:
                pass
    return str(value)


def _finite(value):
    """NaN and infinities as null (JSON has none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _cut(text):
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "…"


class _Printed(io.TextIOBase):
    """A run's stdout or stderr: written as records, a line (or a piece) at a time."""

    def __init__(self, stream):
        self._stream, self._pending = stream, ""

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
            cut = self._pending.find("\n") + 1 or min(len(self._pending), _PIECE)
            piece, self._pending = self._pending[:min(cut, _PIECE)], self._pending[min(cut, _PIECE):]
            if _run_id is not None:
                _record({"id": _run_id, "stream": self._stream, "text": piece})


class _Caught:
    """What is written to file descriptor `fd` (programs the code starts, C libraries),
    read by a thread of its own and passed to a run's stream. `settle` returns once
    what was written before it is passed on."""

    _MARK = b"\x00\x1fsettled\x1f\x00"

    def __init__(self, fd, printed):
        read, write = os.pipe()
        os.dup2(write, fd)
        os.close(write)
        self._fd, self._read, self._printed = fd, read, printed
        self._settled = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        pending, decoder = b"", __import__("codecs").getincrementaldecoder("utf-8")("replace")
        while True:
            data = os.read(self._read, 65536)
            if not data:
                return
            pending += data
            while self._MARK in pending:
                before, pending = pending.split(self._MARK, 1)
                self._pass(decoder.decode(before))
                self._printed.flush()
                self._settled.set()
            keep = len(self._MARK) - 1
            if len(pending) > keep:
                self._pass(decoder.decode(pending[:-keep]))
                pending = pending[-keep:]

    def _pass(self, text):
        if text:
            self._printed.write(text)

    def settle(self):
        self._settled.clear()
        os.write(self._fd, self._MARK)
        self._settled.wait(2)


_stdout, _stderr = _Printed("stdout"), _Printed("stderr")


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


def _error_of(exc):
    try:
        shown = traceback.TracebackException.from_exception(exc)
        # The driver's and IPython's own frames are no frames of the run's.
        shown.stack = traceback.StackSummary.from_list(
            [f for f in shown.stack if f.name != _interrupt.__name__ and "/IPython/" not in f.filename
             and f.filename != "<string>"])
        return {"name": type(exc).__name__, "value": _cut(str(exc)),
                "traceback": _cut("".join(shown.format()))}
    except BaseException:  # its text is the run's code too: it may raise, or be interrupted
        return {"name": type(exc).__name__, "value": "", "traceback": ""}


#: True while a run's code is parsed, run and its value shown.
_armed = False


def _interrupt(signum, frame):
    """Raises KeyboardInterrupt in a run: while it is armed, or in the run's code (its
    frames, or what they called: code that caught an interrupt may be interrupted
    again). Raising disarms it. Between runs, or while the driver reads a request or
    reports a run, an interrupt is let go: raised there, it would lose the next request
    or end the interpreter."""
    global _armed
    in_cell = False
    while frame is not None and not in_cell:
        name = frame.f_code.co_filename
        in_cell, frame = name == "<cell>" or name.startswith("<ipython-input-"), frame.f_back
    if _armed or in_cell:
        _armed = False
        raise KeyboardInterrupt


class _Plain:
    """Plain Python: the value of a final expression is the result, its repr() its
    only format."""

    def __init__(self):
        self._globals = {"__name__": "__main__"}

    def run(self, code):
        global _armed
        result = None
        try:
            _armed = True
            tree = ast.parse(code, "<cell>", "exec")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, "<cell>", "exec"), self._globals)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), self._globals)
                if value is not None:
                    result = {"text/plain": _cut(repr(value))}
        finally:
            _armed = False
        return result, None


def _python(interpreter, run, code):
    global _run_id
    _run_id = run
    sys.stdout, sys.stderr = _stdout, _stderr
    result, error = None, None
    try:
        result, error = interpreter.run(code)
    except BaseException as exc:  # KeyboardInterrupt included: a timeout interrupts the run
        error = _error_of(exc)
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        for caught in _caught:
            caught.settle()
        _stdout.flush()
        _stderr.flush()
        _run_id = None
    return result, error


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _Bash:
    """A bash shell kept between runs (its variables, functions and directory): each
    run's code is sourced in it, its output read as it comes."""

    def __init__(self):
        read, write = os.pipe()
        self._dir = tempfile.mkdtemp(prefix="sandboxd-bash-")
        self._shell = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "/dev/fd/%d" % read], pass_fds=(read,),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(read)
        self._script = os.fdopen(write, "w")
        # An interrupt ends the command running, not the shell.
        self._say("trap : INT\n")
        self._ends = {}
        for pipe, printed in ((self._shell.stdout, _stdout), (self._shell.stderr, _stderr)):
            threading.Thread(target=self._pump, args=(pipe, printed), daemon=True).start()

    def _say(self, text):
        self._script.write(text)
        self._script.flush()

    def _pump(self, pipe, printed):
        while True:
            line = pipe.readline(_PIECE)
            if not line:
                for done in list(self._ends.values()):
                    done.set()
                return
            text = line.decode("utf-8", "replace")
            mark = text.startswith("\x1e") and text[1:].split()
            if mark and mark[0] in self._ends:
                if len(mark) > 1:
                    self._status = int(mark[1])
                printed.flush()
                self._ends[mark[0]].set()
                continue
            printed.write(text)

    def run(self, code, env):
        token = secrets.token_hex(8)
        path = os.path.join(self._dir, token)
        with open(path, "w") as file:
            file.write(code + "\n")
        names = [name for name in env if _NAME.match(name)]
        before = "".join(
            'if [ -n "${%s+x}" ]; then __had_%s=1; __was_%s=$%s; else __had_%s=; fi; export %s=%s\n'
            % (n, n, n, n, n, n, "'" + env[n].replace("'", "'\\''") + "'") for n in names)
        after = "".join('if [ -n "$__had_%s" ]; then %s=$__was_%s; else unset %s; fi\n' % (n, n, n, n)
                        for n in names)
        out, err = threading.Event(), threading.Event()
        self._ends = {token: out, token + "e": err}
        self._status = 0
        self._say(before + '. "%s"\n__status=$?\n%s' % (path, after)
                  + "printf '\\036%s %%s\\n' \"$__status\"\nprintf '\\036%se\\n' >&2\n" % (token, token))
        out.wait()
        err.wait()
        os.unlink(path)
        if self._shell.poll() is not None:
            return None, {"name": "Exit", "value": "the shell has exited", "traceback": ""}
        if self._status:
            return None, {"name": "ExitCode", "value": "exit status %d" % self._status, "traceback": ""}
        return None, None


def _serve(run_one):
    global _count
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
        code = request.get("code", "")
        try:
            result, error = run_one(run, code, env)
        except Exception as exc:  # an environment the OS refuses
            result, error = None, {"name": type(exc).__name__, "value": str(exc), "traceback": ""}
        text = result.get("text/plain") if result else None
        _record({"id": run, "result": text, "bundle": result or None, "error": error, "count": _count})


if sys.argv[1:] == ["bash"]:
    # Not ignored: the shell and what it runs would inherit that.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    _bash = _Bash()

    def _run_bash(run, code, env):
        global _run_id
        _run_id = run
        try:
            return _bash.run(code, env)
        finally:
            _run_id = None

    _serve(_run_bash)
else:
    _caught = [_Caught(1, _Printed("stdout")), _Caught(2, _Printed("stderr"))]
    _os_system = os.system

    def _system_in_order(command):
        """os.system, its output in order with what the run prints."""
        _stdout.flush()
        _stderr.flush()
        status = _os_system(command)
        for caught in _caught:
            caught.settle()
        return status

    os.system = _system_in_order
    signal.signal(signal.SIGINT, _interrupt)
    _interpreter = _shell() or _Plain()
    _serve(lambda run, code, env: _with_env(
        {k: str(v) for k, v in env.items()}, lambda: _python(_interpreter, run, code)))
