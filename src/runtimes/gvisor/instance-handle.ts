// One instance's names and paths on the host, derived once from its id and the data
// directory and carried to everything that touches the instance: its network namespace
// and veth ends (tagged, see network/netns.ts), and its directory with the writable
// layer, the overlay root, the bundle and the console log. Its record (instance.json)
// says what it was made from and outlives a restart of the service. The network names
// are the record's when it has them: an instance that took a network slot made ahead
// (network/slots.ts) keeps the slot's names, derived from the slot's id; without a
// record they are derived from the instance's id.
import type { NetworkPolicy } from '../../network/egress/policy.ts';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type InstanceNetworkNames, networkNames } from '../../network/netns.ts';

/** What the runtime keeps about an instance next to its files (instance.json). */
export interface InstanceMeta {
  instanceId: string;
  imageKey: string;
  netns: string;
  hostIf: string;
  guestIf: string;
  home: string;
  egress: string;
  /** Its egress policy as made (an allowlist's entries are entered again when the service adopts it). */
  network?: NetworkPolicy;
  memoryMb: number;
  /** The instance's address, where its agent listens. */
  guestAddress?: string;
  /** The key of the instance's agent; absent when the instance runs without one. */
  agentKey?: string;
  /**
   * Restored from a snapshot's memory, its agent kept the key it had in the instance the
   * snapshot was taken of (memory-snapshots.ts): which snapshot and instance.
   */
  agentKeyFrom?: { snapshotId: string; instanceId: string };
  /** Its layer is btrfs and can keep undo points (undo.ts); absent: ext4. */
  undoLayer?: boolean;
}

export class InstanceHandle implements InstanceNetworkNames {
  readonly id: string;
  /** The names derived from the instance's id, for an instance whose record names none. */
  private readonly ownNames: InstanceNetworkNames;
  /** Everything of the instance on disk is below it, and goes with it. */
  readonly dir: string;
  /** The sparse file of disk_mb that holds the writable layer (ext4, or btrfs for undo). */
  readonly diskImage: string;
  /** Where the writable layer is mounted; the overlay's upper and work directories are in it. */
  readonly layer: string;
  /** A btrfs layer's subvolume holding upper and work (one subvolume: overlayfs needs both on it). */
  readonly state: string;
  /** A btrfs layer's undo points: read-only snapshots of `state`, one per command (undo.ts). */
  readonly undoDir: string;
  /** The overlay of the writable layer over the image: the instance's root filesystem. */
  readonly rootfs: string;
  /** The OCI bundle (config.json) of the sandbox. */
  readonly bundle: string;
  /** What the sandbox's init and runsc create print. */
  readonly consoleLog: string;
  /** The sandbox's host process id, as `runsc create` writes it. */
  readonly pidFile: string;
  private readonly metaFile: string;
  private meta: Partial<InstanceMeta> | undefined;

  constructor(instancesDir: string, tag: string, instanceId: string) {
    this.id = instanceId;
    this.ownNames = networkNames(tag, instanceId);
    this.dir = join(instancesDir, instanceId);
    this.diskImage = join(this.dir, 'disk.img');
    this.layer = join(this.dir, 'layer');
    this.state = join(this.layer, 'state');
    this.undoDir = join(this.layer, 'undo');
    this.rootfs = join(this.dir, 'rootfs');
    this.bundle = join(this.dir, 'bundle');
    this.consoleLog = join(this.dir, 'console.log');
    this.pidFile = join(this.dir, 'sandbox.pid');
    this.metaFile = join(this.dir, 'instance.json');
  }

  /** Its network namespace. */
  get netns(): string {
    return this.networkNames().netns;
  }

  /** The host end of its veth pair. */
  get hostIf(): string {
    return this.networkNames().hostIf;
  }

  /** The guest end's name before it is moved into the namespace. */
  get guestIf(): string {
    return this.networkNames().guestIf;
  }

  /** Its network's names: its record's, else derived from its id. */
  networkNames(): InstanceNetworkNames {
    const meta = this.readMeta();
    if (meta?.netns && meta.hostIf && meta.guestIf) return { netns: meta.netns, hostIf: meta.hostIf, guestIf: meta.guestIf };
    return this.ownNames;
  }

  /** The overlay's upper directory: exactly what the instance changed since it started. */
  get upper(): string {
    return join(this.readMeta()?.undoLayer ? this.state : this.layer, 'upper');
  }

  get work(): string {
    return join(this.readMeta()?.undoLayer ? this.state : this.layer, 'work');
  }

  writeMeta(meta: InstanceMeta): void {
    writeFileSync(this.metaFile, `${JSON.stringify(meta)}\n`);
    this.meta = meta;
  }

  /** The instance's record, read once; undefined while it has none. */
  readMeta(): Partial<InstanceMeta> | undefined {
    if (this.meta) return this.meta;
    try {
      this.meta = JSON.parse(readFileSync(this.metaFile, 'utf8')) as Partial<InstanceMeta>;
    } catch {
      return undefined;
    }
    return this.meta;
  }
}
