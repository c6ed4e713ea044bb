// The file system service of E2B's in-sandbox protocol (filesystem.Filesystem), over
// core's files: stat and listings from core's directory listings (a stat is its parent's
// listing), removal of a file through core. What core has no file operation for yet
// (making a directory, moving, removing a directory) runs as a command of the instance
// through core's commands, so it is recorded, and tracked, like any other. Watching a
// directory polls core's listings (directory-watch.ts), in the streamed form (WatchDir)
// and in the polled one (CreateWatcher, GetWatcherEvents, RemoveWatcher).
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { DirectoryListing } from '../../core/file-schema.ts';
import type { Services } from '../../services.ts';
import { connectErrorOf, unimplemented } from './errors.ts';
import { type EntryInfoSchema, type Filesystem, FileType, type WatchDirResponseSchema } from './generated/filesystem/filesystem_pb.js';
import { FIRST, watchDirectory, Watchers } from './directory-watch.ts';
import { SANDBOX_CALL, type SandboxCall } from './process-service.ts';

/** How long a watch says nothing before it tells the client it is alive. */
const KEEPALIVE_MS = 50_000;

type Entry = MessageInitShape<typeof EntryInfoSchema>;
type DirEntry = DirectoryListing['entries'][number];

/** The exit status the make-directory command gives when the path exists already. */
const EXISTS_STATUS = 17;
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

function shellWord(word: string): string {
  return `'${word.replaceAll("'", "'\\''")}'`;
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

function parentOf(path: string): { parent: string; name: string } {
  const cut = path.lastIndexOf('/');
  return { parent: cut <= 0 ? '/' : path.slice(0, cut), name: path.slice(cut + 1) };
}

export function filesystemService(services: Services): Partial<ServiceImpl<typeof Filesystem>> {
  const watchers = new Watchers();
  // The home directory is read only for a relative path.
  const homeOf = async (call: SandboxCall) => (await services.instances.requireReadyAt(call.address)).spec.home;
  const resolve = async (call: SandboxCall, path: string) => absolutePath(path, path.startsWith('/') ? '/' : await homeOf(call));

  const stat = async (call: SandboxCall, path: string): Promise<Entry> => {
    if (path === '/') return { name: '/', type: FileType.DIRECTORY, path: '/', mode: 0o755, permissions: 'drwxr-xr-x' };
    const { parent, name } = parentOf(path);
    const listing = await services.files.listAt(call.address, parent);
    const entry = listing.entries.find((e) => e.name === name);
    if (!entry) throw new ConnectError(`no such file or directory: ${path}`, Code.NotFound);
    return entryOf(parent, entry);
  };

  /** Runs a small file operation as a command of the instance; its exit status, or its output as the error. */
  const runFileCommand = async (call: SandboxCall, command: string): Promise<number> => {
    const result = await services.commands.runAt(call.address, { command });
    return result.result.exit_code ?? -1;
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
        const listing = await services.files.listAt(call.address, directory);
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
      const status = await runFileCommand(call, `[ -e ${shellWord(path)} ] && exit ${EXISTS_STATUS}; mkdir -p -- ${shellWord(path)}`);
      if (status === EXISTS_STATUS) throw new ConnectError(`${path} exists already`, Code.AlreadyExists);
      if (status !== 0) throw new ConnectError(`could not make the directory ${path}`, Code.PermissionDenied);
      return { entry: await stat(call, path) };
    }),

    move: guarded(async (request, context) => {
      const call = callOf(context);
      const source = await resolve(call, request.source);
      const destination = await resolve(call, request.destination);
      await stat(call, source);
      const status = await runFileCommand(call, `mkdir -p -- ${shellWord(parentOf(destination).parent)} && mv -f -- ${shellWord(source)} ${shellWord(destination)}`);
      if (status !== 0) throw new ConnectError(`could not move ${source} to ${destination}`, Code.PermissionDenied);
      return { entry: await stat(call, destination) };
    }),

    remove: guarded(async (request, context) => {
      const call = callOf(context);
      const path = await resolve(call, request.path);
      const entry = await stat(call, path);
      if (entry.type !== FileType.DIRECTORY) {
        await services.files.deleteAt(call.address, path);
        return {};
      }
      if ((await runFileCommand(call, `rm -rf -- ${shellWord(path)}`)) !== 0) throw new ConnectError(`could not remove ${path}`, Code.PermissionDenied);
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
