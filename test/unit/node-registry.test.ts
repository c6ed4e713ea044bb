// The node registry on the test store (SQLite, or PostgreSQL in a PostgreSQL run), with
// a clock of the test's: nodes join and show their figures; a silent node is declared
// lost by exactly one of the nodes that look at once, and joins again when it comes
// back; a clean shutdown records that it left. The operator route answers the nodes
// with a PostgreSQL store, and says why not with SQLite.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { nodeIdOf } from '../../src/host/node-identity.ts';
import { NodeRegistry } from '../../src/cluster/node-registry.ts';
import { placementFor, rankNodes } from '../../src/core/placement.ts';
import type { AppError } from '../../src/errors.ts';
import { type Db, openStore } from '../../src/store/db.ts';
import type { AddressInfo } from 'node:net';
import { startTestApp } from '../support/app.ts';
import { run } from '../support/cli.ts';
import { dropTestStore, TEST_STORE, testStoreConfig } from '../support/test-store.ts';

const log = pino({ level: 'silent' });
let dataDir: string;
let db: Db;
let clock = Date.parse('2026-11-26T12:00:00.000Z');

function node(id: string, instances = 0): NodeRegistry {
  return new NodeRegistry({
    db,
    log,
    nodeId: id,
    version: '0.1.0',
    heartbeatMs: 3_600_000, // beats are driven by the test (beatNow)
    lostAfterMs: 10_000,
    measure: async () => ({ capacity: { memory_mb: 1000, vcpus: 2, disk_mb: 5000 }, load: { instances, memory_in_use_mb: 10 * instances } }),
    now: () => clock,
  });
}

/** One heartbeat of `registry` now, as its timer would run it. */
const beatNow = (registry: NodeRegistry) => (registry as unknown as { beat(): Promise<void> }).beat();

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'roomkit-nodes-'));
  db = await openStore({ dataDir, ...(await testStoreConfig(dataDir)) });
});

