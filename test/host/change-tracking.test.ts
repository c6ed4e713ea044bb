// files_changed made from fanotify against the walk it replaces, on a real instance: for
// each command of a corpus (files of the image and new ones created, written, truncated,
// appended to, renamed, linked, chmod-ed and deleted; directories removed whole; names
// the guest chooses; a deep tree; many files), the test lists the instance's writable
// layer itself before and after the command, diffs the two as the walk method does, and
// requires the command's own list, made by fanotify, to be the same. Then the fallbacks:
// more touched paths than the watcher keeps, and a watcher killed while a command runs,
// both give a list made by a walk that says so and is still exact.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { apiPath } from '../../src/lib/guest-names.ts';
import { diffLayers, LayerIndexes, listLayer, type Listing } from '../../src/runtimes/layer-changes/changes.ts';
import { startTestApp, TEST_IMAGES_DIR, type TestApp, type TestOrg } from '../support/app.ts';

/** The watcher keeps this many paths per command here; the overflow case touches more. */
const MAX_PATHS = 4000;

let t: TestApp;
let org: TestOrg;
let profileId: string;
let instanceId: string;
let upper: string;
let imageKey: string;
const indexes = new LayerIndexes(TEST_IMAGES_DIR, (key) => join(TEST_IMAGES_DIR, key, 'rootfs'));

const room = () => `/api/profile/${profileId}/room/main`;

interface Change {
  path: string;
  status: string;
  size?: number;
}

interface Result {
  result: { files_changed: Change[]; files_changed_method?: string; files_changed_total: number; exit_code: number; output: string };
}

