// Idempotent requests (the Idempotency-Key header): a retry with the same key and
// request answers the first one's result and runs nothing again, also when ten come at
// once; another request with the key answers 422; keys belong to an organization;
// expired keys are forgotten and swept; a refused first request frees its key; a
// streamed command refuses the header; a tool call's id is its key; a retry of a first
// request still running on another node waits for its answer, or answers 409 past the
// longest wait.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { IdempotencyKeys } from '../../src/core/idempotency.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { until } from '../support/until.ts';

let t: TestApp;
let org: TestOrg;

before(async () => {
  t = await startTestApp();
  org = await t.newOrg();
});
after(() => t.close());

const roomUrl = (o: TestOrg, room: string) => `/api/profile/${o.defaultProfileId}/room/${room}`;

async function createReady(o: TestOrg, room: string): Promise<string> {
  const res = await t.app.inject({ method: 'POST', url: roomUrl(o, room), headers: o.headers });
  assert.equal(res.statusCode, 201, res.body);
  return res.json().instance_id;
}

function command(o: TestOrg, room: string, key: string | undefined, payload: Record<string, unknown>) {
  return t.app.inject({
    method: 'POST',
    url: `${roomUrl(o, room)}/command`,
    headers: { ...o.headers, ...(key === undefined ? {} : { 'idempotency-key': key }) },
    payload,
  });
}

const ran = (text: string) => t.runtime.commands.filter((c) => c.command === text).length;

