// File endpoints on a real gVisor instance: the JSON read, the unauthenticated raw
// read, write, list and delete, with the guest's permissions, links and traversal
// attempts. Everything a file request reaches, the VM user could reach inside.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let profileId: string;
let instanceId: string;

const base = () => `/api/profile/${profileId}/room/files`;
const fileUrl = (path: string) => `${base()}/file/${path}`;
const raw = (path: string) => `/vm/${instanceId}/file/${path}`;

/** A 1x1 PNG. */
const PNG_HEX =
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a3a4e05a0000000049454e44ae426082';

async function sh(command: string) {
  const res = await t.app.inject({ method: 'POST', url: `${base()}/command`, headers: org.headers, payload: { command } });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().result as { output: string; exit_code: number };
}

const get = (url: string, headers: Record<string, string> = org.headers) => t.app.inject({ method: 'GET', url, headers });

before(async () => {
  t = await startTestApp({ gvisorPool: '10.221.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'files', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' } });
  const created = await t.app.inject({ method: 'POST', url: base(), headers: org.headers });
  assert.equal(created.statusCode, 201, created.body);
  instanceId = created.json().instance_id;
  const setup = await sh(
    `printf 'héllo wörld\\n' > hello.txt && python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex('${PNG_HEX}'))" > dot.png && mkdir -p sub && echo deep > sub/deep.txt`,
  );
  assert.equal(setup.exit_code, 0, setup.output);
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('reading a file (JSON)', () => {
  it('returns text as it is, with the spec\'s FileContent fields', async () => {
    const res = await get(fileUrl('hello.txt'));
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), {
      file_path: '/home/user/hello.txt',
      content: 'héllo wörld\n',
      instance_id: instanceId,
      encoding: 'utf-8',
      size: Buffer.byteLength('héllo wörld\n'),
      mime_type: 'text/plain',
    });
  });

  it('returns binary content base64-encoded, byte for byte', async () => {
    const res = await get(fileUrl('dot.png'));
    assert.equal(res.json().encoding, 'base64');
    assert.equal(Buffer.from(res.json().content, 'base64').toString('hex'), PNG_HEX);
    assert.equal(res.json().mime_type, 'image/png');
  });

  it('takes absolute paths and paths relative to the home directory', async () => {
    for (const path of ['/etc/hostname', '%2Fetc%2Fhostname']) {
      const res = await get(fileUrl(path));
      assert.equal(res.statusCode, 200, `${path}: ${res.body}`);
      assert.equal(res.json().file_path, '/etc/hostname');
      assert.equal(res.json().content, 'roomkit\n');
    }
    const nested = await get(fileUrl('sub/deep.txt'));
    assert.equal(nested.json().content, 'deep\n');
    assert.equal(nested.json().file_path, '/home/user/sub/deep.txt');
  });

  it('reads fresh on every request', async () => {
    await sh('echo one > fresh.txt');
    assert.equal((await get(fileUrl('fresh.txt'))).json().content, 'one\n');
    await sh('echo two > fresh.txt');
    assert.equal((await get(fileUrl('fresh.txt'))).json().content, 'two\n');
  });

  it('answers file_not_found, is_a_directory, permission_denied and instance_not_found', async () => {
    const cases: [string, number, string][] = [
      [fileUrl('missing.txt'), 404, 'file_not_found'],
      [fileUrl('sub'), 400, 'is_a_directory'],
      [fileUrl('/etc/shadow'), 403, 'permission_denied'],
      [fileUrl('/root/.bashrc'), 403, 'permission_denied'],
      [`/api/profile/${profileId}/room/nobody-here/file/x`, 404, 'instance_not_found'],
    ];
    for (const [url, status, error] of cases) {
      const res = await get(url);
      assert.equal(res.statusCode, status, `${url}: ${res.body}`);
      assert.equal(res.json().error, error, url);
      assert.ok(res.json().message.length > 10);
    }
  });

  it('refuses files over the JSON limit with file_too_large, pointing at the raw endpoint', async () => {
    await sh('head -c 52428801 /dev/zero > big.bin');
    const res = await get(fileUrl('big.bin'));
    assert.equal(res.statusCode, 413);
    assert.equal(res.json().error, 'file_too_large');
    assert.match(res.json().message, /\/vm\//);
    await sh('rm big.bin');
  });
});

