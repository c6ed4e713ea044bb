// Profiles over HTTP: create (defaults filled in), list, get, change, delete, name
// uniqueness, validation of every kind of bad input, and the refusal to delete a
// profile that still has a live instance. Real store, runtime test double. Over 400
// lines because it is one resource's whole contract, most of it a table of bad inputs.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;

before(async () => {
  t = await startTestApp();
  org = await t.newOrg();
});
after(() => t.close());

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const createProfile = (payload: unknown, who: TestOrg = org) =>
  t.app.inject({ method: 'POST', url: '/api/profiles', headers: who.headers, payload: payload as object });
const getProfile = (id: string, who: TestOrg = org) =>
  t.app.inject({ method: 'GET', url: `/api/profiles/${id}`, headers: who.headers });
const patchProfile = (id: string, payload: unknown) =>
  t.app.inject({ method: 'PATCH', url: `/api/profiles/${id}`, headers: org.headers, payload: payload as object });
const deleteProfile = (id: string) => t.app.inject({ method: 'DELETE', url: `/api/profiles/${id}`, headers: org.headers });
const listProfiles = (who: TestOrg = org) => t.app.inject({ method: 'GET', url: '/api/profiles', headers: who.headers });

/** Creates a profile that must succeed and answers its body. */
async function made(payload: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await createProfile(payload);
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

let nameCounter = 0;
const uniqueName = (stem: string) => `${stem}-${++nameCounter}`;

/** Asserts a 400 validation_error whose message names `field`. */
function assertValidation(res: { statusCode: number; json(): any; body: string }, field: string | RegExp) {
  assert.equal(res.statusCode, 400, res.body);
  const body = res.json();
  assert.equal(body.error, 'validation_error');
  assert.equal(typeof body.message, 'string');
  if (typeof field === 'string') assert.ok(body.message.includes(field), `message "${body.message}" should name ${field}`);
  else assert.match(body.message, field);
}

describe('creating a profile', () => {
  it('answers 201 with every field, defaults filled in', async () => {
    const res = await createProfile({ name: 'minimal' });
    assert.equal(res.statusCode, 201);
    const p = res.json();
    assert.match(p.profile_id, UUID);
    assert.equal(p.name, 'minimal');
    assert.equal(p.image, 'debian:bookworm');
    assert.deepEqual(p.packages, []);
    assert.equal(p.memory_mb, 1024);
    assert.equal(p.vcpus, 1);
    assert.equal(p.disk_mb, 2048);
    assert.equal(p.user, 'user');
    assert.equal(p.home, '/home/user');
    assert.deepEqual(p.env, {});
    assert.equal(p.command_timeout_s, 120);
    assert.equal(p.idle_timeout_s, 1800);
    assert.equal(p.max_lifetime_s, 86400);
    assert.deepEqual(p.network, { egress: 'internet', allow: [], deny: [] });
    assert.deepEqual(p.settings, {});
    assert.ok(!Number.isNaN(Date.parse(p.created_at)));
    assert.equal(p.updated_at, p.created_at);
  });

  it('keeps every field given', async () => {
    const p = await made({
      name: 'full.profile_1',
      image: 'debian:trixie',
      packages: ['nodejs', 'jq=1.6-2.1'],
      memory_mb: 512,
      vcpus: 1,
      disk_mb: 4096,
      user: 'agent',
      env: { FOO: 'bar', _X1: '' },
      command_timeout_s: 30,
      idle_timeout_s: 0,
      max_lifetime_s: 3600,
      network: { egress: 'none' },
      settings: { team: 'x', nested: { n: [1, 2, null] } },
    });
    assert.equal(p.image, 'debian:trixie');
    assert.deepEqual(p.packages, ['nodejs', 'jq=1.6-2.1']);
    assert.equal(p.memory_mb, 512);
    assert.equal(p.disk_mb, 4096);
    assert.equal(p.user, 'agent');
    assert.equal(p.home, '/home/agent', 'home follows the user when not given');
    assert.deepEqual(p.env, { FOO: 'bar', _X1: '' });
    assert.equal(p.command_timeout_s, 30);
    assert.equal(p.idle_timeout_s, 0);
    assert.equal(p.max_lifetime_s, 3600);
    assert.deepEqual(p.network, { egress: 'none', allow: [], deny: [] });
    assert.deepEqual(p.settings, { team: 'x', nested: { n: [1, 2, null] } });
  });

  it('accepts the host maximum of memory and vcpus', async () => {
    const { maxMemoryMb, maxVcpus } = t.services.config;
    const p = await made({ name: uniqueName('max'), memory_mb: maxMemoryMb, vcpus: maxVcpus });
    assert.equal(p.memory_mb, maxMemoryMb);
    assert.equal(p.vcpus, maxVcpus);
  });
});

describe('reading profiles', () => {
  it('lists the default profile and the ones created', async () => {
    const other = await t.newOrg();
    const a = (await createProfile({ name: 'list-a' }, other)).json();
    const b = (await createProfile({ name: 'list-b' }, other)).json();
    const res = await listProfiles(other);
    assert.equal(res.statusCode, 200);
    const { profiles } = res.json();
    // Profiles made in the same millisecond may come in either order.
    const byName = new Map(profiles.map((p: { name: string }) => [p.name, p]));
    assert.deepEqual([...byName.keys()].sort(), ['code-interpreter', 'default', 'list-a', 'list-b']);
    assert.equal(profiles.length, 4);
    assert.deepEqual((byName.get('code-interpreter') as { packages: string[] }).packages, ['python3-matplotlib', 'python3-pandas', 'python3-pil']);
    assert.equal(profiles[0].name, 'default', 'default first, as the organization started');
    assert.equal((byName.get('default') as { profile_id: string }).profile_id, other.defaultProfileId);
    assert.deepEqual(byName.get('list-a'), a);
    assert.deepEqual(byName.get('list-b'), b);
  });

  it('gets one profile by id, the same as created', async () => {
    const created = await made({ name: uniqueName('get'), memory_mb: 256 });
    const res = await getProfile(created.profile_id);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), created);
  });

  it('gets the default profile with the defaults', async () => {
    const res = await getProfile(org.defaultProfileId);
    assert.equal(res.statusCode, 200);
    const p = res.json();
    assert.equal(p.name, 'default');
    assert.equal(p.memory_mb, 1024);
    assert.equal(p.home, '/home/user');
  });

  it('answers 404 profile_not_found for an unknown id', async () => {
    const res = await getProfile(randomUUID());
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error, 'profile_not_found');
  });

  it('does not show one organization the profiles of another', async () => {
    const other = await t.newOrg();
    const theirs = (await createProfile({ name: 'private' }, other)).json();
    const res = await getProfile(theirs.profile_id);
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error, 'profile_not_found');
    const mine = (await listProfiles()).json().profiles.map((p: { profile_id: string }) => p.profile_id);
    assert.ok(!mine.includes(theirs.profile_id));
    assert.equal((await patchProfile(theirs.profile_id, { memory_mb: 256 })).statusCode, 404);
    assert.equal((await deleteProfile(theirs.profile_id)).statusCode, 404);
    assert.equal((await getProfile(theirs.profile_id, other)).json().memory_mb, 1024, 'left unchanged');
  });

  it('answers 400 validation_error for a profile id that is neither a UUID nor a name, and 404 for a name no profile has', async () => {
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const payload = method === 'PATCH' ? { payload: {} } : {};
      const res = await t.app.inject({ method, url: '/api/profiles/not%20a%20name', headers: org.headers, ...payload });
      assertValidation(res, 'profile_id');
      const unknown = await t.app.inject({ method, url: '/api/profiles/not-a-uuid', headers: org.headers, ...payload });
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.json().error, 'profile_not_found');
    }
  });
});

