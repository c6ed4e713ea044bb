// `roomkit backup`: the real command copies a store while the service has it open and
// writes to it; the copy is whole, self-contained and owner-only, and a service started
// on it after a restore (copy over roomkit.sqlite) serves the data it held. A store in
// PostgreSQL is left to pg_dump, which the command names. A store a newer version
// migrated is refused, on either store.
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { Kysely } from 'kysely';
import type { Database } from '../../src/store/schema.ts';
import { dialectOf, storeSettings } from '../../src/store/store-settings.ts';
import { SQLITE_FILE } from '../../src/store/sqlite/sqlite-connection.ts';
import { migrationProvider } from '../../src/store/migrations.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { run, scratchDirs } from '../support/cli.ts';
import { dropTestStore, TEST_STORE, testStoreConfig } from '../support/test-store.ts';

const scratch = scratchDirs();
let t: TestApp;
let org: TestOrg;

before(async () => {
  t = await startTestApp({ config: { rateLimitKeyRequests: 0, rateLimitOrgRequests: 0 } }); // the writer below outpaces any request limit
  org = await t.newOrg('backed-up');
  const profile = await t.app.inject({ method: 'POST', url: '/api/profiles', headers: org.headers, payload: { name: 'before-backup' } });
  assert.equal(profile.statusCode, 201);
  const room = `/api/profile/${org.defaultProfileId}/room/kept`;
  assert.equal((await t.app.inject({ method: 'POST', url: room, headers: org.headers, payload: {} })).statusCode, 201);
  assert.equal((await t.app.inject({ method: 'POST', url: `${room}/command`, headers: org.headers, payload: { command: 'echo kept' } })).statusCode, 200);
});
after(() => t.close());

describe('roomkit backup', { skip: TEST_STORE !== 'sqlite' && 'copies the SQLite store; a PostgreSQL one is pg_dump\'s' }, () => {
  let file: string;

  it('copies the store while the service is open and writing', async () => {
    file = join(scratch(), 'roomkit-backup.sqlite');
    let writing = true;
    let writes = 0;
    const writer = (async () => {
      while (writing) {
        const res = await t.app.inject({ method: 'POST', url: '/api/profiles', headers: org.headers, payload: { name: `during-${writes}` } });
        assert.equal(res.statusCode, 201);
        writes++;
      }
    })();
    const result = await run(['backup', file, '--data-dir', t.dataDir, '--json']);
    writing = false;
    await writer;
    assert.equal(result.code, 0, result.stderr);
    assert.ok(writes > 0, 'the service wrote while the backup ran');
    const printed = JSON.parse(result.stdout) as { file: string; bytes: number; migration: string };
    assert.equal(printed.file, file);
    assert.equal(printed.bytes, statSync(file).size);
    assert.equal(printed.migration, Object.keys(await migrationProvider.getMigrations()).at(-1));
    assert.equal(statSync(file).mode & 0o777, 0o600);
    // One self-contained file: no write-ahead log beside it, none needed to read it.
    assert.equal(existsSync(`${file}-wal`), false);

    const copy = new SQLite(file, { readonly: true, fileMustExist: true });
    try {
      assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok');
      assert.equal(copy.pragma('journal_mode', { simple: true }), 'delete');
      const names = (copy.prepare('SELECT name FROM profiles').all() as { name: string }[]).map((r) => r.name);
      assert.ok(names.includes('before-backup'));
      const commands = copy.prepare("SELECT command FROM commands WHERE command = 'echo kept'").all();
      assert.equal(commands.length, 1);
      const audited = copy.prepare("SELECT count(*) AS n FROM audit_events WHERE action = 'command.run'").get() as { n: number };
      assert.equal(audited.n, 1);
    } finally {
      copy.close();
    }
  });

  it('restores: a service started on the copy serves its data', async () => {
    const dataDir = scratch();
    copyFileSync(file, join(dataDir, SQLITE_FILE));
    const restored = await startTestApp({ config: { dataDir } });
    try {
      const profiles = await restored.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers });
      assert.equal(profiles.statusCode, 200, profiles.body);
      assert.ok(profiles.json().profiles.some((p: { name: string }) => p.name === 'before-backup'));
      const history = await restored.app.inject({ method: 'GET', url: `/api/profile/${org.defaultProfileId}/room/kept/commands`, headers: org.headers });
      assert.deepEqual(history.json().commands.map((c: { command: string }) => c.command), ['echo kept']);
    } finally {
      await restored.close();
    }
  });

  it('refuses to replace a file unless forced, and names a missing store', async () => {
    const again = await run(['backup', file, '--data-dir', t.dataDir]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /exists; remove it or pass --force/);
    const forced = await run(['backup', file, '--data-dir', t.dataDir, '--force']);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stdout, /^Backed up .* to .*roomkit-backup\.sqlite/);
    const empty = scratch();
    const missing = await run(['backup', join(empty, 'x.sqlite'), '--data-dir', join(empty, 'nothing-here')]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /there is no roomkit store at/);
  });
});

describe('roomkit backup of a PostgreSQL store', () => {
  it('names pg_dump instead of copying, and never shows the password', async () => {
    const dir = scratch();
    const res = await run(['backup', join(dir, 'x.dump'), '--data-dir', dir], { env: { ROOMKIT_DATABASE_URL: 'postgres://roomkit:s3cret-pw@db.example.com:6543/records' } });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /the store is the PostgreSQL database db\.example\.com:6543\/records \(ROOMKIT_DATABASE_URL\).*pg_dump --format=custom/);
    assert.doesNotMatch(res.stderr, /s3cret-pw|\n\s+at /);
    assert.equal(existsSync(join(dir, 'x.dump')), false);
  });
});

describe('a downgrade', () => {
  it('refuses a store a newer version migrated, saying what to do, and leaves it as it was', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'roomkit-downgrade-'));
    const first = await startTestApp({ config: { dataDir } });
    await first.services.db
      .insertInto('kysely_migration' as never)
      .values({ name: '9999_from_a_newer_version', timestamp: new Date().toISOString() } as never)
      .execute();
    await first.services.close();
    await assert.rejects(startTestApp({ config: { dataDir } }), /the store has migration 9999_from_a_newer_version, which this version of roomkit does not know/);
    // Read without opening it as a store (which migrates, and refuses it).
    const raw = new Kysely<Database>({ dialect: dialectOf(storeSettings({ dataDir, ...(await testStoreConfig(dataDir)) })) });
    const names = (await raw.selectFrom('kysely_migration' as never).select('name' as never).orderBy('name' as never).execute()) as { name: string }[];
    await raw.destroy();
    assert.equal(names.at(-1)?.name, '9999_from_a_newer_version');
    rmSync(dataDir, { recursive: true, force: true });
    await dropTestStore(dataDir);
  });
});
