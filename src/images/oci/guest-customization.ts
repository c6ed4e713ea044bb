// What instances need on top of an OCI image's layers: the VM user (uid 1000) in
// /etc/passwd, /etc/group and the shadow files, its home made from /etc/skel, tini as
// init, a shell, and /etc and /tmp as real directories.
//
// Nothing of the image runs on the host: the VM user is added by editing /etc/passwd,
// /etc/group and the shadow files directly instead of running the image's `useradd` in
// a chroot, because a chroot does not contain root and an image's programs are no more
// trusted than its layers. Every instance runs /usr/bin/tini as its init: an image
// without it gets the host's static tini (Debian's `tini` package ships
// /usr/bin/tini-static, which runs in any image, whatever its libc), and without that
// the build fails saying what to install; a dynamically linked tini from the host could
// not be trusted to find its libraries in the image.
import {
  chmodSync,
  closeSync,
  constants,
  copyFileSync,
  fchmodSync,
  fchownSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { join } from 'node:path';
import { OciImageError } from './errors.ts';

/** Where a host's static tini is found (Debian's `tini` package ships it). */
const HOST_STATIC_TINI = '/usr/bin/tini-static';

/** The VM user the image gets, and how the customization reports what it does. */
export interface GuestOptions {
  user: string;
  home: string;
  uid: number;
  onProgress: (line: string) => void;
  /** Where a static tini is taken from when the image has none; tests point it elsewhere. */
  hostTini?: string;
}

/**
 * Looks a path up the way the sandbox will: links are followed, but inside the root
 * (an absolute target starts again at the root, `..` stops at it).
 */
export function guestLookup(rootfs: string, path: string): Stats | undefined {
  const done: string[] = [];
  const todo = path.split('/').filter(Boolean);
  for (let links = 0; todo.length > 0; ) {
    const part = todo.shift() ?? '';
    if (part === '.') continue;
    if (part === '..') {
      done.pop();
      continue;
    }
    const here = join(rootfs, ...done, part);
    const stat = lstatSync(here, { throwIfNoEntry: false });
    if (!stat) return undefined;
    if (stat.isSymbolicLink()) {
      if (++links > 40) return undefined;
      const target = readlinkSync(here);
      if (target.startsWith('/')) done.length = 0;
      todo.unshift(...target.split('/').filter(Boolean));
      continue;
    }
    if (todo.length > 0 && !stat.isDirectory()) return undefined;
    done.push(part);
    if (todo.length === 0) return stat;
  }
  return lstatSync(join(rootfs, ...done), { throwIfNoEntry: false });
}

/** A real directory of the guest, made if missing; never through a link. */
function guestDir(rootfs: string, path: string, what: string): string {
  let current = rootfs;
  for (const part of path.split('/').filter(Boolean)) {
    current = join(current, part);
    const stat = lstatSync(current, { throwIfNoEntry: false });
    if (!stat) mkdirSync(current, { mode: 0o755 });
    else if (!stat.isDirectory()) throw new OciImageError(`${what}: the image's ${path} is not a plain directory (at ${current.slice(rootfs.length)}); refused`);
  }
  return current;
}

function readGuestFile(rootfs: string, path: string, what: string): { text: string; stat: Stats } | undefined {
  const file = join(guestDir(rootfs, path.slice(0, path.lastIndexOf('/')), what), path.slice(path.lastIndexOf('/') + 1));
  const stat = lstatSync(file, { throwIfNoEntry: false });
  if (!stat) return undefined;
  if (!stat.isFile()) throw new OciImageError(`${what}: the image's ${path} is not a regular file; refused`);
  return { text: readFileSync(file, 'utf8'), stat };
}

/** Replaces a guest file (never writing through a link), keeping the old one's owner and mode. */
function writeGuestFile(rootfs: string, path: string, text: string | Buffer, like: { uid: number; gid: number; mode: number }, what: string): void {
  const file = join(guestDir(rootfs, path.slice(0, path.lastIndexOf('/')), what), path.slice(path.lastIndexOf('/') + 1));
  rmSync(file, { force: true, recursive: true });
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, typeof text === 'string' ? Buffer.from(text) : text);
    fchownSync(fd, like.uid, like.gid);
    fchmodSync(fd, like.mode & 0o7777);
  } finally {
    closeSync(fd);
  }
}

/** Replaces the lines of a colon-separated database whose entry `drop` matches, then appends `add`. */
function editDb(rootfs: string, path: string, drop: (fields: string[]) => boolean, add: string, what: string, create: boolean): string[] {
  const current = readGuestFile(rootfs, path, what);
  if (!current && !create) return [];
  const dropped: string[] = [];
  const lines = (current?.text ?? '').split('\n').filter((line) => {
    if (line === '') return false;
    const fields = line.split(':');
    if (!drop(fields)) return true;
    dropped.push(fields[0] ?? '');
    return false;
  });
  lines.push(add);
  const like = current ? { uid: current.stat.uid, gid: current.stat.gid, mode: current.stat.mode } : { uid: 0, gid: 0, mode: 0o644 };
  writeGuestFile(rootfs, path, `${lines.join('\n')}\n`, like, what);
  return dropped;
}

