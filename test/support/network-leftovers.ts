// Names of what test/host/network.test.ts makes on the host (stand-in hosts behind
// veths, a policy rule and routing table for the metadata address), derived from the
// test process's pid, so that a later run can find and remove what a killed run left.
import { existsSync, readdirSync } from 'node:fs';
import { run } from '../../src/host/run.ts';

/** Host end of each stand-in host's veth, and its namespace: `rkt-{pid in base 36}-{short}`. */
export const NETWORK_TEST_PREFIX = 'rkt-';
/** Preference of the policy rule that sends the pool's metadata traffic to the stand-in. */
export const META_RULE_PREF = 31_000;

/** The pid in base 36, so that interface names stay within 15 characters whatever the pid (pids reach 7 digits). */
export function networkTestTag(pid: number): string {
  return pid.toString(36);
}

/** The policy routing table of the run with this pid. */
export function metaTable(pid: number): number {
  return 1_000_000 + pid;
}

export interface NetworkTestLeftover {
  pid: number;
  links: string[];
  netns: string[];
  table: number;
  rulePrefs: number[];
}

/** What runs of the network test have on the host now, per run (live runs included). */
export async function networkTestLeftovers(): Promise<NetworkTestLeftover[]> {
  const byPid = new Map<number, NetworkTestLeftover>();
  const entry = (pid: number) => {
    let e = byPid.get(pid);
    if (!e) byPid.set(pid, (e = { pid, links: [], netns: [], table: metaTable(pid), rulePrefs: [] }));
    return e;
  };
  const pidOf = (name: string) => {
    const m = /^rkt-([0-9a-z]+)-[a-z]+$/.exec(name);
    return m?.[1] ? Number.parseInt(m[1], 36) : undefined;
  };
  const links = (await run('ip', ['-o', 'link', 'show'], { timeoutMs: 10_000 })).stdout;
  for (const m of links.matchAll(/^\d+:\s+([^:@\s]+)/gm)) {
    const pid = pidOf(m[1] ?? '');
    if (pid !== undefined) entry(pid).links.push(m[1] ?? '');
  }
  for (const name of existsSync('/var/run/netns') ? readdirSync('/var/run/netns') : []) {
    const pid = pidOf(name);
    if (pid !== undefined) entry(pid).netns.push(name);
  }
  const rules = (await run('ip', ['rule', 'show'], { timeoutMs: 10_000 })).stdout;
  for (const m of rules.matchAll(/^(\d+):.*\blookup (\d+)/gm)) {
    const table = Number(m[2]);
    if (table > 1_000_000 && Number(m[1]) === META_RULE_PREF) entry(table - 1_000_000).rulePrefs.push(META_RULE_PREF);
  }
  return [...byPid.values()];
}
