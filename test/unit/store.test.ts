// The store: the database the tests run on is the one asked for (ROOMKIT_TEST_STORE:
// a PostgreSQL run that fell back to SQLite fails here), the settings that choose it,
// what a store that cannot be reached says, migrations by several processes at once on
// one empty PostgreSQL database, and two services on one PostgreSQL store, as two nodes
// share it: racing creates for one room make one instance, and racing creates and
// commands never take more than a quota; a delete that meets provisioning halfway; and
// text with a NUL character, which PostgreSQL cannot store.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { openStore, storeDialectOf } from '../../src/store/db.ts';
import { migrationProvider } from '../../src/store/migrations.ts';
import { SQLITE_FILE } from '../../src/store/sqlite/sqlite-connection.ts';
import { storeSettings } from '../../src/store/store-settings.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { dropTestStore, TEST_STORE, testStoreConfig } from '../support/test-store.ts';
import { untilTrue } from '../support/until.ts';

describe('the store in use', () => {
  it('is the one the run asked for', async () => {
    const t = await startTestApp();
    try {
      assert.equal(storeDialectOf(t.services.db), TEST_STORE);
      if (TEST_STORE === 'postgres') {
        const { rows } = await sql<{ version: string }>`select version() as version`.execute(t.services.db);
        assert.match(rows[0]!.version, /^PostgreSQL \d+/);
        assert.equal(existsSync(join(t.dataDir, SQLITE_FILE)), false, 'no SQLite file beside the PostgreSQL store');
      } else {
        assert.equal(existsSync(join(t.dataDir, SQLITE_FILE)), true);
      }
    } finally {
      await t.close();
    }
  });
});

describe('store settings', () => {
  it('chooses PostgreSQL by ROOMKIT_DATABASE_URL, with its pool size, and SQLite in the data directory without it', () => {
    const env = { ROOMKIT_DATABASE_URL: 'postgresql://roomkit:pw@db.example.com:6543/records', ROOMKIT_DATABASE_POOL_SIZE: '25' };
    assert.deepEqual(storeSettings(loadConfig({ dataDir: '/srv/roomkit' }, env)), {
      dialect: 'postgres',
      url: 'postgresql://roomkit:pw@db.example.com:6543/records',
      poolSize: 25,
    });
    assert.deepEqual(storeSettings(loadConfig({ dataDir: '/srv/roomkit' }, {})), { dialect: 'sqlite', dataDir: '/srv/roomkit' });
    assert.equal(loadConfig({}, {}).databasePoolSize, 10);
  });

  it('refuses a URL that is not PostgreSQL\'s, without repeating its password', () => {
    for (const url of ['mysql://roomkit:hunter2-pw@db/x', 'postgres//roomkit:hunter2-pw@db/x', 'postgres:///x']) {
      assert.throws(
        () => loadConfig({}, { ROOMKIT_DATABASE_URL: url }),
        (err: unknown) => err instanceof ConfigError && /ROOMKIT_DATABASE_URL must be a PostgreSQL URL/.test(err.message) && !err.message.includes('hunter2-pw'),
        url,
      );
    }
    assert.throws(() => loadConfig({}, { ROOMKIT_DATABASE_POOL_SIZE: '0' }), /ROOMKIT_DATABASE_POOL_SIZE must be a whole number from 1 to 1000/);
  });

  it('says what to fix when the server cannot be reached, naming the server, never the password', async () => {
    await assert.rejects(
      openStore({ dataDir: '', databaseUrl: 'postgres://roomkit:hunter2-pw@127.0.0.1:1/records' }),
      (err: Error) =>
        /^cannot reach PostgreSQL at 127\.0\.0\.1:1\/records \(ECONNREFUSED\): check the host and port of ROOMKIT_DATABASE_URL/.test(err.message) &&
        !err.message.includes('hunter2-pw'),
    );
  });
});

