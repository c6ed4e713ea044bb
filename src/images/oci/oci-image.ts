// Root filesystems from OCI images: a profile's `image` of `oci:<name>[:<tag>]` names an
// OCI image layout (a directory, or a `.tar` of one) in the operator's OCI directory
// (ROOMKIT_OCI_DIR). The builder resolves it to one image manifest, whose digest goes
// into the cache key, verifies every blob, and applies the layers into a fresh root
// filesystem, then adds what instances need (the VM user, tini, a real /tmp). This file
// is what the rest of roomkit uses; each step has its own file beside it: the reference
// (reference.ts), the layout (layout.ts), the tar reader (tar-reader.ts), the layers
// (layer-applier.ts) and the guest's customization (guest-customization.ts).
//
// A registry pull would only need a function that writes a layout into the OCI
// directory; everything from resolveOciImage() on is the same for it.
import { mkdirSync } from 'node:fs';
import { OciImageError } from './errors.ts';
import { customizeGuest, type GuestOptions } from './guest-customization.ts';
import { applyLayer, verifyBlob } from './layer-applier.ts';
import { type OciImage, resolveLayout } from './layout.ts';
import { formatBytes } from '../../lib/format-size.ts';

export { OciImageError } from './errors.ts';
export { guestLookup } from './guest-customization.ts';
export type { OciImage } from './layout.ts';
export { isOciImage, OCI_PREFIX, type OciReference, parseOciImage } from './reference.ts';

/**
 * Finds the image `image` names in `ociDir` and reads (and verifies) its manifest and
 * config; the layers are read only by a build.
 */
export async function resolveOciImage(ociDir: string, image: string, arch: string = process.arch): Promise<OciImage> {
  try {
    return resolveLayout(ociDir, image, arch);
  } catch (err) {
    if (err instanceof OciImageError) throw err;
    throw new OciImageError(`${image}: cannot read the layout: ${(err as Error).message}`);
  }
}

export interface BuildOptions extends GuestOptions {
  signal?: AbortSignal;
}

/** Makes `rootfs` (which must not exist) the image's root filesystem plus what instances need. */
export async function buildOciRootfs(image: OciImage, rootfs: string, options: BuildOptions): Promise<void> {
  try {
    await buildRootfs(image, rootfs, options);
  } catch (err) {
    if (err instanceof OciImageError || options.signal?.aborted) throw err;
    // A host failure (a full disk, say) still says which image and why, not a stack.
    throw new OciImageError(`${image.image}: the build failed: ${(err as Error).message}`);
  }
}

async function buildRootfs(image: OciImage, rootfs: string, options: BuildOptions): Promise<void> {
  mkdirSync(rootfs, { mode: 0o755 });
  const count = image.layers.length;
  // Every blob is checked before anything is written, so a damaged layout fails fast.
  for (const [i, layer] of image.layers.entries()) {
    options.signal?.throwIfAborted();
    options.onProgress(`verifying layer ${i + 1}/${count} (${formatBytes(layer.size)})`);
    await verifyBlob(image, layer);
  }
  for (const [i, layer] of image.layers.entries()) {
    options.signal?.throwIfAborted();
    options.onProgress(`applying layer ${i + 1}/${count}`);
    const stats = await applyLayer(image, layer, image.diffIds[i] ?? '', rootfs, `layer ${i + 1}/${count}`, options.signal);
    if (stats.xattrs > 0) options.onProgress(`layer ${i + 1}/${count}: left out ${stats.xattrs} extended attributes (such as file capabilities)`);
  }
  options.onProgress('adding the VM user');
  customizeGuest(rootfs, image.image, options);
}
