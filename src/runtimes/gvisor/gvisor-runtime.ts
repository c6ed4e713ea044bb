// The gVisor runtime: each instance is a runsc sandbox (ptrace platform) in its own
// network namespace, on an overlay of the profile's cached image and a writable layer
// capped at disk_mb. Provisioning reports each lifecycle step as it completes and, if
// any step fails, undoes everything before rejecting.
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { run, runChecked, type RunResult } from '../../host/run.ts';
import { mountDiskImage, mountOverlay, mountsUnder, unmountAll } from '../../host/mounts.ts';
import { ImageStore, VM_UID } from '../../images/builder.ts';
import { OUTPUT_RELAY, ROOT_SERVICE } from '../../images/guest-additions.ts';
import { allowEgress, egressInterfaces, hostNetworks, installRuleset, removeRuleset, revokeEgress } from '../../network/firewall.ts';
import {
  createNetns,
  hostTag,
  createVethPair,
  listHostInterfaces,
  listNetns,
  networkNames,
  removeNetwork,
} from '../../network/netns.ts';
import type { AddressPool } from '../../network/pool.ts';
import { PassThrough, Readable, Transform } from 'node:stream';
import { mimeTypeByExtension, sniffMimeType } from '../../core/mime.ts';
import {
  GuestFileError,
  type CommandOutcome,
  type CommandRequest,
  type CommandSignal,
  type FileAccess,
  type FileChangeEntry,
  type GuestDirEntry,
  type GuestFileInfo,
  type ProvisionRequest,
  type Runtime,
  type RuntimeHealth,
} from '../types.ts';
import { diffLayers, layerWalker, listLayer, type LowerIndex, lowerIndexOf } from './changes.ts';
import { COMMAND_MARKER, type ExecChild, KILL_SCRIPT, shellQuote, superviseCommand } from './commands.ts';
import { absoluteGuestPath, FILE_SCRIPT, fileError, parseInfo, parseListing } from './guest-files.ts';
import { ociSpec, PATH_ENV } from './bundle.ts';
import { removeCgroups, unfreezeMemory } from './cgroups.ts';
import { MemoryGuard, type Victim } from './memory-guard.ts';
import { Runsc } from './runsc.ts';

const BOOT_TIMEOUT_MS = 15_000;
/** File operations other than streaming a file's content. */
const FILE_OP_TIMEOUT_MS = 60_000;
/** Streaming a file's content out of the instance. */
const FILE_STREAM_TIMEOUT_MS = 10 * 60_000;
/** Pipes of background processes kept open per instance; the oldest is closed beyond it. */
const MAX_LINGERING_PIPES = 64;
/** Files whose type is read from their first bytes per command; the rest get a type by extension or none. */
const MAX_SNIFFED_FILES = 200;
const SNIFF_BYTES = 512;

export interface GvisorOptions {
  dataDir: string;
  pool: AddressPool;
  images: ImageStore;
  log: Logger;
  dnsServers: string[];
}

/** What the runtime keeps about an instance next to its files (instance.json). */
interface InstanceMeta {
  instanceId: string;
  imageKey: string;
  netns: string;
  hostIf: string;
  guestIf: string;
  home: string;
  egress: string;
  memoryMb: number;
}

export interface ExecOptions {
  /** `vm`: the profile's unprivileged user in its home; `root`: root in /. */
  as: 'vm' | 'root';
  home?: string;
  env?: string[];
  timeoutMs: number;
}

export class GvisorRuntime implements Runtime {
  readonly name = 'gvisor';
  readonly capabilities = { network: true, diskLimit: true };
  private readonly runsc: Runsc;
  private readonly instancesDir: string;
  private readonly pool: AddressPool;
  private readonly images: ImageStore;
  private readonly log: Logger;
  private readonly dnsServers: string[];
  /** Marks this data directory's names on the host (namespaces, interfaces, rules). */
  readonly tag: string;
  private readonly memoryGuard: MemoryGuard;
  private walker: Promise<string> | undefined;
  /** Per image: what its root filesystem holds, to read writable-layer changes against. */
  private readonly lowerIndexes = new Map<string, Promise<LowerIndex>>();
  /** Per image: whether it has the output relay. */
  private readonly relayInImage = new Map<string, boolean>();
  /** Per instance: output pipes still held by background processes of finished commands. */
  private readonly lingering = new Map<string, Set<Readable>>();