describe('changing a profile', () => {
  it('changes only the fields given', async () => {
    const before = await made({ name: uniqueName('patch'), env: { A: '1' }, settings: { k: 'v' } });
    const res = await patchProfile(before.profile_id, { memory_mb: 2048, env: { B: '2' } });
    assert.equal(res.statusCode, 200, res.body);
    const after = res.json();
    assert.equal(after.memory_mb, 2048);
    assert.deepEqual(after.env, { B: '2' }, 'a field given is replaced as a whole');
    const { memory_mb: _m, env: _e, updated_at: _u, ...restAfter } = after;
    const { memory_mb: _m2, env: _e2, updated_at: _u2, ...restBefore } = before;
    assert.deepEqual(restAfter, restBefore);
    assert.ok(Date.parse(after.updated_at) >= Date.parse(before.updated_at));
    assert.deepEqual((await getProfile(before.profile_id)).json(), after, 'the change is stored');
  });

  it('merges network by field', async () => {
    const p = await made({ name: uniqueName('net') });
    const res = await patchProfile(p.profile_id, { network: { egress: 'none' } });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json().network, { egress: 'none', allow: [], deny: [] });
  });

  it('renames', async () => {
    const p = await made({ name: uniqueName('old') });
    const newName = uniqueName('new');
    const res = await patchProfile(p.profile_id, { name: newName });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().name, newName);
    assert.equal(res.json().memory_mb, p.memory_mb);
  });

  it('keeps its own name when "renamed" to it', async () => {
    const p = await made({ name: uniqueName('same') });
    const res = await patchProfile(p.profile_id, { name: p.name, vcpus: 1 });
    assert.equal(res.statusCode, 200, res.body);
  });

  it('moves the home that followed the user to the new user', async () => {
    const p = await made({ name: uniqueName('user') });
    assert.equal(p.home, '/home/user');
    const res = await patchProfile(p.profile_id, { user: 'alice' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().user, 'alice');
    assert.equal(res.json().home, '/home/alice');
  });

  it('keeps a custom home when the user changes', async () => {
    const p = await made({ name: uniqueName('custom-home'), home: '/srv/work' });
    assert.equal(p.home, '/srv/work');
    const res = await patchProfile(p.profile_id, { user: 'bob' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().user, 'bob');
    assert.equal(res.json().home, '/srv/work');
  });

  it('takes a home given with the new user', async () => {
    const p = await made({ name: uniqueName('both') });
    const res = await patchProfile(p.profile_id, { user: 'carol', home: '/work' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().user, 'carol');
    assert.equal(res.json().home, '/work');
  });

  it('answers 404 profile_not_found for an unknown id', async () => {
    const res = await patchProfile(randomUUID(), { memory_mb: 256 });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error, 'profile_not_found');
  });

  it('leaves the profile unchanged when the change is refused', async () => {
    const p = await made({ name: uniqueName('refused') });
    assertValidation(await patchProfile(p.profile_id, { memory_mb: 512, network: { allow: ['example.com'] } }), 'network.allow');
    assert.deepEqual((await getProfile(p.profile_id)).json(), p);
  });
});

