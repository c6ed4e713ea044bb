// `roomkit images build|list|prune`: lets an operator build a profile's image ahead of
// the first instance, see the cache, and free disk (template layers no template uses
// included).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../config.ts';
import type { Profile } from '../core/profile-schema.ts';
import { nodeIdOf } from '../host/node-identity.ts';
import { liveStates } from '../core/instance-queries.ts';
import { ImageStore } from '../images/builder.ts';
import { createLogger } from '../log.ts';
import { LayerSnapshots } from '../runtimes/gvisor/snapshots.ts';
import { Profiles } from '../core/profiles.ts';
import { forgetTemplateLayers, unusedTemplateLayers } from '../core/template-layers.ts';
import { type Db, openStore } from '../store/db.ts';
import { CliError } from './errors.ts';

interface Common {
  dataDir?: string | undefined;
  json?: boolean | undefined;
}

/** What these commands read: the store and its profiles. */
interface Store {
  db: Db;
  profiles: Profiles;
}

/**
 * Opens the data directory's store alone, not the services: starting those beside a
 * running server would recover its running commands as interrupted.
 */
async function withStore<T>(options: Common, work: (store: Store) => Promise<T>): Promise<T> {
  const config = loadConfig({ dataDir: options.dataDir, runtime: 'none' });
  const db = await openStore(config);
  try {
    return await work({ db, profiles: new Profiles(db, config) });
  } finally {
    await db.destroy();
  }
}

function imageStore(options: Common, progress: boolean): ImageStore {
  const config = loadConfig({ dataDir: options.dataDir });
  // Progress lines go to stderr, so that stdout stays the result.
  return new ImageStore({ dir: config.imagesDir, ociDir: config.ociDir, log: createLogger(progress ? 'info' : 'warn', process.stderr) });
}

export async function imagesBuild(profileRef: string, options: Common & { org?: string | undefined }): Promise<void> {
  const profile = await withStore(options, (services) => findProfile(services, profileRef, options.org));
  const started = Date.now();
  const image = await imageStore(options, !options.json).ensure({
    image: profile.image,
    packages: profile.packages,
    user: profile.user,
    home: profile.home,
  });
  if (options.json) {
    process.stdout.write(`${JSON.stringify(image)}\n`);
  } else {
    const took = Date.now() - started < 1000 ? 'already built' : `built in ${((Date.now() - started) / 1000).toFixed(1)} s`;
    process.stdout.write(`image ${image.key} for profile ${profile.name} (${profile.image}${profile.packages.length ? ` + ${profile.packages.join(' ')}` : ''}): ${took}\n`);
  }
}

export async function imagesList(options: Common): Promise<void> {
  const images = imageStore(options, false).list();
  if (options.json) {
    process.stdout.write(`${JSON.stringify(images)}\n`);
    return;
  }
  if (images.length === 0) {
    process.stdout.write('no images built yet (they are built on the first instance of a profile, or with `roomkit images build`)\n');
    return;
  }
  for (const image of images) {
    process.stdout.write(
      `${image.key}  ${image.image}  user=${image.user}  packages=${image.packages.join(',') || '-'}  built ${image.built_at} in ${(image.build_ms / 1000).toFixed(1)} s\n`,
    );
  }
}

export async function imagesPrune(options: Common): Promise<void> {
  const config = loadConfig({ dataDir: options.dataDir });
  const inUse = await withStore(options, async (services) => {
    // The images this node's instances run on: another node's are on its own host.
    const live = await liveStates(services.db, nodeIdOf(config.dataDir));
    return new Set(live.map((row) => imageKeyOf(config.dataDir, row.id)).filter((k): k is string => k !== undefined));
  });
  const snapshots = new LayerSnapshots(config.dataDir, createLogger('silent'));
  // Template layers no template's image starts from are build cache: removed first, so
  // that the images only they sat on go too.
  const layers = await withStore(options, async ({ db }) => {
    const unused = await unusedTemplateLayers(db, nodeIdOf(config.dataDir));
    for (const id of unused) await snapshots.remove(id);
    await forgetTemplateLayers(db, unused);
    return unused;
  });
  // Snapshots (template layers among them) are restored over the image they were taken over.
  for (const key of snapshots.imageKeys()) inUse.add(key);
  const removed = await imageStore(options, false).prune(inUse);
  if (options.json) process.stdout.write(`${JSON.stringify({ removed, kept: [...inUse], template_layers_removed: layers })}\n`);
  else {
    if (layers.length > 0) process.stdout.write(`removed ${layers.length} template layer${layers.length === 1 ? '' : 's'} no template uses\n`);
    process.stdout.write(removed.length ? `removed ${removed.join(', ')}\n` : 'nothing to remove\n');
  }
}

function imageKeyOf(dataDir: string, instanceId: string): string | undefined {
  const meta = join(dataDir, 'instances', instanceId, 'instance.json');
  if (!existsSync(meta)) return undefined;
  try {
    return (JSON.parse(readFileSync(meta, 'utf8')) as { imageKey?: string }).imageKey;
  } catch {
    return undefined;
  }
}

async function findProfile(services: Store, ref: string, orgName: string | undefined): Promise<Profile> {
  const orgs = await services.db.selectFrom('organizations').selectAll().orderBy('created_at').execute();
  const org = orgName === undefined ? (orgs.length === 1 ? orgs[0] : undefined) : orgs.find((o) => o.name === orgName);
  if (!org) {
    throw new CliError(
      orgName === undefined
        ? `there are ${orgs.length} organizations here; say which with --org (${orgs.map((o) => o.name).join(', ')})`
        : `no organization named "${orgName}"`,
      2,
    );
  }
  const profiles = await services.profiles.list(org.id);
  const profile = profiles.find((p) => p.profile_id === ref || p.name === ref);
  if (!profile) throw new CliError(`no profile "${ref}" in organization ${org.name} (profiles: ${profiles.map((p) => p.name).join(', ')})`, 2);
  return profile;
}