  constructor(options: GvisorOptions) {
    this.runsc = new Runsc({ root: join(options.dataDir, 'runsc') });
    this.instancesDir = join(options.dataDir, 'instances');
    this.pool = options.pool;
    this.images = options.images;
    this.log = options.log;
    this.dnsServers = options.dnsServers;
    mkdirSync(this.runsc.root, { recursive: true, mode: 0o700 });
    mkdirSync(this.instancesDir, { recursive: true, mode: 0o700 });
    this.tag = hostTag(options.dataDir);
    this.memoryGuard = new MemoryGuard({
      log: this.log,
      killLargest: (id) => this.killLargest(id),
      killUser: async (id) => {
        // Again until none is left: a process may fork between the listing and the kill.
        const script = `n=$(ps -u ${VM_UID} --no-headers | wc -l); i=0; while pkill -KILL -u ${VM_UID} && [ $i -lt 50 ]; do i=$((i+1)); sleep 0.1; done; echo $n`;
        const result = await this.exec(id, ['sh', '-c', script], {
          as: 'root',
          timeoutMs: 10_000,
        });
        return Number(result.stdout.trim()) || 0;
      },
    });
  }

  /** Installs the firewall table; instances already running get their egress back from adopt(). */
  async start(): Promise<void> {
    const addresses = await runChecked('ip', ['-4', '-o', 'addr', 'show'], { timeoutMs: 10_000 });
    await installRuleset({
      tag: this.tag,
      poolCidr: this.pool.cidr,
      dnsServers: this.dnsServers,
      hostNetworks: hostNetworks(addresses.stdout, this.pool.cidr),
    });
  }

  async provision(request: ProvisionRequest): Promise<void> {
    const { instanceId, spec, signal, log, onStep } = request;
    const names = networkNames(this.tag, instanceId);
    const dir = join(this.instancesDir, instanceId);
    try {
      // Still `active`: the image is built once per profile and cached.
      // A build can take minutes: a delete or a shutdown does not wait for it (the build
      // itself goes on for others that need it, or is stopped when the service stops).
      const image = await untilAborted(
        this.images.ensure({ image: spec.image, packages: spec.packages, user: spec.user, home: spec.home }, log, request.onProgress),
        signal,
      );
      signal.throwIfAborted();
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      const meta: InstanceMeta = { instanceId, imageKey: image.key, ...names, home: spec.home, egress: spec.network.egress, memoryMb: spec.memory_mb };
      writeFileSync(join(dir, 'instance.json'), `${JSON.stringify(meta)}\n`);

      const lease = await this.pool.allocate(instanceId);
      await createNetns(names.netns);
      await onStep('network_allocated');

      await createVethPair(names, lease);
      if (spec.network.egress === 'internet') await allowEgress(this.tag, names.hostIf);
      await onStep('ftap_created');

      const layer = join(dir, 'layer');
      const rootfs = join(dir, 'rootfs');
      mkdirSync(layer, { recursive: true });
      mkdirSync(rootfs, { recursive: true });
      await mountDiskImage(join(dir, 'disk.img'), layer, spec.disk_mb);
      mkdirSync(join(layer, 'upper'), { recursive: true });
      mkdirSync(join(layer, 'work'), { recursive: true });
      await mountOverlay({ lower: image.rootfs, upper: join(layer, 'upper'), work: join(layer, 'work'), target: rootfs });
      // No guest code has run yet, so writing into its root from the host is safe.
      this.writeGuestConfig(rootfs, instanceId, spec.network.egress === 'internet');
      const bundle = join(dir, 'bundle');
      mkdirSync(bundle, { recursive: true });
      writeFileSync(join(bundle, 'config.json'), JSON.stringify(ociSpec({ instanceId, rootfs, hostname: 'roomkit', spec })));
      await onStep('image_generated');

      await this.runsc.create(names.netns, instanceId, bundle, join(dir, 'console.log'));
      this.guardMemory(instanceId, spec.memory_mb);
      await this.runsc.start(names.netns, instanceId);
      await onStep('vm_started');

      await this.waitForInit(instanceId, signal);
      await this.startRootService(instanceId);
      await onStep('vm_booted');

      const check = await this.exec(instanceId, ['sh', '-c', 'cd "$HOME" && test -w . && id -u'], {
        as: 'vm',
        home: spec.home,
        timeoutMs: BOOT_TIMEOUT_MS,
      });
      if (check.code !== 0 || check.stdout.trim() !== String(VM_UID)) {
        throw new Error(`readiness check failed: a command as ${spec.user} in ${spec.home} answered ${check.code}: ${(check.stderr || check.stdout).trim()}`);
      }
      await onStep('ready');
      // The first command's files_changed needs the image's index: build it now.
      this.lowerIndex(instanceId).catch((err: unknown) => log.warn({ err }, 'could not index the image'));
    } catch (err) {
      try {
        await this.destroy(instanceId);
      } catch (cleanupErr) {
        log.error({ err: cleanupErr }, 'cleanup after a failed start failed');
      }
      throw err;
    }
  }