describe('profile names', () => {
  it('answers 409 profile_name_taken for a name in use, on create', async () => {
    const name = uniqueName('taken');
    await made({ name });
    const res = await createProfile({ name });
    assert.equal(res.statusCode, 409);
    assert.equal(res.json().error, 'profile_name_taken');
    assert.ok(res.json().message.includes(name));
  });

  it('refuses to create a second "default"', async () => {
    const res = await createProfile({ name: 'default' });
    assert.equal(res.statusCode, 409);
    assert.equal(res.json().error, 'profile_name_taken');
  });

  it('answers 409 profile_name_taken for a name in use, on rename', async () => {
    const a = await made({ name: uniqueName('a') });
    const b = await made({ name: uniqueName('b') });
    const res = await patchProfile(b.profile_id, { name: a.name });
    assert.equal(res.statusCode, 409);
    assert.equal(res.json().error, 'profile_name_taken');
    assert.equal((await getProfile(b.profile_id)).json().name, b.name, 'not renamed');
  });

  it('is unique per organization only', async () => {
    const other = await t.newOrg();
    const name = uniqueName('shared');
    await made({ name });
    const res = await createProfile({ name }, other);
    assert.equal(res.statusCode, 201);
  });

  it('can be used again once its profile is deleted', async () => {
    const name = uniqueName('reuse');
    const first = await made({ name });
    assert.equal((await deleteProfile(first.profile_id)).statusCode, 204);
    const second = await made({ name });
    assert.notEqual(second.profile_id, first.profile_id);
  });
});

