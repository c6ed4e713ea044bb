// A revert's writes: each file a command changed is put back as it was in its undo point
// (undo.ts), through the guest, so that the sandbox sees it as any change it makes
// itself (writing into the host's upper directory behind a running gVisor sandbox may
// not be seen inside). What the file was is read on the host from the undo point, a
// read-only btrfs snapshot that nothing can change any more, listed by the no-follow
// walker, and from the image, which roomkit built; so neither read follows a path the
// guest can still change. In the guest, root then (1) removes the files the command
// created and makes missing parent directories with their old owner and mode, (2)
// writes each file back (the agent's write, as root), (3) gives each its old owner and
// mode. Directories the command made stay (empty); links and other non-regular files
// are not files_changed, so they are not put back.
import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { shellArg, shellDecode } from '../../lib/guest-names.ts';
import type { RunResult } from '../../host/run.ts';
import { listLayer, type ListingView, visible } from './changes.ts';

/** Files written back at once through the agent. */
const WRITES_AT_ONCE = 8;

/** A file as it was before the command: absent, or a regular file with its bytes and attributes. */
type Prior = { path: string; absent: true } | { path: string; absent: false; data: Buffer; uid: number; gid: number; mode: number };

/** A directory to make when it is missing, with the owner and mode it had. */
interface ParentDir {
  path: string;
  uid: number;
  gid: number;
  mode: number;
}

export interface GuestAccess {
  /** Runs argv as root in the guest. */
  runAsRoot(argv: string[]): Promise<RunResult>;
  /** Writes a whole file as root in the guest (creating or truncating it). */
  writeAsRoot(path: string, data: Buffer): Promise<void>;
}

/**
 * `sh -c APPLY_SCRIPT sh OP PATH [OWNER MODE] ...`: `rm` removes a file, `mkdir` makes
 * a missing directory with an owner and mode, `own` sets a file's owner and mode. Paths
 * come as shellArg makes them. Every operation is tried; the status says whether all worked.
 */
const APPLY_SCRIPT = `
s=0
while [ $# -gt 0 ]; do
  op=$1; p=$2; shift 2
  ${shellDecode('p')}
  case $op in
  rm) [ -d "$p" ] || rm -f -- "$p" || { echo "could not remove $p" >&2; s=1; } ;;
  mkdir) o=$1; m=$2; shift 2; [ -d "$p" ] || { mkdir -- "$p" && chown -- "$o" "$p" && chmod -- "$m" "$p"; } || { echo "could not make $p" >&2; s=1; } ;;
  own) o=$1; m=$2; shift 2; chown -- "$o" "$p" && chmod -- "$m" "$p" || { echo "could not set the owner and mode of $p" >&2; s=1; } ;;
  esac
done
exit $s
`;

/** Puts `paths` (absolute) back as the undo point at `point` and the image at `rootfs` say they were. */
export async function applyRevert(options: { walker: string; point: string; rootfs: string; paths: string[]; guest: GuestAccess }): Promise<void> {
  const upper = join(options.point, 'upper');
  const listing = await listLayer(options.walker, upper);
  const lower = imageView(options.rootfs);
  const priors = options.paths.map((path) => priorOf(path, listing, lower, upper, options.rootfs));

  const before: string[] = [];
  const after: string[] = [];
  const madeDirs = new Set<string>();
  const ownership = new Map<string, string[]>();
  for (const prior of priors) {
    if (prior.absent) {
      before.push('rm', shellArg(prior.path));
      continue;
    }
    for (const dir of parentsOf(prior.path, listing, upper, options.rootfs)) {
      if (madeDirs.has(dir.path)) continue;
      madeDirs.add(dir.path);
      before.push('mkdir', shellArg(dir.path), `${dir.uid}:${dir.gid}`, (dir.mode & 0o7777).toString(8));
    }
    const owner = `${prior.uid}:${prior.gid}`;
    const mode = (prior.mode & 0o7777).toString(8);
    // Names the shell need not decode share one chown and one chmod per owner and mode
    // (one process per file cost ~30 ms each in gVisor: 3 s for 100 files).
    if (shellArg(prior.path) === prior.path) ownership.set(`${owner} ${mode}`, [...(ownership.get(`${owner} ${mode}`) ?? []), prior.path]);
    else after.push('own', shellArg(prior.path), owner, mode);
  }
  if (before.length > 0) await runScript(options.guest, before);
  // A few at a time: each write is a connection of its own to the agent.
  const writes = priors.filter((p) => !p.absent);
  await Promise.all(
    Array.from({ length: Math.min(WRITES_AT_ONCE, writes.length) }, async () => {
      for (let prior = writes.shift(); prior !== undefined; prior = writes.shift()) await options.guest.writeAsRoot(prior.path, prior.data);
    }),
  );
  if (after.length > 0) await runScript(options.guest, after);
  for (const [key, paths] of ownership) {
    const [owner, mode] = key.split(' ') as [string, string];
    for (let i = 0; i < paths.length; i += OWNED_AT_ONCE) {
      const result = await options.guest.runAsRoot(['/bin/sh', '-c', OWN_SCRIPT, 'sh', owner, mode, ...paths.slice(i, i + OWNED_AT_ONCE)]);
      if (result.code !== 0) throw new Error(`putting owners and modes back failed in the instance (${result.code ?? result.signal}): ${result.stderr.trim().slice(0, 1000)}`);
    }
  }
}

