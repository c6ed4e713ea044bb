// The runtime's file operations on an instance: read (streamed), stat, write, list and
// delete. Each runs one operation of guest-files.ts's script inside the instance as the
// VM user, so paths resolve in the guest with the guest's rights, and turns its answer
// into the contract's types, or into a GuestFileError the caller can act on.
import { type FileAccess, GuestFileError, type GuestDirEntry, type GuestFileInfo } from '../types.ts';
import type { ExecChild } from './commands.ts';
import { capStream, type Collected, collect, headerThenBody } from './exec-streams.ts';
import { shellArg } from '../../lib/guest-names.ts';
import { absoluteGuestPath, FILE_SCRIPT, fileError, parseInfo, parseListing } from './guest-files.ts';

/** File operations other than streaming a file's content. */
export const FILE_OP_TIMEOUT_MS = 60_000;
/** Streaming a file's content out of the instance. */
const FILE_STREAM_TIMEOUT_MS = 10 * 60_000;

/** Starts the script in the instance (as the VM user, in the request's home) with these arguments. */
export type FileScript = (args: string[]) => ExecChild;

/**
 * The program that runs the script: through the output relay when the image has it,
 * since file contents come through the relay too, so a busy host never cuts them short.
 * Only stdout goes through it; the script's errors stay on stderr.
 */
export function fileScriptArgv(relay: string[], args: string[]): string[] {
  const [op = '', path = '', ...rest] = args;
  return [...relay, ...(relay.length > 0 ? ['--stdout-only'] : []), 'sh', '-c', FILE_SCRIPT, 'sh', op, shellArg(path), ...rest];
}

export async function openFile(
  script: FileScript,
  path: string,
  options: FileAccess & { maxBytes: number; range?: { start: number; end: number } },
): Promise<{ info: GuestFileInfo; body: NodeJS.ReadableStream }> {
  const absolute = absoluteGuestPath(path, options.home);
  const range = options.range ? [String(options.range.start), String(options.range.end - options.range.start + 1)] : ['0', '-1'];
  const { header, body } = await headerThenBody(
    script(['read', path, ...range]),
    FILE_STREAM_TIMEOUT_MS,
    (code, stderr) => fileError(code, absolute, stderr) ?? new Error(`reading ${absolute} failed (exit ${code}): ${stderr}`),
  );
  const info = parseInfo(header, absolute);
  if (info.size > options.maxBytes) {
    body.destroy();
    throw new GuestFileError('too_large', `${absolute} is ${info.size} bytes, more than the ${options.maxBytes} served`, info.size);
  }
  // The file may grow while it is read: never send more than the size announced.
  const expected = options.range ? Math.min(options.range.end + 1, info.size) - options.range.start : info.size;
  return { info, body: capStream(body, Math.max(0, expected)) };
}

export async function statFile(script: FileScript, path: string, access: FileAccess): Promise<GuestFileInfo> {
  const absolute = absoluteGuestPath(path, access.home);
  const result = await collect(script(['stat', path]), FILE_OP_TIMEOUT_MS);
  throwIfFailed(result, absolute);
  return parseInfo(result.stdout.toString('utf8'), absolute);
}

export async function writeFile(script: FileScript, path: string, data: Buffer, access: FileAccess): Promise<{ info: GuestFileInfo; created: boolean }> {
  const absolute = absoluteGuestPath(path, access.home);
  const result = await collect(script(['write', path]), FILE_OP_TIMEOUT_MS, data);
  throwIfFailed(result, absolute);
  const [line = '', existed = '0'] = result.stdout.toString('utf8').trim().split('\n');
  return { info: parseInfo(line, absolute), created: existed.trim() !== '1' };
}

export async function listDirectory(
  script: FileScript,
  path: string,
  options: FileAccess & { limit: number },
): Promise<{ path: string; entries: GuestDirEntry[]; truncated: boolean }> {
  const absolute = absoluteGuestPath(path, options.home);
  const result = await collect(script(['list', path, String(options.limit + 1)]), FILE_OP_TIMEOUT_MS);
  throwIfFailed(result, absolute);
  const entries = parseListing(result.stdout);
  return { path: absolute, entries: entries.slice(0, options.limit), truncated: entries.length > options.limit };
}

export async function deleteFile(script: FileScript, path: string, access: FileAccess): Promise<{ path: string }> {
  const absolute = absoluteGuestPath(path, access.home);
  throwIfFailed(await collect(script(['delete', path]), FILE_OP_TIMEOUT_MS), absolute);
  return { path: absolute };
}

function throwIfFailed(result: Collected, path: string): void {
  if (result.code === 0) return;
  throw fileError(result.code, path, result.stderr.trim()) ?? new Error(`file operation on ${path} failed (exit ${result.code}): ${result.stderr.trim()}`);
}