describe('the raw endpoint', () => {
  it('serves the bytes without authentication, with the type, length, validators and protective headers', async () => {
    const res = await t.app.inject({ method: 'GET', url: raw('home/user/dot.png') });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.headers['content-type'], 'image/png');
    assert.equal(res.rawPayload.toString('hex'), PNG_HEX);
    assert.equal(res.headers['content-length'], String(PNG_HEX.length / 2));
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.match(String(res.headers['content-security-policy']), /^sandbox/);
    assert.equal(res.headers['referrer-policy'], 'no-referrer');
    assert.ok(res.headers.etag);
    assert.ok(Date.parse(String(res.headers['last-modified'])) > 0);
    const again = await t.app.inject({ method: 'GET', url: raw('home/user/dot.png'), headers: { 'if-none-match': String(res.headers.etag) } });
    assert.equal(again.statusCode, 304);
  });

  it('sniffs the type of a file without an extension, and marks text as UTF-8', async () => {
    await sh('cp dot.png picture');
    const png = await t.app.inject({ method: 'GET', url: raw('home/user/picture') });
    assert.equal(png.headers['content-type'], 'image/png');
    const text = await t.app.inject({ method: 'GET', url: raw('home/user/hello.txt') });
    assert.equal(text.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(text.body, 'héllo wörld\n');
  });

  it('serves byte ranges, and 416 for a range past the end', async () => {
    const part = await t.app.inject({ method: 'GET', url: raw('home/user/sub/deep.txt'), headers: { range: 'bytes=1-3' } });
    assert.equal(part.statusCode, 206);
    assert.equal(part.body, 'eep');
    assert.equal(part.headers['content-range'], 'bytes 1-3/5');
    const suffix = await t.app.inject({ method: 'GET', url: raw('home/user/sub/deep.txt'), headers: { range: 'bytes=-2' } });
    assert.equal(suffix.body, 'p\n');
    const past = await t.app.inject({ method: 'GET', url: raw('home/user/sub/deep.txt'), headers: { range: 'bytes=10-20' } });
    assert.equal(past.statusCode, 416);
    assert.equal(past.json().error, 'range_not_satisfiable');
  });

  it('streams a large file whole (10 MiB)', async () => {
    await sh('head -c 10485760 /dev/urandom > ten.bin && sha256sum ten.bin > ten.sum');
    const res = await t.app.inject({ method: 'GET', url: raw('home/user/ten.bin') });
    assert.equal(res.statusCode, 200);
    assert.equal(res.rawPayload.length, 10485760);
    const { createHash } = await import('node:crypto');
    const sum = (await get(fileUrl('ten.sum'))).json().content.split(' ')[0];
    assert.equal(createHash('sha256').update(res.rawPayload).digest('hex'), sum);
    await sh('rm ten.bin ten.sum');
  });

  it('answers plain Error JSON: unknown instance, missing file, a stopped instance', async () => {
    const unknown = await t.app.inject({ method: 'GET', url: `/vm/${randomUUID()}/file/etc/hostname` });
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().error, 'instance_not_found');
    const notUuid = await t.app.inject({ method: 'GET', url: '/vm/not-an-id/file/etc/hostname' });
    assert.equal(notUuid.statusCode, 400);
    assert.ok(notUuid.json().error);
    const missing = await t.app.inject({ method: 'GET', url: raw('home/user/none.txt') });
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.json().error, 'file_not_found');
    assert.match(String(missing.headers['content-type']), /^application\/json/);
  });

  it('serves what the profile\'s raw_files allows, at once for the live instance: changed, then off, then all again', async () => {
    const patch = async (raw_files: string) => {
      const res = await t.app.inject({ method: 'PATCH', url: `/api/profiles/${profileId}`, headers: org.headers, payload: { raw_files } });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().raw_files, raw_files);
    };
    const status = async (path: string) => (await t.app.inject({ method: 'GET', url: raw(path) })).statusCode;
    await sh('echo listed > listed.txt');
    // Positive control: under the default (`all`) a file no command listed is served.
    assert.equal(await status('etc/passwd'), 200);
    try {
      await patch('changed');
      const listed = await t.app.inject({ method: 'GET', url: raw('home/user/listed.txt') });
      assert.equal(listed.statusCode, 200, listed.body);
      assert.equal(listed.body, 'listed\n');
      assert.equal(await status('home/user/sub/../listed.txt'), 200);
      const refused = await t.app.inject({ method: 'GET', url: raw('etc/passwd') });
      assert.equal(refused.statusCode, 403, refused.body);
      assert.equal(refused.json().error, 'raw_file_not_served');
      assert.match(refused.json().message, /raw_files: changed.*\/etc\/passwd.*\?raw=1/);
      // A file a later command deleted is no longer served, even once it is back (written with the key, not by a command).
      await sh('rm listed.txt');
      const put = await t.app.inject({ method: 'PUT', url: fileUrl('listed.txt'), headers: { ...org.headers, 'content-type': 'text/plain' }, payload: 'via put' });
      assert.equal(put.statusCode, 201, put.body);
      assert.equal(await status('home/user/listed.txt'), 403);
      await patch('off');
      const off = await t.app.inject({ method: 'GET', url: raw('home/user/hello.txt') });
      assert.equal(off.statusCode, 403);
      assert.match(off.json().message, /raw_files: off/);
      // The organization's own download is not affected, with ?raw=1 or by Accept.
      const own = await get(`${fileUrl('listed.txt')}?raw=1`);
      assert.equal(own.statusCode, 200, own.body);
      assert.equal(own.body, 'via put');
      assert.equal(own.headers['content-type'], 'text/plain; charset=utf-8');
      assert.equal(own.headers['cache-control'], 'no-store');
      const byAccept = await get(fileUrl('sub/deep.txt'), { ...org.headers, accept: 'application/octet-stream', range: 'bytes=0-1' });
      assert.equal(byAccept.statusCode, 206);
      assert.equal(byAccept.body, 'de');
      const json = await get(fileUrl('sub/deep.txt'), { ...org.headers, accept: 'application/json, application/octet-stream' });
      assert.equal(json.json().content, 'deep\n');
      assert.equal((await t.app.inject({ method: 'GET', url: `${fileUrl('listed.txt')}?raw=1` })).statusCode, 401);
    } finally {
      await patch('all');
    }
    assert.equal(await status('etc/passwd'), 200);
    await sh('rm -f listed.txt');
  });
});

