#!/usr/bin/python3
# roomkit's Python code context: a long-lived interpreter the host starts through the
# agent (as the instance's user, a child of the agent like any command) and drives with
# one JSON object per line. stdin carries {"type": "run", "code", "env"}; the stdout the
# agent gave it carries the events of each run: stdout and stderr text, results (display
# bundles: the last expression's value, display() calls, matplotlib figures), an error
# ({name, value, traceback}) and the run's end. The code's own descriptors 1 and 2 are
# pipes read here, so a child process's output reaches the run too, in order with what
# the code prints. SIGINT stops a run (KeyboardInterrupt) once its `started` event is
# sent, and is ignored between runs.
# Standard library only; matplotlib, pandas and friends are used when the image has them.
import ast
import base64
import builtins
import codecs
import io
import json
import linecache
import os
import signal
import sys
import threading
import traceback

# The protocol's descriptors, set apart before the code's 0, 1 and 2 are replaced.
PROTO_OUT = os.fdopen(os.dup(1), 'w', encoding='utf-8', buffering=1)
PROTO_IN = os.fdopen(os.dup(0), 'rb')
SEND_LOCK = threading.Lock()
# The chart reader (code-context-charts.py), once a run has shown a figure.
CHARTS = None


def send(event):
    with SEND_LOCK:
        PROTO_OUT.write(json.dumps(event, ensure_ascii=True, default=str) + '\n')
        PROTO_OUT.flush()


# Written into a pipe after what the code printed, so that the run's end (and each
# result) is sent only once everything printed before it was.
MARK = b'\x00roomkit-context-sync\x00'


class Pump(threading.Thread):
    """Reads one of the code's descriptors and sends what comes as that stream's events."""

    def __init__(self, stream, fd):
        super().__init__(daemon=True)
        self.stream = stream
        read_end, write_end = os.pipe()
        os.dup2(write_end, fd)
        os.close(write_end)
        self.fd = fd
        self.read_end = read_end
        self.decoder = codecs.getincrementaldecoder('utf-8')('replace')
        self.pending = b''
        self.seen = 0
        self.asked = 0
        self.cond = threading.Condition()

    def emit(self, data):
        text = self.decoder.decode(data)
        if text:
            send({'type': self.stream, 'text': text})

    def run(self):
        while True:
            data = os.read(self.read_end, 65536)
            if not data:
                return
            self.pending += data
            while True:
                at = self.pending.find(MARK)
                if at < 0:
                    break
                self.emit(self.pending[:at])
                self.pending = self.pending[at + len(MARK):]
                with self.cond:
                    self.seen += 1
                    self.cond.notify_all()
            keep = 0
            for k in range(min(len(MARK) - 1, len(self.pending)), 0, -1):
                if self.pending.endswith(MARK[:k]):
                    keep = k
                    break
            self.emit(self.pending[:len(self.pending) - keep])
            self.pending = self.pending[len(self.pending) - keep:]

    def sync(self):
        self.asked += 1
        os.write(self.fd, MARK)
        with self.cond:
            self.cond.wait_for(lambda: self.seen >= self.asked, timeout=5)


PUMPS = []
IN_CODE = False


def sync_output():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    for pump in PUMPS:
        pump.sync()


def on_interrupt(signum, frame):
    # Between runs an interrupt has nothing to stop (it came late).
    if IN_CODE:
        raise KeyboardInterrupt


MIME_METHODS = [
    ('html', '_repr_html_'),
    ('markdown', '_repr_markdown_'),
    ('svg', '_repr_svg_'),
    ('png', '_repr_png_'),
    ('jpeg', '_repr_jpeg_'),
    ('latex', '_repr_latex_'),
    ('json', '_repr_json_'),
    ('javascript', '_repr_javascript_'),
]
MIME_KEYS = {
    'text/plain': 'text', 'text/html': 'html', 'text/markdown': 'markdown', 'image/svg+xml': 'svg',
    'image/png': 'png', 'image/jpeg': 'jpeg', 'text/latex': 'latex', 'application/json': 'json',
    'application/javascript': 'javascript',
}


def encoded(key, value):
    if key in ('png', 'jpeg') and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode('ascii')
    if key == 'json':
        return value
    return value if isinstance(value, str) else str(value)


def bundle_of(value, main):
    """A display bundle: what the object's rich display methods give, and its repr as text."""
    if is_figure(value):
        return figure_bundle(value, main)
    data = {}
    try:
        mimebundle = value._repr_mimebundle_() if hasattr(value, '_repr_mimebundle_') else None
        if isinstance(mimebundle, tuple):
            mimebundle = mimebundle[0]
        if isinstance(mimebundle, dict):
            for mime, content in mimebundle.items():
                if mime in MIME_KEYS and content is not None:
                    data[MIME_KEYS[mime]] = encoded(MIME_KEYS[mime], content)
    except Exception:
        pass
    for key, method in MIME_METHODS:
        if key in data or isinstance(value, type):
            continue
        fn = getattr(value, method, None)
        if not callable(fn):
            continue
        try:
            content = fn()
        except Exception:
            continue
        if isinstance(content, tuple):
            content = content[0]
        if content is not None:
            data[key] = encoded(key, content)
    if 'text' not in data:
        try:
            data['text'] = repr(value)
        except Exception as err:
            data['text'] = '<unprintable %s: %s>' % (type(value).__name__, err)
    data['is_main_result'] = main
    return data