  /** Runs a program in the instance (no shell unless asked for), bounded by a deadline. */
  async exec(instanceId: string, argv: string[], options: ExecOptions): Promise<RunResult> {
    const names = networkNames(this.tag, instanceId);
    const identity =
      options.as === 'vm'
        ? [`--user=${VM_UID}:${VM_UID}`, `--cwd=${options.home ?? '/'}`, `--env=HOME=${options.home ?? '/'}`]
        : ['--user=0:0', '--cwd=/', '--env=HOME=/root'];
    const env = [PATH_ENV, ...(options.env ?? [])].map((e) => `--env=${e}`);
    return this.runsc.call(names.netns, ['exec', ...identity, ...env, instanceId, ...asUser(options.as, argv)], { timeoutMs: options.timeoutMs });
  }

  async destroy(instanceId: string): Promise<void> {
    const names = networkNames(this.tag, instanceId);
    const dir = join(this.instancesDir, instanceId);
    const netnsExists = existsSync(`/var/run/netns/${names.netns}`);
    // In reverse order of provisioning: sandbox, mounts, writable layer, rules, veth and
    // namespace, address.
    this.memoryGuard.unwatch(instanceId);
    for (const pipe of this.lingering.get(instanceId) ?? []) pipe.destroy();
    this.lingering.delete(instanceId);
    // A sandbox frozen at its memory ceiling cannot even die: let it run free first.
    unfreezeMemory(instanceId);
    await this.runsc.destroy(netnsExists ? names.netns : null, instanceId);
    await unmountAll(dir);
    rmSync(dir, { recursive: true, force: true });
    await revokeEgress(this.tag, names.hostIf);
    await removeNetwork(names);
    await this.pool.release(instanceId);
    removeCgroups(instanceId);
  }

