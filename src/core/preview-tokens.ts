// Signed preview URLs: what lets a browser (or anyone given the URL) reach one port of
// one instance without an API key, until a set time. A token holds the instance, the
// port, the key that asked for it and when it expires, sealed with AES-256-GCM under a
// key derived from a secret of this service, kept in the data directory (made on first
// use, readable by the service's user only), so tokens outlive a restart and nothing
// about them is stored. Nodes of a shared store derive it from their shared
// ROOMKIT_NODE_SECRET instead, so that any node opens a token another node made (and
// carries its request to the node that runs the instance). Sealed, not only signed: whoever holds a URL learns nothing from
// its token (not the instance's id, which would reach the instance's raw file endpoint),
// and cannot alter it. A token is checked on every use: its seal, its expiry, and that
// the key that made it is still active (revoking the key revokes its URLs).
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppError } from '../errors.ts';
import type { Caller } from './orgs.ts';

/** What a preview token grants. */
export interface PreviewGrant {
  instanceId: string;
  port: number;
  /** The key (and its organization) that asked for the URL. */
  caller: Caller;
  /** Unix time, ms. */
  expiresAt: number;
}

const VERSION = 'v2';
const SECRET_FILE = 'preview-url-secret';
const SECRET_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class PreviewTokens {
  private readonly dataDir: string;
  private secretBytes: Buffer | undefined;
  private sealKey: Buffer | undefined;

  /** `nodeSecret`: the nodes' shared secret, when the service is one node of several (else the data directory's secret). */
  constructor(dataDir: string, nodeSecret?: string) {
    this.dataDir = dataDir;
    if (nodeSecret !== undefined) this.secretBytes = Buffer.from(hkdfSync('sha256', nodeSecret, Buffer.alloc(0), 'roomkit nodes preview secret', SECRET_BYTES));
  }

  sign(grant: PreviewGrant): string {
    const fields = JSON.stringify({ i: grant.instanceId, p: grant.port, o: grant.caller.organizationId, k: grant.caller.keyId, v: grant.caller.env, e: Math.floor(grant.expiresAt / 1000) });
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key(), iv);
    cipher.setAAD(Buffer.from(VERSION));
    const sealed = Buffer.concat([iv, cipher.update(fields, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${VERSION}.${sealed.toString('base64url')}`;
  }

  /** What a token grants; throws invalid_preview_token or preview_url_expired. */
  verify(token: string, now = Date.now()): PreviewGrant {
    const invalid = () =>
      new AppError('invalid_preview_token', 'the preview URL is not valid (altered, cut short, or signed by another server)', undefined, { code: 'sign_port_url' });
    const [version, sealed, extra] = token.split('.');
    if (version === 'v1') {
      // Tokens before sealing could be read: they are refused rather than honoured until they expire.
      throw new AppError('invalid_preview_token', 'the preview URL was signed by an earlier version of roomkit, whose URLs are no longer accepted: sign it again', undefined, { code: 'sign_port_url' });
    }
    if (version !== VERSION || !sealed || extra !== undefined) throw invalid();
    const bytes = Buffer.from(sealed, 'base64url');
    if (bytes.length <= IV_BYTES + TAG_BYTES) throw invalid();
    let fields: { i?: unknown; p?: unknown; o?: unknown; k?: unknown; v?: unknown; e?: unknown };
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key(), bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(VERSION));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
      fields = JSON.parse(plain.toString('utf8')) as typeof fields;
    } catch {
      // Altered, cut short, or sealed under another secret: GCM's tag does not match.
      throw invalid();
    }
    const { i, p, o, k, v, e } = fields;
    if (typeof i !== 'string' || typeof p !== 'number' || typeof o !== 'string' || typeof k !== 'string' || (v !== 'live' && v !== 'test') || typeof e !== 'number') {
      throw invalid();
    }
    const expiresAt = e * 1000;
    if (expiresAt <= now) {
      throw new AppError(
        'preview_url_expired',
        `the preview URL expired at ${new Date(expiresAt).toISOString()}`,
        { expired_at: new Date(expiresAt).toISOString() },
        { code: 'sign_port_url', port: p },
      );
    }
    return { instanceId: i, port: p, caller: { organizationId: o, keyId: k, env: v }, expiresAt };
  }

  /** The sealing key, derived from the secret (a key for this use alone). */
  private key(): Buffer {
    this.sealKey ??= Buffer.from(hkdfSync('sha256', this.secret(), Buffer.alloc(0), 'roomkit preview token', 32));
    return this.sealKey;
  }

  /** The service's preview secret: read from the data directory, or made there on first use. */
  private secret(): Buffer {
    if (this.secretBytes) return this.secretBytes;
    const file = join(this.dataDir, SECRET_FILE);
    try {
      this.secretBytes = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64url');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      mkdirSync(this.dataDir, { recursive: true });
      try {
        writeFileSync(file, `${randomBytes(SECRET_BYTES).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
      } catch (writeErr) {
        // Another process of the same data directory made it first: use theirs.
        if ((writeErr as NodeJS.ErrnoException).code !== 'EEXIST') throw writeErr;
      }
      this.secretBytes = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64url');
    }
    if (this.secretBytes.length < 16) throw new Error(`${file} holds too short a secret; remove it and a new one is made (every preview URL signed before stops working)`);
    return this.secretBytes;
  }
}
