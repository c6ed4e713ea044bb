// Per-instance network plumbing: a network namespace and a veth pair whose host end
// is named after the instance and whose other end is the instance's eth0, with its
// address and a default route through the host end. The sandbox's own network stack
// takes eth0's address and routes over when it starts (they leave the host's view of
// the namespace), so whatever starts a sandbox on an eth0 that one has used puts them
// back first (setGuestAddress).
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { run, runChecked } from '../host/run.ts';
import type { Lease } from './pool.ts';

const IP_TIMEOUT_MS = 10_000;
export const NETNS_DIR = '/var/run/netns';
/**
 * Names on the host are shared by every roomkit server on it, so each carries the tag
 * of its data directory (see hostTag): a server only ever touches names with its tag.
 */
export interface NamePrefixes {
  netns: string;
  hostIf: string;
}

export function namePrefixes(tag: string): NamePrefixes {
  return { netns: `rk-${tag}-`, hostIf: `rk${tag}` };
}

export interface InstanceNetworkNames {
  netns: string;
  hostIf: string;
  /** Name of the peer until it is moved into the namespace and renamed eth0. */
  guestIf: string;
}

/** Names derived from the tag and the instance id; interface names fit Linux's 15 characters. */
export function networkNames(tag: string, instanceId: string): InstanceNetworkNames {
  const hex = instanceId.replaceAll('-', '');
  const prefixes = namePrefixes(tag);
  return {
    netns: `${prefixes.netns}${hex.slice(0, 12)}`,
    hostIf: `${prefixes.hostIf}${hex.slice(0, 9)}`,
    guestIf: `rg${tag}${hex.slice(0, 9)}`,
  };
}

export function netnsPath(name: string): string {
  return `${NETNS_DIR}/${name}`;
}

export async function createNetns(name: string): Promise<void> {
  if (existsSync(netnsPath(name))) return;
  await runChecked('ip', ['netns', 'add', name], { timeoutMs: IP_TIMEOUT_MS });
}

export async function createVethPair(names: InstanceNetworkNames, lease: Lease): Promise<void> {
  // Replace a half-made pair from an interrupted attempt.
  await run('ip', ['link', 'del', names.hostIf], { timeoutMs: IP_TIMEOUT_MS });
  await runChecked('ip', ['-batch', '-'], {
    timeoutMs: IP_TIMEOUT_MS,
    input: [
      `link add ${names.hostIf} type veth peer name ${names.guestIf}`,
      `link set ${names.guestIf} netns ${names.netns}`,
      `addr add ${lease.hostAddress}/${lease.prefixLength} dev ${names.hostIf}`,
      `link set ${names.hostIf} up`,
      '',
    ].join('\n'),
  });
  await runChecked('ip', ['-n', names.netns, 'link', 'set', names.guestIf, 'name', 'eth0'], { timeoutMs: IP_TIMEOUT_MS });
  await setGuestAddress(names.netns, lease);
}

/**
 * Makes many instances' networks at once, each as createNetns and createVethPair make
 * one: every namespace and veth pair in one batch of `ip` (the guest end made in its
 * namespace as eth0), then each guest's address. For a burst of creates (a fork's
 * copies): each program the service starts costs a fork of it, which on a host of few
 * cores dominated making ten networks one by one at once.
 */
export async function createNetworks(networks: readonly { names: InstanceNetworkNames; lease: Lease }[]): Promise<void> {
  if (networks.length === 0) return;
  await runChecked('ip', ['-batch', '-'], {
    timeoutMs: IP_TIMEOUT_MS,
    input: [
      ...networks.flatMap(({ names, lease }) => [
        `netns add ${names.netns}`,
        `link add ${names.hostIf} type veth peer name eth0 netns ${names.netns}`,
        `addr add ${lease.hostAddress}/${lease.prefixLength} dev ${names.hostIf}`,
        `link set ${names.hostIf} up`,
      ]),
      '',
    ].join('\n'),
  });
  await Promise.all(networks.map(({ names, lease }) => setGuestAddress(names.netns, lease)));
}

/**
 * Gives the namespace's eth0 the guest's address and a default route through the host
 * end, replacing what is there: a sandbox (gVisor's network stack) reads them from the
 * namespace when it starts, or is restored, and takes them off eth0.
 */
export async function setGuestAddress(netns: string, lease: Pick<Lease, 'guestAddress' | 'hostAddress' | 'prefixLength'>): Promise<void> {
  await runChecked('ip', ['-n', netns, '-batch', '-'], {
    timeoutMs: IP_TIMEOUT_MS,
    input: [
      'addr flush dev eth0',
      `addr add ${lease.guestAddress}/${lease.prefixLength} dev eth0`,
      'link set eth0 up',
      'link set lo up',
      `route replace default via ${lease.hostAddress}`,
      '',
    ].join('\n'),
  });
}

/** Removes the veth pair (deleting one end removes both) and the namespace. Idempotent. */
export async function removeNetwork(names: InstanceNetworkNames): Promise<void> {
  await run('ip', ['link', 'del', names.hostIf], { timeoutMs: IP_TIMEOUT_MS });
  if (existsSync(netnsPath(names.netns))) {
    await runChecked('ip', ['netns', 'del', names.netns], { timeoutMs: IP_TIMEOUT_MS });
  }
}

/** Namespaces with this tag that exist on the host. */
export function listNetns(tag: string): string[] {
  if (!existsSync(NETNS_DIR)) return [];
  const prefix = namePrefixes(tag).netns;
  return readdirSync(NETNS_DIR).filter((n) => n.startsWith(prefix));
}

/** Host-side veth ends with this tag that exist on the host. */
export async function listHostInterfaces(tag: string): Promise<string[]> {
  const result = await runChecked('ip', ['-o', 'link', 'show'], { timeoutMs: IP_TIMEOUT_MS });
  const names = [...result.stdout.matchAll(/^\d+:\s+([^:@\s]+)/gm)].map((m) => m[1] ?? '');
  const prefix = namePrefixes(tag).hostIf;
  return names.filter((n) => n.startsWith(prefix));
}

/** A short tag that tells this data directory's host objects from another server's. */
export function hostTag(dataDir: string): string {
  return createHash('sha256').update(realpathSync(dataDir)).digest('hex').slice(0, 4);
}
