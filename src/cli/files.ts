// The file commands of `roomkit`: `cat`, `put`, `ls` and `rm` of a room's instance,
// through the SDK. Output follows the other client commands (client.ts).
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { Command } from 'commander';
import { formatBytes } from '../lib/format-size.ts';
import { printJson, readLocal, readStdin, roomCommand, roomOf, run, type RoomOptions } from './client.ts';

export function registerFileCommands(program: Command): void {
  roomCommand(program, 'cat <room> <path>', 'write a file of the instance to stdout, byte for byte (relative paths are from the home directory)', { json: false })
    .action(run(async (roomId: string, path: string, options: RoomOptions) => {
      const file = await roomOf(roomId, options).openRaw(path);
      try {
        await pipeline(Readable.fromWeb(file.body as WebReadableStream<Uint8Array>), process.stdout, { end: false });
      } catch (err) {
        // A reader that stops early (`| head`) is not a failure.
        if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
      }
    }));

  roomCommand(program, 'put <room> <local> <remote>', 'upload a local file (- for stdin) to a path in the instance, creating its directories')
    .action(run(async (roomId: string, local: string, remote: string, options: RoomOptions) => {
      const bytes = local === '-' ? await readStdin() : await readLocal(local);
      const written = await roomOf(roomId, options).writeFile(remote, bytes);
      if (options.json) return printJson(written);
      process.stdout.write(`${written.status} ${written.file_path} (${formatBytes(written.size, 'listing')})\n`);
    }));

  roomCommand(program, 'ls <room> [dir]', 'list a directory of the instance (default: the home directory)')
    .action(run(async (roomId: string, dir: string | undefined, options: RoomOptions) => {
      const listing = await roomOf(roomId, options).list(dir);
      if (options.json) return printJson(listing);
      const width = Math.max(0, ...listing.entries.map((e) => String(e.size).length));
      for (const e of listing.entries) {
        const kind = e.type === 'directory' ? 'd' : e.type === 'symlink' ? 'l' : e.type === 'file' ? '-' : '?';
        const name = e.type === 'directory' ? `${e.name}/` : e.name;
        process.stdout.write(`${kind}${permissions(e.mode)} ${String(e.size).padStart(width)} ${e.mtime.slice(0, 16).replace('T', ' ')} ${name}\n`);
      }
      if (listing.truncated) process.stderr.write(`roomkit: only the first ${listing.entries.length} entries of ${listing.path} are listed\n`);
    }));

  roomCommand(program, 'rm <room> <path>', 'delete a file (or link) in the instance; remove directories with exec')
    .action(run(async (roomId: string, path: string, options: RoomOptions) => {
      const deleted = await roomOf(roomId, options).deleteFile(path);
      if (options.json) return printJson(deleted);
      process.stdout.write(`deleted ${deleted.file_path}\n`);
    }));
}

/** `rwxr-xr-x` from octal permission bits. */
function permissions(mode: string): string {
  const bits = Number.parseInt(mode, 8);
  if (Number.isNaN(bits)) return mode;
  return [6, 3, 0].map((shift) => ((bits >> shift) & 4 ? 'r' : '-') + ((bits >> shift) & 2 ? 'w' : '-') + ((bits >> shift) & 1 ? 'x' : '-')).join('');
}