describe('migrations by several processes at once', { skip: TEST_STORE !== 'postgres' && 'PostgreSQL: SQLite has one writer' }, () => {
  it('migrates one empty database once while four stores open it together', async () => {
    // A database of its own, left empty: not a copy of the migrated template.
    const dataDir = mkdtempSync(join(tmpdir(), 'roomkit-migrations-'));
    const { databaseUrl } = await testStoreConfig(dataDir);
    const admin = await openStore({ dataDir, databaseUrl: databaseUrl! });
    const name = new URL(databaseUrl!).pathname.slice(1);
    const emptyUrl = databaseUrl!.replace(name, `${name}_empty`);
    await sql`create database ${sql.id(`${name}_empty`)}`.execute(admin);
    try {
      const stores = await Promise.all(Array.from({ length: 4 }, () => openStore({ dataDir, databaseUrl: emptyUrl, databasePoolSize: 2 })));
      const applied = await stores[0]!.selectFrom('kysely_migration' as never).select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow();
      assert.equal((applied as { n: number }).n, Object.keys(await migrationProvider.getMigrations()).length);
      for (const store of stores) await store.destroy();
    } finally {
      await sql`drop database if exists ${sql.id(`${name}_empty`)} with (force)`.execute(admin);
      await admin.destroy();
      await dropTestStore(dataDir);
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('two services on one store', { skip: TEST_STORE !== 'postgres' && 'PostgreSQL: several nodes share only that store' }, () => {
  let dataDir: string;
  let a: TestApp;
  let b: TestApp;
  let org: TestOrg;
  const room = (name: string) => `/api/profile/${org.defaultProfileId}/room/${name}`;
  const create = (t: TestApp, name: string) => t.app.inject({ method: 'POST', url: room(name), headers: org.headers, payload: { wait: false } });
  const command = (t: TestApp, name: string, text: string) =>
    t.app.inject({ method: 'POST', url: `${room(name)}/command`, headers: org.headers, payload: { command: text } });

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'roomkit-two-services-'));
    // Both start before any instance exists: a service's start reconciles the store with
    // its own runtime, which does not know the other's instances.
    const config = { dataDir, quotaInstances: 3, quotaCommandsPerMinute: 6, quotaConcurrentCommands: 100, rateLimitKeyRequests: 0, rateLimitOrgRequests: 0 };
    a = await startTestApp({ config, onShutdown: 'keep' });
    b = await startTestApp({ config, onShutdown: 'keep' });
    org = await a.newOrg();
  });
  after(async () => {
    await a.close();
    await b.close();
    rmSync(dataDir, { recursive: true, force: true });
    await dropTestStore(dataDir);
  });

  it('make one instance when creates race for one room through both', async () => {
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => create(i % 2 === 0 ? a : b, 'contested')));
    const ids = new Set(answers.map((res) => res.json().instance_id));
    assert.equal(ids.size, 1, answers.map((res) => res.body).join('\n'));
    assert.equal(answers.filter((res) => res.statusCode === 201 || res.statusCode === 202).length, 1, answers.map((res) => res.statusCode).join(','));
    const rows = await a.services.db.selectFrom('instances').select('id').where('room_id', '=', 'contested').execute();
    assert.equal(rows.length, 1);
  });

  it('never take more than the instances quota when creates race through both', async () => {
    // One live instance (the room above) of the quota's three: two more fit.
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => create(i % 2 === 0 ? a : b, `quota-${i}`)));
    const codes = answers.map((res) => res.statusCode).sort();
    assert.deepEqual(codes, [202, 202, 403, 403, 403, 403, 403, 403], answers.map((res) => res.body).join('\n'));
    const live = await a.services.db
      .selectFrom('instances')
      .select(sql<number>`count(*)`.as('n'))
      .where('organization_id', '=', org.organizationId)
      .where('state', 'not in', ['stopped', 'failed'])
      .executeTakeFirstOrThrow();
    assert.equal(live.n, 3);
  });

  it('never start more commands than the per-minute quota when they race through both', async () => {
    await untilTrue('the contested room\'s instance to be ready', async () => {
      const res = await a.app.inject({ method: 'GET', url: room('contested'), headers: org.headers });
      return res.json().state === 'ready';
    });
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => command(i % 2 === 0 ? a : b, 'contested', `echo ${i}`)));
    const codes = answers.map((res) => res.statusCode);
    // The owner's runtime runs them; a command through the other service reaches no machine
    // of its own (its test double has none), which it answers as it answers that, not as a quota.
    assert.equal(codes.filter((c) => c === 429).length, 4, answers.map((res) => `${res.statusCode} ${res.body}`).join('\n'));
    const started = await a.services.db
      .selectFrom('commands')
      .select(sql<number>`count(*)`.as('n'))
      .where('organization_id', '=', org.organizationId)
      .executeTakeFirstOrThrow();
    assert.equal(started.n, 6);
  });
});

