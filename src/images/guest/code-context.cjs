// roomkit's JavaScript code context: a long-lived Node.js interpreter the host starts
// through the agent (as the instance's user, a child of the agent like any command) and
// drives as it drives the Python one (code-context.py): one JSON object per line, runs
// on stdin, each run's events (stdout and stderr text, results, an error, its end) on
// stdout. Code runs in one `vm` context that keeps its globals between runs; the value
// of a cell's last expression is its main result (a promise is awaited first). SIGINT
// interrupts synchronous code (vm's breakOnSigint) and is ignored between runs. Only
// Node's own modules: Debian's `nodejs` is all an image needs.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { Writable } = require('node:stream');
const util = require('node:util');
const vm = require('node:vm');

function send(event) {
  const line = `${JSON.stringify(event)}\n`;
  // Synchronous, so that events leave in the order the code made them.
  for (let at = 0, bytes = Buffer.from(line); at < bytes.length; ) at += fs.writeSync(1, bytes, at);
}

const show = (value) => (typeof value === 'string' ? value : util.inspect(value, { depth: 4, breakLength: 100 }));

/** A stream the code's console and process.stdout/stderr write to: each write an event of that stream, sent at once. */
function streamOf(name) {
  const stream = new Writable({
    decodeStrings: false,
    write(chunk, _encoding, callback) {
      send({ type: name, text: typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8') });
      callback();
    },
  });
  stream.isTTY = false;
  stream.columns = 100;
  return stream;
}

const stdout = streamOf('stdout');
const stderr = streamOf('stderr');

function bundleOf(value, main) {
  const data = { is_main_result: main, text: show(value) };
  if (value !== null && typeof value === 'object') {
    // The display protocol a notebook's JavaScript kernels use: an object may say how it looks.
    for (const [key, method] of [['html', '_repr_html_'], ['markdown', '_repr_markdown_'], ['svg', '_repr_svg_'], ['png', '_repr_png_'], ['json', '_repr_json_']]) {
      if (typeof value[method] !== 'function') continue;
      try {
        const content = value[method]();
        if (content !== undefined && content !== null) data[key] = Buffer.isBuffer(content) ? content.toString('base64') : content;
      } catch {
        // an object that cannot show itself that way is shown as text
      }
    }
  }
  return data;
}

function display(...values) {
  for (const value of values) send({ type: 'result', ...bundleOf(value, false) });
}

const sandbox = {
  console: new console.Console({ stdout, stderr }),
  process: Object.create(process, { stdout: { value: stdout }, stderr: { value: stderr } }),
  require,
  module: { exports: {} },
  Buffer,
  URL,
  URLSearchParams,
  TextEncoder,
  TextDecoder,
  setTimeout,
  clearTimeout,
  setInterval,
  clearInterval,
  setImmediate,
  clearImmediate,
  queueMicrotask,
  structuredClone,
  fetch: globalThis.fetch,
  display,
};
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);

function errorOf(err) {
  if (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') return { name: 'KeyboardInterrupt', value: 'interrupted', traceback: '' };
  if (err instanceof Error || (err && typeof err.stack === 'string')) {
    // Frames of the driver and of Node's internals are not the code's.
    const stack = String(err.stack)
      .split('\n')
      .filter((line) => !line.includes(__filename) && !line.includes('node:'))
      .join('\n');
    return { name: err.name || 'Error', value: err.message ?? String(err), traceback: stack };
  }
  return { name: 'Error', value: show(err), traceback: `Uncaught ${show(err)}` };
}

let executionCount = 0;

async function run(request) {
  executionCount += 1;
  const env = request.env || {};
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  Object.assign(process.env, env);
  let error = null;
  try {
    const script = new vm.Script(request.code || '', { filename: `<cell-${executionCount}>` });
    // From here an interrupt stops the code; the host holds one asked for earlier until it hears this.
    send({ type: 'started' });
    let value = script.runInContext(context, { breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) {
      sandbox._ = value;
      send({ type: 'result', ...bundleOf(value, true) });
    }
  } catch (err) {
    error = errorOf(err);
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
  if (error) send({ type: 'error', ...error });
  send({ type: 'end', execution_count: executionCount });
}

function main() {
  const cwd = process.argv[2];
  if (cwd) {
    try {
      process.chdir(cwd);
    } catch (err) {
      send({ type: 'failed', reason: 'cwd', message: `${cwd}: ${err.code === 'ENOENT' ? 'No such file or directory' : err.message}` });
      return;
    }
  }
  // Between runs an interrupt has nothing to stop (it came late).
  process.on('SIGINT', () => {});
  module.paths.unshift(path.join(process.cwd(), 'node_modules'));
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  let queue = Promise.resolve();
  lines.on('line', (line) => {
    let request;
    try {
      request = JSON.parse(line);
    } catch {
      return;
    }
    if (request.type === 'run') queue = queue.then(() => run(request));
  });
  lines.on('close', () => queue.then(() => process.exit(0)));
  send({ type: 'ready', pid: process.pid, language: 'javascript', version: process.versions.node });
}

main();
