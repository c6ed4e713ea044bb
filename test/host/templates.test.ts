// Templates built from Dockerfiles with real sandboxes: a multi-step Dockerfile with
// COPY, ENV, WORKDIR and USER gives instances that have the files, variables, directory
// and users it set up (its RUN steps ran inside a sandbox, as root and as USER) and its
// start command running; a rebuild of the same Dockerfile runs no step; a failing RUN
// fails the build with its output and exit code; a RUN cannot reach the host; another
// organization can neither see nor use the template.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { until } from '../support/until.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;

async function api(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>, who: TestOrg = org) {
  return t.app.inject({ method, url, headers: who.headers, ...(payload ? { payload } : {}) });
}

/** The template once its latest build has ended (builds boot a sandbox: allow them minutes). */
async function settled(name: string, who: TestOrg = org): Promise<any> {
  return until(
    `template ${name} to settle`,
    async () => {
      const template = (await api('GET', `/api/templates/${name}`, undefined, who)).json();
      return template.state === 'building' ? undefined : template;
    },
    { timeoutMs: 10 * 60_000, everyMs: 250 },
  );
}

async function logOf(name: string, buildId: string): Promise<string> {
  const res = await api('GET', `/api/templates/${name}/builds/${buildId}/logs`);
  assert.equal(res.statusCode, 200, res.body);
  return res.body;
}

async function run(profileId: string, room: string, command: string): Promise<string> {
  const res = await api('POST', `/api/profile/${profileId}/room/${room}/command`, { command });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json().result.exit_code, 0, res.json().result.output);
  return res.json().result.output;
}

const b64 = (text: string) => Buffer.from(text).toString('base64');

const DOCKERFILE = [
  'FROM debian:bookworm',
  'ARG GREETING=hello',
  'ENV APP_HOME=/srv/app GREETING_TOO=$GREETING',
  'WORKDIR $APP_HOME',
  'COPY --chown=user:user app.py data/ ./',
  'RUN python3 app.py > built.txt && id -un > built-by.txt',
  'USER user',
  'RUN id -un > /home/user/user-step.txt && echo "$GREETING_TOO from $APP_HOME" >> /home/user/user-step.txt',
  'CMD ["python3", "-m", "http.server"]',
  'HEALTHCHECK CMD curl -sf http://127.0.0.1:8000/ > /dev/null',
].join('\n');
const FILES = {
  'app.py': b64('import os\nprint("built in", os.getcwd())\n'),
  'data/numbers.txt': b64('1\n2\n3\n'),
};

