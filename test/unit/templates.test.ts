// Templates over the runtime double (src/core/templates.ts, template-builder.ts and
// their routes): builds recorded and run in the background, every step in a build
// sandbox, layers found again by their cache keys, failures with their line and output,
// and templates kept within their organization. test/host/templates.test.ts builds with
// real sandboxes.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { BuildingRuntime } from '../support/building-runtime.ts';
import { until } from '../support/until.ts';
import { forgetTemplateLayers, unusedTemplateLayers } from '../../src/core/template-layers.ts';
import { BUILD_TIME_LIMIT_MS } from '../../src/core/template-builder.ts';

const runtime = new BuildingRuntime();
let t: TestApp;
let org: TestOrg;
let other: TestOrg;

before(async () => {
  t = await startTestApp({ fake: runtime });
  org = await t.newOrg();
  other = await t.newOrg();
});
after(() => t.close());

const b64 = (text: string) => Buffer.from(text).toString('base64');

async function build(who: TestOrg, body: Record<string, unknown>) {
  const res = await t.app.inject({ method: 'POST', url: '/api/templates', headers: who.headers, payload: body });
  return res;
}

/** The template once its latest build has ended. */
async function settled(who: TestOrg, name: string): Promise<any> {
  return until(`template ${name} to settle`, async () => {
    const res = await t.app.inject({ method: 'GET', url: `/api/templates/${name}`, headers: who.headers });
    assert.equal(res.statusCode, 200, res.body);
    const template = res.json();
    return template.state === 'building' ? undefined : template;
  });
}

async function logOf(who: TestOrg, name: string, buildId: string): Promise<string> {
  const res = await t.app.inject({ method: 'GET', url: `/api/templates/${name}/builds/${buildId}/logs`, headers: who.headers });
  assert.equal(res.statusCode, 200, res.body);
  assert.match(String(res.headers['content-type']), /^text\/plain/);
  return res.body;
}

const DOCKERFILE = [
  'FROM debian:bookworm',
  'ARG GREETING=hello',
  'ENV APP_HOME=/srv/app GREETING_TOO=$GREETING',
  'WORKDIR $APP_HOME',
  'COPY --chown=user:user app.py lib/ ./',
  'RUN python3 app.py > out.txt',
  'USER user',
  'EXPOSE 8000',
  'CMD ["python3", "-m", "http.server"]',
].join('\n');
const FILES = { 'app.py': b64('print(1)\n'), 'lib/util.py': b64('X = 1\n'), 'unused.txt': b64('no') };

