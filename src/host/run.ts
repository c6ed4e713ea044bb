// Runs host programs (runsc, ip, nft, mount, mmdebstrap...) with a deadline. Every
// call is bounded: a program that hangs is killed and reported, never waited on forever.
import { spawn, type StdioOptions } from 'node:child_process';

/**
 * After the program exits, how long to wait for its output pipes to close, unless the
 * call says otherwise. Processes it left running (a background job in a sandbox, say)
 * may hold them open indefinitely; their output after this is not waited for.
 */
const OUTPUT_GRACE_MS = 250;

export interface RunOptions {
  /** Killed with SIGKILL after this long. */
  timeoutMs: number;
  /** Text written to the program's stdin. */
  input?: string;
  env?: NodeJS.ProcessEnv;
  /** Working directory (default: this process's). */
  cwd?: string;
  /** Where the program's stdout and stderr go when they must not be pipes (e.g. `runsc create`). */
  outputFd?: number;
  /** Keep at most this many bytes of each output stream (the tail). */
  maxOutputBytes?: number;
  signal?: AbortSignal;
  /**
   * After the program exits, how long its output may still take to arrive (default
   * 250 ms). Waited only while the pipes stay open, so a longer grace costs nothing when
   * the output is already in.
   */
  outputGraceMs?: number;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export class HostCommandError extends Error {
  readonly result: RunResult;
  readonly command: string;

  constructor(command: string, result: RunResult) {
    const why = result.timedOut
      ? 'timed out'
      : result.signal
        ? `was killed by ${result.signal}`
        : `exited with ${result.code}`;
    const detail = (result.stderr.trim() || result.stdout.trim()).split('\n').slice(-5).join(' | ');
    super(`${command} ${why}${detail ? `: ${detail}` : ''}`);
    this.name = 'HostCommandError';
    this.command = command;
    this.result = result;
  }
}

/** Runs a program and resolves with its result, whatever its exit code. */
export function run(file: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  const max = options.maxOutputBytes ?? 64 * 1024;
  const stdio: StdioOptions =
    options.outputFd === undefined
      ? [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe']
      : ['ignore', options.outputFd, options.outputFd];
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio, env: options.env ?? process.env, ...(options.cwd ? { cwd: options.cwd } : {}) });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const keep = (buf: string, chunk: string) => {
      const next = buf + chunk;
      return next.length > max ? next.slice(next.length - max) : next;
    };
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout = keep(stdout, d)));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr = keep(stderr, d)));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    const onAbort = () => child.kill('SIGKILL');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (err) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      reject(err);
    });
    let settled = false;
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve({ code, signal, stdout, stderr, timedOut });
    };
    child.on('close', finish);
    child.on('exit', (code, signal) => {
      setTimeout(() => finish(code, signal), options.outputGraceMs ?? OUTPUT_GRACE_MS);
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** Runs a program and rejects with HostCommandError unless it exits 0. */
export async function runChecked(file: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  const result = await run(file, args, options);
  if (result.code !== 0) throw new HostCommandError([file, ...args.slice(0, 3)].join(' '), result);
  return result;
}
