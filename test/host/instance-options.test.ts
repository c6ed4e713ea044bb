// A create's options with real gVisor instances: its env reaches a command, a background
// command and a shell (the command's own env wins), its labels filter the list and
// another organization's labelled instance never shows, a short timeout_s stops the
// instance with `timeout` in its history after a keep-alive moved it, and bad options
// are refused before anything is made. Two instances in all (one per organization).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

type Json = any;

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let profile: string;
let otherProfile: string;

const room = (p: string, name: string) => `/api/profile/${p}/room/${name}`;

async function call(who: TestOrg, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) {
  const res = await t.app.inject({ method, url, headers: who.headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
  return { status: res.statusCode, body: res.json() as Json, text: res.body };
}

async function output(url: string, body: Record<string, unknown>): Promise<string> {
  const res = await call(org, 'POST', `${url}/command`, body);
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.result.exit_code, 0, res.text);
  return (res.body.result.output as string).trim();
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.252.0.0/24', config: { expiryCheckIntervalMs: 250 } });
  t.gvisor();
  org = await t.newOrg();
  other = await t.newOrg();
  const small = { memory_mb: 512, disk_mb: 512, network: { egress: 'none' } };
  profile = await t.createProfile(org, { name: 'opts', ...small, env: { SHARED: 'profile', PROFILE_ONLY: 'p' }, max_lifetime_s: 3600 });
  otherProfile = await t.createProfile(other, { name: 'opts', ...small, idle_action: 'stop' });
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('env and metadata of a create', () => {
  const url = () => room(profile, 'env');
  let id: string;

  before(async () => {
    const created = await call(org, 'POST', url(), { env: { GREETING: 'hello from create', SHARED: 'create' }, metadata: { app: 'grader', user: 'u-42' } });
    assert.equal(created.status, 201, created.text);
    id = created.body.instance_id;
    assert.deepEqual(created.body.env_names, ['GREETING', 'SHARED']);
    assert.ok(!created.text.includes('hello from create'), 'env values are not answered');
  });

  it('reaches a command over the profile\'s env, and the command\'s own env wins', async () => {
    assert.equal(await output(url(), { command: 'echo "$GREETING|$SHARED|$PROFILE_ONLY"' }), 'hello from create|create|p');
    assert.equal(await output(url(), { command: 'echo "$GREETING|$SHARED"', env: { SHARED: 'command' } }), 'hello from create|command');
    // A login shell's start files do not drop it either.
    assert.equal(await output(url(), { command: 'bash -lc \'echo "$GREETING"\'' }), 'hello from create');
  });

  it('reaches a background command', async () => {
    const started = await call(org, 'POST', `${url()}/command`, { command: 'echo "$GREETING"', background: true });
    assert.equal(started.status, 202, started.text);
    const commandUrl = `${url()}/commands/${started.body.command_id}`;
    const deadline = Date.now() + 30_000;
    let status: Json;
    do {
      await new Promise((r) => setTimeout(r, 200));
      status = (await call(org, 'GET', commandUrl)).body;
    } while (status.state === 'running' && Date.now() < deadline);
    assert.equal(status.state, 'exited', JSON.stringify(status));
    assert.equal(status.output.trim(), 'hello from create', JSON.stringify(status));
  });

  it('reaches a terminal', async () => {
    // Through the terminal service the WebSocket route uses (test/host/terminal.test.ts covers the route).
    const terminal = await t.services.terminals.open(org.organizationId, profile, 'env', { command: 'echo "[$GREETING|$SHARED]"' });
    let seen = '';
    terminal.onOutput((chunk) => (seen += chunk.toString('utf8')));
    const end = await terminal.ended;
    assert.deepEqual(end, { kind: 'exit', exitCode: 0 });
    assert.match(seen, /\[hello from create\|create\]/);
  });

  it('filters the list; another organization\'s instance with the same labels never shows', async () => {
    const theirs = await call(other, 'POST', room(otherProfile, 'labelled'), { metadata: { app: 'grader', user: 'u-42' }, timeout_s: 5 });
    assert.equal(theirs.status, 201, theirs.text);
    const list = async (who: TestOrg, query: string) => {
      const res = await call(who, 'GET', `/api/instances?metadata=${encodeURIComponent(query)}`);
      assert.equal(res.status, 200, res.text);
      return (res.body.instances as Json[]).map((i) => i.instance_id);
    };
    assert.deepEqual(await list(org, 'app=grader&user=u-42'), [id]);
    assert.deepEqual(await list(org, 'app=other'), []);
    assert.deepEqual(await list(other, 'app=grader'), [theirs.body.instance_id]);
    assert.deepEqual((await call(org, 'GET', url())).body.metadata, { app: 'grader', user: 'u-42' });
  });
});

describe('timeout_s and the keep-alive', () => {
  it('a keep-alive moves the deadline; once it passes the instance stops with `timeout` in its history', async () => {
    // Made by the previous test with timeout_s 5 (its profile's idle_action is stop).
    const url = room(otherProfile, 'labelled');
    const first = (await call(other, 'GET', url)).body;
    assert.equal(first.timeout_s, 5);
    const kept = await call(other, 'POST', `${url}/keepalive`, { timeout_s: 8 });
    assert.equal(kept.status, 200, kept.text);
    const moved = Date.parse(kept.body.expires_at);
    assert.ok(moved > Date.parse(first.expires_at), `the keep-alive moved ${first.expires_at} to ${kept.body.expires_at}`);
    let state = kept.body.state;
    while (state === 'ready' && Date.now() < moved + 30_000) {
      await new Promise((r) => setTimeout(r, 250));
      const now = await call(other, 'GET', url);
      state = now.status === 404 ? 'stopped' : now.body.state;
      // Alive until the moved deadline, not only the first one.
      if (state !== 'ready') assert.ok(Date.now() >= moved, `it ended at ${new Date().toISOString()}, before its deadline ${kept.body.expires_at}`);
    }
    const gone = await call(other, 'GET', url);
    assert.equal(gone.status, 404, gone.text);
    assert.equal(gone.body.details.reason_code, 'timeout');
    const listed = (await call(other, 'GET', '/api/instances')).body.instances.find((i: Json) => i.instance_id === kept.body.instance_id);
    const codes = listed.state_history.filter((e: Json) => e.reason_code).map((e: Json) => `${e.state}:${e.reason_code}`);
    assert.deepEqual(codes, ['stopping:timeout', 'stopped:timeout']);
  });
});

describe('bad options', () => {
  it('are refused with 400 before anything is made', async () => {
    const bad: [string, unknown][] = [
      ['env name', { env: { 'NOT-A-NAME': 'x' } }],
      ['reserved env name', { env: { ROOMKIT_COMMAND_ID: 'x' } }],
      ['metadata key', { metadata: { '': 'x' } }],
      ['timeout_s above max_lifetime_s', { timeout_s: 3601 }],
      ['unknown option', { labels: { a: 'b' } }],
    ];
    for (const [what, body] of bad) {
      const res = await call(org, 'POST', room(profile, 'refused'), body);
      assert.equal(res.status, 400, `${what}: ${res.text}`);
      assert.equal(res.body.error, 'validation_error', what);
    }
    assert.equal((await call(org, 'GET', room(profile, 'refused'))).status, 404);
  });
});
