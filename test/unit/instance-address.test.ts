// Core addressed by instance: the same operations as by room, through the instance's id
// within its organization (what a protocol naming sandboxes by id calls), with one
// implementation behind both; another organization's instance id answers exactly as a
// missing one.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { AppError } from '../../src/errors.ts';
import type { InstanceRef } from '../../src/core/instance-address.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let ref: InstanceRef;

before(async () => {
  t = await startTestApp();
  org = await t.newOrg();
  other = await t.newOrg();
  const { instance } = await t.services.instances.create(org.organizationId, org.defaultProfileId, 'by-id', { wait: true });
  ref = { organizationId: org.organizationId, instanceId: instance.instance_id };
});
after(() => t.close());

/** The error a call rejects with, as an AppError. */
async function refusal(call: Promise<unknown>): Promise<AppError> {
  try {
    await call;
  } catch (err) {
    assert.ok(err instanceof AppError, `not an AppError: ${String(err)}`);
    return err;
  }
  assert.fail('the call did not fail');
}

describe('an instance by its id', () => {
  it('is the room\'s live instance, as the resolver says', async () => {
    const resolved = await t.services.instances.resolve({ organizationId: org.organizationId, profileId: org.defaultProfileId, roomId: 'by-id' });
    assert.deepEqual(resolved, ref);
    assert.deepEqual(await t.services.instances.getAt(ref), await t.services.instances.get(org.organizationId, org.defaultProfileId, 'by-id'));
  });

  it('runs commands and reads and writes files that the room sees', async () => {
    const result = await t.services.commands.runAt(ref, { command: 'echo by-id' });
    assert.equal(result.instance_id, ref.instanceId);
    const byRoom = await t.services.commands.status(org.organizationId, org.defaultProfileId, 'by-id', result.command_id);
    const byId = await t.services.commands.statusAt(ref, result.command_id);
    assert.deepEqual(byId, byRoom);
    const written = await t.services.files.writeAt(ref, 'note.txt', Buffer.from('from the id'));
    assert.equal(written.instance_id, ref.instanceId);
    const read = await t.services.files.read(org.organizationId, org.defaultProfileId, 'by-id', 'note.txt');
    assert.equal(read.content, 'from the id');
    assert.equal((await t.services.files.readAt(ref, written.file_path)).content, 'from the id');
    assert.ok((await t.services.files.listAt(ref, '.')).entries.some((e) => e.name === 'note.txt'));
    await t.services.files.deleteAt(ref, 'note.txt');
    assert.equal((await refusal(t.services.files.read(org.organizationId, org.defaultProfileId, 'by-id', 'note.txt'))).code, 'file_not_found');
  });

  it('links changed files at the raw endpoint the REST API registered with core', async () => {
    t.runtime.options = { commandChanges: [{ path: '/home/user/out dir/a.txt', status: 'created', size: 3 }] };
    try {
      const result = await t.services.commands.runAt(ref, { command: 'make' });
      assert.equal(result.result.files_changed[0]!.public_url, `/vm/${ref.instanceId}/file/home/user/out%20dir/a.txt`);
    } finally {
      t.runtime.options = {};
    }
  });

  it('takes a keep-alive', async () => {
    const kept = await t.services.instances.keepAliveAt(ref, { timeout_s: 600 });
    assert.equal(kept.instance_id, ref.instanceId);
    assert.ok(kept.expires_at !== null && Date.parse(kept.expires_at) > Date.now() + 500_000);
  });

  it('answers another organization\'s instance id exactly as a missing one', async () => {
    const foreign = await refusal(t.services.instances.getAt({ organizationId: other.organizationId, instanceId: ref.instanceId }));
    const missingId = randomUUID();
    const missing = await refusal(t.services.instances.getAt({ organizationId: other.organizationId, instanceId: missingId }));
    assert.equal(foreign.code, 'instance_not_found');
    assert.equal(foreign.status, 404);
    assert.deepEqual({ ...foreign.toBody(), message: foreign.message.replace(ref.instanceId, 'X'), details: { instance_id: 'X' } }, {
      ...missing.toBody(),
      message: missing.message.replace(missingId, 'X'),
      details: { instance_id: 'X' },
    });
    // Nothing of the other organization's is touched or read through the id.
    const otherRef = { organizationId: other.organizationId, instanceId: ref.instanceId };
    // One call at a time: each refusal is awaited as it is made, never left unhandled while another runs.
    for (const call of [
      () => t.services.commands.runAt(otherRef, { command: 'true' }),
      () => t.services.files.readAt(otherRef, 'x'),
      () => t.services.files.writeAt(otherRef, 'x', Buffer.from('x')),
      () => t.services.instances.keepAliveAt(otherRef),
      () => t.services.instances.deleteAt(otherRef),
    ]) {
      assert.equal((await refusal(call())).code, 'instance_not_found');
    }
    const commandId = (await t.services.commands.runAt(ref, { command: 'true' })).command_id;
    assert.equal((await refusal(t.services.commands.statusAt(otherRef, commandId))).code, 'command_not_found');
    assert.equal((await refusal(t.services.instances.getAt({ organizationId: org.organizationId, instanceId: 'not-a-uuid' }))).code, 'instance_not_found');
    assert.equal((await t.services.instances.getAt(ref)).state, 'ready');
  });

  it('is deleted through its id, after which neither the id nor the room finds it', async () => {
    const { instance } = await t.services.instances.create(org.organizationId, org.defaultProfileId, 'to-delete', { wait: true });
    const gone = { organizationId: org.organizationId, instanceId: instance.instance_id };
    assert.equal((await t.services.instances.deleteAt(gone)).state, 'stopped');
    assert.equal((await refusal(t.services.instances.getAt(gone))).code, 'instance_not_found');
    assert.equal((await refusal(t.services.instances.get(org.organizationId, org.defaultProfileId, 'to-delete'))).code, 'instance_not_found');
  });
});
