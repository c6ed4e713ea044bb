// The gVisor runtime: each instance is a runsc sandbox (runsc.ts: its platform, and
// gVisor's own network stack on a veth) in its own network namespace, on an overlay of the profile's cached image and a writable layer
// capped at disk_mb. Provisioning reports each lifecycle step as it completes and, if
// any step fails, undoes everything before rejecting. roomkit's agent, the sandbox's
// first process, is the one way into an instance: commands (command-runner.ts), files
// (runtimes/agent/), terminals, kills and every program the runtime itself runs there
// (exec()) go through it. Pause and resume are pause.ts's, snapshots snapshots.ts's. A
// sandbox that ends by itself (sandbox-watch.ts) and the memory guard's kills are
// reported to core/ as runtime events. Over 400 lines, because provisioning's steps and
// their undo read best in one place, in order, beside the adopt, sweep and close that
// must agree with them.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ChangeTracking } from '../../config.ts';
import { run, runChecked, type RunResult } from '../../host/run.ts';
import { subreaper } from '../../host/subreaper.ts';
import { isMountPoint, mountDiskImage, mountOverlay, mountsUnder, unmountAll } from '../../host/mounts.ts';
import { mountBtrfsImage } from '../../host/btrfs.ts';
import type { ImageStore } from '../../images/builder.ts';
import { GUEST_AGENT } from '../../images/guest-additions.ts';
import { KeyedSerial } from '../../lib/keyed-serial.ts';
import { Turns } from '../../lib/turns.ts';
import { agentEndpointOf, throughAgent } from '../agent/access.ts';
import { AGENT_PORT, type AgentEndpoint, agentCall, agentConnectionsNow, endAgentConnections, openAgentConnections } from '../agent/client.ts';
import { allowEgress, egressInterfaces, hostNetworks, installRuleset, removeRuleset, revokeEgress } from '../../network/firewall.ts';
import { removeAllowlist } from '../../network/egress/allowlist-rules.ts';
import { EgressService, type EgressServiceOptions, guestNameservers } from '../../network/egress/egress-service.ts';
import type { NetworkPolicy } from '../../network/egress/policy.ts';
import { createNetns, createVethPair, hostTag, type InstanceNetworkNames, listHostInterfaces, listNetns, netnsPath, setGuestAddress } from '../../network/netns.ts';
import type { AddressPool, Lease } from '../../network/pool.ts';
import { type NetworkSlot, NetworkSlots, SLOT_LEASE_PREFIX } from '../../network/slots.ts';
import type {
  CommandOutcome,
  CommandRequest,
  CommandSignal,
  FileAccess,
  GuestDirEntry,
  GuestFileInfo,
  HostCost,
  MachineResources,
  MachineSpec,
  PauseOptions,
  PauseOutcome,
  PortEndpoint,
  ProvisionRequest,
  ResumeOutcome,
  ResumeRequest,
  Runtime,
  RuntimeCapabilities,
  RuntimeEvent,
  RevertOutcome,
  SnapshotOptions,
  SnapshotOutcome,
  ProvisionNote,
  RuntimeHealth,
  TerminalRequest,
  TerminalSession,
} from '../types.ts';
import { ociSpec, sandboxMemoryLimitMb } from './bundle.ts';
import { ranOutOfMemory, removeCgroups } from './cgroups.ts';
import { measuredMemoryMb, startingMemoryMb } from './host-usage.ts';
import { ChangeTracker } from '../layer-changes/change-tracker.ts';
import type { LayerChangeTracking } from '../layer-changes/tracking.ts';
import * as agentFiles from '../agent/files.ts';
import { agentRun, type ExecOptions, killCommand } from '../agent/commands.ts';
import { CommandRunner } from './command-runner.ts';
import { attachAgentTerminal, openAgentTerminal } from '../agent/terminal.ts';
import { type BootingSandbox, bootReady, type Exec, waitForAgent, writeAgentKey, writeGuestConfig } from '../agent/boot.ts';
import { InstanceHandle, type InstanceMeta } from './instance-handle.ts';
import { MemoryGuard, type MemoryGuardOptions } from './memory-guard.ts';
import { type PauseDeps, type PauseRelease, pauseInstance, resumeInstance } from './pause.ts';
import { LayerSnapshots, type MemorySource, thaw } from './snapshots.ts';
import { canCheckpoint, checkpointDir, hasCheckpoint } from './checkpoint.ts';
import { captureRunning, RestoreSlots, resumeSandbox } from './memory-snapshots.ts';
import { cpuUsedMs, setFrozen } from './freezer.ts';
import { Runsc } from './runsc.ts';
import { LayerSlots } from './layer-slots.ts';
import { SandboxWatch } from './sandbox-watch.ts';
import { type UndoLimits, UndoPoints } from '../layer-changes/undo.ts';
import { stopMachine, type Teardown, Teardowns } from './teardown.ts';

/** An instance is not frozen within this long of an operation reaching into it (its connection may still be opening). */
const FREEZE_AFTER_REACHED_MS = 5_000;

/** Instances a sweep tears down at once. */
const SWEEPS_AT_ONCE = 8;
/**
 * How long after a create the network slot it took is made again: each host program the
 * refill starts blocks the event loop while Node forks (tens of milliseconds on a busy
 * host), which the new instance's first requests would otherwise wait behind.
 */
const SLOT_REFILL_DELAY_MS = 500;

export interface GvisorOptions {
  dataDir: string;
  pool: AddressPool;
  images: ImageStore;
  log: Logger;
  dnsServers: string[];
  /** Resolvers the egress resolver and proxy ask for allowed names; the host's (dnsServers) when not given. */
  egressDnsServers?: string[];
  /** Told of every egress decision (for metrics); the audit trail gets them aggregated, as `egress` events. */
  onEgressDecision?: EgressServiceOptions['onDecision'];
  /** Told of every kill by the memory guard (for metrics). */
  onMemoryGuardKill?: MemoryGuardOptions['onKill'];
  /** Host tasks one sandbox may hold (the pids limit of its host cgroup). */
  maxHostTasks: number;
  /** How files_changed is made (config.ts); `auto` when not given. */
  changeTracking?: ChangeTracking;
  /** Paths one instance's watch keeps between a command's start and end before its list is walked instead (config.ts). */
  changeTrackingMaxPaths?: number;
  /** Bounds of each instance's undo points (config.ts). */
  undoLimits?: UndoLimits;
  /** Network slots kept made ahead of creates (network/slots.ts); 0, the default here, makes each create's network on its path. */
  networkSlots?: number;
  /** Restores from saved memory running at once (memory-snapshots.ts); the host's CPU count when not given. */
  restoresAtOnce?: number;
}

