// Signed preview URLs: what lets a browser (or anyone given the URL) reach one port of
// one instance without an API key, until a set time. A token names the instance, the
// port, the key that asked for it and when it expires, and carries an HMAC-SHA256 of
// that under a secret of this service, kept in the data directory (made on first use,
// readable by the service's user only), so tokens outlive a restart and nothing about
// them is stored. A token is checked on every use: its signature, its expiry, and that
// the key that made it is still active (revoking the key revokes its URLs).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
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

const VERSION = 'v1';
const SECRET_FILE = 'preview-url-secret';
const SECRET_BYTES = 32;

export class PreviewTokens {
  private readonly dataDir: string;
  private secretBytes: Buffer | undefined;

  constructor(dataDir: string) {
    this.dataDir = dataDir;
  }

  sign(grant: PreviewGrant): string {
    const payload = Buffer.from(
      JSON.stringify({ i: grant.instanceId, p: grant.port, o: grant.caller.organizationId, k: grant.caller.keyId, v: grant.caller.env, e: Math.floor(grant.expiresAt / 1000) }),
    ).toString('base64url');
    return `${VERSION}.${payload}.${this.mac(payload)}`;
  }

  /** What a token grants; throws invalid_preview_token or preview_url_expired. */
  verify(token: string, now = Date.now()): PreviewGrant {
    const invalid = () =>
      new AppError('invalid_preview_token', 'the preview URL is not valid (altered, cut short, or signed by another server)', undefined, { code: 'sign_port_url' });
    const [version, payload, mac, extra] = token.split('.');
    if (version !== VERSION || !payload || !mac || extra !== undefined) throw invalid();
    const expected = Buffer.from(this.mac(payload));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
    let fields: { i?: unknown; p?: unknown; o?: unknown; k?: unknown; v?: unknown; e?: unknown };
    try {
      fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof fields;
    } catch {
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

  private mac(payload: string): string {
    return createHmac('sha256', this.secret()).update(`${VERSION}.${payload}`).digest('base64url');
  }

  /** The signing secret: read from the data directory, or made there on first use. */
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
