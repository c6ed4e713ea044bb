// The Dockerfile, the systemd unit and the exec wrapper they share, tested as far as this
// machine allows: the Dockerfile is parsed (its base image cannot be pulled here) and its
// instructions checked against the repository and scripts/setup; the unit passes
// `systemd-analyze verify` and fits the service's shutdown; the wrapper runs the real
// service, which one SIGTERM shuts down gracefully.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { SHUTDOWN_TIMEOUT_MS } from '../../src/cli/serve.ts';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { ENV_NAMES } from '../../src/config/env-names.ts';
import pkg from '../../package.json' with { type: 'json' };
import { collect, scratchDirs } from '../support/cli.ts';

const scratch = scratchDirs();
const EXEC = join(PACKAGE_ROOT, 'packaging', 'roomkit-exec');
const INSTALL_ROOT = '/opt/roomkit';

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Dockerfile instructions: continuation lines joined, comments and blank lines dropped. */
function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let pending = '';
  let start = 0;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) return;
    if (pending === '') start = index + 1;
    if (line.startsWith('#')) return;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      return;
    }
    const whole = `${pending}${line}`;
    pending = '';
    const match = /^([A-Za-z]+)\s+(.*)$/.exec(whole);
    assert.ok(match, `Dockerfile line ${start} is not an instruction: ${whole}`);
    instructions.push({ keyword: match[1]!.toUpperCase(), args: match[2]!, line: start });
  });
  assert.equal(pending, '', 'the Dockerfile ends in a continuation line');
  return instructions;
}

const KNOWN = new Set(['FROM', 'RUN', 'CMD', 'LABEL', 'EXPOSE', 'ENV', 'ADD', 'COPY', 'ENTRYPOINT', 'VOLUME', 'USER', 'WORKDIR', 'ARG', 'ONBUILD', 'STOPSIGNAL', 'HEALTHCHECK', 'SHELL']);

describe('Dockerfile', () => {
  const text = readFileSync(join(PACKAGE_ROOT, 'Dockerfile'), 'utf8');
  const instructions = parseDockerfile(text);
  const all = (keyword: string) => instructions.filter((i) => i.keyword === keyword);
  const ignored = readFileSync(join(PACKAGE_ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));

  it('parses into known instructions, FROM first', () => {
    for (const i of instructions) assert.ok(KNOWN.has(i.keyword), `line ${i.line}: unknown instruction ${i.keyword}`);
    assert.equal(instructions[0]!.keyword, 'FROM');
    assert.match(instructions[0]!.args, /^debian:[a-z]+-slim$/);
  });

  it('copies only files that exist in the repository and that .dockerignore keeps', () => {
    const copies = all('COPY');
    assert.ok(copies.length > 0);
    for (const copy of copies) {
      const parts = copy.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      const sources = parts.slice(0, -1);
      for (const source of sources) {
        assert.ok(existsSync(join(PACKAGE_ROOT, source)), `line ${copy.line}: COPY ${source}: no such file in the repository`);
        assert.ok(!ignored.some((pattern) => source === pattern || source.startsWith(`${pattern}/`)), `line ${copy.line}: ${source} is excluded by .dockerignore`);
      }
    }
    // What the service runs from: sources, entry points, dependency manifests, setup.
    const copied = copies.flatMap((c) => c.args.split(/\s+/).slice(0, -1));
    for (const needed of ['package.json', 'package-lock.json', 'src', 'bin', 'scripts/setup', 'packaging', 'tsconfig.json', 'sdk']) {
      assert.ok(copied.some((c) => c === needed || c.startsWith(`${needed}/`)), `the image needs ${needed}`);
    }
    for (const local of ['node_modules', '.tools', '.roomkit', '.git']) assert.ok(ignored.includes(local), `.dockerignore should keep ${local} out`);
  });

  it('installs every system package scripts/setup installs', () => {
    const setup = readFileSync(join(PACKAGE_ROOT, 'scripts', 'setup'), 'utf8');
    const list = /system_packages=\(([^)]*)\)/.exec(setup);
    assert.ok(list, 'scripts/setup names its system packages');
    const wanted = list[1]!.trim().split(/\s+/);
    const apt = all('RUN').map((r) => r.args).find((args) => args.includes('apt-get install'));
    assert.ok(apt, 'a RUN installs packages with apt-get');
    const installed = new Set(apt.split(/\s+/));
    for (const name of wanted) assert.ok(installed.has(name), `the image lacks ${name}, which scripts/setup installs`);
    assert.ok(all('RUN').some((r) => r.args.includes('scripts/setup')), 'the image runs scripts/setup (Node.js 24, npm ci)');
  });

  it('starts the service through tini and the exec wrapper, with the data directory a volume', () => {
    const entrypoint = JSON.parse(all('ENTRYPOINT').at(-1)!.args) as string[];
    assert.deepEqual(entrypoint.slice(0, 2), ['/usr/bin/tini', '--']);
    const wrapper = entrypoint[2]!;
    assert.ok(wrapper.startsWith(`${INSTALL_ROOT}/`));
    const local = join(PACKAGE_ROOT, wrapper.slice(INSTALL_ROOT.length + 1));
    accessSync(local, constants.X_OK);
    assert.deepEqual(JSON.parse(all('CMD').at(-1)!.args), ['serve']);
    assert.equal(all('WORKDIR').at(-1)!.args, INSTALL_ROOT);
    const health = all('HEALTHCHECK').at(-1)!.args;
    const healthCmd = JSON.parse(health.slice(health.indexOf('CMD') + 3).trim()) as string[];
    assert.ok(existsSync(join(PACKAGE_ROOT, healthCmd[0]!.slice(INSTALL_ROOT.length + 1))));
    assert.equal(all('STOPSIGNAL').at(-1)!.args, 'SIGTERM');
    const env = all('ENV').map((e) => e.args).join(' ');
    const dataDir = /ROOMKIT_DATA_DIR=(\S+)/.exec(env)?.[1];
    assert.ok(dataDir);
    assert.ok(all('VOLUME').some((v) => v.args === dataDir), 'the data directory is a volume');
    const settings = new Set(Object.values(ENV_NAMES));
    for (const name of env.match(/ROOMKIT_[A-Z_]+/g) ?? []) assert.ok(settings.has(name), `${name} is not a roomkit setting`);
  });
});

