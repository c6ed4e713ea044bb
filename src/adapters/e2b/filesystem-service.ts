// The file system service of E2B's in-sandbox protocol (filesystem.Filesystem), over
// core's files: stat and listings from core's directory listings (a stat is its parent's
// listing); making a directory, moving and removing through core's file operations,
// which the instance's agent does. A call runs with the rights of the user it names:
// the instance's own (E2B's `user`, the default) or root (E2B's `user: "root"`, whose
// relative paths start at /root and whose new files are root's). Watching a directory
// polls core's listings (directory-watch.ts), in the streamed form (WatchDir) and in the
// polled one (CreateWatcher, GetWatcherEvents, RemoveWatcher).
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { DirectoryListing } from '../../core/file-schema.ts';
import type { FileCaller } from '../../core/files.ts';
import type { InstanceRef } from '../../core/instance-address.ts';
import { AppError } from '../../errors.ts';
import type { Services } from '../../services.ts';
import { connectErrorOf, unimplemented } from './errors.ts';
import { type EntryInfoSchema, type Filesystem, FileType, type WatchDirResponseSchema } from './generated/filesystem/filesystem_pb.js';
import { FIRST, watchDirectory, Watchers } from './directory-watch.ts';
import { SANDBOX_CALL, type SandboxCall } from './process-service.ts';

/** How long a watch says nothing before it tells the client it is alive. */
const KEEPALIVE_MS = 50_000;

type Entry = MessageInitShape<typeof EntryInfoSchema>;
type DirEntry = DirectoryListing['entries'][number];

/** Deepest listing a ListDir walks. */
const MAX_DEPTH = 16;

function callOf(context: HandlerContext): SandboxCall {
  const call = context.values.get(SANDBOX_CALL);
  if (!call) throw new ConnectError('no sandbox named', Code.Internal);
  return call;
}

