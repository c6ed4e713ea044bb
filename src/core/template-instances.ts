// Instances of a profile whose image is `template:NAME`: the spec they are made with is
// the profile's, on the machine the template's files need (its base image, the build's
// VM user and disk size), with the template's ENV under the profile's env, and what the
// runtime starts them from (the template's last layer, as from a snapshot). The spec an
// instance keeps also names the template build it came from and its WORKDIR, so a
// rebuild of the template changes nothing for instances already made.
import { BUILD_MACHINE } from './template-builder.ts';
import type { ProfileSpec } from './profile-schema.ts';
import type { TemplateSource } from './templates.ts';

/** What an instance's stored spec holds of its template besides the profile's fields. */
export interface TemplateSpecFields {
  template?: {
    name: string;
    build_id: string;
    /** The runtime snapshot its files start from; null when the template changed no file. */
    layer_id: string | null;
    /** WORKDIR: where its commands start when they name no directory. */
    workdir: string | null;
  };
}

/** The spec of an instance of `profile` made from the template's image. */
export function templateInstanceSpec(profile: ProfileSpec, name: string, source: TemplateSource): ProfileSpec & TemplateSpecFields {
  const { image } = source;
  return {
    ...profile,
    image: image.base_image,
    packages: [],
    user: 'user',
    home: '/home/user',
    disk_mb: BUILD_MACHINE.disk_mb,
    keep_undo: false,
    // The profile's own env wins over the template's ENV, as a command's wins over both.
    env: { ...image.env, ...profile.env },
    template: { name, build_id: source.buildId, layer_id: image.layer_id, workdir: image.workdir },
  };
}

/** The template layer an instance of this spec starts from, if it was made from a template that has one. */
export function templateLayerOf(spec: ProfileSpec): string | undefined {
  return (spec as ProfileSpec & TemplateSpecFields).template?.layer_id ?? undefined;
}

/** The directory commands of an instance of this spec start in when they name none (its template's WORKDIR). */
export function templateWorkdirOf(spec: ProfileSpec): string | undefined {
  return (spec as ProfileSpec & TemplateSpecFields).template?.workdir ?? undefined;
}