describe('validation', () => {
  const cases: { what: string; body: unknown; field: string | RegExp }[] = [
    { what: 'an unknown field', body: { name: 'x', memroy_mb: 1 }, field: 'memroy_mb' },
    { what: 'an unknown field in network', body: { name: 'x', network: { egres: 'none' } }, field: 'network.egres' },
    { what: 'memory_mb below 128', body: { name: 'x', memory_mb: 127 }, field: 'memory_mb' },
    { what: 'vcpus 0', body: { name: 'x', vcpus: 0 }, field: 'vcpus' },
    { what: 'disk_mb below 256', body: { name: 'x', disk_mb: 100 }, field: 'disk_mb' },
    { what: 'a fractional memory_mb', body: { name: 'x', memory_mb: 512.5 }, field: 'memory_mb' },
    { what: 'user root', body: { name: 'x', user: 'root' }, field: 'user' },
    { what: 'a user with capitals', body: { name: 'x', user: 'Alice' }, field: 'user' },
    { what: 'a home with ..', body: { name: 'x', home: '/home/../etc' }, field: 'home' },
    { what: 'a relative home', body: { name: 'x', home: 'home/user' }, field: 'home' },
    { what: 'a home with a trailing slash', body: { name: 'x', home: '/home/user/' }, field: 'home' },
    { what: 'an env name starting with a digit', body: { name: 'x', env: { '1BAD': 'v' } }, field: /"1BAD".*\benv\b/ },
    { what: 'an env name with a dash', body: { name: 'x', env: { 'A-B': 'v' } }, field: /"A-B".*\benv\b/ },
    { what: 'an env value that is not a string', body: { name: 'x', env: { A: 1 } }, field: 'env.A' },
    { what: 'a network.allow without egress allowlist', body: { name: 'x', network: { allow: ['example.com'] } }, field: 'network.allow' },
    { what: 'an allow entry in a private range', body: { name: 'x', network: { egress: 'allowlist', allow: ['10.0.0.0/8'] } }, field: 'network.allow[0]' },
    { what: 'a deny entry that is no domain', body: { name: 'x', network: { egress: 'allowlist', deny: ['exa mple.com'] } }, field: 'network.deny[0]' },
    { what: 'a domain on a port the proxy cannot read', body: { name: 'x', network: { egress: 'allowlist', allow: ['example.com:22'] } }, field: 'network.allow[0]' },
    { what: 'an unknown egress', body: { name: 'x', network: { egress: 'some' } }, field: 'network.egress' },
    { what: 'a bad package name', body: { name: 'x', packages: ['rm -rf'] }, field: 'packages' },
    { what: 'a string memory_mb (no coercion)', body: { name: 'x', memory_mb: '512' }, field: 'memory_mb' },
    { what: 'a string vcpus (no coercion)', body: { name: 'x', vcpus: '1' }, field: 'vcpus' },
    { what: 'a missing name', body: { memory_mb: 512 }, field: 'name is required' },
    { what: 'a name with a space', body: { name: 'a b' }, field: 'name' },
    { what: 'a name too long', body: { name: 'n'.repeat(65) }, field: 'name' },
    { what: 'settings that are not an object', body: { name: 'x', settings: [1] }, field: 'settings' },
    { what: 'a body that is not an object', body: [{ name: 'x' }], field: 'body' },
  ];
  for (const c of cases) {
    it(`refuses ${c.what} with 400 naming the field`, async () => {
      assertValidation(await createProfile(c.body), c.field);
    });
  }

  it('takes an egress allowlist, entries as given, and empties the lists when egress leaves allowlist', async () => {
    const network = { egress: 'allowlist', allow: ['example.com', '*.pkg.example.org:443', '203.0.113.0/24'], deny: ['203.0.113.128/25'] };
    const p = await made({ name: uniqueName('allowlist'), network });
    assert.deepEqual(p.network, network);
    const res = await patchProfile(p.profile_id, { network: { egress: 'internet' } });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json().network, { egress: 'internet', allow: [], deny: [] });
  });

  it('names each refused env name once, and takes names up to 128 characters', async () => {
    const res = await createProfile({ name: 'x', env: { OK: 'v', '1BAD': 'v', 'A-B': 'v', ['N'.repeat(129)]: 'v' } });
    assertValidation(res, '"1BAD"');
    assert.match(res.json().message, /\benv\b/);
    const fields = res.json().details.errors.map((e: { field: string }) => e.field).sort();
    assert.deepEqual(fields, ['env.1BAD', 'env.A-B', `env.${'N'.repeat(129)}`].sort());
    const p = await made({ name: uniqueName('env'), env: { ['N'.repeat(128)]: 'v' } });
    assert.deepEqual(p.env, { ['N'.repeat(128)]: 'v' });
  });

  it('refuses memory_mb above the host maximum', async () => {
    const res = await createProfile({ name: 'x', memory_mb: t.services.config.maxMemoryMb + 1 });
    assertValidation(res, 'memory_mb');
    assert.ok(res.json().message.includes(String(t.services.config.maxMemoryMb)), 'says what the maximum is');
  });

  it('refuses vcpus above the host maximum', async () => {
    assertValidation(await createProfile({ name: 'x', vcpus: t.services.config.maxVcpus + 1 }), 'vcpus');
  });

  it('refuses settings larger than 16 KiB and takes exactly 16 KiB', async () => {
    // {"blob":""} is 11 bytes of JSON.
    const over = { blob: 'x'.repeat(16 * 1024 - 10) };
    assert.equal(JSON.stringify(over).length, 16 * 1024 + 1);
    assertValidation(await createProfile({ name: 'x', settings: over }), 'settings');
    const fits = { blob: 'x'.repeat(16 * 1024 - 11) };
    const p = await made({ name: uniqueName('settings'), settings: fits });
    assert.deepEqual(p.settings, fits);
  });

  it('refuses the same problems on PATCH', async () => {
    const p = await made({ name: uniqueName('patch-bad') });
    assertValidation(await patchProfile(p.profile_id, { memroy_mb: 1 }), 'memroy_mb');
    assertValidation(await patchProfile(p.profile_id, { memory_mb: '512' }), 'memory_mb');
    assertValidation(await patchProfile(p.profile_id, { user: 'root' }), 'user');
    assertValidation(await patchProfile(p.profile_id, { settings: { blob: 'x'.repeat(17 * 1024) } }), 'settings');
    assertValidation(await patchProfile(p.profile_id, { name: '' }), 'name');
    assert.deepEqual((await getProfile(p.profile_id)).json(), p, 'left unchanged');
  });

  it('lists every problem in details', async () => {
    const res = await createProfile({ name: 'x', memory_mb: 1, vcpus: 0 });
    assertValidation(res, /memory_mb|vcpus/);
    const fields = res.json().details.errors.map((e: { field: string }) => e.field).sort();
    assert.deepEqual(fields, ['memory_mb', 'vcpus']);
  });

  it('creates nothing when refused', async () => {
    const before = (await listProfiles()).json().profiles.length;
    await createProfile({ name: 'never', memory_mb: '512' });
    await createProfile({ name: 'never', network: { allow: ['a'] } });
    const names = (await listProfiles()).json().profiles.map((p: { name: string }) => p.name);
    assert.equal(names.length, before);
    assert.ok(!names.includes('never'));
  });
});

