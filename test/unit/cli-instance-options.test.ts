// `roomkit create --env/--label/--timeout`, `status --label` and `keepalive` against a
// server listening on a port, over the runtime test double: what the CLI sends reaches
// the instance (env in its commands, labels, deadline), the label filter finds it, and
// keepalive moves its deadline. Commands in real sandboxes are in test/host/cli-client.test.ts.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { run } from '../support/cli.ts';

describe('roomkit create options and keepalive', () => {
  let t: TestApp;
  let org: TestOrg;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    t = await startTestApp();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    org = await t.newOrg();
    env = { ROOMKIT_URL: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`, ROOMKIT_API_KEY: org.apiKey };
  });
  after(() => t.close());

  it('create sends --env, --label and --timeout; status --label finds the instance; keepalive moves its deadline', async () => {
    const created = await run(['create', 'opts', '--env', 'TOKEN=a=b', '--label', 'app=cli', '--label', 'user=u 1', '--timeout', '600', '--json'], { env });
    assert.equal(created.code, 0, created.stderr);
    const instance = JSON.parse(created.stdout);
    assert.deepEqual([instance.env_names, instance.metadata, instance.timeout_s], [['TOKEN'], { app: 'cli', user: 'u 1' }, 600]);
    t.runtime.commands.length = 0;
    assert.equal((await run(['exec', 'opts', 'true'], { env })).code, 0);
    assert.equal(t.runtime.commands[0]?.env.TOKEN, 'a=b');

    const listed = await run(['status', '--label', 'user=u 1', '--label', 'app=cli', '--json'], { env });
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout).instances.map((i: { instance_id: string }) => i.instance_id), [instance.instance_id]);
    const none = await run(['status', '--label', 'app=other', '--json'], { env });
    assert.deepEqual(JSON.parse(none.stdout).instances, []);

    const shown = await run(['status', 'opts'], { env });
    assert.match(shown.stdout, /labels +app=cli, user=u 1/);
    assert.match(shown.stdout, /env +TOKEN \(values not shown\)/);
    assert.doesNotMatch(shown.stdout, /a=b/);

    const kept = await run(['keepalive', 'opts', '--timeout', '1200'], { env });
    assert.equal(kept.code, 0, kept.stderr);
    const until = /runs until (\S+)/.exec(kept.stdout)?.[1];
    assert.ok(until !== undefined && Date.parse(until) > Date.parse(instance.expires_at) + 500_000, kept.stdout);

    const conflict = await run(['create', 'opts', '--timeout', '60'], { env });
    assert.equal(conflict.code, 1, conflict.stderr);
    assert.match(conflict.stderr, /different timeout_s; `roomkit keepalive opts --timeout S` moves its deadline/);
    const bad = await run(['create', 'x', '--label', 'novalue'], { env });
    assert.equal(bad.code, 2, bad.stderr);
  });
});
