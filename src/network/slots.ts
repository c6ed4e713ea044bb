// Network slots made ahead of creates: each a namespace with its veth pair and the
// guest's address in place, on an address block leased from the pool, so that a create
// takes one (a few milliseconds) instead of making it (about a hundred). The pool of
// slots refills in the background, one slot at a time, off the create's path. Creates
// known to come together (a fork's copies) ask for as many slots more at once
// (addBatch), made in one batch; those beyond the pool's size are taken by the next
// creates like any other.
//
// A slot's names (namespace, veth ends) are derived from its own id as an instance's are
// from the instance's (netns.ts); the instance that takes it keeps them (the runtime
// records them in the instance's record), and its address lease, held under the slot's
// key until then, is handed to the instance. A slot is made without the egress rule:
// whoever takes one for an instance with egress adds it.
//
// Nothing outlives the service: close() removes every free slot, and a crash's
// leftovers (leases under a slot's key, with their namespaces and veths) are removed by
// the next start before any slot is made (removeLeftovers). The runtime's sweep keeps
// the slots named by names() and leaves the rest of its tag's namespaces and veths to
// be removed as it always has.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { Logger } from 'pino';
import { createNetns, createNetworks, createVethPair, type InstanceNetworkNames, netnsPath, networkNames, removeNetwork } from './netns.ts';
import { type AddressPool, type Lease, PoolExhaustedError } from './pool.ts';

/** Leases of slots not yet taken are held under this prefix and the slot's id. */
export const SLOT_LEASE_PREFIX = 'slot:';

/** A made-ahead network: its names, and the address block it holds. */
export interface NetworkSlot {
  id: string;
  names: InstanceNetworkNames;
  lease: Lease;
}

export interface NetworkSlotsOptions {
  pool: AddressPool;
  /** The data directory's host tag (network names). */
  tag: string;
  /** Slots kept ready; 0 turns the pool off. */
  size: number;
  log: Logger;
}

export class NetworkSlots {
  private readonly pool: AddressPool;
  private readonly tag: string;
  private readonly log: Logger;
  readonly size: number;
  private readonly ready: NetworkSlot[] = [];
  /** Slots being made, so that a sweep meanwhile does not take their namespaces for leftovers. */
  private readonly making = new Set<InstanceNetworkNames>();
  private filling: Promise<void> | undefined;
  private closed = false;

  constructor(options: NetworkSlotsOptions) {
    this.pool = options.pool;
    this.tag = options.tag;
    this.log = options.log;
    this.size = options.size;
  }

  /** Slots ready to be taken now. */
  get available(): number {
    return this.ready.length;
  }

  /** The names of every slot this pool holds or is making, for a sweep to keep. */
  names(): InstanceNetworkNames[] {
    return [...this.ready.map((s) => s.names), ...this.making];
  }

  /**
   * Removes what slots of a previous run left (a crash, or a close that could not finish):
   * their namespaces and veths, then their leases. Called at start, before fill().
   */
  async removeLeftovers(): Promise<string[]> {
    const removed: string[] = [];
    for (const key of await this.pool.leasedInstances()) {
      if (!key.startsWith(SLOT_LEASE_PREFIX)) continue;
      const names = networkNames(this.tag, key.slice(SLOT_LEASE_PREFIX.length));
      await removeNetwork(names);
      await this.pool.release(key);
      removed.push(`network slot ${names.netns}`);
    }
    return removed;
  }

  /**
   * Takes a ready slot for `instanceId`, or undefined when none is ready (the caller
   * makes the instance's network itself). Its lease stays under the slot's key until
   * adopt(): the caller first records the slot's names with the instance, so that a crash
   * in between leaves nothing that no one would remove.
   */
  take(): NetworkSlot | undefined {
    for (let slot = this.ready.shift(); slot; slot = this.ready.shift()) {
      // A namespace removed behind the service's back is no slot.
      if (existsSync(netnsPath(slot.names.netns))) return slot;
      this.log.warn({ netns: slot.names.netns }, 'a network slot lost its namespace; it is removed');
      this.discard(slot).catch((err: unknown) => this.log.warn({ err, netns: slot.names.netns }, 'could not remove a network slot; the next start removes it'));
    }
    return undefined;
  }

