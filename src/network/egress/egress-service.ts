// The host's side of egress allowlists: the resolver and the proxy (one of each for all
// instances), the instances they serve (by guest address), and each instance's firewall
// chains. A runtime starts it before it installs the firewall (whose redirects name its
// ports), enters an instance when one with `egress: allowlist` starts, and takes it out
// when it stops; setPolicy replaces an instance's policy while it runs.
import type { Logger } from 'pino';
import { allowEgress, type EgressPorts, revokeEgress } from '../firewall.ts';
import { allowlistedInterfaces, applyAllowlist, removeAllowlist } from './allowlist-rules.ts';
import { DecisionAggregator, type EgressDecision, type ReportedDecision } from './decisions.ts';
import { type EgressClient, EgressResolver } from './dns-resolver.ts';
import { EgressProxy } from './egress-proxy.ts';
import { type NetworkPolicy, type ParsedPolicy, parsePolicy } from './policy.ts';
import { UpstreamDns } from './upstream-dns.ts';

export interface EgressServiceOptions {
  /** The data directory's host tag (the firewall's table). */
  tag: string;
  /** Resolvers the host asks for allowed names (ROOMKIT_EGRESS_DNS_SERVERS). */
  upstreamServers: readonly string[];
  /** Every decision, as made (metrics count them). */
  onDecision?: (decision: EgressDecision) => void;
  /** Decisions aggregated (decisions.ts), for the audit trail. */
  onReport?: (decision: ReportedDecision) => void;
  log: Logger;
}

export class EgressService {
  private readonly tag: string;
  private readonly log: Logger;
  private readonly resolver: EgressResolver;
  private readonly proxy: EgressProxy;
  private readonly aggregator: DecisionAggregator;
  /** Instances served, by guest address. */
  private readonly clients = new Map<string, EgressClient & { hostIf: string }>();
  private hostNetworks: readonly string[] = [];
  private listening: EgressPorts | undefined;

  constructor(options: EgressServiceOptions) {
    this.tag = options.tag;
    this.log = options.log;
    const upstream = new UpstreamDns(options.upstreamServers);
    this.aggregator = new DecisionAggregator((d) => options.onReport?.(d));
    const onDecision = (d: EgressDecision) => {
      options.onDecision?.(d);
      this.aggregator.add(d);
    };
    const clientOf = (address: string) => this.clients.get(address);
    this.resolver = new EgressResolver({ upstream, clientOf, onDecision, log: this.log });
    this.proxy = new EgressProxy({ upstream, clientOf, onDecision, blockedNetworks: () => this.hostNetworks, log: this.log });
  }

  /** The ports the firewall redirects to, once listening. */
  get ports(): EgressPorts | undefined {
    return this.listening;
  }

  /** Listens; `hostNetworks` are networks the host is on, never dialled by the proxy. */
  async start(hostNetworks: readonly string[]): Promise<EgressPorts> {
    this.hostNetworks = hostNetworks;
    if (this.listening) return this.listening;
    const dns = await this.resolver.start();
    const proxy = await this.proxy.start();
    this.listening = { dnsUdp: dns.udp, dnsTcp: dns.tcp, http: proxy.http, tls: proxy.tls };
    this.log.info({ ports: this.listening }, 'egress resolver and proxy listening');
    return this.listening;
  }

  async close(): Promise<void> {
    this.aggregator.flush();
    await Promise.all([this.resolver.close(), this.proxy.close()]);
  }

  /**
   * Serves the instance with this policy and puts its firewall chains in place (or
   * replaces them). With `cut`, its connections through the proxy are ended, so that
   * none the old policy allowed outlives it; connections to ranges reached directly
   * keep going until they end.
   */
  async enter(instanceId: string, guestAddress: string, hostIf: string, policy: ParsedPolicy, cut = false): Promise<void> {
    const ports = this.listening;
    if (!ports) throw new Error('the egress proxy is not listening');
    this.clients.set(guestAddress, { instanceId, hostIf, policy });
    await applyAllowlist(this.tag, hostIf, guestAddress, policy, ports);
    if (cut) this.proxy.cut(instanceId);
  }

  /**
   * Puts the instance's rules in place for `network`, whatever they were: the internet
   * set, or its allowlist chains, or neither. `fresh`: its veth is new and has no rules
   * yet (a create), so nothing is removed first.
   */
  async apply(instanceId: string, hostIf: string, guestAddress: string, network: NetworkPolicy, options: { fresh?: boolean; cut?: boolean } = {}): Promise<void> {
    if (network.egress === 'allowlist') {
      if (!options.fresh) await revokeEgress(this.tag, hostIf);
      await this.enter(instanceId, guestAddress, hostIf, parsePolicy(network), options.cut);
      return;
    }
    if (!options.fresh) await this.leave(instanceId, hostIf);
    if (network.egress === 'internet') await allowEgress(this.tag, hostIf);
    else if (!options.fresh) await revokeEgress(this.tag, hostIf);
  }

  /** Removes whatever rules the instance has (a teardown). */
  async release(instanceId: string, hostIf: string): Promise<void> {
    await revokeEgress(this.tag, hostIf);
    await this.leave(instanceId, hostIf);
  }

  /** Veth ends with allowlist chains, for a sweep to compare with those it keeps. */
  allowlisted(): Promise<string[]> {
    return allowlistedInterfaces(this.tag);
  }

  /** Stops serving the instance and removes its chains; nothing to do when it is not served. */
  async leave(instanceId: string, hostIf: string): Promise<void> {
    for (const [address, client] of this.clients) if (client.instanceId === instanceId) this.clients.delete(address);
    this.proxy.cut(instanceId);
    await removeAllowlist(this.tag, hostIf);
  }
}

/**
 * The resolvers an instance's resolv.conf names: the host's for internet egress; for an
 * allowlist its gateway (the host end of its veth), though any address does, since every
 * port-53 packet is redirected to the egress resolver; none without egress.
 */
export function guestNameservers(network: NetworkPolicy, hostDnsServers: readonly string[], guestAddress: string | undefined): string[] {
  if (network.egress === 'internet') return [...hostDnsServers];
  if (network.egress === 'allowlist' && guestAddress) {
    const parts = guestAddress.split('.').map(Number);
    parts[3] = (parts[3] ?? 1) - 1;
    return [parts.join('.')];
  }
  return [];
}
