// The operator's list of organizations (GET /operator/organizations: each one's live
// instances and keys, by name, a page at a time) and the warm pools in GET
// /operator/capacity, over the runtime test double; both refused without the operator token.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { untilTrue } from '../support/until.ts';

const TOKEN = 'operator-token-of-the-organizations-test-0123';
const operator = { authorization: `Bearer ${TOKEN}` };

describe('the operator API lists organizations and warm pools', () => {
  let t: TestApp;
  let busy: TestOrg;
  let quiet: TestOrg;
  const get = (url: string, headers: Record<string, string> = operator) => t.app.inject({ method: 'GET', url, headers });

  before(async () => {
    t = await startTestApp({ config: { operatorToken: TOKEN, expiryCheckIntervalMs: 100, warmPoolMaxInstances: 4 } });
    // Named so that the quiet one comes first.
    busy = await t.newOrg(`op-list-busy-${process.pid}`);
    quiet = await t.newOrg(`op-list-alone-${process.pid}`);
  });
  after(() => t.close());

  it('answers each organization with its live instances and its keys not revoked, by name', async () => {
    const profile = await t.createProfile(busy, { name: 'listed' });
    for (const room of ['a', 'b']) {
      const made = await t.app.inject({ method: 'POST', url: `/api/profile/${profile}/room/${room}`, headers: busy.headers, payload: { wait: true } });
      assert.equal(made.statusCode, 201, made.body);
    }
    assert.equal((await t.app.inject({ method: 'DELETE', url: `/api/profile/${profile}/room/b`, headers: busy.headers })).statusCode, 200);
    const second = await t.app.inject({ method: 'POST', url: '/api/keys', headers: busy.headers, payload: { name: 'second' } });
    const third = await t.app.inject({ method: 'POST', url: '/api/keys', headers: busy.headers, payload: { name: 'third' } });
    assert.equal((await t.app.inject({ method: 'DELETE', url: `/api/keys/${third.json().key_id}`, headers: busy.headers })).statusCode, 204);
    assert.equal(second.statusCode, 201, second.body);

    const res = await get('/operator/organizations');
    assert.equal(res.statusCode, 200, res.body);
    const { organizations, next_cursor } = res.json();
    assert.equal(next_cursor, null);
    const mine = organizations.filter((o: { organization_id: string }) => [busy.organizationId, quiet.organizationId].includes(o.organization_id));
    assert.deepEqual(
      mine.map((o: Record<string, unknown>) => [o.name, o.live_instances, o.keys]),
      [
        [`op-list-alone-${process.pid}`, 0, 1],
        [`op-list-busy-${process.pid}`, 1, 2],
      ],
    );
    assert.ok(!Number.isNaN(Date.parse(mine[0].created_at)));
    const names = organizations.map((o: { name: string }) => o.name);
    assert.deepEqual(names, [...names].sort());
  });

  it('pages by name with next_cursor, and refuses a cursor it did not give and a limit out of bounds', async () => {
    const all = (await get('/operator/organizations')).json().organizations as { organization_id: string }[];
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await get(`/operator/organizations?limit=1${cursor === null ? '' : `&cursor=${cursor}`}`);
      assert.equal(res.statusCode, 200, res.body);
      assert.ok(res.json().organizations.length <= 1);
      seen.push(...res.json().organizations.map((o: { organization_id: string }) => o.organization_id));
      cursor = res.json().next_cursor;
    } while (cursor !== null);
    assert.deepEqual(seen, all.map((o) => o.organization_id));
    const bad = await get('/operator/organizations?cursor=nonsense');
    assert.deepEqual([bad.statusCode, bad.json().error], [400, 'invalid_cursor']);
    for (const limit of ['0', '501', 'x']) assert.equal((await get(`/operator/organizations?limit=${limit}`)).json().error, 'validation_error', limit);
  });

  it('is refused without the operator token, and with an organization\'s key', async () => {
    for (const headers of [{}, busy.headers, { authorization: `Bearer ${TOKEN}x` }]) {
      const res = await get('/operator/organizations', headers);
      assert.deepEqual([res.statusCode, res.json().error], [401, 'invalid_operator_token']);
    }
  });

  it('shows each warm pool of this node in GET /operator/capacity: its size, and what is ready', async () => {
    const pooled = await t.createProfile(quiet, { name: 'pooled', warm_pool: 2 });
    const poolOf = async () => {
      const res = await get('/operator/capacity');
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().warm_pools.max_instances, 4);
      return (res.json().warm_pools.pools as { profile_id: string }[]).find((p) => p.profile_id === pooled) as Record<string, unknown> | undefined;
    };
    await untilTrue('the pool to fill', async () => (await poolOf())?.ready === 2, { everyMs: 20 });
    assert.deepEqual(await poolOf(), { organization_id: quiet.organizationId, profile_id: pooled, profile_name: 'pooled', size: 2, ready: 2, starting: 0, leaving: 0 });
    // A profile without a pool is not listed.
    const plain = await t.createProfile(quiet, { name: 'plain' });
    assert.ok(!(await get('/operator/capacity')).json().warm_pools.pools.some((p: { profile_id: string }) => p.profile_id === plain));
  });
});
