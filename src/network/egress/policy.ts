// An instance's egress policy: what `network.allow` and `network.deny` entries mean,
// how they are checked when a profile or a create names them, and how a name or an
// address is matched against them by the resolver, the proxy and the firewall.
//
// An entry is a domain (`example.com`, `*.example.com`: its subdomains, not itself) or an
// IPv4 address or range (`203.0.113.7`, `203.0.113.0/24`), either with an optional
// `:port`. Domains are reached through the egress proxy, which can read a name only on
// HTTP (the Host) and TLS (the SNI): their ports are 80 and 443. Ranges are reached
// directly, over TCP, on their port or any. Deny entries win over allow entries, and the
// ranges an instance never reaches (BLOCKED_IPV4, the host's own networks) stay
// unreachable whatever either list says.
import { isIPv4 } from 'node:net';
import { parseCidr } from '../../lib/cidr.ts';
import { BLOCKED_IPV4 } from '../firewall.ts';

export type EgressMode = 'none' | 'internet' | 'allowlist';

/** The network part of a machine: as a profile, a create or PUT …/network states it. */
export interface NetworkPolicy {
  egress: EgressMode;
  allow?: string[];
  deny?: string[];
}

/** The most entries in `allow` and in `deny`, each. */
export const MAX_POLICY_ENTRIES = 100;
/** The ports a domain entry may name: where the proxy reads the name. */
export const NAME_PORTS = [80, 443] as const;

export type PolicyEntry =
  | { kind: 'domain'; text: string; domain: string; wildcard: boolean; port?: number }
  | { kind: 'cidr'; text: string; cidr: string; base: number; prefixLength: number; port?: number };

/** A policy's entries parsed once, for the resolver, the proxy and the firewall. */
export interface ParsedPolicy {
  egress: EgressMode;
  allow: PolicyEntry[];
  deny: PolicyEntry[];
}

/** An entry that cannot be used: which list, its index, and why. */
export class PolicyEntryError extends Error {
  readonly field: string;

  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** Parses one entry, or throws PolicyEntryError naming `field`. */
export function parseEntry(field: string, raw: string): PolicyEntry {
  const text = raw.trim().toLowerCase();
  if (text.includes('[') || text.split(':').length > 2) {
    throw new PolicyEntryError(field, `"${raw}": IPv6 is not routed to instances; name a domain or an IPv4 range`);
  }
  let host = text;
  let port: number | undefined;
  const colon = text.lastIndexOf(':');
  if (colon >= 0) {
    host = text.slice(0, colon);
    const portText = text.slice(colon + 1);
    if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) {
      throw new PolicyEntryError(field, `"${raw}": the port after ":" must be a number from 1 to 65535`);
    }
    port = Number(portText);
  }
  if (/^[\d./]+$/.test(host)) {
    const cidrText = host.includes('/') ? host : `${host}/32`;
    if (!isIPv4(cidrText.split('/')[0] ?? '')) throw new PolicyEntryError(field, `"${raw}" is not an IPv4 address or range like 203.0.113.0/24`);
    let parsed: { base: number; prefixLength: number };
    try {
      parsed = parseCidr(cidrText);
    } catch (err) {
      throw new PolicyEntryError(field, `"${raw}": ${(err as Error).message}`);
    }
    const inside = BLOCKED_IPV4.find((b) => contains(parseCidr(b), parsed));
    if (inside) {
      throw new PolicyEntryError(
        field,
        `"${raw}" is inside ${inside}, a private, loopback, link-local, metadata or reserved range: instances never reach those, whatever the policy says`,
      );
    }
    return { kind: 'cidr', text, cidr: cidrText, base: parsed.base, prefixLength: parsed.prefixLength, ...(port !== undefined ? { port } : {}) };
  }
  const wildcard = host.startsWith('*.');
  const domain = wildcard ? host.slice(2) : host;
  const labels = domain.split('.');
  if (domain.length > 253 || labels.length < 2 || !labels.every((l) => LABEL.test(l)) || /^\d+$/.test(labels.at(-1) ?? '')) {
    throw new PolicyEntryError(
      field,
      `"${raw}" is not a domain (example.com, *.example.com) or an IPv4 address or range (203.0.113.0/24), with an optional :port`,
    );
  }
  if (port !== undefined && !(NAME_PORTS as readonly number[]).includes(port)) {
    throw new PolicyEntryError(
      field,
      `"${raw}": a domain is reachable on ports 80 and 443 only (the proxy reads the HTTP Host or the TLS SNI there); name an IPv4 range for port ${port}`,
    );
  }
  return { kind: 'domain', text, domain, wildcard, ...(port !== undefined ? { port } : {}) };
}

