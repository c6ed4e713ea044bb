// Cleans up after test processes that were killed before their `after` hooks ran (a CI
// time limit, a Ctrl-C): their instances, namespaces, firewall tables, mounts and data
// directories, and the network test's stand-in hosts. Only what belongs to a process
// that no longer exists is touched, so test runs going on beside this one are safe.
//
// scripts/test runs this before the host tests. The instances are cleaned up by
// roomkit's own crash recovery: a service is started on the dead run's data directory
// (which makes the store and the host agree) and then stopped with `onShutdown: stop`.
// It runs on SQLite (scripts/test sees to it), whatever store the dead run used.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/host/run.ts';
import { startTestApp, TEST_OWNER_FILE } from './app.ts';
import { NETWORK_TEST_PREFIX, networkTestLeftovers } from './network-leftovers.ts';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function reapDataDirs(): Promise<string[]> {
  const reaped: string[] = [];
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith('roomkit-')) continue;
    const dataDir = join(tmpdir(), name);
    const ownerFile = join(dataDir, TEST_OWNER_FILE);
    if (!existsSync(ownerFile)) continue; // not ours to judge: made by something else, or still being made
    const owner = JSON.parse(readFileSync(ownerFile, 'utf8')) as { pid: number; pool: string | null };
    if (alive(owner.pid)) continue;
    // A run on PostgreSQL left no store here (its cluster went with it): the service then
    // starts on a new, empty one, and sweeps everything of the directory as unknown.
    if (owner.pool !== null) {
      const t = await startTestApp({ gvisorPool: owner.pool, config: { dataDir } });
      await t.closeLeavingNothing();
    }
    rmSync(dataDir, { recursive: true, force: true });
    reaped.push(dataDir);
  }
  return reaped;
}

async function reapNetworkTestHosts(): Promise<string[]> {
  const reaped: string[] = [];
  for (const leftover of await networkTestLeftovers()) {
    if (alive(leftover.pid)) continue;
    for (const link of leftover.links) await run('ip', ['link', 'del', link], { timeoutMs: 10_000 });
    for (const netns of leftover.netns) await run('ip', ['netns', 'del', netns], { timeoutMs: 10_000 });
    for (const pref of leftover.rulePrefs) await run('ip', ['rule', 'del', 'pref', String(pref), 'lookup', String(leftover.table)], { timeoutMs: 10_000 });
    await run('ip', ['route', 'flush', 'table', String(leftover.table)], { timeoutMs: 10_000 });
    reaped.push(`${NETWORK_TEST_PREFIX}${leftover.pid.toString(36)}-*`);
  }
  return reaped;
}

const reaped = [...(await reapNetworkTestHosts()), ...(await reapDataDirs())];
if (reaped.length > 0) console.log(`cleaned up after killed test runs: ${reaped.join(', ')}`);
