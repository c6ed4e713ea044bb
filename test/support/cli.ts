// Runs the real `roomkit` command as a child process, as a user would.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { testStoreEnv } from './test-store.ts';

export const MAIN = join(PACKAGE_ROOT, 'src', 'cli', 'main.ts');
export const BIN = join(PACKAGE_ROOT, 'bin', 'roomkit.mjs');

/** Makes scratch directories for a test file, all removed when the file's tests are done. */
export function scratchDirs(): () => string {
  const dirs: string[] = [];
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), 'roomkit-cli-'));
    dirs.push(dir);
    return dir;
  };
}

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * The store of the data directory `args` name (`--data-dir DIR`), for a child process:
 * the test store's database of that directory when the tests run on PostgreSQL, so that
 * the command and an in-process app on one data directory see the same rows.
 */
async function storeEnvOf(args: string[]): Promise<Record<string, string>> {
  const at = args.indexOf('--data-dir');
  const dataDir = at === -1 ? undefined : args[at + 1];
  return dataDir === undefined ? {} : testStoreEnv(dataDir);
}

/** Runs `node <script> args...` to completion. */
export async function run(args: string[], options: { node?: string; script?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  const child = spawn(options.node ?? process.execPath, [options.script ?? MAIN, ...args], {
    env: { ...process.env, ROOMKIT_RUNTIME: 'none', ...(await storeEnvOf(args)), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return collect(child);
}

export async function collect(child: ChildProcess): Promise<Run> {
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  return { code, signal, stdout, stderr };
}

export interface Server {
  child: ChildProcess;
  url: string;
  /** Output so far. */
  output(): { stdout: string; stderr: string };
  /** Sends SIGTERM and waits for the exit; kills it if it takes longer than 20 s. */
  stop(): Promise<Run>;
  /**
   * Sends `signal` (SIGKILL by default: a crash, no shutdown code runs) to this process
   * only, and waits for it to exit. Its children, if any, are left as they are.
   */
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `roomkit serve` on a free port and waits until it listens. */
export async function startServer(dataDir: string, extraArgs: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<Server> {
  // The CLI tests are about the command, not instances: no runtime, no host changes.
  const child = spawn(process.execPath, [MAIN, 'serve', '--port', '0', '--data-dir', dataDir, ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ROOMKIT_RUNTIME: 'none', ...(await testStoreEnv(dataDir)), ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in 20 s:\n${stdout}\n${stderr}`)), 20_000);
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      const match = /listening on (http:\/\/\S+) /.exec(stderr);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${stdout}\n${stderr}`));
    });
  });
  const exited = once(child, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
  // 'exit' rather than 'close': after a crash, the pipes may stay open in processes it left.
  const ended = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  return {
    child,
    url,
    output: () => ({ stdout, stderr }),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const [code, signal] = await exited;
      clearTimeout(timer);
      return { code, signal, stdout, stderr };
    },
    async kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const [code, how] = await ended;
      return { code, signal: how };
    },
  };
}