  /** Starts `runsc exec` of a program in the instance, for callers that stream its input or output. */
  private spawnExec(
    instanceId: string,
    argv: string[],
    options: { as: 'vm' | 'root'; home?: string; env?: Record<string, string>; combineOutput?: boolean },
  ): ExecChild {
    const names = networkNames(this.tag, instanceId);
    const identity =
      options.as === 'vm'
        ? [`--user=${VM_UID}:${VM_UID}`, `--cwd=${options.home ?? '/'}`, `--env=HOME=${options.home ?? '/'}`]
        : ['--user=0:0', '--cwd=/', '--env=HOME=/root'];
    const env = [PATH_ENV, ...Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`)].map((e) => `--env=${e}`);
    return this.runsc.spawn(names.netns, ['exec', ...identity, ...env, instanceId, ...asUser(options.as, argv)], {
      combineOutput: options.combineOutput ?? false,
    });
  }

  async runCommand(instanceId: string, request: CommandRequest): Promise<CommandOutcome> {
    const upper = join(this.instancesDir, instanceId, 'layer', 'upper');
    const walker = request.trackChanges ? await this.layerWalker() : undefined;
    const lower = request.trackChanges ? this.lowerIndex(instanceId) : undefined;
    const before = walker ? await listLayer(walker, upper) : undefined;
    const script = request.cwd === undefined ? request.command : `cd -- ${shellQuote(request.cwd)} || exit 1\n${request.command}`;
    // Through the relay, so that output never meets the host pipe's EAGAIN (guest/relay.c).
    const child = this.spawnExec(instanceId, [...this.relay(instanceId), '/bin/sh', '-c', script], {
      as: 'vm',
      home: request.home,
      env: { LANG: 'C.UTF-8', ...request.env, [COMMAND_MARKER]: request.commandId },
      combineOutput: true,
    });
    const outcome = await superviseCommand(child, {
      timeoutMs: request.timeoutMs,
      maxOutputBytes: request.maxOutputBytes,
      ...(request.onOutput ? { onOutput: request.onOutput } : {}),
      killTree: async () => void (await this.killCommand(instanceId, request.commandId)),
    });
    if (outcome.lingering) this.keepDraining(instanceId, outcome.lingering);
    let changes: FileChangeEntry[] | null = null;
    if (walker && before && lower) {
      changes = diffLayers(before, await listLayer(walker, upper), await lower);
      await this.addMimeTypes(instanceId, changes);
    }
    return {
      output: outcome.output,
      outputBytes: outcome.outputBytes,
      outputTruncated: outcome.outputTruncated,
      exitCode: outcome.exitCode,
      timedOut: outcome.timedOut,
      changes,
    };
  }

  /** Signals every process of a command, as root inside the instance. */
  async killCommand(instanceId: string, commandId: string, signal: CommandSignal = 'KILL'): Promise<number> {
    const result = await this.exec(instanceId, ['sh', '-c', KILL_SCRIPT, 'sh', commandId, signal], { as: 'root', timeoutMs: 30_000 });
    if (result.code !== 0) this.log.warn({ instanceId, commandId, code: result.code, stderr: result.stderr }, 'a killed command left processes behind');
    return Number.parseInt(result.stdout.trim(), 10) || 0;
  }

  /** Reads on from a pipe that background processes hold, so their writes do not fail, until they end. */
  private keepDraining(instanceId: string, pipe: Readable): void {
    let pipes = this.lingering.get(instanceId);
    if (!pipes) this.lingering.set(instanceId, (pipes = new Set()));
    const set = pipes;
    pipe.on('close', () => set.delete(pipe));
    pipe.resume();
    set.add(pipe);
    if (set.size > MAX_LINGERING_PIPES) {
      const oldest = set.values().next().value;
      oldest?.destroy();
      if (oldest) set.delete(oldest);
    }
  }

  /** Types changed files: by extension, else from their first bytes read inside the instance. */
  private async addMimeTypes(instanceId: string, changes: FileChangeEntry[]): Promise<void> {
    const unknown: FileChangeEntry[] = [];
    for (const change of changes) {
      if (change.status === 'deleted') continue;
      const byExtension = mimeTypeByExtension(change.path);
      if (byExtension) change.mimeType = byExtension;
      else if (unknown.length < MAX_SNIFFED_FILES) unknown.push(change);
    }
    if (unknown.length === 0) return;
    // Each file's first bytes, preceded by their count; as root, since root may have made them.
    const script = `for f; do n=$(head -c ${SNIFF_BYTES} -- "$f" 2>/dev/null | wc -c); echo "$n"; head -c "$n" -- "$f" 2>/dev/null; done`;
    const child = this.spawnExec(instanceId, ['sh', '-c', script, 'sh', ...unknown.map((c) => c.path)], { as: 'root' });
    const { stdout } = await collect(child, FILE_OP_TIMEOUT_MS);
    let offset = 0;
    for (const change of unknown) {
      const newline = stdout.indexOf(10, offset);
      if (newline < 0) break;
      const count = Number(stdout.toString('latin1', offset, newline));
      const head = stdout.subarray(newline + 1, newline + 1 + count);
      offset = newline + 1 + count;
      change.mimeType = sniffMimeType(head, count < SNIFF_BYTES);
    }
  }

  private layerWalker(): Promise<string> {
    this.walker ??= layerWalker(this.images.dir);
    this.walker.catch(() => (this.walker = undefined));
    return this.walker;
  }

  /** The index of the instance's image, built once per image and process. */
  private lowerIndex(instanceId: string): Promise<LowerIndex> {
    const key = this.readMeta(instanceId)?.imageKey;
    if (key === undefined) return Promise.reject(new Error(`instance ${instanceId} has no image record`));
    let index = this.lowerIndexes.get(key);
    if (!index) {
      index = this.layerWalker().then((walker) => listLayer(walker, this.images.rootfsOf(key))).then(lowerIndexOf);
      index.catch(() => this.lowerIndexes.delete(key));
      this.lowerIndexes.set(key, index);
    }
    return index;
  }

  private fileOp(instanceId: string, access: FileAccess, args: string[]): ExecChild {
    // File contents come through the relay too, so a busy host never cuts them short.
    const relay = this.relay(instanceId);
    return this.spawnExec(instanceId, [...relay, ...(relay.length > 0 ? ['--stdout-only'] : []), 'sh', '-c', FILE_SCRIPT, 'sh', ...args], {
      as: 'vm',
      home: access.home,
    });
  }

  /**
   * The output relay to run a program through: its path when the instance's image has
   * it, else nothing (an instance adopted from an image built before the relay existed).
   * Looked up in the image, which roomkit built and the guest cannot change.
   */
  private relay(instanceId: string): string[] {
    const key = this.readMeta(instanceId)?.imageKey;
    if (key === undefined) return [];
    let has = this.relayInImage.get(key);
    if (has === undefined) {
      has = existsSync(join(this.images.rootfsOf(key), OUTPUT_RELAY));
      this.relayInImage.set(key, has);
    }
    return has ? [OUTPUT_RELAY] : [];
  }

  async openFile(
    instanceId: string,
    path: string,
    options: FileAccess & { maxBytes: number; range?: { start: number; end: number } },
  ): Promise<{ info: GuestFileInfo; body: NodeJS.ReadableStream }> {
    const absolute = absoluteGuestPath(path, options.home);
    const range = options.range ? [String(options.range.start), String(options.range.end - options.range.start + 1)] : ['0', '-1'];
    const child = this.fileOp(instanceId, options, ['read', path, ...range]);
    const { header, body } = await headerThenBody(child, absolute, FILE_STREAM_TIMEOUT_MS);
    const info = parseInfo(header, absolute);
    if (info.size > options.maxBytes) {
      body.destroy();
      throw new GuestFileError('too_large', `${absolute} is ${info.size} bytes, more than the ${options.maxBytes} served`, info.size);
    }
    // The file may grow while it is read: never send more than the size announced.
    const expected = options.range ? Math.min(options.range.end + 1, info.size) - options.range.start : info.size;
    return { info, body: capStream(body, Math.max(0, expected)) };
  }

  async statFile(instanceId: string, path: string, options: FileAccess): Promise<GuestFileInfo> {
    const absolute = absoluteGuestPath(path, options.home);
    const result = await collect(this.fileOp(instanceId, options, ['stat', path]), FILE_OP_TIMEOUT_MS);
    throwIfFailed(result, absolute);
    return parseInfo(result.stdout.toString('utf8'), absolute);
  }

  async writeFile(instanceId: string, path: string, data: Buffer, options: FileAccess): Promise<{ info: GuestFileInfo; created: boolean }> {
    const absolute = absoluteGuestPath(path, options.home);
    const result = await collect(this.fileOp(instanceId, options, ['write', path]), FILE_OP_TIMEOUT_MS, data);
    throwIfFailed(result, absolute);
    const [line = '', existed = '0'] = result.stdout.toString('utf8').trim().split('\n');
    return { info: parseInfo(line, absolute), created: existed.trim() !== '1' };
  }

  async listDirectory(
    instanceId: string,
    path: string,
    options: FileAccess & { limit: number },
  ): Promise<{ path: string; entries: GuestDirEntry[]; truncated: boolean }> {
    const absolute = absoluteGuestPath(path, options.home);
    const result = await collect(this.fileOp(instanceId, options, ['list', path, String(options.limit + 1)]), FILE_OP_TIMEOUT_MS);
    throwIfFailed(result, absolute);
    const entries = parseListing(result.stdout);
    return { path: absolute, entries: entries.slice(0, options.limit), truncated: entries.length > options.limit };
  }

  async deleteFile(instanceId: string, path: string, options: FileAccess): Promise<{ path: string }> {
    const absolute = absoluteGuestPath(path, options.home);
    throwIfFailed(await collect(this.fileOp(instanceId, options, ['delete', path]), FILE_OP_TIMEOUT_MS), absolute);
    return { path: absolute };
  }

  async health(instanceId: string): Promise<RuntimeHealth> {
    const names = networkNames(this.tag, instanceId);
    if (!existsSync(`/var/run/netns/${names.netns}`)) return { healthy: false, reason: 'its network namespace is gone' };
    const state = await this.runsc.state(names.netns, instanceId);
    if (!state) return { healthy: false, reason: 'runsc does not know its sandbox' };
    if (state.status !== 'running') return { healthy: false, reason: `its sandbox is ${state.status}` };
    const probe = await this.exec(instanceId, ['/bin/true'], { as: 'root', timeoutMs: 10_000 });
    if (probe.code !== 0) return { healthy: false, reason: `its init does not answer (exit ${probe.code})` };
    return { healthy: true };
  }

  async adopt(instanceId: string): Promise<void> {
    const meta = this.readMeta(instanceId);
    if (meta?.egress === 'internet') await allowEgress(this.tag, networkNames(this.tag, instanceId).hostIf);
    if (meta?.memoryMb !== undefined) this.guardMemory(instanceId, meta.memoryMb);
    this.lowerIndex(instanceId).catch((err: unknown) => this.log.warn({ instanceId, err }, 'could not index the image'));
  }

  private guardMemory(instanceId: string, memoryMb: number): void {
    if (!this.memoryGuard.watch(instanceId, memoryMb)) {
      this.log.warn({ instanceId }, 'no v1 memory cgroup for the sandbox: only the host limit applies to its memory');
    }
  }

  /**
   * Kills the process with the largest resident memory in the instance: among the VM
   * user's processes first, so that root's (ours included) are taken only when nothing
   * else is left; never the init.
   */
  private async killLargest(instanceId: string): Promise<Victim | null> {
    const script = [
      'ps -eo pid=,uid=,rss=,comm= --sort=-rss > /tmp/.roomkit-oom',
      'v=$(awk \'$1 != 1 && $2 != 0 { print; exit }\' /tmp/.roomkit-oom)',
      // Root's processes only when they are big (> 10 MiB): never the small helpers the
      // service itself runs inside.
      '[ -n "$v" ] || v=$(awk \'$1 != 1 && $3 > 10240 { print; exit }\' /tmp/.roomkit-oom)',
      'rm -f /tmp/.roomkit-oom',
      '[ -n "$v" ] || exit 0',
      'set -- $v',
      'kill -9 "$1" && echo "$1 $3 $4"',
    ].join('\n');
    const result = await this.exec(instanceId, ['sh', '-c', script], { as: 'root', timeoutMs: 10_000 });
    const match = /^(\d+) (\d+) (.*)$/m.exec(result.stdout);
    return match ? { pid: Number(match[1]), rssKb: Number(match[2]), command: match[3] ?? '' } : null;
  }

  async list(): Promise<string[]> {
    const ids = new Set<string>([...(await this.runsc.list()), ...(await this.pool.leasedInstances())]);
    for (const name of existsSync(this.instancesDir) ? readdirSync(this.instancesDir) : []) ids.add(name);
    return [...ids];
  }

  async sweep(keep: ReadonlySet<string>): Promise<string[]> {
    const removed: string[] = [];
    const errors: string[] = [];
    for (const id of await this.list()) {
      if (keep.has(id)) continue;
      try {
        await this.destroy(id);
        removed.push(`instance ${id}`);
      } catch (err) {
        errors.push(`instance ${id}: ${(err as Error).message}`);
      }
    }
    // Namespaces, veths and rules whose instance is unknown (e.g. lost with its directory).
    const kept = new Set([...keep].map((id) => networkNames(this.tag, id)));
    const keptNetns = new Set([...kept].map((n) => n.netns));
    const keptIfs = new Set([...kept].map((n) => n.hostIf));
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
    this.memoryGuard.stop();
    await this.images.close();
    if ((await this.list()).length === 0) await removeRuleset(this.tag);
  }

  private async waitForInit(instanceId: string, signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + BOOT_TIMEOUT_MS;
    let last = '';
    while (Date.now() < deadline) {
      signal.throwIfAborted();
      const result = await this.exec(instanceId, ['/bin/true'], { as: 'root', timeoutMs: BOOT_TIMEOUT_MS });
      if (result.code === 0) return;
      last = result.stderr.trim();
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the sandbox's init did not answer within ${BOOT_TIMEOUT_MS / 1000} s${last ? `: ${last}` : ''}`);
  }

