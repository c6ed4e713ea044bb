// The nftables rules that fence instances in. One table per data directory,
// `inet roomkit_<tag>`, replaced as a whole when the runtime starts; instances are added to and removed from its sets.
//
// From an instance (traffic entering on a host veth end `rk<tag>*`):
// - with a source address outside the pool (spoofed): dropped;
// - to the host itself (any of its addresses, over IPv4 or IPv6): dropped, except
//   replies to connections the host opened, and DNS to a resolver on the host;
// - to another instance: dropped;
// - to loopback, link-local (incl. 169.254.169.254), private, shared (100.64/10),
//   multicast and reserved IPv4 ranges, the networks the host itself is on (its
//   neighbours), and any IPv6: dropped;
// - to the host's DNS servers on port 53, for instances with egress: allowed, before
//   the private-range drop, since a resolver usually sits in a private range;
// - to anywhere else: allowed (and masqueraded) only when the instance's profile has
//   `network.egress = "internet"`; otherwise dropped;
// - from an instance with `network.egress = "allowlist"` (egress/allowlist-rules.ts):
//   DNS to any address redirected to roomkit's resolver, TCP to an allowed range
//   forwarded, TCP to ports 80 and 443 elsewhere redirected to roomkit's proxy, and
//   everything else dropped.
import { runChecked } from '../host/run.ts';
import { namePrefixes } from './netns.ts';

const NFT_TIMEOUT_MS = 10_000;

export const BLOCKED_IPV4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
];

export interface FirewallOptions {
  /** The data directory's host tag: names the table and the instances' interfaces. */
  tag: string;
  /** The instances' address pool, e.g. 10.213.0.0/16. */
  poolCidr: string;
  /** IPv4 resolvers instances with egress may query on port 53. */
  dnsServers: string[];
  /** IPv4 networks the host has an address in (CIDR), besides the pool: blocked too. */
  hostNetworks: string[];
  /** Where the egress resolver and proxy listen on the host (egress/egress-service.ts); without them no instance is allowlisted. */
  egressPorts?: EgressPorts;
}

/** The host ports of the resolver (UDP and TCP) and of the proxy (for ports 80 and 443). */
export interface EgressPorts {
  dnsUdp: number;
  dnsTcp: number;
  http: number;
  tls: number;
}

export function tableName(tag: string): string {
  return `roomkit_${tag}`;
}

export function rulesetText(options: FirewallOptions): string {
  const TABLE = tableName(options.tag);
  const instances = `"${namePrefixes(options.tag).hostIf}*"`;
  const dns = options.dnsServers.length > 0 ? `{ ${options.dnsServers.join(', ')} }` : undefined;
  const p = options.egressPorts;
  return `
add table inet ${TABLE}
delete table inet ${TABLE}
table inet ${TABLE} {
  set egress {
    type ifname
    comment "host veth ends of instances whose profile allows internet egress"
  }
  set allowlisted {
    type ifname
    comment "host veth ends of instances with an egress allowlist"
  }
  map allowlist_nat {
    type ifname : verdict
    comment "each allowlisted instance's redirects to the resolver and the proxy"
  }
  map allowlist_forward {
    type ifname : verdict
    comment "each allowlisted instance's ranges reached directly"
  }
  chain input {
    type filter hook input priority filter; policy accept;
    iifname ${instances} ct state established,related accept
    ${dns ? `iifname @egress ip daddr ${dns} meta l4proto { tcp, udp } th dport 53 accept` : ''}
    ${p ? `iifname @allowlisted ct status dnat udp dport ${p.dnsUdp} accept` : ''}
    ${p ? `iifname @allowlisted ct status dnat tcp dport { ${p.dnsTcp}, ${p.http}, ${p.tls} } accept` : ''}
    iifname ${instances} drop
  }
  chain prerouting {
    type nat hook prerouting priority dstnat; policy accept;
    iifname vmap @allowlist_nat
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    oifname ${instances} ct state established,related accept
    oifname ${instances} drop
    iifname ${instances} meta nfproto ipv6 drop
    iifname ${instances} ip saddr != ${options.poolCidr} drop
    ${dns ? `iifname @egress ip daddr ${dns} meta l4proto { tcp, udp } th dport 53 accept` : ''}
    iifname ${instances} ip daddr { ${[...BLOCKED_IPV4, ...options.hostNetworks].join(', ')} } drop
    iifname @egress accept
    iifname vmap @allowlist_forward
    iifname ${instances} drop
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${options.poolCidr} oifname != ${instances} masquerade
  }
}
`;
}

