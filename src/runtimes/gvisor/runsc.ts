// Calls to runsc. Every call for a container uses the same global flags (runsc keeps
// some in the sandbox's state and reads others on each call, so a call with other
// flags can misread a running sandbox) and runs inside the container's network
// namespace; every call has a deadline: a hung runsc is killed, not waited on. The
// sandbox runs gVisor's own network stack (netstack) on the namespace's veth.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { PACKAGE_ROOT } from '../../config.ts';
import { HostCommandError, type RunOptions, type RunResult, run, runChecked } from '../../host/run.ts';
import { netnsPath } from '../../network/netns.ts';

export const RUNSC_TIMEOUT_MS = 30_000;

/**
 * The runsc program: ROOMKIT_RUNSC names another build (a path), else `runsc` on PATH.
 * Read from the environment rather than the service's configuration because tests,
 * benchmarks and `roomkit doctor` call the same runsc as the runtime.
 */
export function runscBinary(env: NodeJS.ProcessEnv = process.env): string {
  return env.ROOMKIT_RUNSC?.trim() || 'runsc';
}

export const RUNSC_PLATFORMS = ['systrap', 'ptrace'] as const;
export type RunscPlatform = (typeof RUNSC_PLATFORMS)[number];

/**
 * The platform that runs the guest's system calls: systrap unless ROOMKIT_RUNSC_PLATFORM
 * says ptrace. Chosen by measurement (docs/architecture.md, "runsc's platform"): about
 * as fast, and a sandbox under systrap levels off at about a hundred host tasks where
 * under ptrace they grow with the guest processes it has run (traced host processes
 * kept for reuse).
 */
export function runscPlatform(env: NodeJS.ProcessEnv = process.env): RunscPlatform {
  const value = env.ROOMKIT_RUNSC_PLATFORM?.trim() || 'systrap';
  if (!(RUNSC_PLATFORMS as readonly string[]).includes(value)) {
    throw new Error(`ROOMKIT_RUNSC_PLATFORM must be one of ${RUNSC_PLATFORMS.join(', ')} (it is ${JSON.stringify(value)})`);
  }
  return value as RunscPlatform;
}

/** The runsc version scripts/setup installs (packaging/runsc-version: its one place). */
export function pinnedRunscVersion(): string {
  return readFileSync(join(PACKAGE_ROOT, 'packaging', 'runsc-version'), 'utf8').trim();
}

/**
 * Whether runsc's version (as `runsc --version` prints it, e.g. `0.0~20240729.0`) is at
 * least the pinned one: gVisor's versions are release dates, compared as numbers.
 */
export function runscAtLeast(version: string, pinned: string): boolean {
  const date = (v: string) => Number(/(\d{8})/.exec(v)?.[1] ?? 0);
  return date(version) >= date(pinned);
}

/**
 * Runs a program in a mount namespace of its own where /proc/sys/net is an empty tmpfs.
 * runsc refuses its own network stack when it thinks it is in the host's network
 * namespace, which it decides by whether /proc/sys/net/core/rmem_default exists: on
 * newer kernels it exists in every namespace. Costs about 5 ms; `create`, `start` and
 * `restore` need it. The host's mounts are untouched: the sandbox's processes start
 * from that namespace and move into mount namespaces of their own.
 */
export function withHiddenNetSysctls(argv: string[]): string[] {
  return [
    'unshare', '--mount', '--propagation', 'private', '--',
    'sh', '-c', 'mount -t tmpfs -o size=4k,mode=555 roomkit-netstack /proc/sys/net && exec "$@"', 'sh',
    ...argv,
  ];
}

/** Subcommands that start sandbox processes, and so must not see /proc/sys/net (withHiddenNetSysctls). */
const STARTS_SANDBOX = new Set(['create', 'start', 'restore', 'run', 'do']);
/** Subcommands that leave the sandbox and its gofer running after they exit: run under the subreaper when there is one. */
const LEAVES_DAEMONS = new Set(['create', 'restore']);

export class Runsc {
  readonly root: string;
  readonly binary: string;
  readonly platform: RunscPlatform;
  /** `sandbox` (gVisor's network stack) for every instance; `host` only for the benchmarks' comparison. */
  readonly network: 'sandbox' | 'host';
  /**
   * The subreaper program (host/subreaper.ts) that `create` and `restore` run under, so
   * that a sandbox that ends is reaped at once and its `delete` (which waits for that)
   * takes milliseconds instead of the host init's second or more; unset, they run as
   * they are.
   */
  private subreaper: string | undefined;

  constructor(options: { root: string; binary?: string; platform?: RunscPlatform; network?: 'sandbox' | 'host' }) {
    this.root = options.root;
    this.binary = options.binary ?? runscBinary();
    this.platform = options.platform ?? runscPlatform();
    this.network = options.network ?? 'sandbox';
  }

