// `roomkit serve`: runs the HTTP API until SIGTERM or SIGINT, then shuts down in order:
// stop accepting connections, let requests in flight finish, stop background work,
// close the store.
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type ConfigOverrides, loadConfig } from '../config.ts';
import { buildApp } from '../app.ts';
import type { App } from '../http/types.ts';
import { createLogger } from '../log.ts';
import { createServices, type Services } from '../services.ts';
import { describeDatabase } from '../store/postgres/postgres-errors.ts';

export const INITIAL_KEY_FILE = 'initial-api-key';
/** How long a graceful shutdown may take before the service exits on its own (packaging/ allows for it). */
export const SHUTDOWN_TIMEOUT_MS = 30_000;
/** A signal this soon after the first is the same stop delivered twice, not a second request. */
const REPEATED_SIGNAL_MS = 1000;

export async function serve(overrides: ConfigOverrides): Promise<void> {
  const config = loadConfig(overrides);
  const log = createLogger(config.logLevel);
  const services = await createServices(config, log);
  let app: App | undefined;

  // Installed before anything listens, so a signal at any point shuts down cleanly.
  let stopping: Promise<void> | undefined;
  let firstSignalAt = 0;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) {
      // One stop often arrives twice within moments: Ctrl-C or a supervisor signals the
      // whole process group, and bin/roomkit.mjs (running this under an older Node)
      // forwards the same signal. Only a later one is someone insisting.
      if (Date.now() - firstSignalAt < REPEATED_SIGNAL_MS) {
        log.info({ signal }, 'signal repeated while shutting down; still shutting down');
        return;
      }
      log.warn({ signal }, 'second signal during shutdown; exiting at once');
      process.exit(1);
    }
    firstSignalAt = Date.now();
    log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      log.error({ timeoutMs: SHUTDOWN_TIMEOUT_MS }, 'shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    stopping = (async () => {
      try {
        await app?.close();
        await services.close();
        log.info('shutdown complete');
        process.exitCode = 0;
      } catch (err) {
        log.error({ err }, 'shutdown failed');
        process.exitCode = 1;
      } finally {
        clearTimeout(timer);
      }
    })();
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);

  let initialKeyFile: string | null;
  try {
    initialKeyFile = await createFirstOrganization(services);
    app = await buildApp(services);
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    process.off('SIGTERM', shutdown);
    process.off('SIGINT', shutdown);
    await app?.close();
    await services.close();
    throw err;
  }
  if (stopping) return;
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const base = `http://${host}:${address.port}`;
  const store = config.databaseUrl === undefined ? 'sqlite' : `postgres ${describeDatabase(config.databaseUrl)}`;
  log.info({ url: base, dataDir: config.dataDir, store }, 'roomkit listening');
  if (services.nodes) {
    // A node among the ones sharing the store: the others reach it at this address.
    const nodeUrl = config.nodeUrl ?? base;
    await services.nodes.join(nodeUrl);
    process.stderr.write(`roomkit node ${services.nodes.nodeId} joined the nodes of its store, reached at ${nodeUrl}\n`);
  }
  if (initialKeyFile) announce(log, initialKeyFile, base);
  process.stderr.write(`roomkit listening on ${base} (API reference: ${base}/docs)\n`);
}

/**
 * On the first start of an empty data directory, makes an organization and a key so a
 * newcomer can call the API at once. The key goes to a file only the owner can read.
 */
async function createFirstOrganization(services: Services): Promise<string | null> {
  if ((await services.organizations.count()) > 0) return null;
  const { organization } = await services.organizations.ensure('default');
  const { secret } = await services.organizations.createKey(organization.organization_id, { env: 'live', name: 'initial' });
  const file = join(services.config.dataDir, INITIAL_KEY_FILE);
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return file;
}

function announce(log: Logger, file: string, base: string): void {
  log.info({ file }, 'created organization "default" and its first API key');
  process.stderr.write(
    `\nFirst start: created organization "default" with an API key, saved in\n  ${file}\n` +
      `(readable only by you). Use it like this:\n` +
      `  export ROOMKIT_API_KEY=$(cat ${file})\n` +
      `  curl -H "Authorization: Bearer $ROOMKIT_API_KEY" ${base}/api/profiles\n\n`,
  );
}