/** A path as E2B gives it, absolute: a relative one is under the user's home, as envd has it. */
export function absolutePath(path: string, home: string): string {
  if (path === '') throw new ConnectError('path is empty', Code.InvalidArgument);
  const joined = path.startsWith('/') ? path : `${home.replace(/\/+$/, '')}/${path}`;
  const parts: string[] = [];
  for (const part of joined.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

/** `ls -l`'s permission string of an entry. */
function permissionsOf(type: DirEntry['type'], mode: number): string {
  const kind = type === 'directory' ? 'd' : type === 'symlink' ? 'l' : '-';
  const bits = 'rwxrwxrwx';
  let text = kind;
  for (let i = 0; i < 9; i++) text += mode & (1 << (8 - i)) ? bits[i] : '-';
  return text;
}

function entryOf(directory: string, entry: DirEntry): Entry {
  const mode = Number.parseInt(entry.mode, 8) || 0;
  return {
    name: entry.name,
    type: entry.type === 'directory' ? FileType.DIRECTORY : entry.type === 'symlink' ? FileType.SYMLINK : FileType.FILE,
    path: directory === '/' ? `/${entry.name}` : `${directory}/${entry.name}`,
    size: BigInt(entry.size),
    mode,
    permissions: permissionsOf(entry.type, mode),
    modifiedTime: timestampFromDate(new Date(entry.mtime)),
  };
}

/** The name E2B's SDK gives the sandbox's own user, when it names one. */
const DEFAULT_USER = 'user';

/**
 * Whose rights a file call runs with: root's for E2B's `root`, the instance's user's
 * otherwise (its own name, E2B's `user`, or none). resolveFor refuses another user name,
 * since files are read and written as one of those two.
 */
export function fileCallerOf(user: string | undefined): FileCaller {
  if (user === 'root') return { asRoot: true };
  return {};
}

/** An E2B path as the user it names sees it, absolute: a relative one is under that user's home (root's is /root). */
export async function resolveFor(services: Services, address: InstanceRef, user: string | undefined, path: string): Promise<string> {
  const needsSpec = !path.startsWith('/') || (user !== undefined && user !== DEFAULT_USER && user !== 'root');
  const spec = needsSpec ? (await services.instances.requireReadyAt(address)).spec : undefined;
  if (spec && user !== undefined && user !== DEFAULT_USER && user !== 'root' && user !== spec.user) {
    throw new AppError('validation_error', `files are read and written as the sandbox's user or as root, not as ${user}`);
  }
  return absolutePath(path, path.startsWith('/') ? '/' : user === 'root' ? '/root' : (spec?.home ?? '/'));
}

function parentOf(path: string): { parent: string; name: string } {
  const cut = path.lastIndexOf('/');
  return { parent: cut <= 0 ? '/' : path.slice(0, cut), name: path.slice(cut + 1) };
}

export function filesystemService(services: Services): Partial<ServiceImpl<typeof Filesystem>> {
  const watchers = new Watchers();
  const resolve = (call: SandboxCall, path: string) => resolveFor(services, call.address, call.user, path);

  const stat = async (call: SandboxCall, path: string): Promise<Entry> => {
    if (path === '/') return { name: '/', type: FileType.DIRECTORY, path: '/', mode: 0o755, permissions: 'drwxr-xr-x' };
    const { parent, name } = parentOf(path);
    const listing = await services.files.listAt(call.address, parent, fileCallerOf(call.user));
    const entry = listing.entries.find((e) => e.name === name);
    if (!entry) throw new ConnectError(`no such file or directory: ${path}`, Code.NotFound);
    return entryOf(parent, entry);
  };

  const guarded = <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await fn(...args);
      } catch (err) {
        throw connectErrorOf(err);
      }
    };

  return {
    stat: guarded(async (request, context) => {
      const call = callOf(context);
      return { entry: await stat(call, await resolve(call, request.path)) };
    }),

    listDir: guarded(async (request, context) => {
      const call = callOf(context);
      const root = await resolve(call, request.path);
      const depth = Math.min(Math.max(request.depth, 1), MAX_DEPTH);
      const entries: Entry[] = [];
      const walk = async (directory: string, level: number): Promise<void> => {
        const listing = await services.files.listAt(call.address, directory, fileCallerOf(call.user));
        for (const entry of listing.entries) {
          const info = entryOf(directory, entry);
          entries.push(info);
          if (entry.type === 'directory' && level < depth) await walk(info.path!, level + 1);
        }
      };
      await walk(root, 1);
      return { entries };
    }),

    makeDir: guarded(async (request, context) => {
      const call = callOf(context);
      const path = await resolve(call, request.path);
      const { created } = await services.files.makeDirectoryAt(call.address, path, fileCallerOf(call.user));
      if (!created) throw new ConnectError(`${path} exists already`, Code.AlreadyExists);
      return { entry: await stat(call, path) };
    }),

    move: guarded(async (request, context) => {
      const call = callOf(context);
      const source = await resolve(call, request.source);
      const destination = await resolve(call, request.destination);
      await services.files.renameAt(call.address, source, destination, fileCallerOf(call.user));
      return { entry: await stat(call, destination) };
    }),

    remove: guarded(async (request, context) => {
      const call = callOf(context);
      await services.files.removeTreeAt(call.address, await resolve(call, request.path), fileCallerOf(call.user));
      return {};
    }),

    async *watchDir(request, context): AsyncGenerator<MessageInitShape<typeof WatchDirResponseSchema>> {
      const call = callOf(context);
      let root: string;
      try {
        root = await resolve(call, request.path);
      } catch (err) {
        throw connectErrorOf(err);
      }
      if (request.includeEntry) throw unimplemented('A watch event with its entry (includeEntry)');
      let quietSince = Date.now();
      try {
        for await (const events of watchDirectory(services, call.address, root, { recursive: request.recursive, signal: context.signal })) {
          if (events === FIRST) yield { event: { case: 'start', value: {} } };
          for (const event of events) yield { event: { case: 'filesystem', value: { name: event.name, type: event.type } } };
          if (events.length > 0) quietSince = Date.now();
          else if (Date.now() - quietSince > KEEPALIVE_MS) {
            quietSince = Date.now();
            yield { event: { case: 'keepalive', value: {} } };
          }
        }
      } catch (err) {
        // The sandbox stopped under the watch: the stream ends as E2B's does when envd goes.
        if (context.signal.aborted) return;
        throw connectErrorOf(err);
      }
    },
    createWatcher: guarded(async (request, context) => {
      const call = callOf(context);
      if (request.includeEntry) throw unimplemented('A watch event with its entry (includeEntry)');
      return { watcherId: await watchers.create(services, call.address, await resolve(call, request.path), request.recursive) };
    }),
    getWatcherEvents: guarded(async (request, context) => {
      const call = callOf(context);
      return { events: watchers.take(call.address.instanceId, request.watcherId).map((e) => ({ name: e.name, type: e.type })) };
    }),
    removeWatcher: guarded(async (request, context) => {
      watchers.remove(callOf(context).address.instanceId, request.watcherId);
      return {};
    }),
  };
}
