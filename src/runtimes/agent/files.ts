// File operations through the instance's agent (images/guest/agent/files.go, tree.go):
// read (streamed), stat, write, list, delete, make a directory, rename and remove a tree
// with the VM user's rights (or root's, when the caller asks), so that paths resolve in
// the guest with the guest's permissions and the host never opens a guest-controlled
// path; and the first bytes of files, read as root, for their types.
import { PassThrough } from 'node:stream';
import { decodeName, encodeName } from '../../lib/guest-names.ts';
import { VM_UID } from '../../images/builder.ts';
import { type AgentEndpoint, agentCall, AgentFailure, agentRequest, parseJson } from './client.ts';
import { FRAME } from './frames.ts';
import { AGENT_PROTOCOL } from './protocol.ts';
import { type FileAccess, GuestFileError, type GuestDirEntry, type GuestFileInfo } from '../types.ts';
import { absoluteGuestPath, guestFileError } from './file-errors.ts';

const KINDS = new Set<GuestFileError['kind']>(['not_found', 'permission_denied', 'is_a_directory', 'not_a_directory', 'too_large', 'invalid_path', 'no_space', 'changed']);
const AS_VM = { uid: VM_UID, gid: VM_UID };
/** Root in the guest, for a revert's writes (layer-changes/undo-apply.ts): the VM user may become root anyway (sudo). */
export const AS_ROOT = { uid: 0, gid: 0 };

/** An agent's failure as the caller's GuestFileError, when it is one the caller can act on. */
function asFileError(err: unknown, path: string): unknown {
  if (err instanceof AgentFailure && KINDS.has(err.kind as GuestFileError['kind'])) return guestFileError(err.kind as GuestFileError['kind'], path);
  if (err instanceof AgentFailure) return new Error(`file operation on ${path} failed in the instance: ${err.message}`);
  return err;
}

/** Whose rights an operation runs with. */
function identityOf(access: FileAccess): { uid: number; gid: number } {
  return access.asRoot === true ? AS_ROOT : AS_VM;
}

function pathBytes(absolute: string): string {
  return encodeName(absolute).toString('base64');
}

function infoOf(reply: Record<string, unknown>, path: string): GuestFileInfo {
  const size = Number(reply.size);
  const mtimeNs = BigInt(String(reply.mtime_ns ?? 0));
  if (!Number.isFinite(size)) throw new Error(`unexpected answer from the instance about ${path}`);
  return { path, size, mtimeMs: Number(mtimeNs / 1_000_000n), version: `${String(reply.ino)}-${size}-${String(reply.mtime_ns)}-${String(reply.ctime_ns)}` };
}

export async function openFile(
  endpoint: AgentEndpoint,
  path: string,
  options: FileAccess & { maxBytes: number; range?: { start: number; end: number } },
): Promise<{ info: GuestFileInfo; body: NodeJS.ReadableStream }> {
  const absolute = absoluteGuestPath(path, options.home);
  const range = options.range ? { offset: options.range.start, length: options.range.end - options.range.start + 1 } : { offset: 0, length: -1 };
  let opened;
  try {
    opened = await agentRequest(endpoint, { op: 'read', path: pathBytes(absolute), ...identityOf(options), ...range });
  } catch (err) {
    throw asFileError(err, absolute);
  }
  const { channel, reply } = opened;
  const info = infoOf(reply, absolute);
  if (info.size > options.maxBytes) {
    channel.close();
    throw new GuestFileError('too_large', `${absolute} is ${info.size} bytes, more than the ${options.maxBytes} served`, info.size);
  }
  const body = new PassThrough();
  body.on('close', () => channel.close());
  void (async () => {
    for (;;) {
      const frame = await channel.next();
      if (frame === null) return body.destroy(channel.error ?? new Error(`the instance's agent stopped sending ${absolute}`));
      if (frame.type === FRAME.data) {
        if (!body.write(frame.payload)) await drainedOrClosed(body);
        if (body.destroyed) return;
      } else if (frame.type === FRAME.end) {
        channel.close();
        return body.end();
      } else if (frame.type === FRAME.fail) {
        return body.destroy(new Error(`reading ${absolute} failed in the instance: ${String(parseJson(frame.payload).message)}`));
      }
    }
  })();
  return { info, body };
}

/** Waits until a stream wants more, or is closed (each listener removed after). */
function drainedOrClosed(stream: PassThrough): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done);
      stream.off('close', done);
      resolve();
    };
    stream.on('drain', done);
    stream.on('close', done);
  });
}

export async function statFile(endpoint: AgentEndpoint, path: string, access: FileAccess): Promise<GuestFileInfo> {
  const absolute = absoluteGuestPath(path, access.home);
  try {
    return infoOf(await agentCall(endpoint, { op: 'stat', path: pathBytes(absolute), ...identityOf(access) }), absolute);
  } catch (err) {
    throw asFileError(err, absolute);
  }
}

