// The CLI's commands of commands and of profiles against a server listening on a port,
// over the runtime test double (which answers each command with its own text): options
// right after the room are roomkit's, `--background` prints the command's id, `commands`
// lists the history and shows one command, `kill` signals it, exec's files_changed names
// the command, a usage error exits 2 (exec's too); `profiles create|show|update|rm`,
// with the raw endpoint's reach said at a create that leaves raw_files at "all".
// Commands in real sandboxes are in test/host/cli-client.test.ts.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { run } from '../support/cli.ts';
import { FakeRuntime } from '../support/fake-runtime.ts';

let t: TestApp;
let org: TestOrg;
let env: NodeJS.ProcessEnv;

before(async () => {
  t = await startTestApp({ fake: new FakeRuntime({ commandDelayMs: 1500 }) });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  org = await t.newOrg();
  env = { ROOMKIT_URL: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`, ROOMKIT_API_KEY: org.apiKey };
  const created = await run(['create', 'cmds'], { env });
  assert.equal(created.code, 0, created.stderr);
});
after(() => t.close());

describe('roomkit exec and commands', () => {
  it('takes roomkit\'s options right after the room, and passes the command\'s own on', async () => {
    const json = await run(['exec', 'cmds', '--json', 'echo', 'hi'], { env });
    assert.equal(json.code, 0, json.stderr);
    assert.equal(JSON.parse(json.stdout).result.output, 'echo hi');
    // (The test runtime streams no output: what ran is read from it.)
    const passed = await run(['exec', 'cmds', 'ls', '--json'], { env });
    assert.equal(passed.code, 0, passed.stderr);
    assert.equal(t.runtime.commands.at(-1)?.command, 'ls --json');
    const quiet = await run(['exec', 'cmds', '--idle-output-timeout', '5', 'true'], { env });
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.equal(t.runtime.commands.at(-1)?.idleOutputTimeoutMs, 5000);
    const dashed = await run(['exec', 'cmds', '--', '--version'], { env });
    assert.equal(dashed.code, 0, dashed.stderr);
    assert.equal(t.runtime.commands.at(-1)?.command, '--version');
    const unknown = await run(['exec', 'cmds', '--bogus', 'ls'], { env });
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, /unknown option --bogus: roomkit's options go before the command; .* roomkit exec cmds -- --bogus ls/);
  });

  it('--background prints the id; commands lists it, shows its output and end; kill signals a running one', async () => {
    const started = await run(['exec', '--background', 'cmds', 'sleep 1'], { env });
    assert.equal(started.code, 0, started.stderr);
    const id = started.stdout.trim();
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.match(started.stderr, new RegExp(`roomkit commands cmds ${id} --follow`));
    const followed = await run(['commands', 'cmds', id, '--follow'], { env });
    assert.equal(followed.code, 0, followed.stderr);
    assert.equal(t.runtime.commands.at(-1)?.command, 'sleep 1');
    assert.match(followed.stderr, /^exited with exit code 0 after \d+ ms$/m);
    const listed = await run(['commands', 'cmds'], { env });
    assert.equal(listed.code, 0, listed.stderr);
    const row = listed.stdout.split('\n').find((line) => line.startsWith(id));
    assert.match(row ?? '', /exited +0 .*sleep 1$/);
    assert.match(listed.stdout, /^COMMAND +STATE +EXIT +STARTED +TOOK +RUN$/m);

    // A command that runs long enough for a kill to find it running, however slow the CLI's start.
    t.runtime.options.commandDelayMs = 30_000;
    const long = await run(['exec', '--background', 'cmds', 'sleep 100'], { env });
    t.runtime.options.commandDelayMs = 1500;
    const longId = long.stdout.trim();
    const killed = await run(['kill', 'cmds', longId, '--signal', 'term'], { env });
    assert.equal(killed.code, 0, killed.stderr);
    assert.ok(t.runtime.killed.includes(longId), 'the kill reached the runtime');
    // The server's advice (its hint) as a roomkit command, not as a REST or SDK call.
    const unknown = await run(['kill', 'cmds', '00000000-0000-4000-8000-000000000000'], { env });
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^roomkit: error command_not_found: no command 0{8}-.*; `roomkit commands cmds` lists them\n$/);
  });

  it('names the command whose files_changed it prints', async () => {
    t.runtime.options.commandChanges = [{ path: '/home/user/made.txt', status: 'created', size: 3 }];
    try {
      const res = await run(['exec', 'cmds', 'touch made.txt'], { env });
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stderr, /^files changed by command [0-9a-f-]{36}:\n {2}created +\/home\/user\/made\.txt/m);
    } finally {
      delete t.runtime.options.commandChanges;
    }
  });

  it('without a key, exec exits 2 like every usage error', async () => {
    const res = await run(['exec', 'cmds', 'true'], { env: { ...env, ROOMKIT_API_KEY: '' } });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /^roomkit: error missing_api_key: /);
  });
});

describe('roomkit profiles', () => {
  it('create, show, update, list and rm, the server validating', async () => {
    const made = await run(
      ['profiles', 'create', 'undoable', '--memory', '512', '--keep-undo', '--command-timeout', '300', '--command-idle-output-timeout', '30', '--set', 'env={"A":"1"}', '--json'],
      { env },
    );
    assert.equal(made.code, 0, made.stderr);
    const profile = JSON.parse(made.stdout);
    assert.deepEqual(
      [profile.memory_mb, profile.keep_undo, profile.command_timeout_s, profile.command_idle_output_timeout_s, profile.env, profile.raw_files],
      [512, true, 300, 30, { A: '1' }, 'all'],
    );
    // Left at "all", the create says what the raw endpoint reaches and how to narrow it.
    assert.match(made.stderr, /raw_files is "all": anyone who knows an instance's id reads, without a key.*--raw-files changed/);
    const narrow = await run(['profiles', 'create', 'narrow', '--raw-files', 'changed', '--egress', 'allowlist', '--allow', 'pypi.org, *.pythonhosted.org', '--deny', 'evil.pypi.org', '--json'], { env });
    assert.equal(narrow.code, 0, narrow.stderr);
    assert.deepEqual(JSON.parse(narrow.stdout).network, { egress: 'allowlist', allow: ['pypi.org', '*.pythonhosted.org'], deny: ['evil.pypi.org'] });
    assert.doesNotMatch(narrow.stderr, /raw_files is "all"/);

    const shown = await run(['profiles', 'show', 'undoable'], { env });
    assert.match(shown.stdout, /^memory_mb +512$/m);
    const updated = await run(['profiles', 'update', 'undoable', '--memory', '768', '--raw-files', 'off', '--json'], { env });
    assert.equal(updated.code, 0, updated.stderr);
    assert.deepEqual([JSON.parse(updated.stdout).memory_mb, JSON.parse(updated.stdout).raw_files], [768, 'off']);
    const invalid = await run(['profiles', 'update', 'undoable', '--memory', '1'], { env });
    assert.equal(invalid.code, 1);
    assert.match(invalid.stderr, /^roomkit: error validation_error: .*memory_mb/);
    const nothing = await run(['profiles', 'update', 'undoable'], { env });
    assert.equal(nothing.code, 2);

    const listed = await run(['profiles'], { env });
    assert.match(listed.stdout, /^undoable +[0-9a-f-]{36} +768 MiB/m);
    assert.equal((await run(['profiles', 'rm', 'narrow'], { env })).code, 0);
    const gone = await run(['profiles', 'show', 'narrow'], { env });
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /profile_not_found/);
  });
});