describe('paths that try to leave what the VM user may read', () => {
  it('resolves .. and encoded .. inside the instance, with its permissions', async () => {
    for (const url of [raw('home/user/../../etc/shadow'), raw('home/user/%2e%2e/%2e%2e/etc/shadow'), fileUrl('..%2F..%2Fetc%2Fshadow')]) {
      const res = await t.app.inject({ method: 'GET', url, headers: org.headers });
      assert.equal(res.statusCode, 403, `${url}: ${res.body}`);
      assert.equal(res.json().error, 'permission_denied');
    }
    const passwd = await t.app.inject({ method: 'GET', url: raw('home/user/../../etc/passwd') });
    assert.match(passwd.body, /^user:x:1000:1000:/m);
  });

  it('refuses NUL bytes in paths', async () => {
    for (const url of [raw('etc/host%00name'), fileUrl('hello.txt%00.png')]) {
      const res = await t.app.inject({ method: 'GET', url, headers: org.headers });
      assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
      assert.equal(res.json().error, 'invalid_path');
    }
  });

  it('follows planted links inside the guest only: never to the host\'s files, never past the guest\'s permissions', async () => {
    const plant = await sh(
      'ln -sf /etc/shadow to-shadow; ln -sf /proc/1/root/etc/shadow to-proc-root; ln -sf /etc/passwd to-passwd; ' +
        'ln -sfn / to-root; ln -sfn /etc to-etc; ln -sf ../../../../../../../../../../etc/hostname to-up; ' +
        `ln -sf ${process.cwd()}/package.json to-host-file`,
    );
    assert.equal(plant.exit_code, 0, plant.output);
    // Refused: the agent opens each as the VM user, who may not read the shadow file nor
    // enter root's /proc/1/root (403, as on Linux), whichever link leads there.
    const refusals: [string, number][] = [
      ['to-shadow', 403],
      ['to-etc/shadow', 403],
      ['to-proc-root', 403],
      ['to-root/etc/shadow', 403],
    ];
    for (const [name, status] of refusals) {
      for (const url of [fileUrl(name), raw(`home/user/${name}`)]) {
        const res = await t.app.inject({ method: 'GET', url, headers: org.headers });
        assert.equal(res.statusCode, status, `${url}: ${res.statusCode} ${res.body}`);
        assert.doesNotMatch(res.body, /root:\*/);
      }
    }
    // The guest's files, not the host's.
    assert.match((await get(fileUrl('to-passwd'))).json().content, /^user:x:1000/m);
    assert.equal((await get(fileUrl('to-up'))).json().content, 'roomkit\n');
    assert.notEqual(readFileSync('/etc/hostname', 'utf8'), 'roomkit\n', 'the host has the guest\'s hostname: the check proves nothing');
    const host = await get(fileUrl('to-host-file'));
    assert.equal(host.statusCode, 404, host.body);
  });

  it('keeps files_changed to the guest when it plants links and swaps directories', async () => {
    const body = await t.app.inject({
      method: 'POST',
      url: `${base()}/command`,
      headers: org.headers,
      payload: { command: 'mkdir -p swap && touch swap/a && rm -rf swap && ln -s / swap && ln -sfn /etc etc-link' },
    });
    const paths: string[] = body.json().result.files_changed.map((c: { path: string }) => c.path);
    assert.deepEqual(paths, [], JSON.stringify(body.json().result));
  });
});