  /**
   * Starts the guest's root service (images/guest/rootd.py), through which its `sudo`
   * works; images without it or without python3 simply have no sudo.
   */
  private async startRootService(instanceId: string): Promise<void> {
    // Started in the background from a shell inside (this runsc's `exec --detach` fails),
    // with no descriptor of ours, so it outlives this call and holds no pipe open.
    const script = `[ -f ${ROOT_SERVICE} ] && command -v python3 >/dev/null || exit 0; setsid python3 ${ROOT_SERVICE} </dev/null >/dev/null 2>&1 &`;
    const result = await this.exec(instanceId, ['sh', '-c', script], { as: 'root', timeoutMs: BOOT_TIMEOUT_MS });
    if (result.code !== 0) {
      throw new Error(`could not start the instance's root service (exit ${result.code}${result.timedOut ? ', timed out' : ''}): ${(result.stderr || result.stdout).trim()}`);
    }
  }

  private writeGuestConfig(rootfs: string, instanceId: string, egress: boolean): void {
    const nameservers = egress ? this.dnsServers : [];
    writeFileSync(join(rootfs, 'etc', 'resolv.conf'), nameservers.map((ns) => `nameserver ${ns}\n`).join(''));
    writeFileSync(join(rootfs, 'etc', 'hostname'), 'roomkit\n');
    writeFileSync(join(rootfs, 'etc', 'hosts'), '127.0.0.1\tlocalhost roomkit\n::1\tlocalhost ip6-localhost ip6-loopback\n');
    const tmp = join(rootfs, 'tmp');
    mkdirSync(tmp, { recursive: true });
    chmodSync(tmp, 0o1777);
    this.log.debug({ instanceId }, 'guest configuration written');
  }