  /** Hands a taken slot's address lease to the instance that took it. */
  async adopt(slot: NetworkSlot, instanceId: string): Promise<void> {
    await this.pool.transfer(`${SLOT_LEASE_PREFIX}${slot.id}`, instanceId);
  }

  /** Makes slots until `size` are ready, one at a time, in the background; joins a fill under way. */
  fill(): Promise<void> {
    if (this.size === 0 || this.closed) return Promise.resolve();
    this.filling ??= (async () => {
      try {
        while (!this.closed && this.ready.length < this.size) {
          const slot = await this.make();
          if (this.closed) await this.discard(slot);
          else this.ready.push(slot);
        }
      } catch (err) {
        // The next create makes its own network; the next fill tries again. A full pool
        // is no fault of the slots': creates say so when they find it full.
        if (err instanceof PoolExhaustedError) this.log.debug({ err }, 'no address block left for a network slot');
        else this.log.warn({ err }, 'could not make a network slot ahead of creates');
      } finally {
        this.filling = undefined;
      }
    })();
    return this.filling;
  }

  /**
   * Makes slots until `count` are ready, beyond the pool's size if need be, all in one
   * batch (createNetworks), for creates about to be asked for together. Never fails: a
   * create that finds no slot makes its own network.
   */
  async addBatch(count: number): Promise<void> {
    const missing = count - this.ready.length;
    if (missing <= 0 || this.closed) return;
    const batch = Array.from({ length: missing }, () => {
      const id = randomUUID();
      return { id, names: networkNames(this.tag, id) };
    });
    for (const { names } of batch) this.making.add(names);
    const leased: NetworkSlot[] = [];
    try {
      // Leased first: a crash from here on leaves leases that the next start follows to the names.
      for (const { id, names } of batch) leased.push({ id, names, lease: await this.pool.allocate(`${SLOT_LEASE_PREFIX}${id}`) });
      await createNetworks(leased);
      if (!this.closed) this.ready.push(...leased.splice(0));
    } catch (err) {
      if (err instanceof PoolExhaustedError) this.log.debug({ err }, 'no address block left for a batch of network slots');
      else this.log.warn({ err, count: missing }, 'could not make a batch of network slots; the creates make their own');
    } finally {
      await Promise.allSettled(leased.map((slot) => this.discard(slot)));
      for (const { names } of batch) this.making.delete(names);
    }
  }

  /** Stops filling and removes every free slot; resolves once they are gone. */
  async close(): Promise<void> {
    this.closed = true;
    await this.filling;
    const slots = this.ready.splice(0);
    const outcomes = await Promise.allSettled(slots.map((slot) => this.discard(slot)));
    const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed.length > 0) this.log.warn({ err: failed[0]?.reason, failed: failed.length }, 'could not remove every network slot; the next start removes them');
  }

  private async make(): Promise<NetworkSlot> {
    const id = randomUUID();
    const names = networkNames(this.tag, id);
    this.making.add(names);
    try {
      // Leased first: a crash from here on leaves a lease that the next start follows to the names.
      const lease = await this.pool.allocate(`${SLOT_LEASE_PREFIX}${id}`);
      try {
        await createNetns(names.netns);
        await createVethPair(names, lease);
      } catch (err) {
        await this.discard({ id, names, lease }).catch(() => {});
        throw err;
      }
      return { id, names, lease };
    } finally {
      this.making.delete(names);
    }
  }

  private async discard(slot: NetworkSlot): Promise<void> {
    await removeNetwork(slot.names);
    await this.pool.release(`${SLOT_LEASE_PREFIX}${slot.id}`);
  }
}