  /**
   * The same for every call. --net-disconnect-ok lets a checkpoint drop established TCP
   * connections (without it, a single one, even in TIME_WAIT, fails the checkpoint).
   * --overlay2=none: by default this runsc puts its own overlay over the root (its upper
   * layer a file in the sandbox's memory, `.gvisor.filestore.<id>` in the rootfs), so
   * the guest's writes would never reach the writable layer the host reads (changes,
   * snapshots, a files-only pause) and a second sandbox over the same rootfs is refused.
   */
  globalFlags(): string[] {
    return [`--root=${this.root}`, `--network=${this.network}`, `--platform=${this.platform}`, '--net-disconnect-ok', '--overlay2=none'];
  }

  /** Runs the calls that leave a sandbox behind under this subreaper program from now on. */
  useSubreaper(program: string): void {
    this.subreaper = program;
  }

  /** The whole command line of `runsc <args>` in the namespace `netns` (or the host's when null). */
  argv(netns: string | null, args: string[]): string[] {
    let argv = [this.binary, ...this.globalFlags(), ...args];
    if (STARTS_SANDBOX.has(args[0] ?? '')) argv = withHiddenNetSysctls(argv);
    if (netns !== null) argv = ['nsenter', `--net=${netnsPath(netns)}`, ...argv];
    return this.subreaper !== undefined && LEAVES_DAEMONS.has(args[0] ?? '') ? [this.subreaper, ...argv] : argv;
  }

  /** Runs `runsc <args>` inside the namespace `netns` (or the host's when null). */
  call(netns: string | null, args: string[], options: Partial<RunOptions> = {}): Promise<RunResult> {
    const [file, ...rest] = this.argv(netns, args);
    return run(file as string, rest, { timeoutMs: RUNSC_TIMEOUT_MS, ...options });
  }

  /**
   * Starts `runsc <args>` in the namespace and hands back the process, for callers that
   * stream its input or output (the benchmarks' floor). The caller bounds its run time.
   */
  spawn(netns: string, args: string[]): ChildProcessByStdio<Writable, Readable, Readable> {
    const argv = this.argv(netns, args);
    return spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
  }

  async callChecked(netns: string | null, args: string[], options: Partial<RunOptions> = {}): Promise<RunResult> {
    const result = await this.call(netns, args, options);
    if (result.code !== 0) throw new HostCommandError(`runsc ${args.slice(0, 2).join(' ')}`, result);
    return result;
  }

  /**
   * `runsc create` hands its stdio to the container's first process, so it gets a log
   * file instead of pipes (a pipe would stay open as long as the container runs).
   * `pidFile` receives the sandbox's host process id (what `runsc state` would name).
   */
  async create(netns: string, id: string, bundle: string, consoleLog: string, pidFile: string): Promise<void> {
    const fd = openSync(consoleLog, 'a', 0o600);
    try {
      await this.callChecked(netns, ['create', `--bundle=${bundle}`, `--pid-file=${pidFile}`, id], { outputFd: fd });
    } finally {
      closeSync(fd);
    }
  }

  async start(netns: string, id: string): Promise<void> {
    await this.callChecked(netns, ['start', id]);
  }

  /** The container's state as runsc reports it, or null when runsc does not know it. */
  async state(netns: string | null, id: string): Promise<{ status: string; pid: number } | null> {
    const result = await this.call(netns, ['state', id], { timeoutMs: 10_000 });
    if (result.code !== 0) return null;
    try {
      const parsed = JSON.parse(result.stdout) as { status?: string; pid?: number };
      return { status: parsed.status ?? 'unknown', pid: parsed.pid ?? 0 };
    } catch {
      return null;
    }
  }

  /** Kills and deletes the container; succeeds when it does not exist. */
  async destroy(netns: string | null, id: string): Promise<void> {
    const result = await this.call(netns, ['delete', '--force', id]);
    if (result.code !== 0 && !/does not exist|not found|no such/i.test(result.stderr)) {
      // Confirm: a container runsc no longer lists is gone whatever delete said.
      if ((await this.list()).includes(id)) {
        throw new Error(`runsc delete ${id} failed: ${result.stderr.trim().split('\n').slice(-2).join(' | ')}`);
      }
    }
  }

  /** Ids of the containers under this runsc root, whatever their status. */
  async list(): Promise<string[]> {
    const result = await this.callChecked(null, ['list', '--quiet'], { timeoutMs: 10_000 });
    return result.stdout.split('\n').map((l) => l.trim()).filter(Boolean);
  }
}

/** runsc's version, as `0.0~20240729.0` (the first line of `runsc --version` without its `runsc version `). */
export async function runscVersion(binary = runscBinary()): Promise<string> {
  const result = await runChecked(binary, ['--version'], { timeoutMs: 10_000 });
  const first = result.stdout.split('\n')[0]?.trim() ?? '';
  return first.replace(/^runsc version\s+/, '') || 'unknown';
}

