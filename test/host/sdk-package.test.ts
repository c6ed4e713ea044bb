// The TypeScript SDK as its users get it: `npm pack` of sdk/ (which builds it), the
// tarball installed into a scratch project without the network, a small program
// compiled against it under a strict `nodenext` tsconfig with the repository's
// TypeScript (the DOM library and no Node types, so a Node-only type in the SDK's
// declarations fails it), then run with the machine's own Node (18 or later) against a
// real server with a real gVisor instance, a terminal included (given the `ws` package's WebSocket
// where the machine's Node has no global one).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { API_VERSION } from '../../src/app.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const run = promisify(execFile);
const SDK_DIR = join(PACKAGE_ROOT, 'sdk');
const TSC = join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

// What a newcomer's project would have: strict, nodenext, and the SDK's own
// declarations checked too (skipLibCheck off).
const TSCONFIG = {
  compilerOptions: {
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    lib: ['es2022', 'dom'],
    types: [],
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    verbatimModuleSyntax: true,
    skipLibCheck: false,
    outDir: 'out',
  },
  include: ['main.ts'],
};

// The program: a room, a command that writes a file, the file read back (as text and
// as bytes), bytes written and read through the raw endpoint, a typed error, and the
// room deleted. It prints what it saw as one JSON line for the test to check.
const PROGRAM = `import { API_VERSION, Roomkit, RoomkitError, contentBytes, type CommandResult, type WebSocketConstructor } from '@roomkit/sdk';

declare const process: { env: Record<string, string | undefined>; versions: { node: string } };

const rk = new Roomkit({ baseUrl: process.env.ROOMKIT_URL, apiKey: process.env.ROOMKIT_API_KEY });
const health = await rk.health();
const room = rk.room('pack', 'main');
const instance = await room.create();
const run: CommandResult = await room.exec('echo hello from the package > made.txt && cat made.txt');
const file = await room.readFile('made.txt');
await room.writeFile('data/bytes.bin', new Uint8Array([0, 1, 2, 255]));
const raw = await room.readRaw('data/bytes.bin');
const viaJson = contentBytes(await room.readFile('data/bytes.bin'));
let missing: { name: string; status: number; code: string } | undefined;
try {
  await rk.room('pack', 'nobody-here').get();
} catch (err) {
  if (err instanceof RoomkitError) missing = { name: err.name, status: err.status, code: err.code };
}
// A terminal: without a global WebSocket (Node 18 and 20) a clear refusal; with one
// given to the client (the ws package's), a real terminal.
let withoutWebSocket: { code: string; saysHow: boolean } | 'has a global WebSocket' = 'has a global WebSocket';
if (!('WebSocket' in globalThis)) {
  try {
    await room.terminal();
  } catch (err) {
    if (err instanceof RoomkitError) withoutWebSocket = { code: err.code, saysHow: /Node\.js 22 or newer.*WebSocket: /.test(err.message) };
  }
}
const ws = (await import(process.env.WS_MODULE ?? 'ws')) as { WebSocket: WebSocketConstructor };
const withWs = new Roomkit({ baseUrl: process.env.ROOMKIT_URL, apiKey: process.env.ROOMKIT_API_KEY, WebSocket: ws.WebSocket });
const terminal = await withWs.room('pack', 'main').terminal({ command: 'echo "term-$((6*7))"; exit 4' });
let terminalOutput = '';
const decoder = new TextDecoder();
terminal.onData((data) => (terminalOutput += decoder.decode(data, { stream: true })));
const terminalExit = await terminal.exited;
const deleted = await room.delete();
console.log(JSON.stringify({
  withoutWebSocket,
  terminal: { exit: terminalExit, printed: terminalOutput.includes('term-42') },
  node: process.versions.node,
  apiVersion: API_VERSION,
  serverVersion: health.version,
  instanceState: instance.state,
  exitCode: run.result.exit_code,
  output: run.result.output,
  changed: run.result.files_changed.map((f) => [f.path, f.status]),
  file: { content: file.content, encoding: file.encoding },
  raw: Array.from(raw),
  viaJson: Array.from(viaJson),
  missing,
  deletedState: deleted.state,
}));
`;

let t: TestApp;
let org: TestOrg;
let baseUrl: string;
const scratch = mkdtempSync(join(tmpdir(), 'roomkit-sdk-package-'));

before(async () => {
  t = await startTestApp({ gvisorPool: '10.249.0.0/24' });
  t.gvisor();
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  await t.createProfile(org, { name: 'pack', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 60 });
});

after(async () => {
  rmSync(scratch, { recursive: true, force: true });
  await t.closeLeavingNothing();
});

/**
 * The machine's own Node: the first `node` on PATH outside this repository's
 * project-local one, when it is 18 or later; else the Node running the tests.
 */
async function machineNode(): Promise<{ path: string; version: string; own: boolean }> {
  const ownDir = dirname(process.execPath);
  const dirs = (process.env.PATH ?? '').split(delimiter).filter((d) => d !== '' && d !== ownDir);
  for (const dir of dirs) {
    const candidate = join(dir, 'node');
    try {
      const { stdout } = await run(candidate, ['-p', 'process.versions.node']);
      const version = stdout.trim();
      if (Number(version.split('.')[0]) >= 18) return { path: candidate, version, own: true };
    } catch {
      // Not here, or not runnable.
    }
  }
  return { path: process.execPath, version: process.versions.node, own: false };
}