describe('state changes that race', () => {
  it('a delete while provisioning records its steps stops the instance, never an error', async () => {
    const t = await startTestApp();
    try {
      const org = await t.newOrg();
      t.runtime.options = { stepDelayMs: 1 };
      for (let i = 0; i < 12; i++) {
        const url = `/api/profile/${org.defaultProfileId}/room/raced-${i}`;
        const created = await t.app.inject({ method: 'POST', url, headers: org.headers, payload: { wait: false } });
        assert.equal(created.statusCode, 202, created.body);
        // Each delete meets provisioning at another step.
        await new Promise((resolve) => setTimeout(resolve, i % 6));
        const deleted = await t.app.inject({ method: 'DELETE', url, headers: org.headers });
        assert.equal(deleted.statusCode, 200, deleted.body);
        assert.equal(deleted.json().state, 'stopped');
      }
    } finally {
      await t.close();
    }
  });
});

describe('text PostgreSQL cannot hold', () => {
  it('refuses a label or a name with a NUL character, and records a request that carried one with U+FFFD in its place', async () => {
    const t = await startTestApp();
    try {
      const org = await t.newOrg();
      const room = `/api/profile/${org.defaultProfileId}/room/nul`;
      const labelled = await t.app.inject({ method: 'POST', url: room, headers: org.headers, payload: { metadata: { k: 'a\u0000b' } } });
      assert.equal(labelled.statusCode, 400, labelled.body);
      assert.match(labelled.json().message, /metadata k: the value contains a NUL character/);
      const filtered = await t.app.inject({ method: 'GET', url: `/api/instances?metadata=${encodeURIComponent('k=a\u0000b')}`, headers: org.headers });
      assert.equal(filtered.statusCode, 400, filtered.body);
      assert.equal((await t.app.inject({ method: 'POST', url: room, headers: org.headers, payload: {} })).statusCode, 201);
      for (const [url, payload] of [[`${room}/snapshots`, { name: 'a\u0000b' }], ['/api/keys', { name: 'a\u0000b' }]] as const) {
        const named = await t.app.inject({ method: 'POST', url, headers: org.headers, payload });
        assert.equal(named.statusCode, 400, `${url}: ${named.body}`);
        assert.match(named.json().message, /name contains a NUL character/);
      }
      const refused = await t.app.inject({ method: 'POST', url: `${room}/command`, headers: org.headers, payload: { command: 'echo a\u0000b' } });
      assert.equal(refused.statusCode, 400, refused.body);
      // One record the store refused would hold back every other record of its batch.
      await t.services.audit.flush();
      const { events } = (await t.app.inject({ method: 'GET', url: '/api/audit?action=command.run', headers: org.headers })).json() as { events: { command: string | null }[] };
      assert.deepEqual(events.map((e) => e.command), ['echo a\uFFFDb']);
      const byRoom = await t.app.inject({ method: 'GET', url: `/api/audit?room_id=${encodeURIComponent('a\u0000b')}`, headers: org.headers });
      assert.equal(byRoom.statusCode, 200, byRoom.body);
      assert.deepEqual(byRoom.json().events, []);
    } finally {
      await t.close();
    }
  });
});
