// Request ids: every request gets one, sent back as X-Request-Id, written on every log
// line of the request and put in every Error body. A proxy the operator trusts
// (ROOMKIT_TRUST_PROXY) may bring its own, so one id follows a request through both; it
// is kept only when it is a short plain token, so a client cannot put arbitrary text
// into the logs. Anything else gets a new UUID.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { BlockList, isIPv4 } from 'node:net';

/** What an incoming id may look like: letters, digits and . _ : - , at most 128 characters. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** The addresses (and CIDR ranges) of trusted proxies, as a set to test peers against. */
export function trustedPeers(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', prefix] = entry.split('/');
    const family = isIPv4(address) ? 'ipv4' : 'ipv6';
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(prefix), family);
  }
  return list;
}

function isTrusted(peers: BlockList, address: string | undefined): boolean {
  if (address === undefined) return false;
  // A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d.
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (v4 !== undefined) return peers.check(v4, 'ipv4');
  return peers.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');
}

/** A generator for Fastify's genReqId: the trusted proxy's id when it is sane, else a new UUID. */
export function requestIdGenerator(peers: BlockList): (raw: IncomingMessage) => string {
  return (raw) => {
    const incoming = raw.headers['x-request-id'];
    if (typeof incoming === 'string' && REQUEST_ID_PATTERN.test(incoming) && isTrusted(peers, raw.socket?.remoteAddress)) return incoming;
    return randomUUID();
  };
}
