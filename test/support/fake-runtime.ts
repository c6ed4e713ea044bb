// A test double of the instance runtime for HTTP- and core-layer tests: it walks the
// lifecycle steps without making a machine. Never the runtime of `roomkit serve`.
import type { NetworkPolicy } from '../../src/network/egress/policy.ts';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import {
  type CommandOutcome,
  type CommandRequest,
  type FileAccess,
  type FileChangeEntry,
  GuestFileError,
  type GuestDirEntry,
  type GuestFileInfo,
  type HostCost,
  type MachineResources,
  type PauseOptions,
  type PauseOutcome,
  PROVISION_STEPS,
  type ProvisionRequest,
  type ProvisionStep,
  type ResumeOutcome,
  type ResumeRequest,
  type Runtime,
  type RuntimeEvent,
  type PortEndpoint,
  type RuntimeHealth,
  RuntimeFeatureUnavailable,
  type TerminalSession,
} from '../../src/runtimes/types.ts';

export interface FakeRuntimeOptions {
  /** Fail when this step is reached, with this message. */
  failAt?: { step: ProvisionStep; message: string };
  /** Pause before each step, ms. */
  stepDelayMs?: number;
  /** When set, provisioning waits at this step until release() is called. */
  holdAt?: ProvisionStep;
  /** What every command reports as the files it changed (default none). */
  commandChanges?: FileChangeEntry[];
  /** What every command's outcome says beyond the defaults (exit code 0, on its own). */
  commandOutcome?: Partial<CommandOutcome>;
  /** How long every command runs, ms (default: it answers at once). */
  commandDelayMs?: number;
  /** Where the host reaches the ports of every instance (e.g. 127.0.0.1, servers of the test); unset: nowhere. */
  portHost?: string;
  /** The runtime's own ports there. */
  reservedPorts?: number[];
}

export class FakeRuntime implements Runtime {
  readonly name = 'fake';
  readonly capabilities = { network: false, diskLimit: false, interactive: false, pause: false, pauseMemory: false, snapshot: false, freeze: false, snapshotMemory: false };
  /** Instances provisioned and not destroyed. */
  readonly live = new Set<string>();
  readonly destroyed: string[] = [];
  options: FakeRuntimeOptions;
  private releaseHold: (() => void) | undefined;
  private held: Promise<void> | undefined;

  constructor(options: FakeRuntimeOptions = {}) {
    this.options = options;
  }

  /** Lets provisioning held at `holdAt` go on. */
  release(): void {
    this.releaseHold?.();
    this.held = undefined;
  }

  async provision(request: ProvisionRequest): Promise<void> {
    this.live.add(request.instanceId);
    this.memoryOf.set(request.instanceId, request.spec.memory_mb);
    try {
      for (const step of PROVISION_STEPS) {
        if (this.options.stepDelayMs) await sleep(this.options.stepDelayMs, request.signal);
        if (this.options.holdAt === step) {
          this.held ??= new Promise<void>((resolve) => (this.releaseHold = resolve));
          await Promise.race([this.held, aborted(request.signal)]);
        }
        if (this.options.failAt?.step === step) throw new Error(this.options.failAt.message);
        await request.onStep(step);
      }
    } catch (err) {
      await this.destroy(request.instanceId);
      throw err;
    }
  }

  portEndpoint(instanceId: string): PortEndpoint | undefined {
    if (this.options.portHost === undefined || !this.live.has(instanceId)) return undefined;
    return { host: this.options.portHost, reservedPorts: this.options.reservedPorts ?? [] };
  }

  /** Each instance's network as it was last changed at run time (setNetwork). */
  readonly networks = new Map<string, NetworkPolicy>();

  async setNetwork(instanceId: string, network: NetworkPolicy): Promise<void> {
    if (!this.live.has(instanceId)) throw new Error(`instance ${instanceId} is not running`);
    this.networks.set(instanceId, network);
  }

  async destroy(instanceId: string): Promise<{ released: Promise<void> }> {
    if (this.live.delete(instanceId)) this.destroyed.push(instanceId);
    return { released: Promise.resolve() };
  }

  async list(): Promise<string[]> {
    return [...this.live];
  }

  async start(): Promise<void> {}

  async health(instanceId: string): Promise<RuntimeHealth> {
    return this.live.has(instanceId) ? { healthy: true } : { healthy: false, reason: 'not running' };
  }

  async adopt(): Promise<void> {}

  async sweep(keep: ReadonlySet<string>): Promise<string[]> {
    const removed = [...this.live].filter((id) => !keep.has(id));
    for (const id of removed) await this.destroy(id);
    return removed;
  }

  async close(): Promise<void> {}

  private readonly listeners: ((event: RuntimeEvent) => void)[] = [];

  onEvent(listener: (event: RuntimeEvent) => void): void {
    this.listeners.push(listener);
  }

