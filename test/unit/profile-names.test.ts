// A profile's name in place of its id in a path: resolved in the caller's organization
// only, answered with the UUID, and an unknown name is an unknown profile. The runtime is
// the test double; the store, the routes and the hooks are the real ones.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;

before(async () => {
  t = await startTestApp();
  org = await t.newOrg();
  other = await t.newOrg();
});
after(() => t.close());

describe('a profile name in a path', () => {
  it('creates, reads and deletes a room through /api/profile/default/..., answering with the UUID', async () => {
    const created = await t.app.inject({ method: 'POST', url: '/api/profile/default/room/by-name', headers: org.headers });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.json().profile_id, org.defaultProfileId);
    const byId = await t.app.inject({ method: 'GET', url: `/api/profile/${org.defaultProfileId}/room/by-name`, headers: org.headers });
    assert.equal(byId.json().instance_id, created.json().instance_id);
    const profile = await t.app.inject({ method: 'GET', url: '/api/profiles/default', headers: org.headers });
    assert.equal(profile.statusCode, 200, profile.body);
    assert.equal(profile.json().profile_id, org.defaultProfileId);
    const deleted = await t.app.inject({ method: 'DELETE', url: '/api/profile/default/room/by-name', headers: org.headers });
    assert.equal(deleted.statusCode, 200, deleted.body);
  });

  it("resolves a name in the caller's organization only: the same name elsewhere is that organization's own profile", async () => {
    const mine = await t.app.inject({ method: 'POST', url: '/api/profile/default/room/scoped', headers: org.headers });
    const theirs = await t.app.inject({ method: 'POST', url: '/api/profile/default/room/scoped', headers: other.headers });
    assert.equal(mine.json().profile_id, org.defaultProfileId);
    assert.equal(theirs.json().profile_id, other.defaultProfileId);
    assert.notEqual(mine.json().instance_id, theirs.json().instance_id);
    // Another organization's profile id is still not found, whatever the form.
    const cross = await t.app.inject({ method: 'GET', url: `/api/profile/${other.defaultProfileId}/room/scoped`, headers: org.headers });
    assert.equal(cross.statusCode, 404);
    assert.equal(cross.json().error, 'profile_not_found');
  });

  it('answers an unknown name 404 profile_not_found, and a malformed one 400 validation_error', async () => {
    const unknown = await t.app.inject({ method: 'GET', url: '/api/profile/no-such-profile/room/r', headers: org.headers });
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().error, 'profile_not_found');
    assert.match(unknown.json().message, /no-such-profile/);
    // It says which profiles the organization has (its own only).
    assert.match(unknown.json().message, /its profiles are "code-interpreter", "default"/);
    assert.ok(unknown.json().details.profiles.includes('default'), unknown.body);
    const malformed = await t.app.inject({ method: 'GET', url: '/api/profile/-bad%20name/room/r', headers: org.headers });
    assert.equal(malformed.statusCode, 400);
    assert.equal(malformed.json().error, 'validation_error');
    assert.match(malformed.json().message, /a name is 1-64 characters of A-Z a-z 0-9 \. _ -, starting with a letter or a digit/);
    // A room name in words too, not as a regular expression.
    const badRoom = await t.app.inject({ method: 'GET', url: '/api/profile/default/room/bad%20room', headers: org.headers });
    assert.equal(badRoom.statusCode, 400);
    assert.match(badRoom.json().message, /a room name is 1-128 characters of A-Z a-z 0-9 \. _ - and not "\." or "\.\."/);
    assert.doesNotMatch(badRoom.json().message, /\^\(\?!/);
  });
});