before(async () => {
  t = await startTestApp({ gvisorPool: '10.212.0.0/25' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  other = await t.newOrg();
});

after(async () => {
  if (!t) return;
  const live = await api('GET', '/api/instances?limit=50');
  for (const i of live.json().instances ?? []) {
    if (i.state !== 'stopped' && i.state !== 'failed') await api('DELETE', `/api/profile/${i.profile_id}/room/${i.room_id}`);
  }
  await t.closeLeavingNothing();
});

describe('a template built from a Dockerfile', () => {
  let built: any;
  let profileId: string;

  it('runs its steps in a sandbox and becomes ready with what the Dockerfile set', async () => {
    const res = await api('POST', '/api/templates', { name: 'app', dockerfile: DOCKERFILE, files: FILES });
    assert.equal(res.statusCode, 202, res.body);
    built = await settled('app');
    const log = await logOf('app', built.build_id);
    assert.equal(built.state, 'ready', `${built.reason}\n${log}`);
    assert.equal(built.build.steps, 9);
    assert.deepEqual(built.image.env, { APP_HOME: '/srv/app', GREETING_TOO: 'hello' });
    assert.equal(built.image.workdir, '/srv/app');
    assert.equal(built.image.user, 'user');
    assert.deepEqual(built.image.start_command, ['python3', '-m', 'http.server']);
    assert.deepEqual(built.image.ready_check, ['sh', '-c', 'curl -sf http://127.0.0.1:8000/ > /dev/null']);
    assert.ok(built.image.disk_bytes > 0);
    assert.match(log, /step 5\/9: RUN python3 app.py/);
    // Nothing of a build sandbox is left: the only instances are the organization's own.
    assert.deepEqual(await t.gvisor().list(), []);
  });

  it('gives instances of a template:NAME profile its files, variables, directory, users and running start command', async () => {
    profileId = await t.createProfile(org, { name: 'of-app', image: 'template:app', memory_mb: 512, network: { egress: 'none' } });
    const created = await api('POST', `/api/profile/${profileId}/room/r1`, { wait: true });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.json().state, 'ready', created.body);
    // WORKDIR is where commands start; ENV is their environment.
    assert.equal(await run(profileId, 'r1', 'pwd; echo "$APP_HOME $GREETING_TOO"'), '/srv/app\n/srv/app hello\n');
    // COPY put the files (a directory's contents below the destination), owned as --chown said.
    assert.equal(await run(profileId, 'r1', 'cat numbers.txt; stat -c "%U %n" app.py numbers.txt'), '1\n2\n3\nuser app.py\nuser numbers.txt\n');
    // The first RUN ran as root in WORKDIR, the one after USER as user.
    assert.equal(await run(profileId, 'r1', 'cat built.txt built-by.txt; stat -c %U built.txt'), 'built in /srv/app\nroot\nroot\n');
    assert.equal(await run(profileId, 'r1', 'cat /home/user/user-step.txt; whoami'), 'user\nhello from /srv/app\nuser\n');
    // CMD was started, and its HEALTHCHECK passed, before the instance was ready: its
    // server, in WORKDIR, answers at once with the copied files.
    const served = await run(profileId, 'r1', 'curl -sf http://127.0.0.1:8000/numbers.txt; ps -o user=,args= -C python3 | grep http.server');
    assert.match(served, /^1\n2\n3\nuser +python3 -m http.server\n$/);
  });

  it('is rebuilt from the cache without running a step', async () => {
    const started = Date.now();
    const res = await api('POST', '/api/templates', { name: 'app', dockerfile: DOCKERFILE, files: FILES });
    assert.equal(res.statusCode, 202, res.body);
    const rebuilt = await settled('app');
    const elapsed = Date.now() - started;
    assert.equal(rebuilt.state, 'ready', rebuilt.reason);
    assert.equal(rebuilt.build_id, res.json().build_id);
    assert.equal(rebuilt.build.cached_steps, rebuilt.build.steps);
    const log = await logOf('app', rebuilt.build_id);
    assert.doesNotMatch(log, /starting a build sandbox/);
    assert.match(log, /9 steps, 9 cached/);
    assert.ok(elapsed < 5000, `a cached rebuild took ${elapsed} ms`);
  });

  it('fails on a RUN that exits non-zero, with its output and exit code', async () => {
    const dockerfile = 'FROM debian:bookworm\nRUN echo first-step > /first\nRUN echo before-failure && ls /no/such/dir && echo never\n';
    const res = await api('POST', '/api/templates', { name: 'broken', dockerfile });
    assert.equal(res.statusCode, 202, res.body);
    const broken = await settled('broken');
    assert.equal(broken.state, 'failed');
    assert.match(broken.reason, /^line 3: RUN echo before-failure .*: exited with code 2; its output ended with: before-failure\n.*No such file or directory/s);
    const log = await logOf('broken', res.json().build_id);
    assert.match(log, /before-failure\n/);
    assert.match(log, /exit code 2\n/);
    assert.doesNotMatch(log, /^never$/m);
    assert.deepEqual(await t.gvisor().list().then((ids) => ids.length), 1, 'only the instance of the test is left');
  });

  it('refuses a RUN that reaches for the host, as in any instance', async () => {
    // The service listens on every address of the host, its sandboxes' gateway among them.
    await t.app.listen({ host: '0.0.0.0', port: 0 });
    const port = (t.app.server.address() as AddressInfo).port;
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
    const reach = `gw=$(ip route | awk '/default/ {print $3}'); if curl -s -o /dev/null --max-time 3 http://$gw:${port}/healthz; then exit 1; fi; echo host-refused-at-$gw`;
    const res = await api('POST', '/api/templates', { name: 'reach', dockerfile: `FROM debian:bookworm\nRUN ${reach}\n` });
    assert.equal(res.statusCode, 202, res.body);
    const reached = await settled('reach');
    const log = await logOf('reach', res.json().build_id);
    assert.equal(reached.state, 'ready', `${reached.reason}\n${log}`);
    assert.match(log, /^host-refused-at-\d+\.\d+\.\d+\.\d+$/m);
  });

  it('can be neither seen nor used by another organization', async () => {
    for (const res of [
      await api('GET', '/api/templates/app', undefined, other),
      await api('GET', `/api/templates/${built.template_id}`, undefined, other),
      await api('GET', `/api/templates/app/builds/${built.build_id}/logs`, undefined, other),
      await api('DELETE', '/api/templates/app', undefined, other),
    ]) {
      assert.equal(res.statusCode, 404, res.body);
      assert.equal(res.json().error, 'template_not_found');
    }
    assert.deepEqual((await api('GET', '/api/templates', undefined, other)).json().templates, []);
    const profile = await api('POST', '/api/profiles', { name: 'steal', image: 'template:app' }, other);
    assert.equal(profile.statusCode, 400, profile.body);
    assert.match(profile.json().message, /no template "app" in this organization/);
    const child = await api('POST', '/api/templates', { name: 'child', dockerfile: 'FROM template:app\nRUN true\n' }, other);
    const refused = await settled(child.json().name, other);
    assert.equal(refused.state, 'failed');
    assert.match(refused.reason, /no template "app" in this organization/);
    assert.equal((await api('GET', '/api/templates/app')).statusCode, 200);
  });
});
