// What file operations in an instance answer with, whoever does them: the absolute path
// a request names, and the GuestFileError of each kind of failure the caller can act on,
// with a message naming the path as the API shows it.
import { posix } from 'node:path';
import { apiPath } from '../../lib/guest-names.ts';
import { GuestFileError } from '../types.ts';

/** The absolute path a request names, for answers: relative paths start at the home directory. */
export function absoluteGuestPath(path: string, home: string): string {
  return posix.resolve(home, path);
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
