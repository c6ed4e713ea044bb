// Makes a Debian image's login shell cheap to start without changing what it sets up.
// Debian's /etc/profile asks `id -u` whether the user is root (for PATH, and PS1 in
// shells other than bash), a process of its own on every login shell: in a gVisor
// sandbox that is some 35 ms of a `bash -l -c …`, which is how E2B's SDK runs every
// command. bash knows the answer already ($EUID), so the profile reads that and runs
// `id -u` only in shells without it (dash, as `sh -l`). Everything else in the file stays
// as Debian wrote it.
import { lstatSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What the profile asks, and what it asks instead: the shell's own effective uid where it has one. */
const ASKS_ID = /\$\(id -u\)/g;
const ASKS_EUID = '${EUID:-$(id -u)}';

/** The profile's text with each `$(id -u)` answered by $EUID where the shell sets it; unchanged when already so. */
export function quickerProfile(text: string): string {
  if (text.includes(ASKS_EUID)) return text;
  return text.replace(ASKS_ID, ASKS_EUID);
}

/**
 * Rewrites the built root filesystem's /etc/profile (a regular file written by the
 * image's packages, never through a link); a root filesystem without one is left as it is.
 */
export function quickenLoginProfile(rootfs: string): void {
  const path = join(rootfs, 'etc', 'profile');
  const stat = lstatSync(path, { throwIfNoEntry: false });
  if (!stat?.isFile()) return;
  const text = readFileSync(path, 'utf8');
  const quicker = quickerProfile(text);
  if (quicker !== text) writeFileSync(path, quicker, { mode: stat.mode & 0o7777 });
}