describe('the packed TypeScript SDK', () => {
  let tarball: string;
  let unpacked: string;

  it('packs into a tarball that is public, versioned with the API and built to JavaScript with declarations', async () => {
    const packDir = join(scratch, 'pack');
    mkdirSync(packDir);
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: SDK_DIR, maxBuffer: 16 * 1024 * 1024 });
    const [result] = JSON.parse(stdout) as { filename: string; version: string; files: { path: string }[] }[];
    assert.ok(result);
    assert.equal(result.version, API_VERSION, 'the SDK is versioned with the API');
    tarball = join(packDir, result.filename);
    const files = result.files.map((f) => f.path);
    for (const needed of ['package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/room.js', 'dist/room.d.ts']) {
      assert.ok(files.includes(needed), `the tarball has no ${needed}: ${files.join(', ')}`);
    }
    unpacked = join(scratch, 'unpacked');
    mkdirSync(unpacked);
    await run('tar', ['-xzf', tarball, '-C', unpacked]);
    const pkg = JSON.parse(readFileSync(join(unpacked, 'package', 'package.json'), 'utf8'));
    assert.equal(pkg.private, undefined, 'the package is not private');
    assert.equal(pkg.exports['.'].types, './dist/index.d.ts');
    assert.equal(pkg.exports['.'].default, './dist/index.js');
    assert.match(pkg.engines.node, />=\s*18/);
  });

  it('loads nothing of Node in what a browser bundle would load, and names no Node-only type', () => {
    const dist = join(unpacked, 'package', 'dist');
    const names = readdirSync(dist, { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.js') || n.endsWith('.d.ts'));
    assert.ok(names.some((n) => n.endsWith('.js')));
    for (const name of names) {
      const text = readFileSync(join(dist, name), 'utf8');
      if (name.endsWith('.js')) {
        assert.doesNotMatch(text, /from ['"]node:|import\(['"]node:|require\(/, `${name} imports a Node module`);
        assert.doesNotMatch(text, /\bBuffer\./, `${name} uses Buffer`);
      }
      if (name.endsWith('.d.ts')) assert.doesNotMatch(text, /\bBuffer\b|\bNodeJS\.|['"]node:/, `${name} names a Node-only type`);
    }
  });

  it('installs offline into a scratch project, compiles under strict nodenext and runs against the server', async (context) => {
    const project = join(scratch, 'project');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'sdk-consumer', private: true, type: 'module' }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: project });
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
    writeFileSync(join(project, 'main.ts'), PROGRAM);
    await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project }).catch((err: { stdout?: string; stderr?: string }) => {
      assert.fail(`the program does not compile against the packed SDK:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    });

    const node = await machineNode();
    context.diagnostic(`the program ran with ${node.path} (Node ${node.version})`);
    const { stdout } = await run(node.path, ['out/main.js'], {
      cwd: project,
      env: { PATH: process.env.PATH ?? '', ROOMKIT_URL: baseUrl, ROOMKIT_API_KEY: org.apiKey, WS_MODULE: pathToFileURL(join(PACKAGE_ROOT, 'node_modules', 'ws', 'wrapper.mjs')).href },
      timeout: 180_000,
    });
    const seen = JSON.parse(stdout.trim().split('\n').at(-1) ?? '');
    assert.equal(seen.node, node.version, `ran with ${node.path}${node.own ? '' : ' (no other Node 18+ on PATH)'}`);
    assert.equal(seen.apiVersion, API_VERSION);
    assert.equal(seen.serverVersion, API_VERSION);
    assert.equal(seen.instanceState, 'ready');
    assert.equal(seen.exitCode, 0);
    assert.equal(seen.output, 'hello from the package\n');
    assert.deepEqual(seen.changed, [['/home/user/made.txt', 'created']]);
    assert.deepEqual(seen.file, { content: 'hello from the package\n', encoding: 'utf-8' });
    assert.deepEqual(seen.raw, [0, 1, 2, 255]);
    assert.deepEqual(seen.viaJson, [0, 1, 2, 255]);
    assert.deepEqual(seen.missing, { name: 'RoomkitError', status: 404, code: 'instance_not_found' });
    assert.equal(seen.deletedState, 'stopped');
    // Node 18 and 20 have no global WebSocket: the SDK says what to do; given one, terminals work.
    if (Number(node.version.split('.')[0]) < 22) assert.deepEqual(seen.withoutWebSocket, { code: 'feature_unavailable', saysHow: true });
    assert.deepEqual(seen.terminal, { exit: 4, printed: true });
    // The server saw it all: the room's instance was made and is gone again.
    const [row] = await t.services.db.selectFrom('instances').select(['room_id', 'state']).where('room_id', '=', 'main').execute();
    assert.deepEqual(row, { room_id: 'main', state: 'stopped' });
  });
});
