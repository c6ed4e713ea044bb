// Questions asked of the host's resolvers (ROOMKIT_EGRESS_DNS_SERVERS), over UDP: the
// egress resolver forwards an allowed name's A question with them, and the egress proxy
// resolves the name it dials with them, so both see the same answers.
import { randomInt } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import * as dnsPacket from 'dns-packet';

/** How long one upstream server is given to answer before the next is asked. */
const ANSWER_TIMEOUT_MS = 2_000;

export interface UpstreamAnswer {
  rcode: string;
  answers: dnsPacket.Answer[];
}

export class UpstreamDns {
  private readonly servers: readonly string[];

  constructor(servers: readonly string[]) {
    this.servers = servers;
  }

  /** Asks each server in turn until one answers; rejects when none does. */
  async query(name: string, type: 'A' | 'AAAA' = 'A'): Promise<UpstreamAnswer> {
    let lastError: Error = new Error('no upstream DNS server is configured');
    for (const server of this.servers) {
      try {
        return await askOne(server, name, type);
      } catch (err) {
        lastError = err as Error;
      }
    }
    throw lastError;
  }

  /** The IPv4 addresses a name resolves to (CNAMEs followed by the upstream), none when it does not. */
  async addresses(name: string): Promise<string[]> {
    const answer = await this.query(name, 'A');
    return answer.answers.filter((a) => a.type === 'A').map((a) => (a as { data: string }).data);
  }
}

function askOne(server: string, name: string, type: 'A' | 'AAAA'): Promise<UpstreamAnswer> {
  const [host, portText] = server.includes(':') && !isIPv6(server) ? server.split(':') : [server, '53'];
  const id = randomInt(0, 65536);
  const socket = createSocket(isIPv6(host ?? '') ? 'udp6' : 'udp4');
  return new Promise<UpstreamAnswer>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.close();
      reject(new Error(`the DNS server ${server} did not answer within ${ANSWER_TIMEOUT_MS} ms`));
    }, ANSWER_TIMEOUT_MS);
    socket.on('message', (message) => {
      let packet: dnsPacket.DecodedPacket;
      try {
        packet = dnsPacket.decode(message);
      } catch {
        return;
      }
      if (packet.id !== id) return;
      clearTimeout(timer);
      socket.close();
      resolve({ rcode: (packet as unknown as { rcode?: string }).rcode ?? 'NOERROR', answers: packet.answers ?? [] });
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      socket.close();
      reject(err);
    });
    const query = dnsPacket.encode({ type: 'query', id, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name }] });
    socket.send(query, Number(portText), host);
  });
}
