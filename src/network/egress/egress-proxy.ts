// The egress proxy: where nftables redirects an allowlisted instance's TCP to ports 80
// and 443 (one listener for each, so the port the guest asked for is known without the
// original destination). It reads the name the connection is for (the TLS SNI, or the
// HTTP Host, whichever the first bytes are, on either port), checks it against the
// instance's policy, and dials that name itself, resolved by the host's resolvers: the
// address the guest chose is never used, so a guest that points an allowed name at
// another address (or sends an allowed SNI to a DNS-over-HTTPS server's address) still
// reaches only the allowed name's servers. A name that is an IPv4 literal is dialled
// only inside an allowed range; a resolved address in a blocked or denied range is
// refused. Refused HTTP gets a 403 saying why; refused TLS is closed.
import { isIPv4 } from 'node:net';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Logger } from 'pino';
import type { EgressDecision } from './decisions.ts';
import type { EgressClient } from './dns-resolver.ts';
import { hostName, readFirstBytes } from './first-bytes.ts';
import { checkAddress, checkDialAddress, checkName, type Verdict } from './policy.ts';
import type { UpstreamDns } from './upstream-dns.ts';

/** How long a connection may take to send its ClientHello or request head. */
const FIRST_BYTES_TIMEOUT_MS = 10_000;
const DIAL_TIMEOUT_MS = 10_000;

export interface ProxyOptions {
  upstream: UpstreamDns;
  clientOf: (address: string) => EgressClient | undefined;
  onDecision: (decision: EgressDecision) => void;
  /** Networks the host is on, besides the always blocked ranges: never dialled. */
  blockedNetworks: () => readonly string[];
  log: Logger;
}

export class EgressProxy {
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Socket>();
  /** Open connections per instance, so that a change of policy can cut them. */
  private readonly byInstance = new Map<string, Set<Socket>>();

  private readonly options: ProxyOptions;

  constructor(options: ProxyOptions) {
    this.options = options;
  }

  /** Listens on two ephemeral ports: the one ports 80 and 443 are redirected to. */
  async start(): Promise<{ http: number; tls: number }> {
    const http = await this.listen(80);
    const tls = await this.listen(443);
    return { http, tls };
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  /** Ends every connection the instance has through the proxy (a new policy applies to the next ones). */
  cut(instanceId: string): number {
    const open = this.byInstance.get(instanceId);
    if (!open) return 0;
    for (const socket of open) socket.destroy();
    return open.size;
  }

  private async listen(port: number): Promise<number> {
    const server = createServer((socket) => this.serve(socket, port));
    this.servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '0.0.0.0', resolve);
    });
    return (server.address() as { port: number }).port;
  }

  private track(instanceId: string, ...sockets: Socket[]): void {
    let open = this.byInstance.get(instanceId);
    if (!open) this.byInstance.set(instanceId, (open = new Set()));
    for (const socket of sockets) {
      this.sockets.add(socket);
      open.add(socket);
      socket.on('close', () => {
        this.sockets.delete(socket);
        open.delete(socket);
        if (open.size === 0 && this.byInstance.get(instanceId) === open) this.byInstance.delete(instanceId);
      });
    }
  }

  private serve(socket: Socket, port: number): void {
    socket.on('error', () => socket.destroy());
    const source = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const client = this.options.clientOf(source);
    if (!client) {
      socket.destroy();
      return;
    }
    this.track(client.instanceId, socket);
    let buffered = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), FIRST_BYTES_TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const read = readFirstBytes(buffered);
      if (read.state === 'more') return;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.pause();
      const decide = (d: Omit<EgressDecision, 'instanceId' | 'kind' | 'port'>) => this.options.onDecision({ instanceId: client.instanceId, kind: 'connect', port, ...d });
      const refuse = (name: string | undefined, verdict: Verdict, address?: string) => {
        decide({ ...(name !== undefined ? { name } : {}), ...(address !== undefined ? { address } : {}), allowed: false, rule: verdict.rule });
        if (read.state === 'http') {
          const body = `roomkit egress: ${name ?? 'this connection'} is not allowed (${verdict.rule})\n`;
          socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
        } else socket.destroy();
      };
      if (read.state === 'unknown') return refuse(undefined, { allowed: false, rule: read.reason });
      let name: string | undefined;
      if (read.state === 'tls') name = read.sni;
      else {
        name = read.host === undefined ? undefined : hostName(read.host);
        // An absolute request target names a host too: it must be the Host's.
        const absolute = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]+)/i.exec(read.target);
        if (absolute && name !== undefined && hostName((absolute[1] ?? '').replace(/^.*@/, '').toLowerCase()) !== name) {
          return refuse(name, { allowed: false, rule: 'host_mismatch' });
        }
      }
      if (name === undefined || name === '') return refuse(undefined, { allowed: false, rule: read.state === 'tls' ? 'no_sni' : 'no_host' });
      void this.dial(client, name, port).then(
        (dialled) => {
          if ('refused' in dialled) return refuse(name, dialled.refused, dialled.address);
          decide({ name, address: dialled.address, allowed: true, rule: dialled.rule });
          const upstream = dialled.socket;
          this.track(client.instanceId, upstream);
          upstream.on('error', () => socket.destroy());
          socket.on('error', () => upstream.destroy());
          upstream.on('close', () => socket.destroy());
          socket.on('close', () => upstream.destroy());
          upstream.write(buffered);
          socket.pipe(upstream);
          upstream.pipe(socket);
          socket.resume();
        },
        (err: unknown) => {
          this.options.log.debug({ err, name }, 'egress proxy: the dial failed');
          refuse(name, { allowed: false, rule: 'unreachable' });
        },
      );
    };
    socket.on('data', onData);
    socket.on('close', () => clearTimeout(timer));
  }

  private async dial(client: EgressClient, name: string, port: number): Promise<{ socket: Socket; address: string; rule: string } | { refused: Verdict; address?: string }> {
    let address: string;
    let rule: string;
    if (isIPv4(name)) {
      const verdict = checkAddress(client.policy, name, port, this.options.blockedNetworks());
      if (!verdict.allowed) return { refused: verdict.rule === 'default' ? { allowed: false, rule: 'ip_literal' } : verdict, address: name };
      address = name;
      rule = verdict.rule;
    } else if (name.startsWith('[') || name.includes(':')) {
      return { refused: { allowed: false, rule: 'ipv6' } };
    } else {
      const verdict = checkName(client.policy, name, port);
      if (!verdict.allowed) return { refused: verdict };
      const addresses = await this.options.upstream.addresses(name);
      const first = addresses[0];
      if (first === undefined) return { refused: { allowed: false, rule: 'unresolved' } };
      const dialVerdict = checkDialAddress(client.policy, first, port, this.options.blockedNetworks());
      if (!dialVerdict.allowed) return { refused: dialVerdict, address: first };
      address = first;
      rule = verdict.rule;
    }
    const socket = connect({ host: address, port });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no connection to ${address}:${port} within ${DIAL_TIMEOUT_MS} ms`));
      }, DIAL_TIMEOUT_MS);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    return { socket, address, rule };
  }
}
