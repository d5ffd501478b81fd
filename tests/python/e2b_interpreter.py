"""E2B's code interpreter SDK (`e2b-code-interpreter` on PyPI) against sandboxd, set up
as its users set it up (E2B_API_URL, E2B_SANDBOX_URL, a sandboxd key): `run_code`
with results, output, errors, environment variables and execution counts; state kept
between runs; a run whose client gave up interrupted; contexts made in a directory,
listed, restarted and removed; JavaScript and bash; a language that is not served
refused; then, in E2B's default template (`code-interpreter-v1`, the interpreter's
image), results in every format: a figure as a picture and as chart data, a data frame
as data, display() calls as they happen.

    python3 tests/python/e2b_interpreter.py URL KEY
"""

import os
import sys
import time

url, key = sys.argv[1:3]
os.environ["E2B_API_URL"] = f"{url}/e2b"
os.environ["E2B_SANDBOX_URL"] = f"{url}/e2b/envd"
os.environ["E2B_API_KEY"] = key

from e2b import SandboxException, TimeoutException  # noqa: E402
from e2b_code_interpreter import Sandbox  # noqa: E402

sbx = Sandbox.create("base", timeout=120, allow_internet_access=False)
try:
    first = sbx.run_code("x = 1; x")
    assert first.text == "1", first
    assert first.execution_count == 1, first.execution_count
    # State is kept; output is told apart from the result.
    seen = []
    second = sbx.run_code("print('hi'); y = x + 1; y", on_stdout=lambda m: seen.append(m.line))
    assert second.text == "2" and second.logs.stdout == ["hi\n"], second
    assert seen == ["hi\n"], seen
    assert second.execution_count == 2
    # Output is told as it is printed, not when the run ends.
    heard = []
    started = time.monotonic()
    streamed = sbx.run_code(
        "import time\nprint('early')\ntime.sleep(2)\nprint('late')",
        on_stdout=lambda m: heard.append((m.line, time.monotonic() - started)),
    )
    ended = time.monotonic() - started
    assert [line for line, _ in heard] == ["early\n", "late\n"], heard
    assert ended - heard[0][1] > 1.5, f"'early' came {heard[0][1]:.2f} s in, the run ended at {ended:.2f} s"
    # Errors, as E2B's interpreter tells them.
    failed = sbx.run_code("1 / 0")
    assert failed.error is not None and failed.error.name == "ZeroDivisionError", failed.error
    assert "ZeroDivisionError" in failed.error.traceback
    # Variables for one run only.
    env = sbx.run_code("import os; os.environ.get('GREETING')", envs={"GREETING": "hello"})
    assert env.text == "hello", env.text
    assert sbx.run_code("os.environ.get('GREETING')").text is None

    # A client that gives up takes its run with it: the next run does not wait behind it.
    try:
        sbx.run_code("import time; time.sleep(300)", timeout=2)
        raise AssertionError("the client's timeout ends the call")
    except TimeoutException:
        pass
    started = time.monotonic()
    assert sbx.run_code("y", timeout=30).text == "2"
    assert time.monotonic() - started < 15, time.monotonic() - started

    # Contexts: their own state and directory, listed, restarted, removed.
    ctx = sbx.create_code_context(cwd="/tmp")
    assert ctx.language == "python" and ctx.cwd == "/tmp", ctx
    assert sbx.run_code("import os; os.getcwd()", context=ctx).text == "/tmp"
    unknown = sbx.run_code("x", context=ctx)
    assert unknown.error is not None and unknown.error.name == "NameError", unknown.error
    sbx.run_code("z = 5", context=ctx)
    assert ctx.id in [c.id for c in sbx.list_code_contexts()]
    sbx.restart_code_context(ctx)
    gone = sbx.run_code("z", context=ctx)
    assert gone.error is not None and gone.error.value == "name 'z' is not defined", gone.error
    assert sbx.run_code("import os; os.getcwd()", context=ctx).text == "/tmp"
    sbx.remove_code_context(ctx)
    assert ctx.id not in [c.id for c in sbx.list_code_contexts()]
    # The default context is untouched by all that.
    assert sbx.run_code("y").text == "2"

    # JavaScript and bash, each in its own default context, with variables per run.
    js = sbx.run_code("const n = 40 + 2; console.log(n)", language="js")
    assert js.logs.stdout == ["42\n"], js
    assert sbx.run_code("n", language="javascript").text == "42"
    assert sbx.run_code("process.env.FOO", language="js", envs={"FOO": "bar"}).text == "bar"
    bash = sbx.run_code("echo ${FOO:-unset} $PWD", language="bash")
    assert bash.logs.stdout == ["unset /home/user\n"], bash
    languages = {c.language for c in sbx.list_code_contexts()}
    assert {"python", "javascript", "bash"} <= languages, languages
    try:
        sbx.run_code('print("x")', language="r")
        raise AssertionError("a language not served is refused")
    except SandboxException as refused:
        assert "javascript and bash are served" in str(refused), refused
finally:
    sbx.kill()

rich = Sandbox.create(timeout=120, allow_internet_access=False)
try:
    shown = []
    figure = rich.run_code(
        "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 5], label='n')\n"
        "plt.title('Counts')\nplt.show()\n'done'",
        on_result=shown.append,
    )
    assert len(figure.results) == 2 and len(shown) == 2, figure.results
    assert figure.results[0].png and figure.results[0].text.startswith("<Figure"), figure.results[0]
    chart = figure.results[0].chart
    assert chart.type == "bar" and chart.title == "Counts", chart
    assert [(bar.label, bar.value) for bar in chart.elements] == [("a", 3), ("b", 5)]
    assert figure.text == "done" and figure.results[1].is_main_result
    frame = rich.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    assert frame.results[0].data == {"a": [1, 2]} and "<table" in frame.results[0].html
    latex = rich.run_code("from IPython.display import display\ndisplay({'text/latex': 'x'}, raw=True)")
    assert latex.results[0].formats() == ["latex"], latex.results[0].formats()
    assert "".join(rich.run_code("!pwd").logs.stdout).strip() == "/home/user"
finally:
    rich.kill()
print("e2b code interpreter: ok")
