// The address pool in the store: a block leased under a network slot's key is handed to
// the instance that takes the slot (the same block, no other lease meanwhile), a
// transfer of a key that holds nothing is refused, and the next allocation skips the
// handed-over block; a burst of allocations gets a block each. Slots themselves
// (namespaces, veths) are test/host/network-slots.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AddressPool } from '../../src/network/pool.ts';
import { SLOT_LEASE_PREFIX } from '../../src/network/slots.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
let pool: AddressPool;

before(async () => {
  t = await startTestApp();
  pool = new AddressPool(t.services.db, '10.9.0.0/28', t.services.nodeId);
});
after(async () => {
  await t.close();
});

describe('address pool', () => {
  it("hands a slot's block to the instance that takes it, and allocates past it", async () => {
    const slotKey = `${SLOT_LEASE_PREFIX}0f0e0d0c-0b0a-4908-8706-050403020100`;
    const slotLease = await pool.allocate(slotKey);
    await pool.transfer(slotKey, 'instance-a');
    assert.deepEqual(await pool.leaseOf('instance-a'), slotLease);
    assert.equal(await pool.leaseOf(slotKey), undefined);
    assert.deepEqual(await pool.allocate('instance-a'), slotLease, 'the instance already holds a block: the same one');
    const next = await pool.allocate('instance-b');
    assert.notEqual(next.slot, slotLease.slot);
    await assert.rejects(pool.transfer(slotKey, 'instance-c'), /no address block is leased to slot:/);
    assert.equal(await pool.leaseOf('instance-c'), undefined);
    await pool.release('instance-a');
    await pool.release('instance-b');
    assert.deepEqual(await pool.leasedInstances(), []);
  });

  it('gives each of a burst of allocations its own block', async () => {
    const wide = new AddressPool(t.services.db, '10.10.0.0/24', t.services.nodeId);
    const ids = Array.from({ length: 24 }, (_, i) => `burst-${i}`);
    const leases = await Promise.all(ids.map((id) => wide.allocate(id)));
    assert.equal(new Set(leases.map((l) => l.slot)).size, ids.length);
    for (const id of ids) await wide.release(id);
  });

  it("hands each node's blocks from its own range: another node's leases are neither seen nor taken", async () => {
    const mine = new AddressPool(t.services.db, '10.11.0.0/28', 'node-one');
    const theirs = new AddressPool(t.services.db, '10.12.0.0/28', 'node-two');
    const a = await mine.allocate('node-one-instance');
    const b = await theirs.allocate('node-two-instance');
    assert.equal(a.slot, 0);
    assert.equal(b.slot, 0, 'the same block number on another host');
    assert.equal(b.guestAddress, '10.12.0.2');
    assert.deepEqual(await mine.leasedInstances(), ['node-one-instance']);
    assert.equal(await mine.leaseOf('node-two-instance'), undefined);
    await mine.release('node-two-instance');
    assert.deepEqual(await theirs.leasedInstances(), ['node-two-instance'], "a release names only the node's own leases");
    await assert.rejects(mine.transfer('node-two-instance', 'stolen'), /no address block is leased to node-two-instance/);
    await mine.release('node-one-instance');
    await theirs.release('node-two-instance');
  });
});
