// Starts roomkit for a benchmark script: the real service (gVisor runtime, SQLite in a
// scratch data directory) listening on a loopback port, with an organization and a key,
// and a close() that stops its instances and removes the directory. Exits with the
// reason when instances cannot run here (not root, runsc missing).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type Config, loadConfig } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
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

/** The service with its instances in `networkPool` (each script its own, so they never collide). */
export async function startBenchService(networkPool: string): Promise<BenchService> {
  const dataDir = mkdtempSync(join(tmpdir(), 'roomkit-bench-'));
  const config = loadConfig({ dataDir, logLevel: 'warn', runtime: 'gvisor', networkPool, onShutdown: 'stop' });
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
