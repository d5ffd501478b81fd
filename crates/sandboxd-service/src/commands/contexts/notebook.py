# Python as a notebook runs it, for the context driver (driver.py, which this file is
# given before): IPython's shell with its syntax (`!cmd`, `%magic`), display() and
# every format a value has, a matplotlib figure also as chart data (charts.py), a data
# frame also as its columns, a Pillow image shown or saved as a picture. Each displayed
# value becomes a record of the run; formats too large are left out.

_CHART, _DATA = "application/vnd.sandboxd.chart+json", "application/vnd.sandboxd.data+json"


def _bundle(data):
    """A displayed value's formats, each JSON-able and at most _MAX_FORMAT long."""
    kept = {}
    for mime, value in (data or {}).items():
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode()
        try:
            size = len(value) if isinstance(value, str) else len(json.dumps(_finite(value), default=_plain))
            if size <= _MAX_FORMAT:
                kept[str(mime)] = value if isinstance(value, str) else _finite(value)
        except Exception:
            pass
    return kept


class _IPython:
    """IPython's shell: its syntax (`!cmd`, `%magic`), display() and every format a
    value has (images, HTML, figures as pictures and as chart data, data frames as
    data)."""

    def __init__(self, shell):
        self.shell, self._main = shell, None
        shell.display_pub.publish = self._publish
        hook = shell.displayhook
        hook.write_output_prompt = lambda: None
        hook.finish_displayhook = lambda: None
        hook.write_format_data = self._main_result
        shell.showtraceback = lambda *a, **k: None
        shell.showsyntaxerror = lambda *a, **k: None
        shell.showindentationerror = lambda *a, **k: None
        shell.system = self._system
        _formatters(shell)
        _images(shell)

    def _publish(self, data, metadata=None, source=None, *, transient=None, update=False, **_):
        _stdout.flush()
        _stderr.flush()
        bundle = _bundle(data)
        if bundle and _run_id is not None:
            _record({"id": _run_id, "display": bundle})

    def _system(self, command):
        """`!command`: run by bash, its output the run's, in order with the rest."""
        _stdout.flush()
        _stderr.flush()
        shell = "/bin/bash" if os.path.exists("/bin/bash") else None
        status = subprocess.call(command, shell=True, executable=shell, stdin=subprocess.DEVNULL)
        for caught in _caught:
            caught.settle()
        self.shell.user_ns["_exit_code"] = status

    def _main_result(self, format_dict, md_dict=None):
        self._main = _bundle(format_dict)

    def run(self, code):
        global _armed
        self._main = None
        try:
            _armed = True
            ran = self.shell.run_cell(code, store_history=True)
        finally:
            _armed = False
        error = ran.error_before_exec or ran.error_in_exec
        if error is not None:
            raise error
        return self._main, None


def _formatters(shell):
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    class Chart(BaseFormatter):
        format_type = Unicode(_CHART)
        print_method = ObjectName("_repr_chart_")
        _return_type = (dict,)

        def __call__(self, obj):
            if "matplotlib" in sys.modules:
                from matplotlib.figure import Figure
                if isinstance(obj, Figure):
                    try:
                        return chart_of(obj)
                    except Exception:
                        return None
            return super().__call__(obj)

    class Data(BaseFormatter):
        format_type = Unicode(_DATA)
        print_method = ObjectName("_repr_data_")
        _return_type = (dict,)

        def __call__(self, obj):
            pandas = sys.modules.get("pandas")
            if pandas is not None and isinstance(obj, pandas.DataFrame):
                return {str(k): [_plain(v) if hasattr(v, "isoformat") else v for v in values]
                        for k, values in obj.to_dict(orient="list").items()}
            return super().__call__(obj)

    formatters = shell.display_formatter.formatters

    class Json(type(formatters["application/json"])):
        def __call__(self, obj):
            """Lists and dicts as JSON too, when they are made of what JSON holds."""
            if isinstance(obj, (list, dict)):
                try:
                    return json.loads(json.dumps(_finite(obj), allow_nan=False))
                except (TypeError, ValueError):
                    pass
            return super().__call__(obj)

    formatters["application/json"] = Json(parent=shell.display_formatter)
    formatters[_CHART] = Chart(parent=shell.display_formatter)
    formatters[_DATA] = Data(parent=shell.display_formatter)
    active = shell.display_formatter.active_types
    shell.display_formatter.active_types = list(active) + [_CHART, _DATA]


def _images(shell):
    """A picture shown (`Image.show()`) or saved to a file is displayed, as a notebook
    shows it; nothing tries to open a window."""
    try:
        from PIL import Image, ImageShow
    except Exception:
        return
    from IPython.display import display

    class Shown(ImageShow.Viewer):
        def show(self, image, **options):
            display(image)
            return 1

    ImageShow.register(Shown(), 0)
    save = Image.Image.save

    def saved(image, fp, format=None, **params):
        if isinstance(fp, (str, os.PathLike)):
            display(image)
        return save(image, fp, format, **params)

    Image.Image.save = saved


def _shell():
    """IPython's shell, or None when the image has no IPython."""
    try:
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config
    except Exception:
        return None
    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    config.PlainTextFormatter.max_seq_length = 0
    import importlib.util
    if importlib.util.find_spec("matplotlib_inline") is not None:
        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    try:
        return _IPython(InteractiveShell.instance(config=config))
    except Exception:
        return None
