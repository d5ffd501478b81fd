# What a matplotlib figure shows, as data: its kind (line, scatter, bar, pie, box and
# whisker; several axes make a "superchart"; anything else "unknown"), its title, axis
# labels, units, scales and ticks, and its elements. Read from the figure's artists, so
# that a client can draw the chart again or reason about it without the picture.
import re as _re

_UNIT = _re.compile(r"\(([^()]*)\)\s*$|\[([^\[\]]*)\]\s*$")


def _unit(label):
    found = _UNIT.search(label or "")
    return (found.group(1) or found.group(2)).strip() or None if found else None


def _text(text):
    return text if text else None


def _scale(axis):
    import matplotlib.category, matplotlib.dates
    converter = getattr(axis, "get_converter", lambda: axis.converter)()
    if isinstance(converter, matplotlib.dates.DateConverter) or isinstance(
            converter, getattr(matplotlib.dates, "_SwitchableDateConverter", ())):
        return "datetime"
    if isinstance(converter, matplotlib.category.StrCategoryConverter):
        return "categorical"
    return axis.get_scale()


def _value_of(axis, scale):
    """Turns the axis's numbers into what they stand for: dates as ISO text, categories
    as their names, anything else as a float."""
    if scale == "datetime":
        import matplotlib.dates
        return lambda v: matplotlib.dates.num2date(float(v)).isoformat()
    if scale == "categorical":
        names = {v: k for k, v in (getattr(axis.units, "_mapping", None) or {}).items()}
        return lambda v: names.get(int(round(float(v))), str(v))
    return float


def _axes_base(ax, kind):
    xlabel, ylabel = ax.get_xlabel(), ax.get_ylabel()
    return {"type": kind, "title": _text(ax.get_title()), "x_label": _text(xlabel),
            "y_label": _text(ylabel), "x_unit": _unit(xlabel), "y_unit": _unit(ylabel),
            "elements": []}


def _ticks(chart, ax):
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        scale = _scale(axis)
        value = _value_of(axis, scale)
        low, high = sorted(axis.get_view_interval())
        # The locator places ticks past the ends too; those are not drawn.
        shown = [(t, l.get_text()) for t, l in zip(axis.get_ticklocs(), axis.get_ticklabels())
                 if low - 1e-9 * abs(high - low) <= t <= high + 1e-9 * abs(high - low)]
        chart[name + "_scale"] = scale
        chart[name + "_ticks"] = [value(t) if scale == "datetime" else float(t) for t, _ in shown]
        chart[name + "_tick_labels"] = [label for _, label in shown]


def _label(artist, fallback):
    label = artist.get_label() or ""
    return fallback if not label or label.startswith("_") else label


def _points(ax, xs, ys):
    x_of = _value_of(ax.xaxis, _scale(ax.xaxis))
    y_of = _value_of(ax.yaxis, _scale(ax.yaxis))
    return [(x_of(x), y_of(y)) for x, y in zip(xs, ys)]


def _is_box(ax):
    from matplotlib.patches import PathPatch
    boxes = [p for p in ax.patches if isinstance(p, PathPatch)]
    medians = [l for l in ax.lines if len(l.get_xdata()) == 2 and l.get_ydata()[0] == l.get_ydata()[1]]
    return boxes and len(medians) >= len(boxes)


def _boxes(ax):
    from matplotlib.patches import PathPatch
    labels = {round(float(t), 6): l.get_text() for t, l in zip(ax.get_xticks(), ax.get_xticklabels())}
    elements = []
    for index, box in enumerate(p for p in ax.patches if isinstance(p, PathPatch)):
        xs, ys = box.get_path().vertices[:, 0], box.get_path().vertices[:, 1]
        left, right, q1, q3 = float(min(xs)), float(max(xs)), float(min(ys)), float(max(ys))
        centre = (left + right) / 2
        near = [l for l in ax.lines if len(l.get_xdata()) and
                all(left - 1e-9 <= float(x) <= right + 1e-9 for x in l.get_xdata())]
        median = next((float(l.get_ydata()[0]) for l in near if len(l.get_xdata()) == 2 and
                       l.get_ydata()[0] == l.get_ydata()[1] and q1 <= l.get_ydata()[0] <= q3), None)
        whiskers = [float(y) for l in near if l.get_linestyle() not in ("None", "", " ") and
                    len(l.get_xdata()) == 2 and l.get_xdata()[0] == l.get_xdata()[1] for y in l.get_ydata()]
        fliers = [float(y) for l in near if l.get_linestyle() in ("None", "", " ") for y in l.get_ydata()]
        elements.append({
            "label": labels.get(round(centre, 6), str(index + 1)),
            "min": min(whiskers + [q1]), "first_quartile": q1, "median": median,
            "third_quartile": q3, "max": max(whiskers + [q3]), "outliers": fliers})
    return elements


def _bars(ax):
    from matplotlib.container import BarContainer
    labels = {round(float(t), 6): l.get_text() for t, l in zip(ax.get_xticks(), ax.get_xticklabels())}
    elements = []
    for container in ax.containers:
        if not isinstance(container, BarContainer):
            continue
        group = _label(container, "")
        for bar in container:
            centre = bar.get_x() + bar.get_width() / 2
            elements.append({"label": labels.get(round(centre, 6), str(centre)),
                             "value": float(bar.get_height()), "group": group})
    return elements


def _axes(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.patches import Wedge
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        chart = {"type": "pie", "title": _text(ax.get_title()), "elements": [
            {"label": _label(w, ""), "angle": round(abs(float(w.theta2) - float(w.theta1)), 2),
             "radius": float(w.r)} for w in wedges]}
        return chart
    if _is_box(ax):
        chart = _axes_base(ax, "box_and_whisker")
        chart["elements"] = _boxes(ax)
        return chart
    if any(isinstance(c, BarContainer) for c in ax.containers):
        chart = _axes_base(ax, "bar")
        chart["elements"] = _bars(ax)
        return chart
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    if scatters:
        chart = _axes_base(ax, "scatter")
        _ticks(chart, ax)
        chart["elements"] = [
            {"label": _label(c, ""), "points": _points(ax, *zip(*c.get_offsets())) if len(c.get_offsets()) else []}
            for c in scatters]
        return chart
    lines = list(ax.get_lines())
    if lines:
        chart = _axes_base(ax, "line")
        _ticks(chart, ax)
        chart["elements"] = [{"label": _label(l, ""), "points": _points(ax, l.get_xdata(orig=False), l.get_ydata(orig=False))}
                             for l in lines]
        return chart
    return {"type": "unknown", "title": _text(ax.get_title()), "elements": []}


def chart_of(figure):
    """The chart a figure draws, or None when it has no axes."""
    axes = [ax for ax in figure.get_axes() if ax.get_visible() and ax.get_label() != "<colorbar>"]
    if not axes:
        return None
    figure.canvas.draw()  # tick labels are set when the figure is drawn
    if len(axes) == 1:
        return _axes(axes[0])
    title = figure._suptitle.get_text() if getattr(figure, "_suptitle", None) else None
    return {"type": "superchart", "title": _text(title), "elements": [_axes(ax) for ax in axes]}
