// The egress resolver: the only DNS server an allowlisted instance reaches (nftables
// redirects its port-53 traffic, to any address, here). It answers A questions for
// allowed names with the host's resolvers' answer, AAAA and other types of allowed names
// with an empty answer (IPv6 is not routed to instances; other record types carry no
// address the proxy would dial), and NXDOMAIN for every other name, without asking
// anyone: a name that is not allowed never leaves the host as a query.
//
// One UDP socket and one TCP server for all instances, on ports the firewall's redirects
// name; a packet's source address says which instance asks. Anything else is dropped.
import { createSocket, type Socket } from 'node:dgram';
import { createServer, type Server, type Socket as TcpSocket } from 'node:net';
import * as dnsPacket from 'dns-packet';
import type { Logger } from 'pino';
import type { EgressDecision } from './decisions.ts';
import { checkName, type ParsedPolicy } from './policy.ts';
import type { UpstreamDns } from './upstream-dns.ts';

/** Longest DNS message over TCP that is read (its two-byte length can say up to 65535). */
const MAX_TCP_MESSAGE = 4096;
const TCP_IDLE_MS = 10_000;
const RCODE_NXDOMAIN = 3;
const RCODE_SERVFAIL = 2;
const RCODE_FORMERR = 1;

export interface EgressClient {
  instanceId: string;
  policy: ParsedPolicy;
}

export interface ResolverOptions {
  upstream: UpstreamDns;
  clientOf: (address: string) => EgressClient | undefined;
  onDecision: (decision: EgressDecision) => void;
  log: Logger;
}

export class EgressResolver {
  private udp: Socket | undefined;
  private tcp: Server | undefined;
  private readonly tcpSockets = new Set<TcpSocket>();

  private readonly options: ResolverOptions;

  constructor(options: ResolverOptions) {
    this.options = options;
  }

  /** Listens on ephemeral ports of every IPv4 address; resolves to them (UDP, TCP). */
  async start(): Promise<{ udp: number; tcp: number }> {
    const udp = createSocket('udp4');
    this.udp = udp;
    udp.on('message', (message, remote) => {
      void this.answer(message, remote.address).then((reply) => {
        if (reply) udp.send(reply, remote.port, remote.address);
      });
    });
    udp.on('error', (err) => this.options.log.warn({ err }, 'egress resolver: UDP socket error'));
    await new Promise<void>((resolve) => udp.bind(0, '0.0.0.0', resolve));
    const tcp = createServer((socket) => this.serveTcp(socket));
    this.tcp = tcp;
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(0, '0.0.0.0', resolve);
    });
    return { udp: udp.address().port, tcp: (tcp.address() as { port: number }).port };
  }

  async close(): Promise<void> {
    this.udp?.close();
    for (const socket of this.tcpSockets) socket.destroy();
    await new Promise<void>((resolve) => (this.tcp ? this.tcp.close(() => resolve()) : resolve()));
  }

  /** The reply to one message from `source`, or undefined when it gets none (not a client's, not a query). */
  async answer(message: Buffer, source: string): Promise<Buffer | undefined> {
    const client = this.options.clientOf(source);
    if (!client) return undefined;
    let query: dnsPacket.DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return undefined;
    }
    if (query.type !== 'query') return undefined;
    const question = query.questions?.[0];
    const reply = (rcode: number, answers: dnsPacket.Answer[] = []) =>
      dnsPacket.encode({
        type: 'response',
        id: query.id ?? 0,
        flags: (query.flag_rd ? dnsPacket.RECURSION_DESIRED : 0) | dnsPacket.RECURSION_AVAILABLE | rcode,
        questions: question ? [question] : [],
        answers,
      });
    if (!question || (query.questions?.length ?? 0) !== 1) return reply(RCODE_FORMERR);
    const name = question.name.toLowerCase().replace(/\.$/, '');
    const verdict = checkName(client.policy, name);
    this.options.onDecision({ instanceId: client.instanceId, kind: 'dns', name, allowed: verdict.allowed, rule: verdict.rule });
    if (!verdict.allowed) return reply(RCODE_NXDOMAIN);
    if (question.type !== 'A') return reply(0);
    try {
      const upstream = await this.options.upstream.query(name, 'A');
      const answers = upstream.answers
        .filter((a) => a.type === 'A' || a.type === 'CNAME')
        .map((a) => ({ ...a, ttl: Math.min((a as { ttl?: number }).ttl ?? 60, 300) }) as dnsPacket.Answer);
      return reply(upstream.rcode === 'NXDOMAIN' ? RCODE_NXDOMAIN : upstream.rcode === 'NOERROR' ? 0 : RCODE_SERVFAIL, answers);
    } catch (err) {
      this.options.log.debug({ err, name }, 'egress resolver: the upstream did not answer');
      return reply(RCODE_SERVFAIL);
    }
  }

  private serveTcp(socket: TcpSocket): void {
    this.tcpSockets.add(socket);
    socket.on('close', () => this.tcpSockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.setTimeout(TCP_IDLE_MS, () => socket.destroy());
    const source = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    if (!this.options.clientOf(source)) {
      socket.destroy();
      return;
    }
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2) {
        const length = buffered.readUInt16BE(0);
        if (length > MAX_TCP_MESSAGE) {
          socket.destroy();
          return;
        }
        if (buffered.length < 2 + length) return;
        const message = buffered.subarray(2, 2 + length);
        buffered = buffered.subarray(2 + length);
        void this.answer(Buffer.from(message), source).then((reply) => {
          if (!reply || socket.destroyed) return;
          const framed = Buffer.alloc(2 + reply.length);
          framed.writeUInt16BE(reply.length, 0);
          reply.copy(framed, 2);
          socket.write(framed);
        });
      }
    });
  }
}