describe('writing, listing and deleting', () => {
  it('writes raw bytes as the VM user, creating parent directories: 201, then 200 when replaced', async () => {
    const bytes = Buffer.from([0, 1, 2, 254, 255]);
    const first = await t.app.inject({ method: 'PUT', url: fileUrl('up/load/data.bin'), headers: { ...org.headers, 'content-type': 'application/octet-stream' }, payload: bytes });
    assert.equal(first.statusCode, 201, first.body);
    assert.deepEqual(first.json(), { file_path: '/home/user/up/load/data.bin', instance_id: instanceId, status: 'created', size: 5 });
    const second = await t.app.inject({ method: 'PUT', url: fileUrl('up/load/data.bin'), headers: { ...org.headers, 'content-type': 'application/octet-stream' }, payload: bytes.subarray(0, 2) });
    assert.equal(second.statusCode, 200);
    assert.equal(second.json().status, 'modified');
    const owner = await sh('stat -c "%U %s" up/load/data.bin');
    assert.equal(owner.output, 'user 2\n');
  });

  it('writes JSON content as text or base64', async () => {
    const text = await t.app.inject({ method: 'PUT', url: fileUrl('notes/a.md'), headers: org.headers, payload: { content: '# hi\n' } });
    assert.equal(text.statusCode, 201, text.body);
    assert.equal((await get(fileUrl('notes/a.md'))).json().content, '# hi\n');
    const b64 = await t.app.inject({ method: 'PUT', url: fileUrl('notes/b.png'), headers: org.headers, payload: { content: Buffer.from(PNG_HEX, 'hex').toString('base64'), encoding: 'base64' } });
    assert.equal(b64.statusCode, 201, b64.body);
    const back = await t.app.inject({ method: 'GET', url: raw('home/user/notes/b.png') });
    assert.equal(back.rawPayload.toString('hex'), PNG_HEX);
    const bad = await t.app.inject({ method: 'PUT', url: fileUrl('notes/c.txt'), headers: org.headers, payload: { content: 'x', encoding: 'rot13' } });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error, 'validation_error');
  });

  it('refuses writes the VM user may not make, onto a directory, or under a file', async () => {
    const cases: [string, number, string][] = [
      ['/etc/passwd', 403, 'permission_denied'],
      ['/usr/bin/new-tool', 403, 'permission_denied'],
      ['sub', 400, 'is_a_directory'],
      ['hello.txt/inside', 400, 'not_a_directory'],
    ];
    for (const [path, status, error] of cases) {
      const res = await t.app.inject({ method: 'PUT', url: fileUrl(path), headers: org.headers, payload: { content: 'x' } });
      assert.equal(res.statusCode, status, `${path}: ${res.body}`);
      assert.equal(res.json().error, error, path);
    }
    assert.match((await get(fileUrl('/etc/passwd'))).json().content, /^root:x:0:0/);
  });

  it('lists a directory with name, type, size, mode and time', async () => {
    const res = await get(`${base()}/files?path=sub`);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().path, '/home/user/sub');
    assert.deepEqual(
      res.json().entries.map((e: { name: string; type: string; size: number; mode: string }) => [e.name, e.type, e.size, e.mode]),
      [['deep.txt', 'file', 5, '644']],
    );
    const home = await get(`${base()}/files`);
    const names = home.json().entries.map((e: { name: string; type: string }) => `${e.name}:${e.type}`);
    assert.ok(names.includes('sub:directory') && names.includes('hello.txt:file') && names.includes('to-passwd:symlink'), names.join(' '));
    for (const [path, status, error] of [['nothing-here', 404, 'file_not_found'], ['hello.txt', 400, 'not_a_directory'], ['/root', 403, 'permission_denied']] as const) {
      const bad = await get(`${base()}/files?path=${encodeURIComponent(path)}`);
      assert.equal(bad.statusCode, status, `${path}: ${bad.body}`);
      assert.equal(bad.json().error, error);
    }
  });

  it('deletes a file, then answers file_not_found; refuses directories and root\'s files', async () => {
    await sh('echo x > doomed.txt');
    const del = await t.app.inject({ method: 'DELETE', url: fileUrl('doomed.txt'), headers: org.headers });
    assert.equal(del.statusCode, 200, del.body);
    assert.deepEqual(del.json(), { file_path: '/home/user/doomed.txt', instance_id: instanceId, status: 'deleted' });
    const again = await t.app.inject({ method: 'DELETE', url: fileUrl('doomed.txt'), headers: org.headers });
    assert.equal(again.statusCode, 404);
    const dir = await t.app.inject({ method: 'DELETE', url: fileUrl('sub'), headers: org.headers });
    assert.equal(dir.json().error, 'is_a_directory');
    const root = await t.app.inject({ method: 'DELETE', url: fileUrl('/etc/hostname'), headers: org.headers });
    assert.equal(root.statusCode, 403, root.body);
  });
});
