// What a profile's `image` says about an OCI image: `oci:<name>[:<tag>]` names an OCI
// image layout (a directory, or a `.tar` of one) in the operator's OCI directory
// (ROOMKIT_OCI_DIR). The profile API checks it when a profile is saved and the builder
// again when it resolves the image, so the name can never reach outside that directory.
import { OciImageError } from './errors.ts';

export const OCI_PREFIX = 'oci:';

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;

export function isOciImage(image: string): boolean {
  return image.startsWith(OCI_PREFIX);
}

export interface OciReference {
  name: string;
  tag?: string;
}

/** Parses `oci:<name>[:<tag>]`; the name is one entry of the OCI directory, never a path. */
export function parseOciImage(image: string): OciReference {
  const rest = image.slice(OCI_PREFIX.length);
  const colon = rest.indexOf(':');
  const name = colon < 0 ? rest : rest.slice(0, colon);
  const tag = colon < 0 ? undefined : rest.slice(colon + 1);
  if (name.includes('/') || name.includes('..') || !NAME_RE.test(name)) {
    throw new OciImageError(
      `image "${image}": an OCI image is named by a directory or .tar file directly inside the server's OCI directory (ROOMKIT_OCI_DIR): ` +
        "letters, digits, '.', '_' and '-', with no '/' or '..'",
    );
  }
  if (tag !== undefined && !TAG_RE.test(tag)) {
    throw new OciImageError(`image "${image}": "${tag}" is not a tag (letters, digits, '.', '_' and '-', at most 128)`);
  }
  return tag === undefined ? { name } : { name, tag };
}
