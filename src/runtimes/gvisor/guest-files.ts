// File operations done inside the instance, as its VM user, by a POSIX shell script:
// paths (links, `..` and all) resolve in the guest's filesystem with the guest's
// permissions, so the host never opens a guest-controlled path. Each operation answers
// on stdout; a failure the caller can act on is an exit status from FILE_STATUS.
import { posix } from 'node:path';
import { apiPath, decodeName, shellDecode } from '../../lib/guest-names.ts';
import { GuestFileError, type GuestDirEntry, type GuestFileInfo } from '../types.ts';

/** Exit statuses of the script, and what each means. */
export const FILE_STATUS = {
  10: 'not_found',
  11: 'permission_denied',
  12: 'is_a_directory',
  13: 'changed',
  14: 'invalid_path',
  15: 'not_a_directory',
} as const satisfies Record<number, GuestFileError['kind']>;

/**
 * `sh -c FILE_SCRIPT sh OP PATH [ARGS...]`. `stat -L` and `find` use statx, which the
 * guest's compatibility library makes work on this gVisor (see images/guest).
 */
// A plain template: `\${` below is the shell's parameter expansion, `\\0` find's NUL.
export const FILE_SCRIPT = `
op=$1; f=$2
${shellDecode('f')}
missing() { d=$(dirname -- "$f"); if [ -e "$d" ] && ! (cd -- "$d" 2>/dev/null); then exit 11; fi; exit 10; }
case "$op" in
read|stat)
  [ -e "$f" ] || missing
  [ -d "$f" ] && exit 12
  [ -f "$f" ] || exit 14
  # Opening it is the permission check (test -r is not reliable under gVisor); the
  # content comes from this descriptor. The caller enforces the size limit. The guest
  # may swap the path between the checks above and the open, so what was opened is
  # checked and described through its descriptor, never through the path again.
  command exec 3< "$f" 2>/dev/null || { [ -e "$f" ] && exit 11; exit 10; }
  [ -d /proc/self/fd/3 ] && exit 12
  [ -f /proc/self/fd/3 ] || exit 14
  stat -L -c '%s %.9Y %i %.9Z' /proc/self/fd/3 || exit 13
  [ "$op" = read ] || exit 0
  [ "$4" -ge 0 ] || exec cat <&3
  tail -c +$(($3 + 1)) <&3 | head -c "$4"
  ;;
write)
  [ -d "$f" ] && exit 12
  existed=0; { [ -e "$f" ] || [ -L "$f" ]; } && existed=1
  case "$f" in */*) d=\${f%/*}; d=\${d:-/} ;; *) d=. ;; esac
  [ -d "$d" ] || mkdir -p -- "$d" || exit 16
  command exec 4> "$f" || exit 16
  cat >&4 || exit 16
  stat -L -c '%s %.9Y %i %.9Z' /proc/self/fd/4 || exit 13
  echo "$existed"
  ;;
list)
  [ -e "$f" ] || missing
  [ -d "$f" ] || exit 15
  cd -- "$f" 2>/dev/null || exit 11
  ls -f . >/dev/null 2>&1 || exit 11
  find . -mindepth 1 -maxdepth 1 -printf '%y %s %m %T@ %f\\0' | head -z -n "$3"
  ;;
delete)
  { [ -e "$f" ] || [ -L "$f" ]; } || missing
  [ -d "$f" ] && [ ! -L "$f" ] && exit 12
  rm -f -- "$f" || exit 16
  ;;
*) exit 2 ;;
esac
`;

/** The absolute path a request names, for answers: relative paths start at the home directory. */
export function absoluteGuestPath(path: string, home: string): string {
  return posix.resolve(home, path);
}

/**
 * The GuestFileError for a script's exit status, or null when the status is not one
 * the caller can act on. Status 16 is a failed write or delete, told apart by the
 * message the tool printed (the instance runs in the C locale).
 */
export function fileError(code: number | null, guestPath: string, stderr: string): GuestFileError | null {
  let kind: GuestFileError['kind'] | undefined = code === null ? undefined : FILE_STATUS[code as keyof typeof FILE_STATUS];
  if (code === 16) {
    if (/Permission denied|Operation not permitted|Read-only file system/.test(stderr)) kind = 'permission_denied';
    else if (/Not a directory|File exists/.test(stderr)) kind = 'not_a_directory';
    else if (/No space left|Disk quota exceeded/.test(stderr)) kind = 'no_space';
    else if (/Is a directory/.test(stderr)) kind = 'is_a_directory';
  }
  if (kind === undefined) return null;
  return guestFileError(kind, guestPath);
}

/** The GuestFileError of a kind, with a message naming the path as the API shows it. */
export function guestFileError(kind: GuestFileError['kind'], guestPath: string): GuestFileError {
  const path = apiPath(guestPath).path;
  const messages: Record<GuestFileError['kind'], string> = {
    not_found: `no file at ${path} in the instance`,
    permission_denied: `the instance's user may not access ${path}`,
    is_a_directory: `${path} is a directory; list it with GET .../files?path=${path}`,
    too_large: `${path} is larger than this endpoint serves`,
    invalid_path: `${path} is not a regular file (a device, socket or pipe)`,
    not_a_directory: `${path} is not a directory, or a component of it is not`,
    no_space: `no space left in the instance to write ${path}`,
    changed: `${path} changed while it was being read or written (the instance replaced or removed it); try again`,
  };
  return new GuestFileError(kind, messages[kind]);
}

/** Parses the `SIZE MTIME INO CTIME` line of `read`, `stat` and `write`. */
export function parseInfo(line: string, path: string): GuestFileInfo {
  const [size, mtime, ino, ctime] = line.trim().split(' ');
  if (size === undefined || mtime === undefined || ino === undefined || ctime === undefined) {
    throw new Error(`unexpected answer from the instance about ${path}: ${line.slice(0, 200)}`);
  }
  return { path, size: Number(size), mtimeMs: Math.floor(Number(mtime) * 1000), version: `${ino}-${size}-${mtime}-${ctime}` };
}

const TYPES: Record<string, GuestDirEntry['type']> = { f: 'file', d: 'directory', l: 'symlink' };

/** Parses `list`'s NUL-separated `TYPE SIZE MODE MTIME NAME` records. */
export function parseListing(data: Buffer): GuestDirEntry[] {
  const entries: GuestDirEntry[] = [];
  for (let start = 0; start < data.length; ) {
    let end = data.indexOf(0, start);
    if (end < 0) end = data.length;
    const record = decodeName(data, start, end);
    start = end + 1;
    const match = /^(\S) (\d+) ([0-7]+) ([\d.]+) (.*)$/s.exec(record);
    if (!match) continue;
    const [, type = '', size = '0', mode = '0', mtime = '0', name = ''] = match;
    entries.push({
      name,
      type: TYPES[type] ?? 'other',
      size: Number(size),
      mode,
      mtime: new Date(Math.floor(Number(mtime) * 1000)).toISOString(),
    });
  }
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