describe('deleting a profile', () => {
  it('answers 204 with no body, then the profile is gone', async () => {
    const p = await made({ name: uniqueName('doomed') });
    const res = await deleteProfile(p.profile_id);
    assert.equal(res.statusCode, 204);
    assert.equal(res.body, '');
    const gone = await getProfile(p.profile_id);
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.json().error, 'profile_not_found');
    const listed = (await listProfiles()).json().profiles.map((x: { profile_id: string }) => x.profile_id);
    assert.ok(!listed.includes(p.profile_id));
    const again = await deleteProfile(p.profile_id);
    assert.equal(again.statusCode, 404);
    assert.equal(again.json().error, 'profile_not_found');
    assert.equal((await patchProfile(p.profile_id, { vcpus: 1 })).statusCode, 404);
  });

  it('is refused with 409 profile_in_use while the profile has a live instance', async () => {
    const p = await made({ name: uniqueName('busy') });
    const roomUrl = `/api/profile/${p.profile_id}/room/r1`;
    const created = await t.app.inject({ method: 'POST', url: roomUrl, headers: org.headers });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.json().state, 'ready');

    const refused = await deleteProfile(p.profile_id);
    assert.equal(refused.statusCode, 409);
    assert.equal(refused.json().error, 'profile_in_use');
    assert.equal(typeof refused.json().message, 'string');
    assert.equal((await getProfile(p.profile_id)).statusCode, 200, 'still there');

    const roomDeleted = await t.app.inject({ method: 'DELETE', url: roomUrl, headers: org.headers });
    assert.equal(roomDeleted.statusCode, 200, roomDeleted.body);

    assert.equal((await deleteProfile(p.profile_id)).statusCode, 204);
    assert.equal((await getProfile(p.profile_id)).statusCode, 404);
  });
});

describe('the code-interpreter profile', () => {
  const names = async (who: TestOrg) => ((await listProfiles(who)).json().profiles as { name: string }[]).map((p) => p.name).sort();

  it('is given at start to an organization made before every organization got one, and not again once deleted', async () => {
    const older = await t.newOrg();
    const deleter = await t.newOrg();
    // An organization from before: no profile of that name was ever made.
    await t.services.db.deleteFrom('profiles').where('organization_id', '=', older.organizationId).where('name', '=', 'code-interpreter').execute();
    assert.deepEqual(await names(older), ['default']);
    const mine = ((await listProfiles(deleter)).json().profiles as { name: string; profile_id: string }[]).find((p) => p.name === 'code-interpreter')!;
    const deleted = await t.app.inject({ method: 'DELETE', url: `/api/profiles/${mine.profile_id}`, headers: deleter.headers });
    assert.equal(deleted.statusCode, 204, deleted.body);

    assert.equal(await t.services.organizations.addCodeInterpreterProfiles(), 1);
    assert.deepEqual(await names(older), ['code-interpreter', 'default']);
    assert.deepEqual(await names(deleter), ['default'], 'a deleted one is not made again');
    assert.equal(await t.services.organizations.addCodeInterpreterProfiles(), 0);
  });
});
