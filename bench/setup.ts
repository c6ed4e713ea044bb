// Starts roomkit for a benchmark script: the real service (gVisor runtime, SQLite in a
// scratch data directory) listening on a loopback port, with an organization and a key,
// and a close() that stops its instances and removes the directory. Exits with the
// reason when instances cannot run here (not root, runsc missing). In this process
// (startBenchService), or as a `roomkit serve` process of its own
// (startBenchServiceProcess) when the benchmark measures the service's process.
import { spawn } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { INITIAL_KEY_FILE } from '../src/cli/serve.ts';
import { type Config, type ConfigOverrides, loadConfig, PACKAGE_ROOT } from '../src/config.ts';
import { mountsUnder } from '../src/host/mounts.ts';
import { hostTag, listNetns } from '../src/network/netns.ts';
import { buildApp } from '../src/app.ts';
import { createLogger } from '../src/log.ts';
import type { GvisorRuntime } from '../src/runtimes/gvisor/gvisor-runtime.ts';
import { createServices, type Services } from '../src/services.ts';

export interface BenchService {
  config: Config;
  log: Logger;
  services: Services;
  runtime: GvisorRuntime;
  dataDir: string;
  /** The service's base URL, e.g. http://127.0.0.1:41234. */
  base: string;
  /** Bearer key and JSON content type for the benchmark's organization. */
  headers: Record<string, string>;
  organizationId: string;
  close(): Promise<void>;
}

/** The service with its instances in `networkPool` (each script its own, so they never collide), and `settings` over the defaults. */
export async function startBenchService(networkPool: string, settings: ConfigOverrides = {}): Promise<BenchService> {
  const dataDir = mkdtempSync(join(tmpdir(), 'roomkit-bench-'));
  const config = loadConfig({ dataDir, logLevel: 'warn', runtime: 'gvisor', networkPool, onShutdown: 'stop', ...settings });
  const log = createLogger('warn');
  const services = await createServices(config, log);
  if (!('runtime' in services.runtime)) {
    console.error(`cannot benchmark: ${services.runtime.unavailable.reason}`);
    await services.close();
    rmSync(dataDir, { recursive: true, force: true });
    process.exit(1);
  }
  const app = await buildApp(services);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const close = async () => {
    await app.close();
    await services.close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    const { organization } = await services.organizations.ensure('bench');
    const { secret } = await services.organizations.createKey(organization.organization_id, { env: 'test' });
    return {
      config,
      log,
      services,
      runtime: services.runtime.runtime as GvisorRuntime,
      dataDir,
      base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`,
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      organizationId: organization.organization_id,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * A profile `name` (4 GiB disk, no egress, 10-minute commands) and a ready instance of it
 * in room `bench`: the room's URL, the instance's id and its network namespace (for floors
 * by `runsc exec` on the same instance).
 */
export async function benchInstance(bench: BenchService, name: string): Promise<{ roomUrl: string; id: string; netns: string }> {
  const { base, headers, runtime } = bench;
  const profileRes = await fetch(`${base}/api/profiles`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name, disk_mb: 4096, network: { egress: 'none' }, command_timeout_s: 600 }),
  });
  const profile = (await profileRes.json()) as { profile_id: string };
  const roomUrl = `${base}/api/profile/${profile.profile_id}/room/bench`;
  const created = await fetch(roomUrl, { method: 'POST', headers, body: '{}' });
  const instance = (await created.json()) as { instance_id: string; state: string };
  if (instance.state !== 'ready') throw new Error(`the instance did not start: ${JSON.stringify(instance)}`);
  return { roomUrl, id: instance.instance_id, netns: runtime.networkOf(instance.instance_id).netns };
}

export interface BenchServiceProcess {
  /** The service's own process (node running `roomkit serve`), for /proc/<pid>/… */
  pid: number;
  dataDir: string;
  /** The data directory's tag in host names (network namespaces, firewall table). */
  tag: string;
  base: string;
  headers: Record<string, string>;
  /** Where the service's log goes (its stderr and stdout). */
  logFile: string;
  /** Stops the service (SIGTERM, stopping its instances), makes sure none is left, removes the data directory. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * The service as a process of its own, `roomkit serve` on a loopback port with `env`
 * added to this process's environment (ROOMKIT_* settings), so that what is measured of
 * it (resident memory, descriptors) is the service's alone and not the load's. It runs
 * in a process group of its own: a Ctrl-C at the terminal reaches the benchmark, which
 * stops it once through close(). Uses the key of the organization `default` that a first
 * start makes (none when the store had it already: a node joining others).
 */
export async function startBenchServiceProcess(networkPool: string, env: Record<string, string>): Promise<BenchServiceProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'roomkit-bench-'));
  const logFile = join(tmpdir(), `${basename(dataDir)}.log`);
  const log = openSync(logFile, 'a', 0o600);
  const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'src/cli/main.ts'), 'serve'], {
    env: {
      ...process.env,
      ROOMKIT_DATA_DIR: dataDir,
      ROOMKIT_HOST: '127.0.0.1',
      ROOMKIT_PORT: '0',
      ROOMKIT_RUNTIME: 'gvisor',
      ROOMKIT_NETWORK_POOL: networkPool,
      ROOMKIT_ON_SHUTDOWN: 'stop',
      ROOMKIT_LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', log, 'pipe'],
    detached: true,
  });
  closeSync(log);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const done = await Promise.race([exited.then(() => true), sleep(45_000, undefined, { ref: false }).then(() => false)]);
        if (!done) {
          child.kill('SIGKILL');
          await exited;
        }
      }
      // Whatever state it ended in: a service on the same data directory adopts what
      // is left and stops it (ROOMKIT_ON_SHUTDOWN=stop), then the directory goes.
      if (existsSync(dataDir) && (listNetns(hostTag(dataDir)).length > 0 || mountsUnder(dataDir).length > 0)) {
        const config = loadConfig({ dataDir, logLevel: 'warn', runtime: 'gvisor', networkPool, onShutdown: 'stop', ...(env.ROOMKIT_IMAGES_DIR ? { imagesDir: env.ROOMKIT_IMAGES_DIR } : {}) });
        const services = await createServices(config, createLogger('warn'));
        await services.close();
      }
      rmSync(dataDir, { recursive: true, force: true });
    })());
  try {
    const base = await new Promise<string>((resolve, reject) => {
      let text = '';
      child.stderr!.setEncoding('utf8');
      child.stderr!.on('data', (chunk: string) => {
        appendFileSync(logFile, chunk);
        text += chunk;
        const match = /roomkit listening on (http:\/\/\S+)/.exec(text);
        if (match) resolve(match[1]!);
      });
      child.once('exit', (code) => reject(new Error(`roomkit serve exited with ${code} before listening; its log: ${logFile}`)));
      sleep(120_000, undefined, { ref: false }).then(() => reject(new Error(`roomkit serve did not listen within 120 s; its log: ${logFile}`)));
    });
    // A node joining a shared store whose organization exists already makes no key.
    const keyFile = join(dataDir, INITIAL_KEY_FILE);
    const key = existsSync(keyFile) ? readFileSync(keyFile, 'utf8').trim() : '';
    return {
      pid: child.pid!,
      dataDir,
      tag: hostTag(dataDir),
      base,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      logFile,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
