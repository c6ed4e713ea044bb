// The nftables rules of one allowlisted instance, in the table firewall.ts installs: two
// chains named after its host veth end, entered through the table's maps.
//
// - `an_<veth>` (nat prerouting): DNS to any address (UDP and TCP port 53) redirected to
//   the resolver, so that no query leaves as a packet; TCP to an allowed range (not
//   denied) left alone; TCP to ports 80 and 443 anywhere else redirected to the proxy.
// - `af_<veth>` (forward, after the table's drops of blocked ranges and IPv6): denied
//   ranges dropped, allowed ranges accepted on their port, everything else dropped, so
//   other UDP, other protocols and other ports never leave.
// Both first check that a packet comes from the instance's own address: one that claims
// another instance's (guest root can forge it) would otherwise be judged, by the resolver
// and the proxy too, by that instance's policy. Left alone by the nat chain, it meets the
// table's drops.
//
// A change of policy replaces both chains' rules in one transaction: connections already
// forwarded or redirected keep going (conntrack has them); new ones meet the new rules.
import { runChecked } from '../../host/run.ts';
import { type EgressPorts, tableName } from '../firewall.ts';
import type { ParsedPolicy, PolicyEntry } from './policy.ts';

const NFT_TIMEOUT_MS = 10_000;

export function chainNames(hostIf: string): { nat: string; forward: string } {
  return { nat: `an_${hostIf}`, forward: `af_${hostIf}` };
}

function cidrMatch(entry: Extract<PolicyEntry, { kind: 'cidr' }>): string {
  return `ip daddr ${entry.cidr} tcp dport ${entry.port ?? '1-65535'}`;
}

/** The nft script that makes (or replaces) the instance's chains and enters it in the maps. */
export function allowlistScript(tag: string, hostIf: string, guestAddress: string, policy: ParsedPolicy, ports: EgressPorts): string {
  const table = `inet ${tableName(tag)}`;
  const { nat, forward } = chainNames(hostIf);
  const allowed = policy.allow.filter((e): e is Extract<PolicyEntry, { kind: 'cidr' }> => e.kind === 'cidr');
  const denied = policy.deny.filter((e): e is Extract<PolicyEntry, { kind: 'cidr' }> => e.kind === 'cidr');
  const lines = [
    `add chain ${table} ${nat}`,
    `flush chain ${table} ${nat}`,
    `add rule ${table} ${nat} ip saddr != ${guestAddress} return`,
    `add rule ${table} ${nat} udp dport 53 redirect to :${ports.dnsUdp}`,
    `add rule ${table} ${nat} tcp dport 53 redirect to :${ports.dnsTcp}`,
    // A range allowed is reached directly; one also denied is dropped by the forward chain.
    ...allowed.map((e) => `add rule ${table} ${nat} ${cidrMatch(e)} return`),
    `add rule ${table} ${nat} tcp dport 80 redirect to :${ports.http}`,
    `add rule ${table} ${nat} tcp dport 443 redirect to :${ports.tls}`,
    `add chain ${table} ${forward}`,
    `flush chain ${table} ${forward}`,
    `add rule ${table} ${forward} ip saddr != ${guestAddress} drop`,
    ...denied.map((e) => `add rule ${table} ${forward} ip daddr ${e.cidr}${e.port !== undefined ? ` tcp dport ${e.port}` : ''} drop`),
    ...allowed.map((e) => `add rule ${table} ${forward} ${cidrMatch(e)} accept`),
    `add rule ${table} ${forward} drop`,
    `add element ${table} allowlisted { ${hostIf} }`,
    `add element ${table} allowlist_nat { ${hostIf} : jump ${nat} }`,
    `add element ${table} allowlist_forward { ${hostIf} : jump ${forward} }`,
    '',
  ];
  return lines.join('\n');
}

/** Enters the instance in the allowlist (or replaces its rules), in one transaction. */
export async function applyAllowlist(tag: string, hostIf: string, guestAddress: string, policy: ParsedPolicy, ports: EgressPorts): Promise<void> {
  await runChecked('nft', ['-f', '-'], { timeoutMs: NFT_TIMEOUT_MS, input: allowlistScript(tag, hostIf, guestAddress, policy, ports) });
}

/** Takes the instance out of the allowlist and removes its chains; nothing to do when it is not in. */
export async function removeAllowlist(tag: string, hostIf: string): Promise<void> {
  if (!(await allowlistedInterfaces(tag)).includes(hostIf)) return;
  const table = `inet ${tableName(tag)}`;
  const { nat, forward } = chainNames(hostIf);
  await runChecked('nft', ['-f', '-'], {
    timeoutMs: NFT_TIMEOUT_MS,
    input: [
      `delete element ${table} allowlist_nat { ${hostIf} }`,
      `delete element ${table} allowlist_forward { ${hostIf} }`,
      `delete element ${table} allowlisted { ${hostIf} }`,
      `delete chain ${table} ${nat}`,
      `delete chain ${table} ${forward}`,
      '',
    ].join('\n'),
  });
}

export async function allowlistedInterfaces(tag: string): Promise<string[]> {
  const result = await runChecked('nft', ['-j', 'list', 'set', 'inet', tableName(tag), 'allowlisted'], { timeoutMs: NFT_TIMEOUT_MS });
  const parsed = JSON.parse(result.stdout) as { nftables: { set?: { elem?: unknown[] } }[] };
  const elems = parsed.nftables.find((e) => e.set)?.set?.elem ?? [];
  return elems.filter((e): e is string => typeof e === 'string');
}