/**
 * Checks and parses a policy; throws PolicyEntryError for the first bad entry. Lists
 * other than empty ones belong to `allowlist` only: `none` and `internet` have none.
 */
export function parsePolicy(policy: NetworkPolicy, fieldPrefix = 'network'): ParsedPolicy {
  const allow = policy.allow ?? [];
  const deny = policy.deny ?? [];
  if (policy.egress !== 'allowlist') {
    if (allow.length > 0) throw new PolicyEntryError(`${fieldPrefix}.allow`, `network.allow applies to egress "allowlist"; egress "${policy.egress}" takes no entries`);
    if (deny.length > 0) throw new PolicyEntryError(`${fieldPrefix}.deny`, `network.deny applies to egress "allowlist"; egress "${policy.egress}" takes no entries`);
  }
  for (const [name, list] of [['allow', allow], ['deny', deny]] as const) {
    if (list.length > MAX_POLICY_ENTRIES) {
      throw new PolicyEntryError(`${fieldPrefix}.${name}`, `network.${name} has ${list.length} entries; the most is ${MAX_POLICY_ENTRIES}`);
    }
  }
  return {
    egress: policy.egress,
    allow: allow.map((e, i) => parseEntry(`${fieldPrefix}.allow[${i}]`, e)),
    deny: deny.map((e, i) => parseEntry(`${fieldPrefix}.deny[${i}]`, e)),
  };
}

/** What a check decided, and the entry that decided it (`default` when none did). */
export interface Verdict {
  allowed: boolean;
  rule: string;
}

/** Whether `name` (a host name, lower case, no trailing dot) may be reached on `port` (undefined: any of NAME_PORTS, as DNS asks). */
export function checkName(policy: ParsedPolicy, name: string, port?: number): Verdict {
  const host = name.toLowerCase().replace(/\.$/, '');
  for (const entry of policy.deny) {
    // A deny on one port leaves the name resolvable (port undefined) for its other port.
    const onPort = port === undefined ? entry.port === undefined : entry.port === undefined || entry.port === port;
    if (entry.kind === 'domain' && onPort && domainMatches(entry, host)) return { allowed: false, rule: `deny ${entry.text}` };
  }
  for (const entry of policy.allow) {
    if (entry.kind === 'domain' && domainMatches(entry, host) && (entry.port === undefined || port === undefined || entry.port === port)) {
      return { allowed: true, rule: `allow ${entry.text}` };
    }
  }
  return { allowed: false, rule: 'default' };
}

/** Whether an IPv4 address may be reached on a TCP `port` (deny entries and blocked ranges win). */
export function checkAddress(policy: ParsedPolicy, address: string, port: number, extraBlocked: readonly string[] = []): Verdict {
  if (!isIPv4(address)) return { allowed: false, rule: 'ipv6' };
  const value = ipValue(address);
  for (const blocked of [...BLOCKED_IPV4, ...extraBlocked]) {
    const range = parseCidr(blocked);
    if (inRange(value, range)) return { allowed: false, rule: `blocked ${blocked}` };
  }
  for (const entry of policy.deny) {
    if (entry.kind === 'cidr' && inRange(value, entry) && (entry.port === undefined || entry.port === port)) return { allowed: false, rule: `deny ${entry.text}` };
  }
  for (const entry of policy.allow) {
    if (entry.kind === 'cidr' && inRange(value, entry) && (entry.port === undefined || entry.port === port)) return { allowed: true, rule: `allow ${entry.text}` };
  }
  return { allowed: false, rule: 'default' };
}

/** Whether a resolved address of an allowed name may be dialled: blocked ranges and deny entries win. */
export function checkDialAddress(policy: ParsedPolicy, address: string, port: number, extraBlocked: readonly string[] = []): Verdict {
  const verdict = checkAddress(policy, address, port, extraBlocked);
  if (verdict.allowed || verdict.rule === 'default') return { allowed: true, rule: 'resolved' };
  return verdict;
}

function domainMatches(entry: Extract<PolicyEntry, { kind: 'domain' }>, host: string): boolean {
  return entry.wildcard ? host.endsWith(`.${entry.domain}`) : host === entry.domain;
}

export function ipValue(address: string): number {
  return address.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
}

function inRange(value: number, range: { base: number; prefixLength: number }): boolean {
  return value >= range.base && value < range.base + 2 ** (32 - range.prefixLength);
}

function contains(outer: { base: number; prefixLength: number }, inner: { base: number; prefixLength: number }): boolean {
  return inner.prefixLength >= outer.prefixLength && inRange(inner.base, outer);
}