export class GvisorRuntime implements Runtime {
  readonly name = 'gvisor';
  readonly capabilities: RuntimeCapabilities;
  private readonly runsc: Runsc;
  private readonly instancesDir: string;
  private readonly pool: AddressPool;
  private readonly images: ImageStore;
  private readonly log: Logger;
  private readonly dnsServers: string[];
  private readonly maxHostTasks: number;
  private readonly changeTracking: ChangeTracking;
  /** Marks this data directory's names on the host (namespaces, interfaces, rules). */
  readonly tag: string;
  private readonly memoryGuard: MemoryGuard;
  /** Per image: what its root filesystem holds, to read writable-layer changes against. */
  private readonly changeTracker: LayerChangeTracking;
  /** Per instance this runtime made or adopted: its names and paths on the host. */
  private readonly handles = new Map<string, InstanceHandle>();
  private readonly sandboxWatch: SandboxWatch;
  private readonly listeners: ((event: RuntimeEvent) => void)[] = [];
  /** The command path: commands, their files_changed, reverts, stdin (command-runner.ts). */
  private readonly commands: CommandRunner;
  /** Instances being torn down: stopped at once, released in the background (teardown.ts). */
  private readonly teardowns: Teardowns;
  /** Undo points of instances with a btrfs layer (undo.ts). */
  readonly undo: UndoPoints;
  /** What pause.ts needs of this runtime. */
  private readonly pauseDeps: PauseDeps;
  /**
   * Instances this process paused, and what their pause's background release did (never
   * rejects: undefined when it failed); a resume takes it, a destroy waits for it.
   */
  private readonly pauseReleases = new Map<string, Promise<PauseRelease | undefined>>();
  /** Copies of writable layers (snapshots.ts). */
  private readonly snapshots: LayerSnapshots;
  /** Restores from snapshots' memory, a few at a time (memory-snapshots.ts). */
  private readonly restores: RestoreSlots;
  /** Copies restored from a snapshot's memory making their files, as many at once as restores run. */
  private readonly copiesPreparing: Turns;
  /** The pause, resume or snapshot under way per instance: one at a time, and a destroy waits for it. */
  private readonly layerWork = new KeyedSerial<string>();
  /** Instances whose sandbox is frozen (freezer.ts); handle() thaws them. */
  private readonly frozen = new Set<string>();
  /** When an operation last reached into each instance (handle()). */
  private readonly lastReached = new Map<string, number>();
  /** Networks made ahead of creates (network/slots.ts). */
  readonly networkSlots: NetworkSlots;
  /** Egress allowlists: the resolver, the proxy and each instance's rules (network/egress/). */
  readonly egress: EgressService;
  /** Writable layers formatted ahead of creates, as many as network slots (layer-slots.ts). */
  readonly layerSlots: LayerSlots;

  constructor(options: GvisorOptions) {
    this.runsc = new Runsc({ root: join(options.dataDir, 'runsc') });
    this.capabilities = { network: true, diskLimit: true, interactive: true, pause: true, pauseMemory: canCheckpoint(this.runsc), snapshot: true, snapshotMemory: canCheckpoint(this.runsc), freeze: true };
    this.instancesDir = join(options.dataDir, 'instances');
    this.pool = options.pool;
    this.images = options.images;
    this.log = options.log;
    this.dnsServers = options.dnsServers;
    this.maxHostTasks = options.maxHostTasks;
    this.changeTracking = options.changeTracking ?? 'auto';
    mkdirSync(this.runsc.root, { recursive: true, mode: 0o700 });
    mkdirSync(this.instancesDir, { recursive: true, mode: 0o700 });
    this.tag = hostTag(options.dataDir);
    this.restores = new RestoreSlots(options.restoresAtOnce ?? availableParallelism());
    this.copiesPreparing = new Turns(this.restores.atOnce);
    this.networkSlots = new NetworkSlots({ pool: this.pool, tag: this.tag, size: options.networkSlots ?? 0, log: this.log });
    this.layerSlots = new LayerSlots({ dir: join(options.dataDir, 'layer-slots'), size: options.networkSlots ?? 0, log: this.log });
    this.changeTracker = new ChangeTracker(this.images.dir, options.changeTrackingMaxPaths ?? 65_536);
    this.memoryGuard = new MemoryGuard({
      log: this.log,
      runAsRoot: async (id, script, timeoutMs) => (await this.exec(id, ['sh', '-c', script], { as: 'root', timeoutMs })).stdout,
      onKill: (instanceId, kind, kill) => {
        this.commands.noteMemoryKill(instanceId, kill.commandIds);
        options.onMemoryGuardKill?.(instanceId, kind, kill);
        this.emit({ type: 'memory_kill', instanceId, kind, commandIds: kill.commandIds, detail: kill.detail });
      },
    });
    this.sandboxWatch = new SandboxWatch({ onExit: (instanceId) => this.sandboxExited(instanceId) });
    this.egress = new EgressService({
      tag: this.tag,
      upstreamServers: options.egressDnsServers ?? options.dnsServers,
      ...(options.onEgressDecision ? { onDecision: options.onEgressDecision } : {}),
      onReport: (decision) => this.emit({ type: 'egress', instanceId: decision.instanceId, decision }),
      log: this.log,
    });
    this.teardowns = new Teardowns({ runsc: this.runsc, pool: this.pool, tag: this.tag, egress: this.egress, log: this.log });
    this.snapshots = new LayerSnapshots(options.dataDir, this.log);
    this.undo = new UndoPoints({ limits: options.undoLimits ?? { maxPoints: 20, maxBytes: 512 * 1024 * 1024 }, log: this.log });
    this.commands = new CommandRunner({
      log: this.log,
      changeTracker: this.changeTracker,
      undo: this.undo,
      memoryGuard: this.memoryGuard,
      isHeld: (id) => this.handles.has(id),
      hasEnded: (id) => this.sandboxWatch.hasEnded(id),
      withAgent: (h, operation) => this.withAgent(h, operation),
      imageOf: (h) => this.imageOf(h),
    });
    this.pauseDeps = {
      runsc: this.runsc,
      pool: this.pool,
      images: this.images,
      tag: this.tag,
      dnsServers: this.dnsServers,
      egress: this.egress,
      log: this.log,
      checkpoints: this.capabilities.pauseMemory,
      exec: (id, argv, options) => this.exec(id, argv, options),
      agentOf: (h) => this.agentOf(h),
      booting: (h) => this.booting(h),
      forget: (id) => this.forget(id),
      remember: (h, memoryMb) => {
        this.handles.set(h.id, h);
        this.guardMemory(h.id, memoryMb);
      },
      watch: async (h) => void (await Promise.all([this.watchSandbox(h.id, h, true), this.watchChanges(h)])),
      runsNow: (id) => (this.handles.has(id) && this.sandboxWatch.watches(id) ? !this.sandboxWatch.hasEnded(id) : undefined),
    };
  }

