// Builds a real roomkit app (a real store: SQLite in a temporary data directory, or a
// PostgreSQL database of its own, as test-store.ts chooses) for in-process tests, with a
// test double as the runtime unless one is given.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ConfigOverrides, loadConfig, PACKAGE_ROOT } from '../../src/config.ts';
import { buildApp } from '../../src/app.ts';
import type { App } from '../../src/http/types.ts';
import { createLogger } from '../../src/log.ts';
import type { GvisorRuntime } from '../../src/runtimes/gvisor/gvisor-runtime.ts';
import type { RuntimeSelection } from '../../src/runtimes/types.ts';
import { createServices, type Services } from '../../src/services.ts';
import { FakeRuntime } from './fake-runtime.ts';
import { hostObjects, NOTHING } from './host.ts';
import { dropTestStore, testStoreConfig } from './test-store.ts';

export interface TestOrg {
  organizationId: string;
  apiKey: string;
  /** The id of the organization's `default` profile. */
  defaultProfileId: string;
  headers: Record<string, string>;
}

export interface TestApp {
  app: App;
  services: Services;
  /** The runtime test double (unused when a runtime selection was given). */
  runtime: FakeRuntime;
  dataDir: string;
  /** A new organization with a key; each call makes another. */
  newOrg(name?: string): Promise<TestOrg>;
  /** Creates a profile of the organization through the API (asserting 201) and returns its id. */
  createProfile(org: TestOrg, fields: Record<string, unknown>): Promise<string>;
  /** The gVisor runtime of a `gvisorPool` app; fails the test with the reason when it is unavailable. */
  gvisor(): GvisorRuntime;
  close(): Promise<void>;
  /**
   * Closes the services (stopping their instances), checks that nothing of them is
   * left on the host (namespaces, interfaces, mounts, sandboxes, processes), then closes.
   */
  closeLeavingNothing(): Promise<void>;
}

let orgCounter = 0;

/** Test data directories are made in the temporary directory with this prefix. */
export const TEST_DATA_PREFIX = 'roomkit-test-';
/** In each test data directory: `{pid, pool}` of the test process that made it. */
export const TEST_OWNER_FILE = 'test-owner.json';

/**
 * A new data directory in the temporary directory, marked with this process and the
 * address pool its instances use, so that a later run can clean up after this process
 * if it is killed before it does (test/support/reap-stale.ts).
 */
export function testDataDir(prefix: string, pool: string | null): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(join(dir, TEST_OWNER_FILE), JSON.stringify({ pid: process.pid, pool }));
  return dir;
}

/** Images built by tests are cached here across test files and runs. */
export const TEST_IMAGES_DIR = join(PACKAGE_ROOT, '.roomkit-test', 'images');

export interface TestAppOptions {
  selection?: RuntimeSelection;
  fake?: FakeRuntime;
  /** Use the real gVisor runtime, with instances in this address pool. */
  gvisorPool?: string;
  onShutdown?: 'keep' | 'stop';
  /** Further settings, as flags would give them. */
  config?: ConfigOverrides;
  /** Called with the app before it is ready, e.g. to add a hook standing in for another part of the service. */
  beforeReady?: (app: App) => void;
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  // A data directory of its own, removed on close, unless the test gives one (and owns it).
  const given = options.config?.dataDir;
  const dataDir = given === undefined ? testDataDir(TEST_DATA_PREFIX, options.gvisorPool ?? null) : String(given);
  const removeDataDir = async () => {
    if (given !== undefined) return;
    rmSync(dataDir, { recursive: true, force: true });
    await dropTestStore(dataDir);
  };
  const real = options.gvisorPool !== undefined;
  const config = loadConfig(
    {
      dataDir,
      ...(await testStoreConfig(dataDir)),
      logLevel: 'silent',
      // No network slots unless a test asks for them: tests that look at the host find
      // exactly what their instances hold (test/host/network-slots.test.ts has the slots).
      ...(real ? { runtime: 'gvisor', networkPool: options.gvisorPool, imagesDir: TEST_IMAGES_DIR, networkSlots: 0 } : {}),
      onShutdown: options.onShutdown ?? 'stop',
      // Tests send bad keys on purpose, all from one address: throttling is
      // test/unit/auth-throttle.test.ts's subject, which turns it on.
      authFailureBurst: 0,
      ...options.config,
    },
    {},
  );
  const log = createLogger(process.env.ROOMKIT_TEST_LOG_LEVEL === undefined ? 'silent' : (process.env.ROOMKIT_TEST_LOG_LEVEL as 'info'));
  const runtime = options.fake ?? new FakeRuntime();
  let services: Services;
  let app: App;
  try {
    services = await createServices(config, log, real ? {} : { runtime: options.selection ?? { runtime } });
    app = await buildApp(services);
    options.beforeReady?.(app);
    await app.ready();
  } catch (err) {
    await removeDataDir();
    throw err;
  }
  const close = async () => {
    await app.close();
    await services.close();
    await removeDataDir();
  };
  return {
    app,
    services,
    runtime,
    dataDir,
    async newOrg(name = `org-${process.pid}-${++orgCounter}`) {
      const { organization } = await services.organizations.ensure(name);
      const { secret } = await services.organizations.createKey(organization.organization_id, { env: 'test' });
      const profiles = await services.profiles.list(organization.organization_id);
      const defaultProfile = profiles.find((p) => p.name === 'default');
      if (!defaultProfile) throw new Error('new organization has no default profile');
      return {
        organizationId: organization.organization_id,
        apiKey: secret,
        defaultProfileId: defaultProfile.profile_id,
        headers: { authorization: `Bearer ${secret}` },
      };
    },
    async createProfile(org, fields) {
      const res = await app.inject({ method: 'POST', url: '/api/profiles', headers: org.headers, payload: fields });
      assert.equal(res.statusCode, 201, res.body);
      return (res.json() as { profile_id: string }).profile_id;
    },
    gvisor() {
      const selection = services.runtime;
      assert.ok('runtime' in selection, `the gVisor runtime is not available: ${'unavailable' in selection ? selection.unavailable.reason : ''}`);
      return selection.runtime as GvisorRuntime;
    },
    close,
    async closeLeavingNothing() {
      try {
        await services.close();
        // The firewall table goes with the last instance; its egress set is checked per test where it matters.
        assert.deepEqual({ ...(await hostObjects(dataDir)), egressRules: [] }, NOTHING);
      } finally {
        await close();
      }
    },
  };
}