describe('templates', () => {
  it('builds a Dockerfile step by step in a build sandbox, and records what it made', async () => {
    const commandsBefore = runtime.commands.length;
    const res = await build(org, { name: 'py-app', dockerfile: DOCKERFILE, files: FILES });
    assert.equal(res.statusCode, 202, res.body);
    const started = res.json();
    assert.deepEqual(Object.keys(started).sort(), ['build_id', 'name', 'state', 'template_id']);
    assert.equal(started.name, 'py-app');
    assert.equal(started.state, 'building');
    const template = await settled(org, 'py-app');
    assert.equal(template.state, 'ready', template.reason);
    assert.equal(template.build.steps, 8);
    assert.deepEqual(template.image, {
      base_image: 'debian:bookworm',
      env: { APP_HOME: '/srv/app', GREETING_TOO: 'hello' },
      workdir: '/srv/app',
      user: 'user',
      start_command: ['python3', '-m', 'http.server'],
      ready_check: null,
      expose: ['8000'],
      labels: {},
      disk_bytes: 4096,
    });
    // The files went where COPY says, relative to WORKDIR, a directory's files below it.
    const written = [...runtime.files.values()].flatMap((files) => [...files.keys()]);
    assert.ok(written.includes('/srv/app/app.py'), written.join(' '));
    assert.ok(written.includes('/srv/app/util.py'), written.join(' '));
    assert.ok(!written.some((p) => p.endsWith('unused.txt')));
    // RUN went through sudo as root in WORKDIR, with ENV and ARG in its environment.
    const commands = runtime.commands.slice(commandsBefore);
    const run = commands.find((c) => c.command.includes('python3'));
    assert.ok(run, commands.map((c) => c.command).join('\n'));
    assert.match(run.command, /^exec sudo -E -u 'root' -- sh -c .* '\/srv\/app' 'sh' '-c' 'python3 app.py > out.txt'$/);
    assert.equal(run.env.APP_HOME, '/srv/app');
    assert.equal(run.env.GREETING, 'hello');
    assert.ok(commands.some((c) => c.command.includes("chown -- 'user:user'")), 'COPY --chown chowns what it wrote');
    // WORKDIR, COPY and RUN each left a layer; the build sandbox is gone.
    assert.equal(runtime.snapshots.size, 3);
    assert.deepEqual(await runtime.list(), []);
    const log = await logOf(org, 'py-app', started.build_id);
    assert.match(log, /step 5\/8: RUN python3 app.py > out.txt/);
    assert.match(log, /built in .* s: 8 steps, 5 cached\n$/);
  });

  it('runs no step of an unchanged Dockerfile again, and only what follows a changed one', async () => {
    const commandsBefore = runtime.commands.length;
    const provisionedBefore = runtime.provisioned.length;
    const res = await build(org, { name: 'py-app', dockerfile: DOCKERFILE, files: FILES });
    assert.equal(res.statusCode, 202, res.body);
    const template = await settled(org, 'py-app');
    assert.equal(template.state, 'ready');
    assert.equal(template.build_id, res.json().build_id);
    assert.equal(template.build.cached_steps, 8);
    assert.equal(runtime.commands.length, commandsBefore, 'no command ran');
    assert.equal(runtime.provisioned.length, provisionedBefore, 'no sandbox started');
    assert.match(await logOf(org, 'py-app', res.json().build_id), /cached/);

    // Another template sharing the first steps starts from the cached layer of the last one it shares.
    const changed = { ...FILES, 'app.py': b64('print(2)\n') };
    const second = await build(org, { name: 'py-app-2', dockerfile: DOCKERFILE, files: changed });
    const rebuilt = await settled(org, second.json().name);
    assert.equal(rebuilt.state, 'ready', rebuilt.reason);
    assert.equal(rebuilt.build.cached_steps, 6, 'WORKDIR cached; COPY and RUN ran again');
    const from = runtime.provisioned.at(-1);
    assert.ok(from !== undefined && runtime.snapshots.has(from), 'the sandbox started from the WORKDIR layer');
  });

  it('fails a build whose RUN exits non-zero, with the line, exit code and output', async () => {
    const res = await build(org, { name: 'broken', dockerfile: 'FROM debian:trixie\nRUN true\nRUN false\nRUN echo never\n' });
    assert.equal(res.statusCode, 202);
    const template = await settled(org, 'broken');
    assert.equal(template.state, 'failed');
    assert.match(template.reason, /^line 3: RUN false: exited with code 1; its output ended with: it went wrong$/);
    assert.equal(template.image, null);
    const log = await logOf(org, 'broken', res.json().build_id);
    assert.match(log, /it went wrong\n {2}exit code 1\n/);
    assert.doesNotMatch(log, /echo never/);
    assert.deepEqual(await runtime.list(), [], 'the build sandbox is removed');
  });

  it('streams a running build\'s log as Server-Sent Events, and refuses a second build of the name meanwhile', async () => {
    runtime.options.commandDelayMs = 300;
    try {
      const res = await build(org, { name: 'slow', dockerfile: 'FROM debian:bookworm\nRUN echo one\nRUN echo two\n' });
      assert.equal(res.statusCode, 202);
      const busy = await build(org, { name: 'slow', dockerfile: 'FROM debian:bookworm\n' });
      assert.equal(busy.statusCode, 409, busy.body);
      assert.equal(busy.json().error, 'template_busy');
      assert.equal(busy.json().details.build_id, res.json().build_id);
      const stream = await t.app.inject({
        method: 'GET',
        url: `/api/templates/slow/builds/${res.json().build_id}/logs`,
        headers: { ...org.headers, accept: 'text/event-stream' },
      });
      assert.equal(stream.statusCode, 200);
      assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
      const events = stream.body.split('\n\n').filter((e) => e.startsWith('event: '));
      const text = events.filter((e) => e.startsWith('event: log')).map((e) => JSON.parse(e.split('data: ')[1] ?? '').text).join('');
      assert.match(text, /step 1\/2: RUN echo one[\s\S]*step 2\/2: RUN echo two[\s\S]*built in/);
      const end = events.at(-1) ?? '';
      assert.match(end, /^event: end\n/);
      assert.equal(JSON.parse(end.split('data: ')[1] ?? '').state, 'ready');
    } finally {
      delete runtime.options.commandDelayMs;
    }
  });

  it('stops a build whose template is deleted, ending the step under way and its sandbox', async () => {
    runtime.options.commandDelayMs = 400;
    try {
      const res = await build(org, { name: 'stopped', dockerfile: 'FROM debian:bookworm\nRUN sleep 100\nRUN echo never\n' });
      await until('the RUN to start', () => (runtime.commands.at(-1)?.command.includes('sleep 100') ? true : undefined));
      const killedBefore = runtime.killed.length;
      const deleted = await t.app.inject({ method: 'DELETE', url: '/api/templates/stopped', headers: org.headers });
      assert.equal(deleted.statusCode, 200, deleted.body);
      assert.equal(runtime.killed.length, killedBefore + 1, 'the step\'s processes were killed');
      assert.ok(!runtime.commands.some((c) => c.command.includes('echo never')));
      assert.deepEqual(await runtime.list(), []);
      const row = await t.services.db.selectFrom('template_builds').selectAll().where('id', '=', res.json().build_id).executeTakeFirstOrThrow();
      assert.equal(row.state, 'failed');
      assert.equal(row.reason, 'the template was deleted');
    } finally {
      delete runtime.options.commandDelayMs;
    }
  });

  it('keeps a log whose output has a NUL (as U+FFFD, which either store holds)', async () => {
    const res = await build(org, { name: 'nul', dockerfile: 'FROM debian:bookworm\nRUN echo nul-output\n' });
    assert.equal((await settled(org, 'nul')).state, 'ready');
    assert.match(await logOf(org, 'nul', res.json().build_id), /x\uFFFDy\n/);
  });

  it('fails a Dockerfile it does not build at once, naming the line', async () => {
    const res = await build(org, { name: 'unsupported', dockerfile: 'FROM debian:bookworm\nRUN true\nSTOPSIGNAL SIGTERM\n' });
    assert.equal(res.statusCode, 202);
    assert.equal(res.json().state, 'failed');
    const template = await settled(org, 'unsupported');
    assert.match(template.reason, /^line 3: STOPSIGNAL is not supported here/);
    assert.match(await logOf(org, 'unsupported', res.json().build_id), /line 3: STOPSIGNAL/);
  });

  it('builds FROM another template of the organization, on its image', async () => {
    const res = await build(org, { name: 'child', dockerfile: 'FROM template:py-app\nENV MORE=1\n' });
    const child = await settled(org, 'child');
    assert.equal(child.state, 'ready', child.reason);
    assert.deepEqual(child.image.env, { APP_HOME: '/srv/app', GREETING_TOO: 'hello', MORE: '1' });
    assert.equal(child.image.workdir, '/srv/app');
    assert.equal(res.json().state, 'building');
    const orphan = await build(org, { name: 'orphan', dockerfile: 'FROM template:nope\n' });
    assert.match((await settled(org, orphan.json().name)).reason, /^line 1: no template "nope" in this organization$/);
  });

  it('refuses a name of an id\'s form, files outside the context or not in base64, and a COPY of a file not given', async () => {
    const uuidName = await build(org, { name: '4f0b2c1e-8a7d-4c3b-9e6f-1a2b3c4d5e6f', dockerfile: 'FROM debian:bookworm\n' });
    assert.equal(uuidName.statusCode, 400, uuidName.body);
    assert.match(uuidName.json().message, /cannot have the form of a template_id/);
    for (const files of [{ '../etc/passwd': b64('x') }, { '/abs': b64('x') }, { 'a.txt': 'not base64!' }]) {
      const res = await build(org, { name: 'bad-files', dockerfile: 'FROM debian:bookworm\n', files });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().error, 'validation_error');
    }
    await build(org, { name: 'missing', dockerfile: 'FROM debian:bookworm\nCOPY nothere.txt /x\n' });
    assert.match((await settled(org, 'missing')).reason, /^line 2: COPY nothere.txt: no file of the template's files matches it$/);
  });

  it('keeps templates within their organization', async () => {
    const list = await t.app.inject({ method: 'GET', url: '/api/templates', headers: other.headers });
    assert.deepEqual(list.json(), { templates: [] });
    const mine = (await t.app.inject({ method: 'GET', url: '/api/templates/py-app', headers: org.headers })).json();
    for (const [method, url] of [
      ['GET', '/api/templates/py-app'],
      ['GET', `/api/templates/${mine.template_id}`],
      ['GET', `/api/templates/py-app/builds/${mine.build_id}/logs`],
      ['DELETE', '/api/templates/py-app'],
    ] as const) {
      const res = await t.app.inject({ method, url, headers: other.headers });
      assert.equal(res.statusCode, 404, `${method} ${url}`);
      assert.equal(res.json().error, 'template_not_found');
    }
    const child = await build(other, { name: 'theirs', dockerfile: 'FROM template:py-app\n' });
    assert.match((await settled(other, child.json().name)).reason, /no template "py-app" in this organization/);
    // Its own template of the same name is its own.
    const same = await build(other, { name: 'py-app', dockerfile: 'FROM debian:bookworm\nENV MINE=1\n' });
    assert.notEqual(same.json().template_id, mine.template_id);
  });

  it('deletes a template: gone from the list, its name free again', async () => {
    await build(org, { name: 'short-lived', dockerfile: 'FROM debian:bookworm\nENV A=1\n' });
    await settled(org, 'short-lived');
    const res = await t.app.inject({ method: 'DELETE', url: '/api/templates/short-lived', headers: org.headers });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().name, 'short-lived');
    const gone = await t.app.inject({ method: 'GET', url: '/api/templates/short-lived', headers: org.headers });
    assert.equal(gone.statusCode, 404);
    const names = (await t.app.inject({ method: 'GET', url: '/api/templates', headers: org.headers })).json().templates.map((x: { name: string }) => x.name);
    assert.ok(!names.includes('short-lived'));
    const again = await build(org, { name: 'short-lived', dockerfile: 'FROM debian:bookworm\n' });
    assert.equal(again.statusCode, 202);
    assert.notEqual(again.json().template_id, res.json().template_id);
  });

  it('gives a profile of template:NAME instances on its image: its files, ENV, WORKDIR and start command', async () => {
    const template = await settled(org, 'py-app');
    const profileId = await t.createProfile(org, { name: 'from-template', image: 'template:py-app', env: { OWN: '1' } });
    const created = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/r1`, headers: org.headers, payload: { wait: true } });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.json().state, 'ready');
    const layer = runtime.provisioned.at(-1);
    assert.ok(layer !== undefined && runtime.snapshots.has(layer), 'it started from the template\'s last layer');
    // CMD started before the instance was ready: as a program, in WORKDIR, with the environment.
    const start = runtime.commands.at(-1);
    assert.deepEqual(start?.argv, ['python3', '-m', 'http.server']);
    assert.equal(start?.cwd, '/srv/app');
    assert.equal(start?.env.APP_HOME, '/srv/app');
    assert.equal(start?.timeoutMs, 0);
    const res = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/r1/command`, headers: org.headers, payload: { command: 'pwd' } });
    assert.equal(res.statusCode, 200, res.body);
    const command = runtime.commands.at(-1);
    assert.equal(command?.cwd, '/srv/app');
    assert.equal(command?.env.APP_HOME, '/srv/app');
    assert.equal(command?.env.OWN, '1');
    const withCwd = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/r1/command`, headers: org.headers, payload: { command: 'pwd', cwd: '/tmp' } });
    assert.equal(withCwd.statusCode, 200);
    assert.equal(runtime.commands.at(-1)?.cwd, '/tmp', 'a command\'s own directory wins');

    // A rebuild gives new instances the new image; the running one keeps its build.
    const rebuilt = await build(org, { name: 'py-app', dockerfile: `${DOCKERFILE}\nRUN echo more`, files: FILES });
    assert.equal((await settled(org, 'py-app')).state, 'ready');
    assert.notEqual(rebuilt.json().build_id, template.build_id);
    const row = await t.services.db.selectFrom('instances').select('spec').where('id', '=', created.json().instance_id).executeTakeFirstOrThrow();
    assert.equal(JSON.parse(row.spec ?? '{}').template.build_id, template.build_id);
    const second = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/r2`, headers: org.headers, payload: { wait: true } });
    assert.equal(second.statusCode, 201, second.body);
    assert.notEqual(runtime.provisioned.at(-1), layer, 'the new instance starts from the new last layer');
  });

  it('runs a HEALTHCHECK CMD after the start command, before the instance is ready', async () => {
    await build(org, { name: 'checked', dockerfile: 'FROM template:py-app\nHEALTHCHECK --interval=1s CMD curl -sf http://127.0.0.1:8000/\n' });
    const template = await settled(org, 'checked');
    assert.deepEqual(template.image.ready_check, ['sh', '-c', 'curl -sf http://127.0.0.1:8000/']);
    const profileId = await t.createProfile(org, { name: 'of-checked', image: 'template:checked' });
    const created = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/r1`, headers: org.headers, payload: { wait: true } });
    assert.equal(created.json().state, 'ready', created.body);
    const [start, check] = runtime.commands.slice(-2);
    assert.deepEqual(start?.argv, ['python3', '-m', 'http.server']);
    assert.deepEqual(check?.argv, ['sh', '-c', 'curl -sf http://127.0.0.1:8000/']);
    assert.equal(check?.cwd, '/srv/app');
  });

  it('refuses a profile of a template that is not the organization\'s, has no image, or with packages or a warm pool', async () => {
    const cases: [TestOrg, Record<string, unknown>, RegExp][] = [
      [org, { image: 'template:nope' }, /image "template:nope": no template "nope" in this organization/],
      [org, { image: 'template:broken' }, /image "template:broken": template "broken" has no image: its build failed \(line 3/],
      [other, { image: 'template:child' }, /no template "child" in this organization/],
      [org, { image: 'template:py-app', packages: ['jq'] }, /packages cannot be installed into a template/],
      [org, { image: 'template:py-app', warm_pool: 1 }, /keeps no warm pool/],
    ];
    for (const [who, fields, message] of cases) {
      const res = await t.app.inject({ method: 'POST', url: '/api/profiles', headers: who.headers, payload: { name: 'refused', ...fields } });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().error, 'validation_error');
      assert.match(res.json().message, message);
    }
  });

  it('refuses an instance of a template deleted since its profile was saved', async () => {
    await build(org, { name: 'going', dockerfile: 'FROM debian:bookworm\nENV A=1\n' });
    await settled(org, 'going');
    const profileId = await t.createProfile(org, { name: 'of-going', image: 'template:going' });
    await t.app.inject({ method: 'DELETE', url: '/api/templates/going', headers: org.headers });
    const res = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/r1`, headers: org.headers });
    assert.equal(res.statusCode, 404, res.body);
    assert.equal(res.json().error, 'template_not_found');
  });

  it('names for pruning the layers no template\'s image starts from, once no build can be using them', async () => {
    const { nodeId, db } = t.services;
    assert.deepEqual(await unusedTemplateLayers(db, nodeId), [], 'layers younger than a build\'s time limit stay');
    const later = Date.now() + 2 * BUILD_TIME_LIMIT_MS;
    const unused = new Set(await unusedTemplateLayers(db, nodeId, later));
    const all = await db.selectFrom('template_layers').select('layer_id').execute();
    const images = await db.selectFrom('templates').innerJoin('template_builds', 'template_builds.id', 'templates.ready_build_id').select('result').where('templates.deleted_at', 'is', null).execute();
    const used = images.map((r) => JSON.parse(r.result ?? '{}').layer_id).filter((id): id is string => typeof id === 'string');
    assert.ok(used.length > 0);
    for (const id of used) assert.ok(!unused.has(id), `the image layer ${id} is kept`);
    assert.equal(unused.size, all.length - new Set(used).size, 'every other layer goes');
    await forgetTemplateLayers(db, [...unused]);
    assert.equal((await db.selectFrom('template_layers').select('layer_id').execute()).length, new Set(used).size);
  });
});