describe('Idempotency-Key', () => {
  it('answers a retry with the first answer, marked replayed, and runs the command once', async () => {
    await createReady(org, 'once');
    const first = await command(org, 'once', 'key-once', { command: 'echo once' });
    assert.equal(first.statusCode, 200, first.body);
    assert.equal(first.headers['idempotent-replayed'], undefined);
    const again = await command(org, 'once', 'key-once', { command: 'echo once' });
    assert.equal(again.statusCode, 200, again.body);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.body, first.body);
    assert.equal(ran('echo once'), 1);
    // The draft's form of the header, a Structured Field string, is the same key.
    const quoted = await command(org, 'once', '"key-once"', { command: 'echo once' });
    assert.equal(quoted.json().command_id, first.json().command_id);
    assert.equal(ran('echo once'), 1);
    // Without a key, every request runs.
    await command(org, 'once', undefined, { command: 'echo once' });
    assert.equal(ran('echo once'), 2);
  });

  it('runs a command retried 10 times at once exactly once, and answers all ten with its result', async () => {
    await createReady(org, 'ten');
    t.runtime.options.commandDelayMs = 150;
    try {
      const answers = await Promise.all(Array.from({ length: 10 }, () => command(org, 'ten', 'key-ten', { command: 'echo ten', timeout_s: 30 })));
      for (const a of answers) assert.equal(a.statusCode, 200, a.body);
      assert.equal(new Set(answers.map((a) => a.json().command_id)).size, 1);
      assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, 9);
      assert.equal(ran('echo ten'), 1);
    } finally {
      t.runtime.options.commandDelayMs = undefined;
    }
  });

  it('refuses the key with another request: 422 idempotency_key_reused, nothing run', async () => {
    await createReady(org, 'other');
    assert.equal((await command(org, 'other', 'key-other', { command: 'echo a', timeout_s: 5 })).statusCode, 200);
    // The same body with its fields in another order is the same request.
    const reordered = await command(org, 'other', 'key-other', { timeout_s: 5, command: 'echo a' });
    assert.equal(reordered.headers['idempotent-replayed'], 'true');
    for (const [url, payload] of [
      [`${roomUrl(org, 'other')}/command`, { command: 'echo b', timeout_s: 5 }],
      [`${roomUrl(org, 'other')}/command`, { command: 'echo a' }],
      [`${roomUrl(org, 'other')}/snapshots`, {}],
    ] as const) {
      const res = await t.app.inject({ method: 'POST', url, headers: { ...org.headers, 'idempotency-key': 'key-other' }, payload });
      assert.equal(res.statusCode, 422, res.body);
      const body = res.json();
      assert.equal(body.error, 'idempotency_key_reused');
      assert.match(body.message, /another request/);
      assert.ok(body.details.first_used_at);
    }
    assert.equal(ran('echo b'), 0);
    assert.equal(ran('echo a'), 1);
  });

  it('keeps keys apart per organization', async () => {
    const other = await t.newOrg();
    await createReady(org, 'scoped');
    await createReady(other, 'scoped');
    const mine = await command(org, 'scoped', 'key-shared', { command: 'echo scoped' });
    const theirs = await command(other, 'scoped', 'key-shared', { command: 'echo scoped' });
    assert.equal(theirs.statusCode, 200, theirs.body);
    assert.equal(theirs.headers['idempotent-replayed'], undefined);
    assert.notEqual(theirs.json().command_id, mine.json().command_id);
    assert.equal(ran('echo scoped'), 2);
    // Another organization's use of a key says nothing about it: another body is no 422 there.
    const third = await t.newOrg();
    await createReady(third, 'scoped');
    assert.equal((await command(third, 'scoped', 'key-shared', { command: 'echo different' })).statusCode, 200);
  });

  it('forgets an expired key (a new request runs), and the expiry check sweeps expired rows', async () => {
    await createReady(org, 'expiry');
    const first = await command(org, 'expiry', 'key-expiry', { command: 'echo expiry' });
    const past = new Date(Date.now() - 1000).toISOString();
    await t.services.db.updateTable('idempotency_keys').set({ expires_at: past }).where('key', '=', 'key-expiry').execute();
    const after = await command(org, 'expiry', 'key-expiry', { command: 'echo expiry' });
    assert.equal(after.headers['idempotent-replayed'], undefined);
    assert.notEqual(after.json().command_id, first.json().command_id);
    assert.equal(ran('echo expiry'), 2);

    await t.services.db.updateTable('idempotency_keys').set({ expires_at: past }).where('key', '=', 'key-expiry').execute();
    const kept = await t.services.db.selectFrom('idempotency_keys').select('key').where('expires_at', '>', new Date().toISOString()).execute();
    assert.ok(await t.services.idempotencyKeys.sweep() >= 1);
    const left = await t.services.db.selectFrom('idempotency_keys').select('key').execute();
    assert.deepEqual(left.map((r) => r.key).sort(), kept.map((r) => r.key).sort());
  });

  it('is swept by the periodic expiry check once expired', async () => {
    const own = await startTestApp({ config: { expiryCheckIntervalMs: 100 } });
    try {
      const o = await own.newOrg();
      const now = Date.now();
      const row = (key: string, expiresAt: number) => ({
        organization_id: o.organizationId, key, fingerprint: 'f', state: 'done' as const, status: 200, body: '{}', owner: 'local',
        created_at: new Date(now - 1000).toISOString(), expires_at: new Date(expiresAt).toISOString(),
      });
      await own.services.db.insertInto('idempotency_keys').values([row('old', now - 1), row('young', now + 3_600_000)]).execute();
      await until('the expired key to be swept', async () => {
        const keys = (await own.services.db.selectFrom('idempotency_keys').select('key').execute()).map((r) => r.key);
        return keys.length === 1 && keys[0] === 'young' ? true : undefined;
      });
    } finally {
      await own.close();
    }
  });

  it('frees the key of a refused request, so that its retry runs once it can', async () => {
    const refused = await command(org, 'later', 'key-later', { command: 'echo later' });
    assert.equal(refused.statusCode, 404, refused.body);
    await createReady(org, 'later');
    const retried = await command(org, 'later', 'key-later', { command: 'echo later' });
    assert.equal(retried.statusCode, 200, retried.body);
    assert.equal(retried.headers['idempotent-replayed'], undefined);
    assert.equal(ran('echo later'), 1);
  });

  it('replays a create and a background start with their own status', async () => {
    const create = () => t.app.inject({ method: 'POST', url: roomUrl(org, 'made'), headers: { ...org.headers, 'idempotency-key': 'key-made' } });
    const first = await create();
    assert.equal(first.statusCode, 201, first.body);
    const again = await create();
    assert.equal(again.statusCode, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.json().instance_id, first.json().instance_id);
    const started = await command(org, 'made', 'key-bg', { command: 'echo bg', background: true });
    assert.equal(started.statusCode, 202, started.body);
    const restarted = await command(org, 'made', 'key-bg', { command: 'echo bg', background: true });
    assert.equal(restarted.statusCode, 202);
    assert.equal(restarted.json().command_id, started.json().command_id);
    assert.equal(ran('echo bg'), 1);
  });

  it('refuses a streamed command with a key, and a malformed key', async () => {
    await createReady(org, 'refusals');
    const streamed = await command(org, 'refusals', 'key-stream', { command: 'echo s', stream: true });
    assert.equal(streamed.statusCode, 400, streamed.body);
    assert.equal(streamed.json().error, 'validation_error');
    assert.match(streamed.json().message, /streamed command/);
    const accept = await t.app.inject({
      method: 'POST',
      url: `${roomUrl(org, 'refusals')}/command`,
      headers: { ...org.headers, 'idempotency-key': 'key-stream', accept: 'text/event-stream' },
      payload: { command: 'echo s' },
    });
    assert.equal(accept.statusCode, 400, accept.body);
    for (const key of ['x'.repeat(256), 'naïve']) {
      const res = await command(org, 'refusals', key, { command: 'echo s' });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().error, 'validation_error');
    }
    assert.equal(ran('echo s'), 0);
  });

  it('runs a tool call once per call id: a retry of the call answers its first result', async () => {
    await createReady(org, 'tools');
    const call = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: `${roomUrl(org, 'tools')}/tools/call`, headers: org.headers, payload });
    const first = await call({ name: 'run_command', arguments: { command: 'echo tool' }, call_id: 'call_abc' });
    assert.equal(first.statusCode, 200, first.body);
    const retried = await call({ name: 'run_command', arguments: { command: 'echo tool' }, call_id: 'call_abc' });
    assert.equal(retried.headers['idempotent-replayed'], 'true');
    assert.equal(retried.body, first.body);
    assert.equal(ran('echo tool'), 1);
    const reused = await call({ name: 'run_command', arguments: { command: 'echo other tool' }, call_id: 'call_abc' });
    assert.equal(reused.statusCode, 422, reused.body);
    assert.equal(ran('echo other tool'), 0);
    // Without an id, a call runs each time.
    await call({ name: 'run_command', arguments: { command: 'echo tool' } });
    assert.equal(ran('echo tool'), 2);
  });

  it('waits for a first request running on another node, and answers 409 past the longest wait', async () => {
    const keys = new IdempotencyKeys({ db: t.services.db, log: t.services.log, ttlS: 60, owner: 'this-node', waitMaxMs: 600 });
    const now = new Date();
    await t.services.db
      .insertInto('idempotency_keys')
      .values({ organization_id: org.organizationId, key: 'key-elsewhere', fingerprint: 'f', state: 'running', status: null, body: null, owner: 'other-node', created_at: now.toISOString(), expires_at: new Date(now.getTime() + 60_000).toISOString() })
      .execute();
    await assert.rejects(keys.claim(org.organizationId, 'key-elsewhere', 'f'), (err: { code?: string; details?: { retry_after_s?: number } }) => err.code === 'idempotency_key_in_use' && err.details?.retry_after_s === 1);
    const waiting = keys.claim(org.organizationId, 'key-elsewhere', 'f');
    setTimeout(() => {
      void t.services.db.updateTable('idempotency_keys').set({ state: 'done', status: 200, body: '{"done":true}' }).where('key', '=', 'key-elsewhere').execute();
    }, 250);
    assert.deepEqual(await waiting, { kind: 'replay', answer: { status: 200, body: '{"done":true}' } });
    // At start, a node frees the keys its own unanswered requests held, not another node's.
    await t.services.db
      .insertInto('idempotency_keys')
      .values({ organization_id: org.organizationId, key: 'key-mine', fingerprint: 'f', state: 'running', status: null, body: null, owner: 'this-node', created_at: now.toISOString(), expires_at: new Date(now.getTime() + 60_000).toISOString() })
      .execute();
    assert.equal(await keys.forgetUnanswered(), 1);
    const claim = await keys.claim(org.organizationId, 'key-mine', 'f');
    assert.equal(claim.kind, 'first');
    if (claim.kind === 'first') await claim.settle(null);
  });
});
