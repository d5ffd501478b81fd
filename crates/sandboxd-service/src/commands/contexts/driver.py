# The driver of a Python interpreter context: one process whose globals persist between
# runs. Requests are JSON lines on stdin: {"id": N, "code": "...", "env": {...}}, the
# environment variables set for that run only. Each reply is one line on stdout, after
# an ASCII record separator: {"id": N, "stdout", "stderr", "result", "error", "count"},
# count being the run's number in the context. The value of a final expression is the
# result, as in a notebook.
import ast, io, json, os, sys, traceback

_out, _globals, _count = sys.stdout, {"__name__": "__main__"}, 0

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

def _run(code):
    out, err, result, error = io.StringIO(), io.StringIO(), None, None
    sys.stdout, sys.stderr = out, err
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<cell>", "exec"), _globals)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), _globals)
            if value is not None:
                result = repr(value)
    except BaseException as exc:  # KeyboardInterrupt included: a timeout interrupts the run
        error = {"name": type(exc).__name__, "value": str(exc), "traceback": traceback.format_exc()}
    finally:
        sys.stdout, sys.stderr = _out, sys.__stderr__
    return out.getvalue(), err.getvalue(), result, error

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
    env = request.get("env") or {}
    try:
        stdout, stderr, result, error = _with_env(env, lambda: _run(request.get("code", "")))
    except Exception as exc:  # an environment the OS refuses
        stdout, stderr, result, error = "", "", None, {"name": type(exc).__name__, "value": str(exc), "traceback": ""}
    reply = {"id": request.get("id"), "stdout": stdout, "stderr": stderr, "result": result,
             "error": error, "count": _count}
    _out.write("\x1e" + json.dumps(reply) + "\n")
    _out.flush()
