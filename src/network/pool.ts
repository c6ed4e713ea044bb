// The address pool: an IPv4 range split into /30 blocks, one per instance (the host end
// of its veth takes .1, the instance .2). Leases live in the store, so an address is
// never handed out twice, also across restarts. A lease is held under an instance's id,
// or under a network slot's key until an instance takes the slot (slots.ts). A process
// allocates one block at a time: concurrent allocations would all read the same free
// block and all but one retry (on either store), and a burst of creates ran out of
// retries. Another process's allocation is still caught by the primary key, and retried.
// Addresses are a host's own (each veth is on its host): nodes sharing a store each
// lease from their own range, their leases keyed by node, never seeing each other's.
import type { Db } from '../store/db.ts';
import { isUniqueViolation } from '../store/errors.ts';
import { formatIp, parseCidr } from '../lib/cidr.ts';
import { Serial } from '../lib/keyed-serial.ts';
import { nowIso } from '../lib/time.ts';

export interface Lease {
  slot: number;
  /** Address of the host end of the veth: the instance's gateway. */
  hostAddress: string;
  /** Address of the instance. */
  guestAddress: string;
  prefixLength: 30;
}

export class PoolExhaustedError extends Error {}

export class AddressPool {
  private readonly db: Db;
  private readonly base: number;
  private readonly nodeId: string;
  readonly cidr: string;
  readonly size: number;

  constructor(db: Db, cidr: string, nodeId: string) {
    const { base, prefixLength } = parseCidr(cidr);
    if (prefixLength > 28) throw new Error(`address pool ${cidr} is too small: use a /28 or larger`);
    this.db = db;
    this.nodeId = nodeId;
    this.base = base;
    this.cidr = cidr;
    this.size = 2 ** (32 - prefixLength) / 4;
  }

  private readonly allocations = new Serial();

  /** Hands the lowest free block to the instance; the same one if it already has one. */
  allocate(instanceId: string): Promise<Lease> {
    return this.allocations.run(() => this.allocateNow(instanceId));
  }

  private async allocateNow(instanceId: string): Promise<Lease> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const existing = await this.leases().select('slot').where('instance_id', '=', instanceId).executeTakeFirst();
      if (existing) return this.lease(existing.slot);
      const used = await this.leases().select('slot').orderBy('slot').execute();
      let slot = 0;
      for (const row of used) {
        if (row.slot !== slot) break;
        slot++;
      }
      if (slot >= this.size) {
        throw new PoolExhaustedError(`the address pool ${this.cidr} has no free block left (${this.size} instances); set ROOMKIT_NETWORK_POOL to a larger range`);
      }
      try {
        await this.db.insertInto('network_leases').values({ node_id: this.nodeId, slot, instance_id: instanceId, created_at: nowIso() }).execute();
        return this.lease(slot);
      } catch (err) {
        // Another allocation took the same block; look again.
        if (!isUniqueViolation(err)) throw err;
      }
    }
    throw new Error('could not allocate an address block after 5 attempts');
  }

  /**
   * Hands the block leased under `from` to `to` (a network slot's to the instance that
   * takes it, see slots.ts); the address does not change hands in between.
   */
  async transfer(from: string, to: string): Promise<void> {
    const result = await this.db.updateTable('network_leases').set({ instance_id: to }).where('node_id', '=', this.nodeId).where('instance_id', '=', from).executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) throw new Error(`no address block is leased to ${from}`);
  }

  async release(instanceId: string): Promise<void> {
    await this.db.deleteFrom('network_leases').where('node_id', '=', this.nodeId).where('instance_id', '=', instanceId).execute();
  }

  async leaseOf(instanceId: string): Promise<Lease | undefined> {
    const row = await this.leases().select('slot').where('instance_id', '=', instanceId).executeTakeFirst();
    return row ? this.lease(row.slot) : undefined;
  }

  /** What this node's leases are held under: instances' ids and network slots' keys. */
  async leasedInstances(): Promise<string[]> {
    const rows = await this.leases().select('instance_id').execute();
    return rows.map((r) => r.instance_id);
  }

  /** This node's leases. */
  private leases() {
    return this.db.selectFrom('network_leases').where('node_id', '=', this.nodeId);
  }

  private lease(slot: number): Lease {
    const block = this.base + slot * 4;
    return { slot, hostAddress: formatIp(block + 1), guestAddress: formatIp(block + 2), prefixLength: 30 };
  }
}