def is_figure(value):
    module = sys.modules.get('matplotlib.figure')
    return module is not None and isinstance(value, module.Figure)


def figure_bundle(figure, main):
    buffer = io.BytesIO()
    figure.savefig(buffer, format='png', bbox_inches='tight')
    data = {'text': repr(figure), 'png': base64.b64encode(buffer.getvalue()).decode('ascii'), 'is_main_result': main}
    try:
        chart = chart_of(figure)
        if chart is not None:
            data['chart'] = chart
    except Exception:
        pass
    return data


def chart_of(figure):
    """The figure's chart data, by code-context-charts.py beside this file (loaded at the first figure)."""
    global CHARTS
    if CHARTS is None:
        import importlib.util
        spec = importlib.util.spec_from_file_location('roomkit_code_context_charts', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'code-context-charts.py'))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        CHARTS = module
    return CHARTS.chart_of(figure)


def display(*objects, **_options):
    """Shows each object as a result of the run (not its main one), as a notebook does."""
    for value in objects:
        sync_output()
        send(dict(bundle_of(value, False), type='result'))


def send_open_figures():
    pyplot = sys.modules.get('matplotlib.pyplot')
    if pyplot is None:
        return
    for number_ in pyplot.get_fignums():
        figure = pyplot.figure(number_)
        try:
            sync_output()
            send(dict(figure_bundle(figure, False), type='result'))
        except Exception as err:
            send({'type': 'stderr', 'text': 'the figure could not be drawn: %s\n' % err})
    pyplot.close('all')


def run(code, execution_count, namespace):
    """Runs a cell: its statements, then its last expression as the main result."""
    global IN_CODE
    filename = '<cell-%d>' % execution_count
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        tree = ast.parse(code, filename, 'exec')
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, 'exec')
        tail = compile(last, filename, 'eval') if last is not None else None
        IN_CODE = True
        # From here an interrupt stops the code; the host holds one asked for earlier until it hears this.
        send({'type': 'started'})
        try:
            exec(body, namespace)
            value = eval(tail, namespace) if tail is not None else None
        finally:
            IN_CODE = False
        send_open_figures()
        if value is not None and not is_figure(value):
            namespace['_'] = value
            sync_output()
            send(dict(bundle_of(value, True), type='result'))
        return None
    except BaseException as err:  # KeyboardInterrupt and SystemExit too: the context goes on
        IN_CODE = False
        try:
            send_open_figures()
        except BaseException:
            pass
        # The driver's own frames (its exec, its interrupt handler) are not the code's.
        # A syntax error has none of the code's frames: it is told without a traceback's head.
        frames = traceback.extract_tb(err.__traceback__)
        first = next((i for i, f in enumerate(frames) if f.filename.startswith('<cell-')), len(frames))
        frames = [f for f in frames[first:] if f.filename != __file__]
        text = ''.join(traceback.format_exception_only(type(err), err))
        if frames:
            text = 'Traceback (most recent call last):\n' + ''.join(traceback.format_list(frames)) + text
        return {'name': type(err).__name__, 'value': str(err), 'traceback': text}


def main():
    cwd = sys.argv[1] if len(sys.argv) > 1 else ''
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as err:
            send({'type': 'failed', 'reason': 'cwd', 'message': '%s: %s' % (cwd, err.strerror)})
            return
    os.environ.setdefault('MPLBACKEND', 'Agg')
    import warnings
    warnings.filterwarnings('ignore', message='.*non-interactive.*')
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = io.StringIO('')
    for stream, fd in (('stdout', 1), ('stderr', 2)):
        pump = Pump(stream, fd)
        pump.start()
        PUMPS.append(pump)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, 'wb', closefd=False), encoding='utf-8', errors='backslashreplace', line_buffering=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, 'wb', closefd=False), encoding='utf-8', errors='backslashreplace', line_buffering=True)
    signal.signal(signal.SIGINT, on_interrupt)
    builtins.display = display
    namespace = {'__name__': '__main__', '__builtins__': builtins}
    sys.path.insert(0, '')
    execution_count = 0
    send({'type': 'ready', 'pid': os.getpid(), 'language': 'python', 'version': sys.version.split()[0]})
    for line in PROTO_IN:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if request.get('type') != 'run':
            continue
        execution_count += 1
        env = request.get('env') or {}
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        try:
            error = run(request.get('code', ''), execution_count, namespace)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        sync_output()
        if error is not None:
            send(dict(error, type='error'))
        send({'type': 'end', 'execution_count': execution_count})


if __name__ == '__main__':
    main()
