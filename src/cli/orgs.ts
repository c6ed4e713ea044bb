// `roomkit orgs quota` and `roomkit orgs usage`: the operator sets and reads an
// organization's quotas directly on the data directory, also while `serve` runs on it
// (the store allows a second writer; the service reads quotas on every request).
import { loadConfig } from '../config.ts';
import { Organizations } from '../core/orgs.ts';
import { Profiles } from '../core/profiles.ts';
import { QUOTA_NAMES, type QuotaName, type QuotaOverrides, type Usage } from '../core/quota-schema.ts';
import { Quotas } from '../core/quotas.ts';
import { isAppError } from '../errors.ts';
import { openStore } from '../store/db.ts';
import { CliError } from './errors.ts';

/** The option of each quota, e.g. --memory-mb for memory_mb. */
export const QUOTA_OPTIONS: Record<QuotaName, string> = Object.fromEntries(
  QUOTA_NAMES.map((name) => [name, name.replaceAll('_', '-')]),
) as Record<QuotaName, string>;

/** A quota value as given on the command line: a whole number, or `default` to return it to the configured default. */
export function parseQuotaValue(name: QuotaName, value: string): number | null {
  if (value === 'default') return null;
  if (!/^\d{1,10}$/.test(value)) throw new CliError(`--${QUOTA_OPTIONS[name]} must be a whole number or "default", got "${value}"`, 2);
  return Number(value);
}

async function withQuotas<T>(dataDir: string | undefined, fn: (orgs: Organizations, quotas: Quotas) => Promise<T>): Promise<T> {
  const config = loadConfig({ dataDir, runtime: 'none' });
  const db = await openStore(config);
  try {
    const orgs = new Organizations({ db, profiles: new Profiles(db, config) });
    return await fn(orgs, new Quotas({ db, config }));
  } catch (err) {
    if (isAppError(err)) throw new CliError(err.message, 1);
    throw err;
  } finally {
    await db.destroy();
  }
}

export async function orgsQuota(org: string, options: { dataDir?: string; json?: boolean } & Partial<Record<QuotaName, string>>): Promise<void> {
  const changes: QuotaOverrides = {};
  for (const name of QUOTA_NAMES) {
    const value = options[name];
    if (value !== undefined) changes[name] = parseQuotaValue(name, value);
  }
  const usage = await withQuotas(options.dataDir, async (orgs, quotas) => {
    const { organization_id } = await orgs.find(org);
    if (Object.keys(changes).length > 0) await quotas.setOverrides(organization_id, changes);
    return quotas.usage(organization_id);
  });
  printUsage(usage, options.json === true);
}

export async function orgsUsage(org: string, options: { dataDir?: string; json?: boolean }): Promise<void> {
  const usage = await withQuotas(options.dataDir, async (orgs, quotas) => quotas.usage((await orgs.find(org)).organization_id));
  printUsage(usage, options.json === true);
}

function printUsage(usage: Usage, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(usage)}\n`);
    return;
  }
  const lines = [`organization ${usage.organization_id}`, 'quota                 used      limit  source'];
  for (const name of QUOTA_NAMES) {
    const q = usage.quotas[name];
    lines.push(`${name.padEnd(20)} ${String(q.used).padStart(6)} ${String(q.limit).padStart(10)}  ${q.source}`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}