describe('packaging/roomkit-exec', () => {
  it('runs roomkit with Node.js 24, also through a symbolic link (as /usr/local/bin/roomkit in the image)', () => {
    const link = join(scratch(), 'roomkit');
    symlinkSync(EXEC, link);
    for (const command of [EXEC, link]) {
      const result = spawnSync(command, ['--version'], { encoding: 'utf8' });
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stdout, new RegExp(`^${pkg.version.replaceAll('.', '\\.')} `));
    }
  });

  it('becomes the service itself: one SIGTERM gives one graceful shutdown', async () => {
    const dataDir = scratch();
    const child = spawn(EXEC, ['serve', '--port', '0', '--data-dir', dataDir], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ROOMKIT_RUNTIME: 'none' } });
    const output = collect(child);
    let stderr = '';
    child.stderr!.on('data', (d: string) => (stderr += d));
    const deadline = Date.now() + 20_000;
    while (!/listening on/.test(stderr)) {
      assert.ok(Date.now() < deadline, `the service did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // exec: the process started is Node running the service, not a shell around it.
    const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
    assert.ok(cmdline.some((arg) => arg.endsWith(join('src', 'cli', 'main.ts'))), cmdline.join(' '));
    child.kill('SIGTERM');
    const result = await output;
    assert.equal(result.code, 0, result.stderr);
    const lines = result.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { msg: string });
    assert.equal(lines.filter((l) => l.msg === 'shutting down').length, 1);
    assert.equal(lines.filter((l) => l.msg === 'shutdown complete').length, 1);
  });
});

describe('packaging/roomkit.service', () => {
  const unit = readFileSync(join(PACKAGE_ROOT, 'packaging', 'roomkit.service'), 'utf8');
  const setting = (name: string) => new RegExp(`^${name}=(.*)$`, 'm').exec(unit)?.[1];
  const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  const skip = analyze.error ? 'systemd-analyze is not installed on this machine' : false;

  it('signals only the service, once, and waits longer than its own shutdown deadline', () => {
    assert.equal(setting('KillMode'), 'process');
    assert.equal(setting('KillSignal'), 'SIGTERM');
    const stop = /^(\d+)s$/.exec(setting('TimeoutStopSec') ?? '');
    assert.ok(stop, 'TimeoutStopSec in seconds');
    assert.ok(Number(stop[1]) * 1000 > SHUTDOWN_TIMEOUT_MS, 'systemd must not SIGKILL a shutdown the service is still allowed to finish');
    assert.equal(setting('ExecStart'), `${INSTALL_ROOT}/packaging/roomkit-exec serve`);
  });

  it('passes systemd-analyze verify', { skip }, () => {
    // Installed at the repository's path instead of /opt/roomkit, so verify finds the program.
    const dir = scratch();
    const verify = (text: string) => {
      writeFileSync(join(dir, 'roomkit.service'), text.replaceAll(INSTALL_ROOT, PACKAGE_ROOT));
      return spawnSync('systemd-analyze', ['verify', join(dir, 'roomkit.service')], { encoding: 'utf8' });
    };
    const result = verify(unit);
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stderr.trim(), '', 'verify printed warnings');
    // Positive control: verify reports a setting it cannot parse (with status 0), so an empty stderr means something.
    const broken = verify(unit.replace(/^KillMode=process$/m, 'KillMode=sometimes'));
    assert.match(broken.stderr, /kill mode/i);
  });
});