export async function installRuleset(options: FirewallOptions): Promise<void> {
  await runChecked('nft', ['-f', '-'], { timeoutMs: NFT_TIMEOUT_MS, input: rulesetText(options) });
}

export async function removeRuleset(tag: string): Promise<void> {
  const table = tableName(tag);
  await runChecked('nft', ['-f', '-'], {
    timeoutMs: NFT_TIMEOUT_MS,
    input: `add table inet ${table}\ndelete table inet ${table}\n`,
  });
}

export async function allowEgress(tag: string, hostIf: string): Promise<void> {
  await runChecked('nft', ['add', 'element', 'inet', tableName(tag), 'egress', `{ ${hostIf} }`], { timeoutMs: NFT_TIMEOUT_MS });
}

/** Removes the interface from the egress set; nothing to do when it is not there. */
export async function revokeEgress(tag: string, hostIf: string): Promise<void> {
  const present = await egressInterfaces(tag);
  if (!present.includes(hostIf)) return;
  await runChecked('nft', ['delete', 'element', 'inet', tableName(tag), 'egress', `{ ${hostIf} }`], {
    timeoutMs: NFT_TIMEOUT_MS,
  });
}

export async function egressInterfaces(tag: string): Promise<string[]> {
  const result = await runChecked('nft', ['-j', 'list', 'set', 'inet', tableName(tag), 'egress'], { timeoutMs: NFT_TIMEOUT_MS });
  const parsed = JSON.parse(result.stdout) as { nftables: { set?: { elem?: unknown[] } }[] };
  const elems = parsed.nftables.find((e) => e.set)?.set?.elem ?? [];
  return elems.filter((e): e is string => typeof e === 'string');
}

/** The IPv4 networks of the host's own addresses, from `ip -4 -o addr` output, less `except`. */
export function hostNetworks(ipAddrOutput: string, except: string): string[] {
  const networks = new Set<string>();
  for (const match of ipAddrOutput.matchAll(/\binet (\d+\.\d+\.\d+\.\d+)\/(\d+)/g)) {
    const [a, b, c, d] = (match[1] ?? '').split('.').map(Number) as [number, number, number, number];
    const prefix = Number(match[2]);
    if (a === 127 || prefix === 32) continue;
    const value = ((a << 24) >>> 0) + (b << 16) + (c << 8) + d;
    const size = 2 ** (32 - prefix);
    const base = value - (value % size);
    const cidr = `${[24, 16, 8, 0].map((s) => Math.floor(base / 2 ** s) % 256).join('.')}/${prefix}`;
    if (!inRange(base, except)) networks.add(cidr);
  }
  return [...networks];
}

function inRange(address: number, cidr: string): boolean {
  const [ip, bits] = cidr.split('/');
  const parts = (ip ?? '').split('.').map(Number);
  const start = (((parts[0] ?? 0) << 24) >>> 0) + ((parts[1] ?? 0) << 16) + ((parts[2] ?? 0) << 8) + (parts[3] ?? 0);
  const size = 2 ** (32 - Number(bits));
  return address >= start && address < start + size;
}

/** Every resolver resolv.conf names (the host's own processes may use loopback ones). */
export function resolvConfServers(resolvConf: string): string[] {
  return [...resolvConf.matchAll(/^\s*nameserver\s+(\S+)\s*$/gm)].map((m) => m[1] ?? '').filter((ip) => ip !== '');
}

/** The host's IPv4 resolvers from resolv.conf, loopback ones left out. */
export function hostDnsServers(resolvConf: string): string[] {
  return [...resolvConf.matchAll(/^\s*nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$/gm)]
    .map((m) => m[1] ?? '')
    .filter((ip) => ip !== '' && !ip.startsWith('127.'));
}
