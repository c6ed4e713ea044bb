// Calls to runsc. Every call for a container uses the same global flags and runs
// inside the container's network namespace (runsc's own netstack cannot start on
// this kernel, so the sandbox uses the namespace's host-mode network), and every
// call has a deadline: a hung runsc is killed, not waited on.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { HostCommandError, type RunOptions, type RunResult, run, runChecked } from '../../host/run.ts';
import { netnsPath } from '../../network/netns.ts';

export const RUNSC_TIMEOUT_MS = 30_000;

export class Runsc {
  readonly root: string;
  readonly binary: string;

  constructor(options: { root: string; binary?: string }) {
    this.root = options.root;
    this.binary = options.binary ?? 'runsc';
  }

  private globalFlags(): string[] {
    return [`--root=${this.root}`, '--network=host', '--platform=ptrace'];
  }

  /** Runs `runsc <args>` inside the namespace `netns` (or the host's when null). */
  call(netns: string | null, args: string[], options: Partial<RunOptions> = {}): Promise<RunResult> {
    const runscArgs = [...this.globalFlags(), ...args];
    const opts: RunOptions = { timeoutMs: RUNSC_TIMEOUT_MS, ...options };
    return netns === null
      ? run(this.binary, runscArgs, opts)
      : run('nsenter', [`--net=${netnsPath(netns)}`, this.binary, ...runscArgs], opts);
  }

  /**
   * Starts `runsc <args>` in the namespace and hands back the process, for callers that
   * stream its input or output (the benchmarks' floor). The caller bounds its run time.
   */
  spawn(netns: string, args: string[]): ChildProcessByStdio<Writable, Readable, Readable> {
    const argv = ['nsenter', `--net=${netnsPath(netns)}`, this.binary, ...this.globalFlags(), ...args];
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

export async function runscVersion(binary = 'runsc'): Promise<string> {
  const result = await runChecked(binary, ['--version'], { timeoutMs: 10_000 });
  return result.stdout.split('\n')[0]?.trim() ?? 'unknown';
}

