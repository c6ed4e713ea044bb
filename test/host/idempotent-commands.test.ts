// Idempotent requests on a real gVisor instance: one command sent ten times at once
// with one Idempotency-Key runs once (counted inside the instance: each run appends a
// line to a file), and all ten answers are its result; the same key with another
// command is refused, and runs nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let url: string;

before(async () => {
  t = await startTestApp({ gvisorPool: '10.209.0.64/26' });
  t.gvisor();
  org = await t.newOrg();
  const profileId = await t.createProfile(org, { name: 'retries', memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 60 });
  url = `/api/profile/${profileId}/room/retries`;
  const created = await t.app.inject({ method: 'POST', url, headers: { ...org.headers, 'idempotency-key': 'create-1' } });
  assert.equal(created.statusCode, 201, created.body);
});

after(async () => {
  await t.closeLeavingNothing();
});

const run = (key: string | undefined, command: string) =>
  t.app.inject({ method: 'POST', url: `${url}/command`, headers: { ...org.headers, ...(key ? { 'idempotency-key': key } : {}) }, payload: { command } });

describe('a command retried with one Idempotency-Key', () => {
  it('runs once when sent ten times at once, and every answer is its result', async () => {
    // Slow enough that the ten overlap the first run.
    const command = 'echo x >> ~/count; sleep 1; wc -l < ~/count';
    const answers = await Promise.all(Array.from({ length: 10 }, () => run('count-1', command)));
    for (const a of answers) assert.equal(a.statusCode, 200, a.body);
    assert.equal(new Set(answers.map((a) => a.json().command_id)).size, 1);
    assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, 9);
    for (const a of answers) assert.equal(a.json().result.output.trim(), '1');
    const counted = await run(undefined, 'wc -l < ~/count');
    assert.equal(counted.json().result.output.trim(), '1', 'the file has one line: the command ran once');
  });

  it('refuses the key for another command and runs nothing; a new key runs again', async () => {
    const other = await run('count-1', 'echo y >> ~/count');
    assert.equal(other.statusCode, 422, other.body);
    assert.equal(other.json().error, 'idempotency_key_reused');
    const fresh = await run('count-2', 'echo x >> ~/count; wc -l < ~/count');
    assert.equal(fresh.json().result.output.trim(), '2');
  });

  it('replays a create with the same key: the same instance, no second machine', async () => {
    const again = await t.app.inject({ method: 'POST', url, headers: { ...org.headers, 'idempotency-key': 'create-1' } });
    assert.equal(again.statusCode, 201, again.body);
    assert.equal(again.headers['idempotent-replayed'], 'true');
  });
});