  private readMeta(instanceId: string): Partial<InstanceMeta> | undefined {
    try {
      return JSON.parse(readFileSync(join(this.instancesDir, instanceId, 'instance.json'), 'utf8')) as Partial<InstanceMeta>;
    } catch {
      return undefined;
    }
  }
}

/**
 * The argv to exec for a user. This runsc gives the first process of `exec --user=N`
 * the sandbox's capabilities (CAP_DAC_OVERRIDE among them) whatever N is; an execve
 * by a non-root user drops them, so the VM user's programs start through env(1) and
 * no code of theirs runs with them.
 */
function asUser(as: 'vm' | 'root', argv: string[]): string[] {
  return as === 'vm' ? ['/usr/bin/env', '--', ...argv] : argv;
}

interface Collected {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** Feeds `input` to a started exec and gathers what it prints; killed after `timeoutMs`. */
function collect(child: ExecChild, timeoutMs: number, input?: Buffer): Promise<Collected> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdin.on('error', () => {}); // the program may exit before reading all of it
    child.stdin.end(input);
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4000)));
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(chunks), stderr });
    });
  });
}

function throwIfFailed(result: Collected, path: string): void {
  if (result.code === 0) return;
  throw fileError(result.code, path, result.stderr.trim()) ?? new Error(`file operation on ${path} failed (exit ${result.code}): ${result.stderr.trim()}`);
}