/** Gives the applied image what instances need, without running any of its programs. */
export function customizeGuest(rootfs: string, image: string, options: GuestOptions): void {
  const { user, home, uid } = options;
  const what = image;
  // /etc and /tmp are written from the host when an instance starts (its resolv.conf,
  // hostname, hosts; /tmp is bind-mounted), so they must be real directories.
  guestDir(rootfs, '/etc', what);
  for (const name of ['resolv.conf', 'hostname']) rmSync(join(rootfs, 'etc', name), { force: true, recursive: true });
  const hosts = lstatSync(join(rootfs, 'etc', 'hosts'), { throwIfNoEntry: false });
  if (hosts && !hosts.isFile()) rmSync(join(rootfs, 'etc', 'hosts'), { force: true, recursive: true });
  const tmp = lstatSync(join(rootfs, 'tmp'), { throwIfNoEntry: false });
  if (tmp && !tmp.isDirectory()) rmSync(join(rootfs, 'tmp'), { force: true, recursive: true });
  chmodSync(guestDir(rootfs, '/tmp', what), 0o1777);

  if (!guestLookup(rootfs, '/bin/sh')?.isFile()) {
    throw new OciImageError(`${image} has no /bin/sh; instances run commands with sh, so the image needs a shell`);
  }
  if (!guestLookup(rootfs, '/usr/bin/tini')?.isFile()) {
    const hostTini = options.hostTini ?? HOST_STATIC_TINI;
    if (!lstatSync(hostTini, { throwIfNoEntry: false })?.isFile()) {
      throw new OciImageError(
        `${image} has no /usr/bin/tini, which every instance runs as its init: add tini to the image, ` +
          'or install tini on this host (apt-get install tini), whose static build is then copied into images that lack it',
      );
    }
    options.onProgress('the image has no /usr/bin/tini: adding the host\'s static tini');
    writeGuestFile(rootfs, '/usr/bin/tini', readFileSync(hostTini), { uid: 0, gid: 0, mode: 0o755 }, what);
  }

  const shell = guestLookup(rootfs, '/bin/bash')?.isFile() ? '/bin/bash' : '/bin/sh';
  const hasShadow = readGuestFile(rootfs, '/etc/shadow', what) !== undefined;
  // uid 1000 is the VM user's: an image's own user with that uid (or the VM user's name)
  // gives way to it.
  const replaced = editDb(rootfs, '/etc/passwd', (f) => f[0] === user || f[2] === String(uid), `${user}:${hasShadow ? 'x' : '!'}:${uid}:${uid}::${home}:${shell}`, what, true);
  const others = replaced.filter((name) => name !== user);
  if (others.length > 0) options.onProgress(`the image's user ${others.join(', ')} (uid ${uid}) gives way to ${user}`);
  editDb(rootfs, '/etc/group', (f) => f[0] === user || f[2] === String(uid), `${user}:x:${uid}:`, what, true);
  const days = Math.floor(Date.now() / 86_400_000);
  editDb(rootfs, '/etc/shadow', (f) => f[0] === user || replaced.includes(f[0] ?? ''), `${user}:!:${days}:0:99999:7:::`, what, false);
  editDb(rootfs, '/etc/gshadow', (f) => f[0] === user, `${user}:!::`, what, false);

  const parent = home.slice(0, home.lastIndexOf('/')) || '/';
  const homeDir = join(guestDir(rootfs, parent, what), home.slice(home.lastIndexOf('/') + 1));
  const existing = lstatSync(homeDir, { throwIfNoEntry: false });
  if (existing && !existing.isDirectory()) rmSync(homeDir, { force: true, recursive: true });
  if (!existing?.isDirectory()) {
    mkdirSync(homeDir, { mode: 0o755 });
    const skel = lstatSync(join(rootfs, 'etc', 'skel'), { throwIfNoEntry: false });
    if (skel?.isDirectory()) copySkel(join(rootfs, 'etc', 'skel'), homeDir, uid);
  }
  lchownSync(homeDir, uid, uid);
}

/** Copies /etc/skel into a new home, as useradd does, owned by the user. */
function copySkel(from: string, to: string, uid: number): void {
  for (const name of readdirSync(from)) {
    const source = join(from, name);
    const target = join(to, name);
    const stat = lstatSync(source);
    if (stat.isDirectory()) {
      mkdirSync(target, { mode: stat.mode & 0o777 });
      copySkel(source, target, uid);
    } else if (stat.isSymbolicLink()) {
      symlinkSync(readlinkSync(source), target);
    } else if (stat.isFile()) {
      copyFileSync(source, target, constants.COPYFILE_EXCL);
      chmodSync(target, stat.mode & 0o777);
    } else {
      continue;
    }
    lchownSync(target, uid, uid);
  }
}
