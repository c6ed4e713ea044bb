# Chart data of a matplotlib figure, for roomkit's Python code context (code-context.py
# loads this file beside it the first time a run shows a figure): what a client can
# redraw or read without the image. The fields are those E2B's code interpreter gives,
# so that its package reads them unchanged: per plot its kind (line, scatter, bar, pie,
# box_and_whisker), title, axis labels and the units written in them ("Time (s)"), for
# line and scatter the axes' scales, tick positions and tick labels, and per element
# what it draws. Standard library and matplotlib only; anything a figure holds that is
# not recognised makes an `unknown` chart rather than an error.
import re

# A unit at the end of an axis label: "Distance (km)" or "Speed [m/s]".
UNIT = re.compile(r'[(\[]\s*([^()\[\]]+?)\s*[)\]]\s*$')


def number(v):
    try:
        f = float(v)
        return f if f == f and f not in (float('inf'), float('-inf')) else None
    except Exception:
        return str(v)


def shown_label(label):
    # matplotlib names what the code left unnamed `_child0`, `_nolegend_`: no label.
    return None if not label or label.startswith('_') else label


def unit_of(label):
    match = UNIT.search(label or '')
    return match.group(1) if match else None


def converter_of(axis):
    get = getattr(axis, 'get_converter', None)
    return get() if get else getattr(axis, 'converter', None)


def scale_of(ax, axis, name):
    """The axis's scale as E2B names it: matplotlib's, or datetime and categorical by its units."""
    converter = type(converter_of(axis)).__name__
    if 'Date' in converter:
        return 'datetime'
    if 'Category' in converter:
        return 'categorical'
    return ax.get_xscale() if name == 'x' else ax.get_yscale()


def value_on(v, scale):
    """A data value as a client reads it: dates as ISO 8601 text, categories as their text."""
    if hasattr(v, 'isoformat'):
        return v.isoformat()
    if type(v).__name__ == 'datetime64':
        return str(v)
    if scale == 'datetime':
        try:
            from matplotlib import dates
            return dates.num2date(float(v)).isoformat()
        except Exception:
            return str(v)
    return number(v)


def axis_fields(ax, name):
    axis = ax.xaxis if name == 'x' else ax.yaxis
    scale = scale_of(ax, axis, name)
    ticks = axis.get_ticklocs()
    labels = [t.get_text() for t in axis.get_ticklabels()]
    if scale == 'categorical':
        # A category axis's ticks are the categories' positions: its labels say which.
        shown = labels
    else:
        shown = [value_on(t, scale) for t in ticks]
    return {name + '_scale': scale, name + '_ticks': shown, name + '_tick_labels': labels}


def base_of(ax, two_d=True):
    chart = {'title': ax.get_title() or None}
    if two_d:
        for name, label in (('x', ax.get_xlabel()), ('y', ax.get_ylabel())):
            chart[name + '_label'] = label or None
            chart[name + '_unit'] = unit_of(label)
    return chart


def bar_chart(ax, containers):
    ticks = {round(float(t), 6): lab.get_text() for t, lab in zip(ax.get_xticks(), ax.get_xticklabels())}
    elements = []
    for container in containers:
        label = container.get_label()
        for patch in container.patches:
            x = patch.get_x() + patch.get_width() / 2
            elements.append({
                'label': ticks.get(round(x, 6)) or str(number(x)),
                'group': shown_label(label),
                'value': number(patch.get_height()),
            })
    return dict(base_of(ax), type='bar', elements=elements)


def pie_chart(ax, wedges):
    elements = []
    texts = [t.get_text() for t in ax.texts]
    for i, wedge in enumerate(wedges):
        label = shown_label(wedge.get_label()) or (texts[i] if i < len(texts) else None)
        elements.append({'label': label, 'angle': number(abs(wedge.theta2 - wedge.theta1)), 'radius': number(wedge.r)})
    return dict(base_of(ax, two_d=False), type='pie', elements=elements)


def box_chart(ax, lines):
    """A boxplot's data, read back from the lines boxplot() draws (it labels none of them).

    Per box it adds, in this order: the box's outline (a 5-point line, or a patch that is
    no line), the lower and upper whiskers, the two caps (unless hidden), the median and
    the fliers (a line of markers only), so each box's lines end with its fliers. A
    whisker runs from its quartile to its end: lower (q1, min), upper (q3, max).
    """
    boxes, group = [], []
    for line in lines:
        group.append(line)
        if line.get_linestyle() in ('None', '') and line.get_marker() not in (None, '', 'None'):
            boxes.append(group)
            group = []
    if not boxes or group:
        return None
    elements = []
    for i, box in enumerate(boxes):
        fliers, twos = box[-1], [line for line in box[:-1] if len(line.get_xdata()) == 2]
        if len(twos) not in (3, 5):
            return None
        low, high, median = twos[0], twos[1], twos[-1]
        # A vertical box's whiskers keep one x; the values are then along y, and its labels on x.
        vertical = bool(low.get_xdata()[0] == low.get_xdata()[1])
        at = (lambda line: list(line.get_ydata())) if vertical else (lambda line: list(line.get_xdata()))
        labels = [t.get_text() for t in (ax.get_xticklabels() if vertical else ax.get_yticklabels())]
        elements.append({
            'label': (labels[i] if i < len(labels) else '') or str(i + 1),
            'min': number(at(low)[1]),
            'first_quartile': number(at(low)[0]),
            'median': number(at(median)[0]),
            'third_quartile': number(at(high)[0]),
            'max': number(at(high)[1]),
            'outliers': [number(v) for v in at(fliers)],
        })
    return dict(base_of(ax), type='box_and_whisker', elements=elements)


def points_chart(ax, kind, series):
    fields = dict(base_of(ax), **axis_fields(ax, 'x'), **axis_fields(ax, 'y'))
    x_scale, y_scale = fields['x_scale'], fields['y_scale']
    elements = [
        {'label': shown_label(label), 'points': [[value_on(x, x_scale), value_on(y, y_scale)] for x, y in points]}
        for label, points in series
    ]
    return dict(fields, type=kind, elements=elements)


def axes_chart(ax):
    """Chart data of one plot: its kind, labels, units, scales, ticks and what it draws."""
    containers = [c for c in ax.containers if type(c).__name__ == 'BarContainer']
    if containers:
        return bar_chart(ax, containers)
    wedges = [p for p in ax.patches if type(p).__name__ == 'Wedge']
    if wedges and len(wedges) == len(ax.patches):
        return pie_chart(ax, wedges)
    lines = ax.get_lines()
    if lines and not ax.collections:
        box = box_chart(ax, lines)
        if box is not None:
            return box
        return points_chart(ax, 'line', [(line.get_label(), zip(line.get_xdata(), line.get_ydata())) for line in lines])
    collections = [c for c in ax.collections if type(c).__name__ == 'PathCollection']
    if collections and not lines:
        return points_chart(ax, 'scatter', [(c.get_label(), c.get_offsets()) for c in collections])
    return dict(base_of(ax), type='unknown', elements=[])


def chart_of(figure):
    charts = [axes_chart(ax) for ax in figure.get_axes()]
    if not charts:
        return None
    if len(charts) == 1:
        return charts[0]
    return {'type': 'superchart', 'title': figure._suptitle.get_text() if figure._suptitle else None, 'elements': charts}