  /** Reports an event as the real runtime would (e.g. a machine that ended by itself). */
  emit(event: RuntimeEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  /** A test double holds nothing of the host; it reports what was asked for. */
  hostCost(resources: MachineResources): HostCost {
    return { memoryMb: resources.memory_mb, diskMb: resources.disk_mb };
  }

  /** What memoryInUseMb() reports of an instance (MiB); an instance not in it: its memory_mb, once provisioned. */
  readonly memoryInUse = new Map<string, number>();
  private readonly memoryOf = new Map<string, number>();

  /** A live instance uses what the test set, else all of its memory_mb; one without a machine nothing measurable. */
  memoryInUseMb(instanceId: string): number | undefined {
    if (!this.live.has(instanceId)) return undefined;
    return this.memoryInUse.get(instanceId) ?? this.memoryOf.get(instanceId);
  }

  /** The double's instances start at their whole memory_mb. */
  startingMemoryMb(resources: MachineResources): number {
    return resources.memory_mb;
  }

  /** Files of each instance, by absolute path (a flat map: directories are implied). */
  readonly files = new Map<string, Map<string, Buffer>>();
  /** Directories made by makeDirectory, per instance (a file's directories are implied by its path). */
  readonly directories = new Map<string, Set<string>>();
  /** Commands it was asked to run. */
  readonly commands: CommandRequest[] = [];

  /** Answers every command with its text as output, exit code 0, and the changes the options name (none by default). */
  async runCommand(_instanceId: string, request: CommandRequest): Promise<CommandOutcome> {
    // As a runtime without interactive instances must (the runtime contract holds it to that).
    if (request.stdinOpen && !this.capabilities.interactive) throw new RuntimeFeatureUnavailable('the test runtime keeps no stdin open');
    this.commands.push(request);
    request.onStarted?.({ streamsApart: this.options.commandOutcome?.streams !== undefined });
    if (this.options.commandDelayMs) await new Promise((resolve) => setTimeout(resolve, this.options.commandDelayMs));
    const changes = this.options.commandChanges ?? [];
    return {
      output: request.command,
      outputBytes: request.command.length,
      outputTruncated: false,
      exitCode: 0,
      timedOut: false,
      changes,
      ...this.options.commandOutcome,
    };
  }

  readonly killed: string[] = [];

  async killCommand(_instanceId: string, commandId: string): Promise<number> {
    this.killed.push(commandId);
    return 1;
  }

  async sendInput(): Promise<boolean> {
    return false;
  }

  async openTerminal(): Promise<TerminalSession> {
    throw new RuntimeFeatureUnavailable('the test runtime has no terminals');
  }

  private fileMap(instanceId: string): Map<string, Buffer> {
    let map = this.files.get(instanceId);
    if (!map) this.files.set(instanceId, (map = new Map()));
    return map;
  }

  private find(instanceId: string, path: string, access: FileAccess): { absolute: string; data: Buffer } {
    const absolute = posix.resolve(access.home, path);
    const data = this.fileMap(instanceId).get(absolute);
    if (!data) throw new GuestFileError('not_found', `no file at ${absolute}`);
    return { absolute, data };
  }

  async openFile(instanceId: string, path: string, options: FileAccess & { maxBytes: number; range?: { start: number; end: number } }) {
    const { absolute, data } = this.find(instanceId, path, options);
    if (data.length > options.maxBytes) throw new GuestFileError('too_large', `${absolute} is too large`, data.length);
    const body = options.range ? data.subarray(options.range.start, options.range.end + 1) : data;
    return { info: infoOf(absolute, data), body: Readable.from([body]) };
  }

  async statFile(instanceId: string, path: string, options: FileAccess): Promise<GuestFileInfo> {
    const { absolute, data } = this.find(instanceId, path, options);
    return infoOf(absolute, data);
  }

  async writeFile(instanceId: string, path: string, data: Buffer, options: FileAccess) {
    const absolute = posix.resolve(options.home, path);
    const created = !this.fileMap(instanceId).has(absolute);
    this.fileMap(instanceId).set(absolute, data);
    return { info: infoOf(absolute, data), created };
  }

  async listDirectory(instanceId: string, path: string, options: FileAccess & { limit: number }) {
    const absolute = posix.resolve(options.home, path);
    const entries: GuestDirEntry[] = [
      ...[...this.dirSet(instanceId)]
        .filter((p) => posix.dirname(p) === absolute)
        .map((p) => ({ name: posix.basename(p), type: 'directory' as const, size: 0, mode: '755', mtime: new Date(0).toISOString() })),
      ...[...this.fileMap(instanceId)]
        .filter(([p]) => posix.dirname(p) === absolute)
        .map(([p, data]) => ({ name: posix.basename(p), type: 'file' as const, size: data.length, mode: '644', mtime: new Date(0).toISOString() })),
    ];
    return { path: absolute, entries: entries.slice(0, options.limit), truncated: entries.length > options.limit };
  }

  async deleteFile(instanceId: string, path: string, options: FileAccess) {
    const { absolute } = this.find(instanceId, path, options);
    this.fileMap(instanceId).delete(absolute);
    return { path: absolute };
  }

  private dirSet(instanceId: string): Set<string> {
    let set = this.directories.get(instanceId);
    if (!set) this.directories.set(instanceId, (set = new Set()));
    return set;
  }

  /** What is at `absolute` or under it: files and made directories. */
  private under(instanceId: string, absolute: string): { files: string[]; dirs: string[] } {
    const inside = (p: string) => p === absolute || p.startsWith(`${absolute}/`);
    return { files: [...this.fileMap(instanceId).keys()].filter(inside), dirs: [...this.dirSet(instanceId)].filter(inside) };
  }

  async makeDirectory(instanceId: string, path: string, options: FileAccess) {
    const absolute = posix.resolve(options.home, path);
    if (this.fileMap(instanceId).has(absolute)) throw new GuestFileError('not_a_directory', `${absolute} exists and is not a directory`);
    const created = !this.dirSet(instanceId).has(absolute);
    for (let p = absolute; p !== '/'; p = posix.dirname(p)) this.dirSet(instanceId).add(p);
    return { path: absolute, created };
  }

  async renamePath(instanceId: string, path: string, target: string, options: FileAccess) {
    const absolute = posix.resolve(options.home, path);
    const to = posix.resolve(options.home, target);
    const { files, dirs } = this.under(instanceId, absolute);
    if (files.length === 0 && dirs.length === 0) throw new GuestFileError('not_found', `no file at ${absolute}`);
    const moved = (p: string) => `${to}${p.slice(absolute.length)}`;
    for (const p of files) {
      const data = this.fileMap(instanceId).get(p)!;
      this.fileMap(instanceId).delete(p);
      this.fileMap(instanceId).set(moved(p), data);
    }
    for (const p of dirs) {
      this.dirSet(instanceId).delete(p);
      this.dirSet(instanceId).add(moved(p));
    }
    return { path: absolute, target: to };
  }

  async removeTree(instanceId: string, path: string, options: FileAccess) {
    const absolute = posix.resolve(options.home, path);
    const { files, dirs } = this.under(instanceId, absolute);
    if (files.length === 0 && dirs.length === 0) throw new GuestFileError('not_found', `no file at ${absolute}`);
    for (const p of files) this.fileMap(instanceId).delete(p);
    for (const p of dirs) this.dirSet(instanceId).delete(p);
    return { path: absolute };
  }
}

function infoOf(path: string, data: Buffer): GuestFileInfo {
  return { path, size: data.length, mtimeMs: 0, version: `${path}-${data.length}` };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/**
 * The test double for a runtime that can pause: a pause keeps the instance's files and
 * stops its machine, and says it kept its memory unless asked not to (a double has no
 * memory to keep; what it records is what a real runtime would have to restore).
 */
export class PausableFakeRuntime extends FakeRuntime {
  override readonly capabilities = { network: false, diskLimit: false, interactive: false, pause: true, pauseMemory: true, snapshot: false, freeze: false, snapshotMemory: false };
  /** Instances paused (their files kept, no machine), with whether their memory was kept. */
  readonly paused = new Map<string, { memoryKept: boolean }>();
  /** What each pause was asked, in order. */
  readonly pauseOptions: (PauseOptions | undefined)[] = [];
  /** When set, the next resume fails with this message. */
  failNextResume: string | undefined;
  /** When set, the next restore of a kept memory fails with this message (the resume falls back to files only). */
  failNextRestore: string | undefined;

  async pause(instanceId: string, options?: PauseOptions): Promise<PauseOutcome> {
    this.pauseOptions.push(options);
    const already = this.paused.get(instanceId);
    if (already) return already;
    this.live.delete(instanceId);
    const kept = { memoryKept: options?.memory ?? true };
    this.paused.set(instanceId, kept);
    return kept;
  }

  async resume(request: ResumeRequest): Promise<ResumeOutcome> {
    if (this.failNextResume !== undefined) {
      const message = this.failNextResume;
      this.failNextResume = undefined;
      throw new Error(message);
    }
    const kept = this.paused.get(request.instanceId);
    this.paused.delete(request.instanceId);
    this.live.add(request.instanceId);
    if (kept?.memoryKept && this.failNextRestore !== undefined) {
      const memoryLost = this.failNextRestore;
      this.failNextRestore = undefined;
      return { memoryRestored: false, memoryLost };
    }
    return { memoryRestored: kept?.memoryKept ?? false };
  }

  override async destroy(instanceId: string): Promise<{ released: Promise<void> }> {
    this.paused.delete(instanceId);
    return super.destroy(instanceId);
  }

  override async list(): Promise<string[]> {
    return [...this.live, ...this.paused.keys()];
  }
}