  /** Pauses an instance: its files stay, and its memory and processes unless asked not to or it cannot (pause.ts). */
  async pause(instanceId: string, options: PauseOptions = { memory: true }): Promise<PauseOutcome> {
    // Its commands' connections drop at the checkpoint: they wait for the resume, unless no memory is kept.
    if (options.memory && this.capabilities.pauseMemory) await this.commands.suspend(instanceId);
    let paused;
    try {
      paused = await this.oneAtATime(instanceId, () => pauseInstance(this.handle(instanceId), this.pauseDeps, options));
    } catch (err) {
      this.commands.wake(instanceId, false);
      throw err;
    }
    const { memoryKept, released } = paused;
    if (!memoryKept) this.commands.wake(instanceId, false);
    this.pauseReleases.set(instanceId, released.catch(() => undefined));
    return { memoryKept };
  }

  /**
   * Starts a paused instance again, from its saved memory or over its writable layer
   * (pause.ts); its pause's release, when this process paused it, is waited for there,
   * beside the steps that do not need it.
   */
  async resume(request: ResumeRequest): Promise<ResumeOutcome> {
    const release = this.pauseReleases.get(request.instanceId);
    this.pauseReleases.delete(request.instanceId);
    const outcome = await this.oneAtATime(request.instanceId, () =>
      resumeInstance(this.handle(request.instanceId), request.spec, this.pauseDeps, request.log, release),
    );
    // A resume that fails leaves the instance paused, its commands still waiting for the next.
    this.commands.wake(request.instanceId, outcome.memoryRestored);
    return outcome;
  }

  /**
   * Copies a ready or paused instance's writable layer into a snapshot (snapshots.ts),
   * with its memory when asked and possible (memory-snapshots.ts): a running sandbox's,
   * which goes on running, or the saved memory of a paused one whose pause kept it.
   */
  async snapshot(instanceId: string, snapshotId: string, options: SnapshotOptions = { memory: true }): Promise<SnapshotOutcome> {
    const h = this.handle(instanceId);
    return this.oneAtATime(instanceId, async () => {
      // A paused instance (its sandbox let go, its layer still mounted) has no guest to flush or to hold still.
      const running = this.handles.has(instanceId);
      const flush = async () => {
        if (running) await this.exec(instanceId, ['/bin/sync'], { as: 'root', timeoutMs: 10_000 });
      };
      const agentKey = h.readMeta()?.agentKey;
      let memory: MemorySource | undefined;
      if (options.memory && this.capabilities.snapshotMemory && agentKey !== undefined) {
        // The checkpoint drops the connections open into it: its commands attach again after (command-runner.ts).
        if (running) memory = { agentKey, running: (dir, copyLayer) => this.commands.across(instanceId, () => captureRunning(h, this.runsc, dir, copyLayer, this.log), this.droppingConnections(h)) };
        else if (hasCheckpoint(h)) memory = { agentKey, savedDir: checkpointDir(h) };
      }
      return this.snapshots.save(h, snapshotId, flush, memory);
    });
  }

  async deleteSnapshot(snapshotId: string): Promise<void> {
    await this.snapshots.remove(snapshotId);
  }

  async listSnapshots(): Promise<string[]> {
    return this.snapshots.list();
  }

  /** The image keys the instances' snapshots were taken over (`roomkit images prune` keeps them). */
  snapshotImageKeys(): Set<string> {
    return this.snapshots.imageKeys();
  }

  /** Runs one pause, resume or snapshot of the instance at a time, in the order asked. */
  private oneAtATime<T>(instanceId: string, work: () => Promise<T>): Promise<T> {
    return this.layerWork.run(instanceId, work);
  }

  onEvent(listener: (event: RuntimeEvent) => void): void {
    this.listeners.push(listener);
  }

