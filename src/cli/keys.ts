// `roomkit keys create`: works directly on the data directory, also while `serve` runs
// on it (the store allows a second writer). It opens the store alone, not the services:
// starting those would recover the running service's commands as interrupted.
import { loadConfig } from '../config.ts';
import { Organizations } from '../core/orgs.ts';
import { Profiles } from '../core/profiles.ts';
import { openStore } from '../store/db.ts';
import { NAME_PATTERN } from '../core/profile-schema.ts';
import type { KeyEnv } from '../core/apikeys.ts';
import { CliError } from './errors.ts';

export async function keysCreate(options: {
  org: string;
  env: KeyEnv;
  name?: string | undefined;
  dataDir?: string | undefined;
  json?: boolean | undefined;
}): Promise<void> {
  if (!new RegExp(NAME_PATTERN).test(options.org)) {
    throw new CliError(`organization name "${options.org}" is not allowed: use 1-64 characters of A-Z a-z 0-9 . _ -`, 2);
  }
  const config = loadConfig({ dataDir: options.dataDir, runtime: 'none' });
  const db = await openStore(config);
  try {
    const organizations = new Organizations({ db, profiles: new Profiles(db, config) });
    const { organization, created } = await organizations.ensure(options.org);
    const { secret } = await organizations.createKey(organization.organization_id, {
      env: options.env,
      name: options.name,
    });
    if (options.json) {
      process.stdout.write(`${JSON.stringify({ organization_id: organization.organization_id, api_key: secret })}\n`);
    } else {
      process.stdout.write(
        `${created ? 'Created organization' : 'Organization'} ${organization.name} (${organization.organization_id})\n` +
          `API key: ${secret}\n` +
          'Store it now: it is not shown again.\n',
      );
    }
  } finally {
    await db.destroy();
  }
}
