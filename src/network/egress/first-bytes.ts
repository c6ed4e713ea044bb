// What the egress proxy reads of a connection before it dials: the server name of a TLS
// ClientHello (its server_name extension, RFC 6066) or the Host of an HTTP/1 request
// head. Neither consumes anything: the bytes read are sent on unchanged once the
// connection is allowed. No TLS library parses a ClientHello without also being the
// server, so the few fields it takes are read here, bounds-checked at every step.

/** The most bytes read while waiting for a ClientHello or a request head. */
export const MAX_FIRST_BYTES = 16_384;

export type FirstBytes =
  | { state: 'more' }
  | { state: 'tls'; sni: string | undefined }
  | { state: 'http'; host: string | undefined; target: string }
  | { state: 'unknown'; reason: string };

/** Reads what is buffered so far: `more` while a ClientHello or a request head is incomplete. */
export function readFirstBytes(buffer: Buffer): FirstBytes {
  if (buffer.length === 0) return { state: 'more' };
  if (buffer[0] === 0x16) return readClientHello(buffer);
  return readHttpHead(buffer);
}

function readClientHello(buffer: Buffer): FirstBytes {
  // The handshake message may span records: gather their payloads.
  const chunks: Buffer[] = [];
  let offset = 0;
  let gathered = 0;
  let needed: number | undefined;
  while (needed === undefined || gathered < needed) {
    if (buffer.length < offset + 5) return more(buffer);
    if (buffer[offset] !== 0x16) return { state: 'unknown', reason: 'a TLS record other than a handshake came first' };
    const length = buffer.readUInt16BE(offset + 3);
    if (buffer.length < offset + 5 + length) return more(buffer);
    const payload = buffer.subarray(offset + 5, offset + 5 + length);
    chunks.push(payload);
    gathered += payload.length;
    offset += 5 + length;
    if (needed === undefined && gathered >= 4) {
      const head = Buffer.concat(chunks);
      if (head[0] !== 0x01) return { state: 'unknown', reason: 'the first TLS handshake message is not a ClientHello' };
      needed = 4 + head.readUIntBE(1, 3);
    }
  }
  const hello = Buffer.concat(chunks).subarray(4, needed);
  try {
    return { state: 'tls', sni: serverName(hello) };
  } catch {
    return { state: 'unknown', reason: 'the ClientHello is malformed' };
  }
}

function more(buffer: Buffer): FirstBytes {
  return buffer.length >= MAX_FIRST_BYTES ? { state: 'unknown', reason: 'no complete ClientHello within the first bytes' } : { state: 'more' };
}

/** The host_name of the server_name extension, if any; throws on a truncated body. */
function serverName(hello: Buffer): string | undefined {
  const need = (end: number) => {
    if (end > hello.length) throw new RangeError('truncated');
  };
  let p = 2 + 32; // client_version, random
  need(p + 1);
  p += 1 + (hello[p] ?? 0); // session_id
  need(p + 2);
  p += 2 + hello.readUInt16BE(p); // cipher_suites
  need(p + 1);
  p += 1 + (hello[p] ?? 0); // compression_methods
  if (p === hello.length) return undefined; // no extensions
  need(p + 2);
  const end = p + 2 + hello.readUInt16BE(p);
  need(end);
  p += 2;
  while (p + 4 <= end) {
    const type = hello.readUInt16BE(p);
    const length = hello.readUInt16BE(p + 2);
    p += 4;
    need(p + length);
    if (type === 0) {
      let q = p + 2;
      const listEnd = p + 2 + hello.readUInt16BE(p);
      need(listEnd);
      while (q + 3 <= listEnd) {
        const nameType = hello[q];
        const nameLength = hello.readUInt16BE(q + 1);
        need(q + 3 + nameLength);
        if (nameType === 0) return hello.subarray(q + 3, q + 3 + nameLength).toString('latin1').toLowerCase();
        q += 3 + nameLength;
      }
      return undefined;
    }
    p += length;
  }
  return undefined;
}

function readHttpHead(buffer: Buffer): FirstBytes {
  const end = buffer.indexOf('\r\n\r\n');
  if (end < 0) {
    if (buffer.length >= MAX_FIRST_BYTES) return { state: 'unknown', reason: 'no HTTP request head within the first bytes' };
    // Not HTTP at all: a request line starts with a token and a space.
    if (!/^[A-Z]{1,16}( |$)/.test(buffer.subarray(0, 17).toString('latin1'))) return { state: 'unknown', reason: 'neither TLS nor HTTP' };
    return { state: 'more' };
  }
  const lines = buffer.subarray(0, end).toString('latin1').split('\r\n');
  const request = /^([A-Z]{1,16}) (\S+) HTTP\/1\.[01]$/.exec(lines[0] ?? '');
  if (!request) return { state: 'unknown', reason: 'neither TLS nor HTTP' };
  const hosts = lines.slice(1).filter((l) => /^host\s*:/i.test(l)).map((l) => l.slice(l.indexOf(':') + 1).trim().toLowerCase());
  // Two Host headers are a request smuggling device; it is treated as having none.
  return { state: 'http', host: hosts.length === 1 ? hosts[0] : undefined, target: request[2] ?? '' };
}

/** The name part of a Host header or an authority (`name`, `name:port`, `[v6]:port`). */
export function hostName(authority: string): string {
  if (authority.startsWith('[')) return authority.slice(0, authority.indexOf(']') + 1);
  const colon = authority.lastIndexOf(':');
  return (colon >= 0 ? authority.slice(0, colon) : authority).replace(/\.$/, '');
}