/**
 * Waits for the first line a file read prints (the file's info), then hands back the
 * rest of its output as the body stream. Destroying the body kills the read.
 */
function headerThenBody(child: ExecChild, path: string, timeoutMs: number): Promise<{ header: string; body: Readable }> {
  return new Promise((resolve, reject) => {
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4000)));
    let pending = Buffer.alloc(0);
    let resolved = false;
    const onData = (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const newline = pending.indexOf(10);
      if (newline < 0) {
        if (pending.length > 4096) child.kill('SIGKILL');
        return;
      }
      resolved = true;
      child.stdout.off('data', onData);
      child.stdout.pause();
      const body = new PassThrough();
      body.write(pending.subarray(newline + 1));
      child.stdout.pipe(body);
      body.on('close', () => {
        clearTimeout(timer);
        if (child.exitCode === null) child.kill('SIGKILL');
      });
      resolve({ header: pending.toString('utf8', 0, newline), body });
    };
    child.stdout.on('data', onData);
    child.on('error', (err) => {
      clearTimeout(timer);
      if (!resolved) reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (resolved) return;
      reject(fileError(code, path, stderr.trim()) ?? new Error(`reading ${path} failed (exit ${code}): ${stderr.trim()}`));
    });
  });
}

/** At most `limit` bytes of `source`; the source is destroyed (its read killed) once they are through. */
function capStream(source: Readable, limit: number): Readable {
  if (limit === 0) {
    source.destroy();
    return Readable.from([]);
  }
  let left = limit;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (left <= 0) return done();
      const part = chunk.length > left ? chunk.subarray(0, left) : chunk;
      left -= part.length;
      done(null, part);
      if (left <= 0) {
        this.push(null);
        source.destroy();
      }
    },
  });
  source.on('error', (err) => out.destroy(err));
  source.pipe(out);
  out.on('close', () => source.destroy());
  return out;
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