/** Files given one owner and mode by one chown and one chmod. */
const OWNED_AT_ONCE = 500;
/** `sh -c OWN_SCRIPT sh OWNER MODE PATH...` */
const OWN_SCRIPT = 'o=$1; m=$2; shift 2; chown -- "$o" "$@" && chmod -- "$m" "$@"';

async function runScript(guest: GuestAccess, args: string[]): Promise<void> {
  const result = await guest.runAsRoot(['/bin/sh', '-c', APPLY_SCRIPT, 'sh', ...args]);
  if (result.code !== 0) throw new Error(`putting files back failed in the instance (${result.code ?? result.signal}): ${result.stderr.trim().slice(0, 1000)}`);
}

/** What the guest saw at `path` before the command, from the undo point's upper listing and the image. */
function priorOf(path: string, listing: ListingView, lower: ListingView, upper: string, rootfs: string): Prior {
  const relative = path.replace(/^\/+/, '');
  const seen = visible(listing, lowerIndexView(lower), relative);
  if (seen === null) return { path, absent: true };
  return { path, absent: false, ...readRegular(join(seen.from === 'upper' ? upper : rootfs, relative)) };
}

/** The parent directories of `path`, top down, with the owner and mode each had (from the undo point, else the image). */
function parentsOf(path: string, listing: ListingView, upper: string, rootfs: string): ParentDir[] {
  const parts = path.replace(/^\/+/, '').split('/').slice(0, -1);
  const dirs: ParentDir[] = [];
  for (let i = 1; i <= parts.length; i++) {
    const relative = parts.slice(0, i).join('/');
    // The listing says it is a directory in the snapshot, which cannot change: lstat sees the same.
    const inUpper = listing.get(relative)?.startsWith('d ') === true;
    if (!inUpper && !imageView(rootfs).get(relative)?.startsWith('d ')) throw new Error(`${path}: /${relative} was not a directory before the command`);
    const st = lstatSync(join(inUpper ? upper : rootfs, relative));
    if (!st.isDirectory()) throw new Error(`${path}: /${relative} was not a directory before the command`);
    dirs.push({ path: `/${relative}`, uid: st.uid, gid: st.gid, mode: st.mode });
  }
  return dirs;
}

/** A regular file's bytes and attributes, opened without following a final link and described by its descriptor. */
function readRegular(file: string): { data: Buffer; uid: number; gid: number; mode: number } {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new Error(`${file} is not a regular file`);
    return { data: readFileSync(fd), uid: st.uid, gid: st.gid, mode: st.mode };
  } finally {
    closeSync(fd);
  }
}

/** The image's entries by path as the walker's headers would start (type first), read with lstat: roomkit built the image, the guest cannot change it. */
function imageView(rootfs: string): ListingView {
  return {
    get(path: string): string | undefined {
      try {
        // Every ancestor must be a directory: a link in the image (as /lib in a merged-/usr
        // image) is not followed on the host.
        const parts = path.split('/');
        for (let i = 1; i < parts.length; i++) if (!lstatSync(join(rootfs, ...parts.slice(0, i))).isDirectory()) return undefined;
        const st = lstatSync(join(rootfs, path));
        return `${st.isFile() ? 'f' : st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'o'} ${st.mode.toString(8)} ${st.size}`;
      } catch {
        return undefined;
      }
    },
  };
}

/** The image view as the index visible() reads: type and size. */
function lowerIndexView(view: ListingView): { get(path: string): { type: string; size: number } | undefined } {
  return {
    get(path: string) {
      const header = view.get(path);
      if (header === undefined) return undefined;
      const [type = 'o', , size = '0'] = header.split(' ');
      return { type, size: Number(size) };
    },
  };
}