async function post(command: string): Promise<Result> {
  const res = await t.app.inject({ method: 'POST', url: `${room()}/command`, headers: org.headers, payload: { command } });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

async function walk(): Promise<Listing> {
  return listLayer(await indexes.walker(), upper);
}

const shown = (changes: Change[]) => changes.map((c) => `${c.status} ${c.path} ${c.size ?? ''}`);

/** Runs the command; its fanotify list must equal the walker's diff over the same command. */
async function compare(command: string, method: string | string[] = 'fanotify'): Promise<string[]> {
  const beforeListing = await walk();
  const body = await post(command);
  const afterListing = await walk();
  assert.equal(body.result.exit_code, 0, `${command}: ${body.result.output}`);
  const walked = diffLayers(beforeListing, afterListing, await indexes.lowerIndex(imageKey)).map((c) => ({
    ...c,
    path: apiPath(c.path).path,
  }));
  assert.equal(body.result.files_changed_total, walked.length, command);
  assert.deepEqual(shown(body.result.files_changed), shown(walked), command);
  assert.ok([method].flat().includes(String(body.result.files_changed_method)), `${command}: made by ${body.result.files_changed_method}, not ${method}`);
  return shown(walked);
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.238.0.0/25', config: { changeTracking: 'fanotify', changeTrackingMaxPaths: MAX_PATHS, filesChangedLimit: 100_000 } });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'track', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 120 });
  const created = await t.app.inject({ method: 'POST', url: room(), headers: org.headers });
  assert.equal(created.statusCode, 201, created.body);
  instanceId = created.json().instance_id;
  const dir = join(t.services.config.dataDir, 'instances', instanceId);
  upper = join(dir, 'layer', 'upper');
  imageKey = (JSON.parse(readFileSync(join(dir, 'instance.json'), 'utf8')) as { imageKey: string }).imageKey;
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('files_changed from fanotify', () => {
  it('is empty, and made by fanotify, for a command that changes nothing', async () => {
    assert.deepEqual(await compare('true'), []);
  });

  it('equals the walk for new files: created, appended, truncated, chmod-ed, renamed, deleted', async () => {
    assert.deepEqual(await compare('echo one > a.txt && echo two > b.txt && mkdir -p dir/sub && echo three > dir/sub/c.txt'), [
      'created /home/user/a.txt 4',
      'created /home/user/b.txt 4',
      'created /home/user/dir/sub/c.txt 6',
    ]);
    await compare('echo more >> a.txt');
    await compare(': > b.txt');
    assert.equal((await compare('chmod 600 a.txt')).length, 1);
    await compare('mv a.txt moved.txt');
    await compare('rm b.txt');
    await compare('touch brief && rm brief');
    await compare('mv dir dir2');
    await compare('rm -r dir2');
  });

  it('equals the walk for files of the image: modified, truncated, deleted, renamed, chmod-ed', async () => {
    assert.deepEqual(await compare('echo x >> .bashrc'), ['modified /home/user/.bashrc ' + String(Number(execFileSync('stat', ['-c', '%s', join(TEST_IMAGES_DIR, imageKey, 'rootfs/home/user/.bashrc')]).toString()) + 2)]);
    await compare(': > .profile');
    await compare('rm .bash_logout');
    await compare('sudo mv /etc/issue /etc/issue.moved');
    await compare('sudo chmod 600 /etc/issue.net');
    await compare('sudo rm -rf /usr/share/doc');
    await compare('sudo rm -rf /etc/skel && sudo mkdir /etc/skel && sudo touch /etc/skel/only');
  });

  it('lists every name of a hard-linked file that changes', async () => {
    await compare('echo first > linked && ln linked alias');
    assert.deepEqual(await compare('echo second >> alias'), ['modified /home/user/alias 13', 'modified /home/user/linked 13']);
    await compare('rm alias');
  });

  it('equals the walk for names the guest chooses: a newline, bytes that are not UTF-8, symbolic links', async () => {
    await compare(`touch "$(printf 'new\\nline')" "$(printf 'bad\\377name')" && ln -s /etc/passwd link && mkdir "$(printf 'd\\001')" && echo x > "$(printf 'd\\001')/f"`);
    await compare(`rm "$(printf 'new\\nline')" && mv "$(printf 'bad\\377name')" "$(printf 'still\\376bad')"`);
  });

  it('equals the walk for a deep tree, created, written and removed', async () => {
    const deep = Array.from({ length: 300 }, () => 'd').join('/');
    await compare(`mkdir -p ${deep} && echo bottom > ${deep}/file`);
    await compare(`echo again >> ${deep}/file && mv d e`);
    await compare('rm -r e');
  });

  it('equals the walk for many files in one command', async () => {
    const list = await compare('mkdir many && cd many && for i in $(seq 1500); do echo $i > f$i; done');
    assert.equal(list.length, 1500);
    await compare('rm -r many');
  });

  it('falls back to a walk, and says so, when a command touches more paths than the watcher keeps', async () => {
    const list = await compare(`mkdir lots && cd lots && for i in $(seq ${MAX_PATHS + 500}); do : > f$i; done`, 'walk');
    assert.equal(list.length, MAX_PATHS + 500);
    // The next command is tracked by fanotify again, from the picture the walk made.
    await compare('rm lots/f1 && echo new > lots/f2', 'fanotify');
    // Removing them all touches as many again, but the deletes may reach the watcher
    // after their directory is gone and count as fewer paths: either method, the same list.
    const removed = await compare('rm -r lots', ['walk', 'fanotify']);
    assert.equal(removed.length, MAX_PATHS + 499); // f1 went before
  });

  it('falls back to a walk, and says so, when the watcher dies while a command runs', async () => {
    const pending = (async () => {
      const beforeListing = await walk();
      const body = await post('sleep 1.5 && echo late > late.txt');
      return { beforeListing, body };
    })();
    await new Promise((resolve) => setTimeout(resolve, 700));
    const helpers = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)]).toString().split('\n').filter((l) => /change-watch/.test(l));
    assert.equal(helpers.length, 1, `one change watcher runs: ${helpers.join('; ')}`);
    process.kill(Number.parseInt(helpers[0]!.trim(), 10), 'SIGKILL');
    const { beforeListing, body } = await pending;
    const walked = diffLayers(beforeListing, await walk(), await indexes.lowerIndex(imageKey));
    assert.equal(body.result.files_changed_method, 'walk');
    assert.deepEqual(shown(body.result.files_changed), shown(walked));
    assert.deepEqual(shown(walked), ['created /home/user/late.txt 5']);
    await compare('rm late.txt', 'fanotify');
  });
});