  private emit(event: RuntimeEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.log.error({ err, event }, 'a runtime event listener failed');
      }
    }
  }

  /** A sandbox ended by itself: stop guarding it and tell core/, with whether memory was why. */
  private sandboxExited(instanceId: string): void {
    this.memoryGuard.unwatch(instanceId);
    this.endConnections(this.handle(instanceId));
    const outOfMemory = ranOutOfMemory(instanceId);
    const detail = outOfMemory
      ? 'its sandbox was killed by the host for using more memory than it may (the host cgroup ran out of memory)'
      : 'its sandbox process ended unexpectedly';
    this.log.warn({ instanceId, outOfMemory }, 'sandbox ended by itself');
    this.emit({ type: 'machine_exited', instanceId, outOfMemory, detail });
  }

  /**
   * Watches the sandbox's host process, so that its end is noticed. A new sandbox's pid
   * is in the file `runsc create` wrote (no runsc call on the create path); an adopted
   * one asks `runsc state`, since its pid may have been reused by now.
   */
  private async watchSandbox(instanceId: string, h: InstanceHandle, fromPidFile = false): Promise<void> {
    const pid = fromPidFile ? Number(readFileSync(h.pidFile, 'utf8').trim()) : (await this.runsc.state(h.netns, instanceId))?.pid;
    if (!pid || !this.sandboxWatch.watch(instanceId, pid)) {
      this.log.warn({ instanceId, pid }, 'could not find the sandbox process to watch: its end would go unnoticed');
    }
  }

  /**
   * Installs the firewall table (instances already running get their egress back from
   * adopt()), removes the network slots a crash left, and starts making new ones in the
   * background.
   */
  async start(): Promise<void> {
    const addresses = await runChecked('ip', ['-4', '-o', 'addr', 'show'], { timeoutMs: 10_000 });
    const networks = hostNetworks(addresses.stdout, this.pool.cidr);
    // The firewall's redirects name the ports the resolver and the proxy listen on.
    const egressPorts = await this.egress.start([...networks, this.pool.cidr]);
    await installRuleset({
      tag: this.tag,
      poolCidr: this.pool.cidr,
      dnsServers: this.dnsServers,
      hostNetworks: networks,
      egressPorts,
    });
    const removed = await this.networkSlots.removeLeftovers();
    if (removed.length > 0) this.log.info({ removed }, 'removed network slots left by an earlier run');
    // Sandboxes made from now on are reaped as soon as they end, so that deleting their
    // record (before a resume reuses the id, or at a delete) does not wait for the host's init.
    try {
      this.runsc.useSubreaper(await subreaper(this.images.dir));
    } catch (err) {
      this.log.warn({ err }, "cannot build the subreaper: ended sandboxes wait for the host's init to reap them (a resume right after a pause waits about a second longer)");
    }
    void this.networkSlots.fill();
    // Filled once a create has said what size of layer to keep ready.
    await this.layerSlots.removeLeftovers();
  }

  async provision(request: ProvisionRequest): Promise<void> {
    const { instanceId, spec, signal, log, onStep } = request;
    const h = new InstanceHandle(this.instancesDir, this.tag, instanceId);
    this.handles.set(instanceId, h);
    /** A network slot taken whose lease is not yet the instance's. */
    let slotUnadopted: NetworkSlot | undefined;
    /** The egress rule being added beside the sandbox's start: what failed, once it ends (never rejects). */
    let egressAdded: Promise<unknown> = Promise.resolve(undefined);
    try {
      // Still `active`: the image is built once per profile and cached.
      // A build can take minutes: a delete or a shutdown does not wait for it (the build
      // itself goes on for others that need it, or is stopped when the service stops).
      const image = request.fromSnapshot
        ? this.snapshotImage(request.fromSnapshot)
        : await untilAborted(
            this.images.ensure({ image: spec.image, packages: spec.packages, user: spec.user, home: spec.home }, log, request.onProgress),
            signal,
          );
      signal.throwIfAborted();
      const undoLayer = request.fromSnapshot ? this.snapshots.meta(request.fromSnapshot)?.undoLayer : spec.keep_undo;
      // A plain ext4 layer of this size may be ready, mounted in a directory made ahead
      // (layer-slots.ts), which becomes the instance's.
      if (request.fromSnapshot || undoLayer || !this.layerSlots.take(spec.disk_mb, h.dir)) mkdirSync(h.dir, { recursive: true, mode: 0o700 });
      const meta = {
        instanceId,
        imageKey: image.key,
        netns: h.netns,
        hostIf: h.hostIf,
        guestIf: h.guestIf,
        home: spec.home,
        egress: spec.network.egress,
        network: spec.network,
        memoryMb: spec.memory_mb,
        ...(undoLayer ? { undoLayer: true } : {}),
      };
      h.writeMeta(meta);

      // The agent is the only way into the instance: an image without it is refused before anything is made.
      if (!existsSync(join(image.rootfs, GUEST_AGENT))) {
        throw new Error(
          `the image ${image.key} has no roomkit agent (${GUEST_AGENT}), which every instance needs as its first process: remove it from the image cache (roomkit images prune, once no instance uses it) so that it is built again`,
        );
      }
      // Restored from a snapshot's memory, the agent answers to its source's key (memory-snapshots.ts).
      const source = request.fromSnapshot && this.capabilities.snapshotMemory ? this.snapshots.meta(request.fromSnapshot) : undefined;
      const fromMemory = source?.memory ? source : undefined;
      const agentKey = fromMemory?.memory?.agentKey ?? randomBytes(24).toString('base64url');
      const keyFrom = fromMemory ? { agentKeyFrom: { snapshotId: fromMemory.snapshotId, instanceId: fromMemory.sourceInstanceId } } : {};
      // A network made ahead (network/slots.ts) is taken when there is one: its names are
      // recorded as the instance's before its lease becomes the instance's, so that
      // whatever removes the instance finds them.
      const slot = this.networkSlots.take();
      let lease;
      if (slot) {
        slotUnadopted = slot;
        h.writeMeta({ ...meta, ...slot.names, guestAddress: slot.lease.guestAddress, agentKey, ...keyFrom });
        await this.networkSlots.adopt(slot, instanceId);
        slotUnadopted = undefined;
        lease = slot.lease;
      } else {
        lease = await this.pool.allocate(instanceId);
        h.writeMeta({ ...meta, guestAddress: lease.guestAddress, agentKey, ...keyFrom });
      }
      // The network and the file system do not depend on each other: both at once (one
      // after the other they took ~120 and ~50 ms at p50). The steps are still recorded in
      // the spec's order, and both are waited for before a failure is thrown, so that the
      // cleanup finds each done or not begun. The egress rule (an nft call, 13-40 ms at
      // p50) matters only once the guest's own programs run, after `ready`: it is added
      // while the sandbox starts, and waited for before `ready` and before any cleanup.
      const settledSteps = await Promise.allSettled([
        (async () => {
          if (!slot) await createNetns(h.netns);
          await onStep('network_allocated');
          if (!slot) await createVethPair(h, lease);
          if (spec.network.egress !== 'none') {
            egressAdded = this.egress
              .apply(instanceId, h.hostIf, lease.guestAddress, spec.network, { fresh: true })
              .then(() => undefined, (err: unknown) => err ?? new Error('could not add the egress rules'));
          }
          await onStep('ftap_created');
        })(),
        // Copies of a snapshot's memory make their files a few at a time, so that a fork's
        // first copies reach their restore while the rest are still being made.
        fromMemory
          ? this.copiesPreparing.run(() => this.prepareFiles(h, image, spec, agentKey, request.fromSnapshot))
          : this.prepareFiles(h, image, spec, agentKey, request.fromSnapshot),
      ]);
      for (const outcome of settledSteps) if (outcome.status === 'rejected') throw outcome.reason;
      await onStep('image_generated');

      const note = fromMemory ? await this.restoreSnapshot(h, fromMemory.snapshotId, lease, log) : undefined;
      const restored = note?.code === 'memory_restored';
      if (!restored) await this.runsc.create(h.netns, instanceId, h.bundle, h.consoleLog, h.pidFile);
      this.guardMemory(instanceId, spec.memory_mb);
      if (!restored) await this.runsc.start(h.netns, instanceId);
      await onStep('vm_started', note);

      const exec: Exec = (argv, options) => this.exec(instanceId, argv, options);
      // Watching the sandbox's process and its layer needs no agent: they go on while it
      // boots and answers the readiness check (one after another, the three took 222 ms
      // at p50). Both are waited for before a failure is thrown, so that the cleanup
      // finds each done.
      const watching = Promise.allSettled([this.watchSandbox(instanceId, h, true), this.watchChanges(h)]);
      try {
        // The agent's init has started the root service by the time it answers, and its
        // hello checks readiness (a command checks it with an older agent). A restored
        // guest was ready when its memory was saved.
        const endpoint = { host: lease.guestAddress, port: AGENT_PORT, key: agentKey };
        if (restored) {
          await waitForAgent(endpoint, signal, this.booting(h));
          await onStep('vm_booted');
        } else {
          await bootReady(endpoint, signal, this.booting(h), exec, spec, () => onStep('vm_booted'));
        }
      } catch (err) {
        await watching;
        throw err;
      }
      for (const outcome of await watching) if (outcome.status === 'rejected') throw outcome.reason;
      const egressFailed = await egressAdded;
      if (egressFailed !== undefined) throw egressFailed;
      await onStep('ready');
      // The first command's files_changed needs the image's index: build it now.
      this.indexImage(h).catch((err: unknown) => log.warn({ err }, 'could not index the image'));
    } catch (err) {
      try {
        await egressAdded;
        await this.destroyCompletely(instanceId);
        // Its names went with the instance; the lease is still the slot's.
        if (slotUnadopted) await this.pool.release(`${SLOT_LEASE_PREFIX}${slotUnadopted.id}`);
      } catch (cleanupErr) {
        log.error({ err: cleanupErr }, 'cleanup after a failed start failed');
      }
      throw err;
    } finally {
      // Off this create's path: the slot and layer it took, if any, are made again a little after.
      setTimeout(() => {
        void this.networkSlots.fill();
        void this.layerSlots.fill();
      }, SLOT_REFILL_DELAY_MS).unref();
    }
  }

  /**
   * Starts the new instance's sandbox from the snapshot's memory (memory-snapshots.ts);
   * what the history says of it. A restore that fails is undone, for a boot over the
   * snapshot's files, and the note says why its memory was lost.
   */
  private async restoreSnapshot(h: InstanceHandle, snapshotId: string, lease: Lease, log: Logger): Promise<ProvisionNote> {
    try {
      await this.restores.restore(h, this.runsc, this.snapshots.memoryDirOf(snapshotId));
      return { code: 'memory_restored', reason: `restored from the memory of snapshot ${snapshotId}: its processes go on from there` };
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      log.warn({ instanceId: h.id, snapshotId, err }, "could not restore the snapshot's memory: booting over its files instead");
      await stopMachine(h, this.runsc);
      await this.runsc.destroy(null, h.id);
      removeCgroups(h.id);
      // The failed sandbox's network stack may have taken the guest's address.
      await setGuestAddress(h.netns, lease);
      return { code: 'memory_lost', reason: `booted over the files of snapshot ${snapshotId}: its memory could not be restored (${why}), so its processes are not there` };
    }
  }

  /** Networks for `count` creates about to come together, made in one batch as network slots (network/slots.ts). */
  async prepareCreates(count: number): Promise<void> {
    await this.networkSlots.addBatch(count);
  }

  /** The instance's network names (a slot's, when it took one), for benchmarks and tests that look at the host. */
  networkOf(instanceId: string): InstanceNetworkNames {
    return this.handle(instanceId).networkNames();
  }

  /** The writable layer, the overlay root over the image, the guest's configuration and the OCI bundle. */
  private async prepareFiles(
    h: InstanceHandle,
    image: { rootfs: string },
    spec: MachineSpec,
    agentKey: string,
    fromSnapshot: string | undefined,
  ): Promise<void> {
    mkdirSync(h.layer, { recursive: true });
    mkdirSync(h.rootfs, { recursive: true });
    // A snapshot's layer is a copy of its source's; the mounts below find it made.
    if (fromSnapshot) await this.snapshots.copyInto(fromSnapshot, h);
    // A layer that keeps undo points is btrfs (snapshots); others ext4, quicker to make,
    // and found made and mounted when the instance's directory was made ahead.
    if (h.readMeta()?.undoLayer) await mountBtrfsImage(h.diskImage, h.layer, spec.disk_mb);
    else await mountDiskImage(h.diskImage, h.layer, spec.disk_mb);
    if (fromSnapshot) await this.snapshots.dropInheritedUndoPoints(h);
    mkdirSync(h.upper, { recursive: true });
    mkdirSync(h.work, { recursive: true });
    await mountOverlay({ lower: image.rootfs, upper: h.upper, work: h.work, target: h.rootfs });
    writeGuestConfig(h.rootfs, guestNameservers(spec.network, this.dnsServers, h.readMeta()?.guestAddress));
    writeAgentKey(h.rootfs, agentKey);
    this.log.debug({ instanceId: h.id }, 'guest configuration written');
    mkdirSync(h.bundle, { recursive: true });
    const bundle = ociSpec({ instanceId: h.id, rootfs: h.rootfs, hostname: 'roomkit', spec, maxHostTasks: this.maxHostTasks, agent: true, netnsPath: netnsPath(h.netns) });
    writeFileSync(join(h.bundle, 'config.json'), JSON.stringify(bundle), { mode: 0o600 });
  }

  /** Runs a program in the instance through its agent (no shell unless asked for), bounded by a deadline. */
  async exec(instanceId: string, argv: string[], options: ExecOptions): Promise<RunResult> {
    return this.withAgent(this.handle(instanceId), (endpoint) =>
      agentRun(endpoint, argv, { identity: options, ...(options.env ? { env: options.env } : {}), timeoutMs: options.timeoutMs }),
    );
  }

  /** The sandbox being booted, as waitForAgent asks after it: whether its process runs, and what its first process printed. */
  private booting(h: InstanceHandle): BootingSandbox {
    let pid: number | undefined;
    return {
      running: () => {
        try {
          pid ??= Number(readFileSync(h.pidFile, 'utf8').trim());
          process.kill(pid, 0);
          return true;
        } catch (err) {
          // Not ours to signal still runs; an unreadable pid file is not proof of an end.
          return (err as NodeJS.ErrnoException).code !== 'ESRCH';
        }
      },
      // runsc's own words go to the console log; the agent's init moves its stdio to a log in the guest (init.go).
      printed: () => [h.consoleLog, join(h.rootfs, 'var/log/roomkit-agent.log')].map((file) => readTail(file)).filter(Boolean).join('\n').slice(-2000),
    };
  }

  /** Stops the instance's machine; what it held is released in the background (teardown.ts). */
  async destroy(instanceId: string): Promise<Teardown> {
    // A snapshot copying the layer (frozen meanwhile) finishes first, and so does the
    // release of a pause just made, which removes the same sandbox record and cgroups.
    await this.layerWork.idle(instanceId);
    const pauseRelease = this.pauseReleases.get(instanceId);
    this.pauseReleases.delete(instanceId);
    await pauseRelease;
    this.commands.wake(instanceId, false);
    return this.teardowns.begin(await this.forget(instanceId));
  }

  /** Waits until every release destroy() started has ended (for a shutdown, and for tests and benchmarks that look at the host). */
  async releasesSettled(): Promise<void> {
    await Promise.all([this.teardowns.settled(), ...this.pauseReleases.values()]);
  }

  /** Stops the instance and releases everything it holds before resolving; rejects when something is left. */
  private async destroyCompletely(instanceId: string): Promise<void> {
    await this.teardowns.complete(await this.forget(instanceId));
  }

  /** Stops watching and guarding an instance that is being torn down; its handle, for the teardown. */
  private async forget(instanceId: string): Promise<InstanceHandle> {
    const h = this.handle(instanceId);
    this.handles.delete(instanceId);
    this.lastReached.delete(instanceId);
    // The change watcher holds the layer open: it lets go before the teardown unmounts it.
    await this.changeTracker.unwatch(instanceId).catch((err: unknown) => this.log.warn({ instanceId, err }, 'could not stop watching the layer'));
    this.sandboxWatch.unwatch(instanceId);
    this.memoryGuard.unwatch(instanceId);
    this.commands.forget(instanceId);
    this.endConnections(h);
    return h;
  }

  /** Ends, when called, the host's connections to the instance's agent open now (not those made later): those a snapshot's checkpoint drops. */
  private droppingConnections(h: InstanceHandle): () => void {
    const address = h.readMeta()?.guestAddress;
    if (address === undefined) return () => {};
    const end = agentConnectionsNow(address);
    return () => {
      const ended = end();
      if (ended > 0) this.log.debug({ instanceId: h.id, connections: ended }, "ended the connections to the instance's agent that its snapshot dropped");
    };
  }

  /**
   * Ends the host's connections to the instance's agent (its commands, terminals, file
   * reads) once its sandbox is being stopped or has ended: their other side lived in the
   * sandbox's network stack, which closes nothing as it goes.
   */
  private endConnections(h: InstanceHandle): void {
    const address = h.readMeta()?.guestAddress;
    const ended = address === undefined ? 0 : endAgentConnections(address);
    if (ended > 0) this.log.debug({ instanceId: h.id, connections: ended }, "ended the connections to the instance's agent");
  }

  async runCommand(instanceId: string, request: CommandRequest): Promise<CommandOutcome> {
    return this.commands.run(this.handle(instanceId), request);
  }

  async revertCommand(instanceId: string, commandId: string, options: { force: boolean }): Promise<RevertOutcome> {
    return this.commands.revert(this.handle(instanceId), commandId, options);
  }

  async sendInput(instanceId: string, commandId: string, data: Buffer | null): Promise<boolean> {
    return this.handles.has(instanceId) && this.commands.sendInput(commandId, data);
  }

  // A terminal whose connection a snapshot drops is attached again as a command is (command-runner.ts).
  async openTerminal(instanceId: string, request: TerminalRequest): Promise<TerminalSession> {
    const h = this.handle(instanceId);
    return this.withAgent(h, (endpoint) => openAgentTerminal(endpoint, request, (offset) => this.commands.reattachTerminal(h, endpoint, request.terminalId, offset)));
  }

  async attachTerminal(instanceId: string, terminalId: string): Promise<TerminalSession> {
    const h = this.handle(instanceId);
    return this.withAgent(h, (endpoint) => attachAgentTerminal(endpoint, terminalId, (offset) => this.commands.reattachTerminal(h, endpoint, terminalId, offset)));
  }

  portEndpoint(instanceId: string): PortEndpoint | undefined {
    const address = this.handle(instanceId).readMeta()?.guestAddress;
    return address === undefined ? undefined : { host: address, reservedPorts: [AGENT_PORT] };
  }

  /** The instance's agent, when it was made with one (every instance this roomkit makes is). */
  private agentOf(h: InstanceHandle): AgentEndpoint | undefined {
    return agentEndpointOf(h.readMeta());
  }

  /** Runs an operation through the instance's agent, the one way into it (agent/access.ts). */
  private withAgent<T>(h: InstanceHandle, operation: (endpoint: AgentEndpoint) => Promise<T>): Promise<T> {
    return throughAgent(this.agentOf(h), operation, (err) => this.log.warn({ instanceId: h.id, err: err.message }, "the instance's agent does not answer"));
  }

  /** Signals every process of a command, as root inside the instance. */
  async killCommand(instanceId: string, commandId: string, signal: CommandSignal = 'KILL'): Promise<number> {
    return this.withAgent(this.handle(instanceId), (endpoint) => killCommand(endpoint, commandId, signal));
  }

  /** The cached image a snapshot's layer was taken over; it must still be in the cache. */
  private snapshotImage(snapshotId: string): { key: string; rootfs: string } {
    const meta = this.snapshots.meta(snapshotId);
    if (!meta) throw new Error(`snapshot ${snapshotId} has no files on this host (it was deleted, or never finished)`);
    const rootfs = this.images.rootfsOf(meta.imageKey);
    if (!existsSync(rootfs)) throw new Error(`the image snapshot ${snapshotId} was taken over (${meta.imageKey}) is no longer in the image cache`);
    return { key: meta.imageKey, rootfs };
  }

  /** The image under the instance's writable layer. */
  private imageOf(h: InstanceHandle): { key: string; rootfs: string } {
    const key = h.readMeta()?.imageKey;
    if (key === undefined) throw new Error(`instance ${h.id} has no image record`);
    return { key, rootfs: this.images.rootfsOf(key) };
  }

  /**
   * Watches the instance's writable layer with fanotify, so that its commands' changes
   * cost what they changed (change-watch.ts); unless that is required, an instance that
   * cannot be watched has its layer walked instead.
   */
  private async watchChanges(h: InstanceHandle): Promise<void> {
    if (this.changeTracking === 'walk') return;
    try {
      await this.changeTracker.watch(h.id, h.layer, h.upper);
    } catch (err) {
      if (this.changeTracking === 'fanotify') throw new Error(`cannot watch the writable layer with fanotify: ${(err as Error).message}`);
      this.log.warn({ instanceId: h.id, err }, 'cannot watch the writable layer with fanotify: its commands\' changes are found by walking it');
    }
  }

  /** Indexes the instance's image for files_changed, once per image and process. */
  private async indexImage(h: InstanceHandle): Promise<void> {
    await this.changeTracker.index(this.imageOf(h));
  }

  openFile(
    instanceId: string,
    path: string,
    options: FileAccess & { maxBytes: number; range?: { start: number; end: number } },
  ): Promise<{ info: GuestFileInfo; body: NodeJS.ReadableStream }> {
    return this.withAgent(this.handle(instanceId), (endpoint) => agentFiles.openFile(endpoint, path, options));
  }

  statFile(instanceId: string, path: string, options: FileAccess): Promise<GuestFileInfo> {
    return this.withAgent(this.handle(instanceId), (endpoint) => agentFiles.statFile(endpoint, path, options));
  }

  writeFile(instanceId: string, path: string, data: Buffer, options: FileAccess): Promise<{ info: GuestFileInfo; created: boolean }> {
    return this.withAgent(this.handle(instanceId), (endpoint) => agentFiles.writeFile(endpoint, path, data, options));
  }

  listDirectory(instanceId: string, path: string, options: FileAccess & { limit: number }): Promise<{ path: string; entries: GuestDirEntry[]; truncated: boolean }> {
    return this.withAgent(this.handle(instanceId), (endpoint) => agentFiles.listDirectory(endpoint, path, options));
  }

  deleteFile(instanceId: string, path: string, options: FileAccess): Promise<{ path: string }> {
    return this.withAgent(this.handle(instanceId), (endpoint) => agentFiles.deleteFile(endpoint, path, options));
  }

  makeDirectory(instanceId: string, path: string, options: FileAccess): Promise<{ path: string; created: boolean }> {
    return this.withAgent(this.handle(instanceId), (endpoint) => agentFiles.makeDirectory(endpoint, path, options));
  }

  renamePath(instanceId: string, path: string, target: string, options: FileAccess): Promise<{ path: string; target: string }> {
    return this.withAgent(this.handle(instanceId), (endpoint) => agentFiles.renamePath(endpoint, path, target, options));
  }

  removeTree(instanceId: string, path: string, options: FileAccess): Promise<{ path: string }> {
    return this.withAgent(this.handle(instanceId), (endpoint) => agentFiles.removeTree(endpoint, path, options));
  }

  async health(instanceId: string): Promise<RuntimeHealth> {
    const h = this.handle(instanceId);
    if (!existsSync(netnsPath(h.netns))) return { healthy: false, reason: 'its network namespace is gone' };
    let state = await this.runsc.state(h.netns, instanceId);
    if (!state) return { healthy: false, reason: 'runsc does not know its sandbox' };
    // Held still for a snapshot when the service stopped (memory-snapshots.ts): it goes on.
    if (state.status === 'paused' && !this.layerWork.busy(instanceId)) {
      await resumeSandbox(h, this.runsc, this.log).catch(() => {});
      state = await this.runsc.state(h.netns, instanceId);
      if (!state) return { healthy: false, reason: 'runsc does not know its sandbox' };
    }
    if (state.status !== 'running') return { healthy: false, reason: `its sandbox is ${state.status}` };
    const endpoint = this.agentOf(h);
    if (!endpoint) return { healthy: false, reason: "it runs without roomkit's agent (an older roomkit made it), the only way into it" };
    try {
      await agentCall(endpoint, { op: 'hello' });
    } catch (err) {
      return { healthy: false, reason: `its agent does not answer: ${(err as Error).message}` };
    }
    return { healthy: true };
  }

  async adopt(instanceId: string): Promise<void> {
    const h = this.handle(instanceId);
    this.handles.set(instanceId, h);
    // A service that ended while the instance was frozen for being idle left it so.
    setFrozen(instanceId, false);
    // A service that ended while it copied the layer for a snapshot left it frozen.
    if (isMountPoint(h.layer)) await thaw(h.layer, this.log);
    const meta = h.readMeta();
    if (meta?.egress === 'internet') await allowEgress(this.tag, h.hostIf);
    else if (meta?.egress === 'allowlist' && meta.network && meta.guestAddress) await this.egress.apply(instanceId, h.hostIf, meta.guestAddress, meta.network, { fresh: true });
    if (meta?.memoryMb !== undefined) this.guardMemory(instanceId, meta.memoryMb);
    await this.watchSandbox(instanceId, h);
    await this.watchChanges(h);
    this.indexImage(h).catch((err: unknown) => this.log.warn({ instanceId, err }, 'could not index the image'));
  }

  private guardMemory(instanceId: string, memoryMb: number): void {
    if (!this.memoryGuard.watch(instanceId, memoryMb)) {
      this.log.warn({ instanceId }, 'no v1 memory cgroup for the sandbox: only the host limit applies to its memory');
    }
  }

  async list(): Promise<string[]> {
    // A network slot's lease is no instance's (slots.ts removes what a crash left of them).
    const leased = (await this.pool.leasedInstances()).filter((id) => !id.startsWith(SLOT_LEASE_PREFIX));
    const ids = new Set<string>([...(await this.runsc.list()), ...leased]);
    for (const name of existsSync(this.instancesDir) ? readdirSync(this.instancesDir) : []) ids.add(name);
    return [...ids];
  }

  async sweep(keep: ReadonlySet<string>): Promise<string[]> {
    const removed: string[] = [];
    const errors: string[] = [];
    // A few at a time: most of a teardown is waiting for the host's init to reap.
    const queue = (await this.list()).filter((id) => !keep.has(id));
    await Promise.all(
      Array.from({ length: Math.min(SWEEPS_AT_ONCE, queue.length) }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
          try {
            // Killed processes of a frozen cgroup end only once it thaws.
            setFrozen(id, false);
            const layer = this.handle(id).layer;
            if (isMountPoint(layer)) await thaw(layer, this.log);
            await this.destroyCompletely(id);
            removed.push(`instance ${id}`);
          } catch (err) {
            errors.push(`instance ${id}: ${(err as Error).message}`);
          }
        }
      }),
    );
    // Namespaces, veths and rules whose instance is unknown (e.g. lost with its directory);
    // the network slots made ahead are kept.
    const kept: InstanceNetworkNames[] = [...[...keep].map((id) => this.handle(id)), ...this.networkSlots.names()];
    const keptNetns = new Set(kept.map((h) => h.netns));
    const keptIfs = new Set(kept.map((h) => h.hostIf));
    for (const netns of listNetns(this.tag)) {
      if (keptNetns.has(netns)) continue;
      await run('ip', ['netns', 'del', netns], { timeoutMs: 10_000 });
      removed.push(`netns ${netns}`);
    }
    for (const hostIf of await listHostInterfaces(this.tag)) {
      if (keptIfs.has(hostIf)) continue;
      await run('ip', ['link', 'del', hostIf], { timeoutMs: 10_000 });
      removed.push(`veth ${hostIf}`);
    }
    for (const hostIf of await egressInterfaces(this.tag)) {
      if (keptIfs.has(hostIf)) continue;
      await revokeEgress(this.tag, hostIf);
      removed.push(`egress rule ${hostIf}`);
    }
    for (const hostIf of await this.egress.allowlisted()) {
      if (keptIfs.has(hostIf)) continue;
      await removeAllowlist(this.tag, hostIf);
      removed.push(`egress allowlist ${hostIf}`);
    }
    for (const point of mountsUnder(this.instancesDir)) {
      const id = point.slice(this.instancesDir.length + 1).split('/')[0] ?? '';
      if (keep.has(id)) continue;
      await unmountAll(point);
      removed.push(`mount ${point}`);
    }
    // What could not be removed is reported after everything else was tried.
    if (errors.length > 0) throw new Error(`could not remove ${errors.join('; ')}`);
    return removed;
  }

  /** Removes the firewall table when no instance is left that it protects. */
  async close(): Promise<void> {
    // Releases under way finish first: a shutdown leaves no stopped instance's mounts,
    // network or lease behind.
    await this.releasesSettled();
    // Paused instances let go of their mounts (their resume mounts them again): a stopped
    // service leaves mounted only what its running instances use.
    const paused = new Set(mountsUnder(this.instancesDir).map((point) => point.slice(this.instancesDir.length + 1).split('/')[0] ?? ''));
    for (const id of paused) {
      if (id === '' || this.handles.has(id)) continue;
      await unmountAll(join(this.instancesDir, id)).catch((err: unknown) => this.log.warn({ instanceId: id, err }, "could not unmount a paused instance's layer at shutdown"));
    }
    this.commands.wakeAll();
    await this.networkSlots.close();
    await this.layerSlots.close();
    await this.egress.close();
    this.memoryGuard.stop();
    this.sandboxWatch.stop();
    await this.changeTracker.close();
    await this.images.close();
    if ((await this.list()).length === 0) await removeRuleset(this.tag);
  }

  /**
   * An instance's sandbox may hold its host cgroup's limit (memory_mb plus the headroom
   * the memory guard needs) and fill its writable layer, a sparse file of disk_mb; where
   * a pause keeps memory, its saved memory (at most memory_mb, uncompressed) is its disk
   * too, held for it from the start so that its pause finds the room.
   */
  hostCost(resources: MachineResources): HostCost {
    const savedMemoryMb = this.capabilities.pauseMemory ? resources.memory_mb : 0;
    return { memoryMb: sandboxMemoryLimitMb(resources.memory_mb), diskMb: resources.disk_mb + savedMemoryMb };
  }

  /** Its sandbox's host cgroup's memory without the host's file cache (host-usage.ts). */
  memoryInUseMb(instanceId: string): number | undefined {
    return measuredMemoryMb(instanceId);
  }

  startingMemoryMb(resources: MachineResources): number {
    return startingMemoryMb(resources);
  }

  /**
   * Freezes a ready instance's sandbox (freezer.ts): it uses no CPU until the next
   * operation on it, which thaws it first (handle()).
   */
  freeze(instanceId: string): boolean {
    const h = this.handles.get(instanceId);
    if (!h || this.layerWork.busy(instanceId)) return false;
    // Not while anything reaches into it: an operation that began (handle() was just
    // called) or a connection to its agent (a command, a file, a terminal) still open.
    if (Date.now() - (this.lastReached.get(instanceId) ?? 0) < FREEZE_AFTER_REACHED_MS) return false;
    const address = h.readMeta()?.guestAddress;
    if (address !== undefined && openAgentConnections(address) > 0) return false;
    if (!setFrozen(instanceId, true)) return false;
    this.frozen.add(instanceId);
    return true;
  }

  isFrozen(instanceId: string): boolean {
    return this.frozen.has(instanceId);
  }

  cpuUsedMs(instanceId: string): number | undefined {
    return this.handles.has(instanceId) ? cpuUsedMs(instanceId) : undefined;
  }

  /**
   * A running instance's egress policy, replaced: its rules (connections through the
   * proxy ended), its record, and the resolver its resolv.conf names.
   */
  async setNetwork(instanceId: string, network: NetworkPolicy): Promise<void> {
    const h = this.handle(instanceId);
    const meta = h.readMeta();
    if (!meta?.guestAddress) throw new Error(`instance ${instanceId} has no network record`);
    await this.egress.apply(instanceId, h.hostIf, meta.guestAddress, network, { cut: true });
    h.writeMeta({ ...(meta as InstanceMeta), egress: network.egress, network });
    const resolvConf = guestNameservers(network, this.dnsServers, meta.guestAddress).map((ns) => `nameserver ${ns}\n`).join('');
    const wrote = await this.exec(instanceId, ['sh', '-c', `printf '${resolvConf}' > /etc/resolv.conf`], { as: 'root', timeoutMs: 10_000 });
    if (wrote.code !== 0) this.log.warn({ instanceId, stderr: wrote.stderr }, "could not write the guest's resolv.conf for its new network");
  }

  /**
   * The instance's handle: the one kept for an instance this runtime runs, else made now.
   * Every operation on an instance starts here, so a frozen instance is thawed here
   * (synchronously: nothing can reach into it before it runs again).
   */
  private handle(instanceId: string): InstanceHandle {
    this.lastReached.set(instanceId, Date.now());
    if (this.frozen.delete(instanceId) && !setFrozen(instanceId, false)) {
      this.log.warn({ instanceId }, "could not thaw a frozen instance's sandbox (its cgroup is gone)");
    }
    return this.handles.get(instanceId) ?? new InstanceHandle(this.instancesDir, this.tag, instanceId);
  }
}

/** The last 2000 characters of a file, or '' when it cannot be read. */
function readTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-2000);
  } catch {
    return '';
  }
}

/** The promise's outcome, or a rejection as soon as the signal aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