after(async () => {
  await db.destroy();
  await dropTestStore(dataDir);
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the node registry', () => {
  it('lists the nodes that joined, with their address and figures', async () => {
    const a = node('node-a', 3);
    const b = node('node-b');
    await a.join('http://10.0.0.1:8080');
    await b.join('http://10.0.0.2:8080');
    const listed = await a.list();
    assert.deepEqual(listed.map((n) => [n.node_id, n.state, n.url]).sort(), [
      ['node-a', 'active', 'http://10.0.0.1:8080'],
      ['node-b', 'active', 'http://10.0.0.2:8080'],
    ]);
    const mine = listed.find((n) => n.node_id === 'node-a')!;
    assert.deepEqual([mine.load.instances, mine.capacity.memory_mb, mine.heartbeat_age_ms], [3, 1000, 0]);
    await a.leave();
    await b.leave();
  });

  it('declares a silent node lost: exactly one of the nodes that look at once does', async () => {
    const [a, b, c] = [node('race-a'), node('race-b'), node('race-c')];
    for (const [n, i] of [[a, 1], [b, 2], [c, 3]] as const) await n.join(`http://10.0.1.${i}:8080`);
    clock += 6_000;
    await beatNow(a);
    await beatNow(b);
    // c is silent; not yet past the limit.
    assert.deepEqual(await a.declareLost(), []);
    // Past the limit for c, not for a and b (their last beats were 6 s ago): they look at once.
    clock += 6_000;
    const declared = await Promise.all([a.declareLost(), b.declareLost(), a.declareLost()]);
    assert.deepEqual(declared.flat(), ['race-c'], 'one declaration, by one node');
    const lost = (await a.list()).find((n) => n.node_id === 'race-c')!;
    assert.equal(lost.state, 'lost');
    assert.ok(lost.lost_by === 'race-a' || lost.lost_by === 'race-b', String(lost.lost_by));
    assert.equal(lost.lost_at, new Date(clock).toISOString());

    // It comes back: its next heartbeat finds it lost, and it joins again.
    await beatNow(c);
    const back = (await a.list()).find((n) => n.node_id === 'race-c')!;
    assert.deepEqual([back.state, back.lost_by, back.heartbeat_age_ms], ['active', null, 0]);
    for (const n of [a, b, c]) await n.leave();
  });

  it('records a clean shutdown as left, and a node that left is not declared lost', async () => {
    const a = node('leaves-a');
    const b = node('leaves-b');
    await a.join('http://10.0.2.1:8080');
    await b.join('http://10.0.2.2:8080');
    await b.leave();
    clock += 60_000;
    await beatNow(a);
    assert.deepEqual(await a.declareLost(), []);
    assert.equal((await a.list()).find((n) => n.node_id === 'leaves-b')?.state, 'left');
    await a.leave();
  });

  it('drains a node and makes it active again; a drained node stays drained when it starts again, and gets no creates placed', async () => {
    const c = node('node-c');
    const d = node('node-d');
    await c.join('http://10.0.0.3:8080');
    await d.join('http://10.0.0.4:8080');
    const ranked = async () => (await rankNodes({ db, profileId: undefined, lostAfterMs: 10_000, now: clock })).map((n) => n.nodeId);
    assert.ok((await ranked()).includes('node-c'), 'positive control: an active node is a candidate');
    // Alike in everything, nodes come in the order of their draws: reversed draws, reversed order.
    const order = async (draws: number[]) =>
      (await rankNodes({ db, profileId: undefined, lostAfterMs: 10_000, now: clock, random: () => draws.shift() ?? 0.5 })).map((n) => n.nodeId).filter((id) => id === 'node-c' || id === 'node-d');
    const one = await order([0.9, 0.1]);
    const other = await order([0.1, 0.9]);
    assert.equal(one.length, 2);
    assert.deepEqual(other, [...one].reverse());
    assert.equal((await d.setState('node-c', 'draining')).state, 'draining');
    assert.ok(!(await ranked()).includes('node-c'), 'a draining node gets no creates');
    await beatNow(c);
    await c.join('http://10.0.0.3:8080'); // as after a restart
    const row = await db.selectFrom('nodes').select('state').where('id', '=', 'node-c').executeTakeFirstOrThrow();
    assert.equal(row.state, 'draining');
    assert.equal((await d.setState('node-c', 'active')).state, 'active');
    assert.ok((await ranked()).includes('node-c'));
    await assert.rejects(d.setState('no-such-node', 'draining'), (err: AppError) => err.code === 'node_not_found');
    await c.leave();
    await assert.rejects(d.setState('node-c', 'draining'), (err: AppError) => err.code === 'node_not_active' && /left/.test(err.message));
    await d.leave();
  });

  it('places a create of a template\'s profile only on the node that built the template', async () => {
    const e = node('node-e');
    const f = node('node-f');
    await e.join('http://10.0.0.5:8080');
    await f.join('http://10.0.0.6:8080');
    const at = new Date(clock).toISOString();
    await db.insertInto('organizations').values({ id: 'org-placed', name: 'org-placed', created_at: at }).execute();
    await db.insertInto('profiles').values({ id: 'profile-tpl', organization_id: 'org-placed', name: 'tpl', spec: JSON.stringify({ image: 'template:web' }), created_at: at, updated_at: at, deleted_at: null }).execute();
    await db.insertInto('profiles').values({ id: 'profile-plain', organization_id: 'org-placed', name: 'plain', spec: JSON.stringify({ image: 'debian:bookworm' }), created_at: at, updated_at: at, deleted_at: null }).execute();
    await db.insertInto('templates').values({ id: 'tpl-1', organization_id: 'org-placed', name: 'web', build_id: 'build-1', ready_build_id: 'build-1', created_at: at, updated_at: at, deleted_at: null }).execute();
    await db
      .insertInto('template_builds')
      .values({ id: 'build-1', template_id: 'tpl-1', organization_id: 'org-placed', state: 'ready', reason: null, dockerfile: 'FROM debian:bookworm', log: '', steps: 1, cached_steps: 0, result: null, node_id: 'node-f', created_at: at, finished_at: at })
      .execute();
    const where = async (profileId: string) => (await placementFor({ db, profileId, roomId: 'r', lostAfterMs: 10_000, now: clock })).map((n) => n.nodeId).filter((id) => id === 'node-e' || id === 'node-f');
    assert.deepEqual(await where('profile-tpl'), ['node-f']);
    assert.deepEqual((await where('profile-plain')).sort(), ['node-e', 'node-f'], 'positive control: any other profile goes to either');
    await e.leave();
    await f.leave();
  });

  it('keeps a node\'s id in its data directory across restarts', () => {
    const dir = mkdtempSync(join(tmpdir(), 'roomkit-node-id-'));
    try {
      const first = nodeIdOf(dir);
      assert.match(first, /^[0-9a-f-]{36}$/);
      assert.equal(nodeIdOf(dir), first);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('GET /operator/nodes', () => {
  it(TEST_STORE === 'postgres' ? 'lists the nodes of the PostgreSQL store' : 'answers 409 with SQLite, saying nodes share a PostgreSQL store', async () => {
    const t = await startTestApp({ config: { operatorToken: 'op-secret-token-0123456789abcdef0123456789' } });
    try {
      const headers = { authorization: 'Bearer op-secret-token-0123456789abcdef0123456789' };
      if (TEST_STORE === 'postgres') {
        await t.services.nodes!.join('http://127.0.0.1:1');
        const res = await t.app.inject({ method: 'GET', url: '/operator/nodes', headers });
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.json().this_node, t.services.nodes!.nodeId);
        assert.deepEqual(res.json().nodes.map((n: { node_id: string; state: string }) => [n.node_id, n.state]), [[t.services.nodes!.nodeId, 'active']]);
      } else {
        assert.equal(t.services.nodes, undefined);
        const res = await t.app.inject({ method: 'GET', url: '/operator/nodes', headers });
        assert.equal(res.statusCode, 409, res.body);
        assert.match(res.json().message, /SQLite.*only node.*PostgreSQL store \(ROOMKIT_DATABASE_URL\)/);
      }
      const refused = await t.app.inject({ method: 'GET', url: '/operator/nodes' });
      assert.equal(refused.statusCode, 401);

      // `roomkit nodes` shows the same, from any node's address.
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      const env = { ROOMKIT_URL: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`, ROOMKIT_OPERATOR_TOKEN: 'op-secret-token-0123456789abcdef0123456789' };
      const shown = await run(['nodes'], { env });
      if (TEST_STORE === 'postgres') {
        assert.equal(shown.code, 0, shown.stderr);
        assert.match(shown.stdout, /^NODE +STATE +URL +HEARTBEAT +INSTANCES +MEMORY +VERSION\n\S+ \* +active +http:\/\/127\.0\.0\.1:1 /);
      } else {
        assert.equal(shown.code, 1);
        assert.match(shown.stderr, /^roomkit: error: feature_unavailable: this server keeps its store in SQLite/);
      }
      // `roomkit nodes drain` and `activate`, through POST /operator/nodes/{id}/drain|activate.
      if (TEST_STORE === 'postgres') {
        const id = t.services.nodes!.nodeId;
        const drained = await run(['nodes', 'drain', id], { env });
        assert.equal(drained.code, 0, drained.stderr);
        assert.match(drained.stderr, new RegExp(`node ${id} is draining: no create is placed on it`));
        assert.equal((await t.app.inject({ method: 'GET', url: '/operator/nodes', headers })).json().nodes[0].state, 'draining');
        const active = await run(['nodes', 'activate', id], { env });
        assert.equal(active.code, 0, active.stderr);
        assert.equal((await t.app.inject({ method: 'GET', url: '/operator/nodes', headers })).json().nodes[0].state, 'active');
        const unknown = await run(['nodes', 'drain', 'no-such-node'], { env });
        assert.equal(unknown.code, 1);
        assert.match(unknown.stderr, /node_not_found: no node no-such-node in this store/);
      } else {
        const refused = await t.app.inject({ method: 'POST', url: '/operator/nodes/any/drain', headers });
        assert.equal(refused.statusCode, 409, refused.body);
      }
      const noToken = await run(['nodes'], { env: { ...env, ROOMKIT_OPERATOR_TOKEN: '' } });
      assert.equal(noToken.code, 2);
      assert.match(noToken.stderr, /no operator token: set ROOMKIT_OPERATOR_TOKEN/);
    } finally {
      await t.close();
    }
  });
});
