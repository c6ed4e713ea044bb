// Undo of one command on real gVisor instances over the API: a profile with keep_undo
// gets a btrfs layer whose undo points put back what a command created, modified and
// deleted (contents, mode), an image file changed as root, a conflicting revert refused
// with the files named and then forced, the bounds dropping the oldest points (count and
// disk), and the refusals: a command without an undo point, a second revert, and
// keep_undo asked of an instance whose profile has none.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let undoProfile: string;
let plainProfile: string;

const room = (profileId = undoProfile) => `/api/profile/${profileId}/room/main`;

async function api(method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) {
  return t.app.inject({ method, url, headers: org.headers, ...(payload ? { payload } : {}) });
}

async function run(command: string, extra: Record<string, unknown> = {}, profileId = undoProfile) {
  const res = await api('POST', `${room(profileId)}/command`, { command, ...extra });
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  assert.equal(body.result.exit_code, 0, body.result.output);
  return body;
}

async function revert(commandId: string, body?: Record<string, unknown>) {
  return api('POST', `${room()}/commands/${commandId}/revert`, body);
}

/** `stat` of a file in the instance: mode, owner, and its content's checksum. */
async function fileState(path: string): Promise<string> {
  const out = await run(`sudo sh -c 'if [ -e "${path}" ]; then stat -c "%a %u:%g %s" "${path}"; md5sum < "${path}"; else echo absent; fi'`);
  return out.result.output.trim();
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.248.0.0/24', config: { undoMaxPoints: 4, undoMaxMb: 8 } });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  const made = await api('POST', '/api/profiles', { name: 'undo', keep_undo: true, memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 60 });
  assert.equal(made.statusCode, 201, made.body);
  assert.equal(made.json().keep_undo, true);
  undoProfile = made.json().profile_id;
  const plain = await api('POST', '/api/profiles', { name: 'plain', memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 60 });
  assert.equal(plain.statusCode, 201, plain.body);
  assert.equal(plain.json().keep_undo, false);
  plainProfile = plain.json().profile_id;
  for (const profileId of [undoProfile, plainProfile]) {
    const created = await api('POST', room(profileId));
    assert.equal(created.statusCode, 201, created.body);
  }
});

after(async () => {
  await t?.close();
});

describe('revert of one command', () => {
  it('puts back a created, a modified and a deleted file, with their contents and modes', async () => {
    await run('mkdir -p work && printf old-m > work/m && chmod 640 work/m && printf old-d > work/d && chmod 600 work/d', { keep_undo: false });
    const before = { c: await fileState('work/c'), m: await fileState('work/m'), d: await fileState('work/d') };
    assert.equal(before.c, 'absent');
    const changed = await run('printf new > work/c && printf new-content > work/m && chmod 755 work/m && rm work/d');
    const statuses = Object.fromEntries(changed.result.files_changed.map((f: any) => [f.path.replace(/^.*\//, ''), f.status]));
    assert.deepEqual(statuses, { c: 'created', m: 'modified', d: 'deleted' });
    // The fanotify watch works on a btrfs layer as on ext4.
    assert.equal(changed.result.files_changed_method, 'fanotify');
    assert.notEqual(await fileState('work/m'), before.m);

    const res = await revert(changed.command_id);
    assert.equal(res.statusCode, 200, res.body);
    const reverted = Object.fromEntries(res.json().files_changed.map((f: any) => [f.path.replace(/^.*\//, ''), f.status]));
    assert.deepEqual(reverted, { c: 'deleted', m: 'modified', d: 'created' });
    assert.equal(res.json().files_changed_method, 'fanotify');
    assert.equal(res.json().forced, false);
    assert.deepEqual({ c: await fileState('work/c'), m: await fileState('work/m'), d: await fileState('work/d') }, before);

    // An undo point is used once.
    const again = await revert(changed.command_id);
    assert.equal(again.statusCode, 409, again.body);
    assert.equal(again.json().error, 'no_undo_point');
    assert.match(again.json().message, /was already reverted/, 'a second revert says so, not that the command kept no undo point');
  });

  it('puts back a file of the image that root changed, with its owner', async () => {
    const before = await fileState('/etc/debian_version');
    assert.match(before, /^644 0:0 /);
    const changed = await run("sudo sh -c 'echo broken >> /etc/debian_version && chmod 600 /etc/debian_version'");
    assert.deepEqual(changed.result.files_changed.map((f: any) => [f.path, f.status]), [['/etc/debian_version', 'modified']]);
    const res = await revert(changed.command_id);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(await fileState('/etc/debian_version'), before);
  });

  it('refuses a revert that later commands make ambiguous, naming the files, and forces it', async () => {
    await run('printf one > shared && printf one > other', { keep_undo: false });
    const first = await run('printf two > shared && printf two > other');
    await run('printf three > shared', { keep_undo: false });
    const refused = await revert(first.command_id);
    assert.equal(refused.statusCode, 409, refused.body);
    assert.equal(refused.json().error, 'revert_conflict');
    assert.deepEqual(refused.json().details.files, ['/home/user/shared']);
    assert.match(refused.json().message, /shared/);
    assert.equal((await run('cat shared other')).result.output, 'threetwo');

    const forced = await revert(first.command_id, { force: true });
    assert.equal(forced.statusCode, 200, forced.body);
    assert.equal(forced.json().forced, true);
    assert.equal((await run('cat shared other')).result.output, 'oneone');
  });

  it('refuses a command without an undo point, and keep_undo on an instance whose profile has none', async () => {
    const without = await run('printf x > no-undo', { keep_undo: false });
    const res = await revert(without.command_id);
    assert.equal(res.statusCode, 409, res.body);
    assert.equal(res.json().error, 'no_undo_point');
    assert.match(res.json().message, /keep_undo/);

    const plain = await api('POST', `${room(plainProfile)}/command`, { command: 'true', keep_undo: true });
    assert.equal(plain.statusCode, 400, plain.body);
    assert.equal(plain.json().error, 'undo_unavailable');
    assert.match(plain.json().message, /profile/);
    const plainRun = await run('printf x > f', {}, plainProfile);
    const plainRevert = await api('POST', `${room(plainProfile)}/commands/${plainRun.command_id}/revert`);
    assert.equal(plainRevert.statusCode, 409, plainRevert.body);
    assert.equal(plainRevert.json().error, 'no_undo_point');
  });

  it('drops the oldest undo points beyond the count bound', async () => {
    const commands = [];
    for (let i = 0; i < 5; i++) commands.push(await run(`printf ${i} > counted`));
    // 4 points at most: the fifth command's point replaced the first one's.
    const dropped = await revert(commands[0].command_id, { force: true });
    assert.equal(dropped.statusCode, 409, dropped.body);
    assert.equal(dropped.json().error, 'no_undo_point');
    assert.match(dropped.json().message, /dropped/);
    const kept = await revert(commands[4].command_id);
    assert.equal(kept.statusCode, 200, kept.body);
    assert.equal((await run('cat counted')).result.output, '3');
  });

  it('drops the oldest undo points when they hold more disk than the bound', async () => {
    const big = await run('head -c 12000000 /dev/urandom > big');
    const removed = await run('rm big');
    // Before this command, the points hold the 12 MB file alone: more than the 8 MiB bound.
    await run('true');
    const res = await revert(removed.command_id);
    assert.equal(res.statusCode, 409, res.body);
    assert.equal(res.json().error, 'no_undo_point');
    assert.match(res.json().message, /dropped/);
    const older = await revert(big.command_id);
    assert.equal(older.statusCode, 409, older.body);
  });
});