export async function writeFile(
  endpoint: AgentEndpoint,
  path: string,
  data: Buffer,
  access: FileAccess,
  identity: { uid: number; gid: number } = identityOf(access),
): Promise<{ info: GuestFileInfo; created: boolean }> {
  const absolute = absoluteGuestPath(path, access.home);
  let opened;
  try {
    opened = await agentRequest(endpoint, { op: 'write', path: pathBytes(absolute), ...identity });
  } catch (err) {
    throw asFileError(err, absolute);
  }
  const { channel } = opened;
  try {
    for (let at = 0; at < data.length; at += 1 << 20) {
      channel.send(FRAME.input, data.subarray(at, at + (1 << 20)));
      await channel.drained();
    }
    channel.send(FRAME.close);
    const frame = await channel.next();
    if (frame === null) throw new Error(`the instance's agent stopped answering while ${absolute} was written`);
    const body = parseJson(frame.payload);
    if (frame.type === FRAME.fail) throw asFileError(new AgentFailure(String(body.kind), String(body.message)), absolute);
    return { info: infoOf((body.info ?? {}) as Record<string, unknown>, absolute), created: body.existed !== true };
  } finally {
    channel.close();
  }
}

/** The API's entry types by the agent's codes. */
const TYPES: Record<string, GuestDirEntry['type']> = Object.fromEntries(
  Object.entries(AGENT_PROTOCOL.entryTypes).map(([type, code]) => [code, type as GuestDirEntry['type'] & keyof typeof AGENT_PROTOCOL.entryTypes]),
);

export async function listDirectory(
  endpoint: AgentEndpoint,
  path: string,
  options: FileAccess & { limit: number },
): Promise<{ path: string; entries: GuestDirEntry[]; truncated: boolean }> {
  const absolute = absoluteGuestPath(path, options.home);
  let reply;
  try {
    reply = await agentCall(endpoint, { op: 'list', path: pathBytes(absolute), ...identityOf(options), limit: options.limit + 1 });
  } catch (err) {
    throw asFileError(err, absolute);
  }
  const raw = Array.isArray(reply.entries) ? (reply.entries as Record<string, unknown>[]) : [];
  const entries = raw
    .map((e) => ({
      name: decodeName(Buffer.from(String(e.name ?? ''), 'base64')),
      type: TYPES[String(e.type)] ?? 'other',
      size: Number(e.size ?? 0),
      mode: String(e.mode ?? '0'),
      mtime: new Date(Number(BigInt(String(e.mtime_ns ?? 0)) / 1_000_000n)).toISOString(),
    }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { path: absolute, entries: entries.slice(0, options.limit), truncated: entries.length > options.limit };
}

export async function deleteFile(endpoint: AgentEndpoint, path: string, access: FileAccess): Promise<{ path: string }> {
  const absolute = absoluteGuestPath(path, access.home);
  try {
    await agentCall(endpoint, { op: 'delete', path: pathBytes(absolute), ...identityOf(access) });
  } catch (err) {
    throw asFileError(err, absolute);
  }
  return { path: absolute };
}

export async function makeDirectory(endpoint: AgentEndpoint, path: string, access: FileAccess): Promise<{ path: string; created: boolean }> {
  const absolute = absoluteGuestPath(path, access.home);
  try {
    const reply = await agentCall(endpoint, { op: 'mkdir', path: pathBytes(absolute), ...identityOf(access) });
    return { path: absolute, created: reply.created === true };
  } catch (err) {
    throw asFileError(err, absolute);
  }
}

export async function renamePath(endpoint: AgentEndpoint, path: string, target: string, access: FileAccess): Promise<{ path: string; target: string }> {
  const absolute = absoluteGuestPath(path, access.home);
  const to = absoluteGuestPath(target, access.home);
  try {
    await agentCall(endpoint, { op: 'rename', path: pathBytes(absolute), target: pathBytes(to), ...identityOf(access) });
  } catch (err) {
    throw asFileError(err, absolute);
  }
  return { path: absolute, target: to };
}

export async function removeTree(endpoint: AgentEndpoint, path: string, access: FileAccess): Promise<{ path: string }> {
  const absolute = absoluteGuestPath(path, access.home);
  try {
    await agentCall(endpoint, { op: 'rmtree', path: pathBytes(absolute), ...identityOf(access) });
  } catch (err) {
    throw asFileError(err, absolute);
  }
  return { path: absolute };
}

/** The first `bytes` bytes of each path (absolute, as bytes), read as root inside the instance; empty for what is not a readable regular file. */
export async function readHeads(endpoint: AgentEndpoint, paths: Buffer[], bytes: number): Promise<Buffer[]> {
  const reply = await agentCall(endpoint, { op: 'heads', paths: paths.map((p) => p.toString('base64')), bytes });
  const heads = Array.isArray(reply.heads) ? (reply.heads as unknown[]) : [];
  return heads.map((head) => Buffer.from(typeof head === 'string' ? head : '', 'base64'));
}
