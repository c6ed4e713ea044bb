// The envd access token a sandbox's create or connect answers with: what authenticates
// the SDK's in-sandbox calls, which carry it (X-Access-Token) instead of the API key. A
// token names one instance and the key that created or connected to it, with an
// HMAC-SHA256 of that under a secret of this service kept in the data directory (made on
// first use, readable by the service's user only), so tokens outlive a restart and
// nothing about them is stored. It is good for that instance only, for as long as the
// key is active (revoking the key revokes its tokens).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Caller } from '../../core/orgs.ts';
import { AppError } from '../../errors.ts';

const VERSION = 'e2b1';
const SECRET_FILE = 'e2b-access-token-secret';
const SECRET_BYTES = 32;

export interface AccessGrant {
  instanceId: string;
  caller: Caller;
}

export class AccessTokens {
  private readonly dataDir: string;
  private secretBytes: Buffer | undefined;

  constructor(dataDir: string) {
    this.dataDir = dataDir;
  }

  sign(grant: AccessGrant): string {
    const payload = Buffer.from(JSON.stringify({ i: grant.instanceId, o: grant.caller.organizationId, k: grant.caller.keyId, v: grant.caller.env })).toString('base64url');
    return `${VERSION}.${payload}.${this.mac(payload)}`;
  }

  /** What a token grants; invalid_api_key for one that is altered, cut short or another server's. */
  verify(token: string): AccessGrant {
    const invalid = () => new AppError('invalid_api_key', 'the sandbox access token (X-Access-Token) is not valid: take it from the create or connect of this sandbox');
    const [version, payload, mac, extra] = token.split('.');
    if (version !== VERSION || !payload || !mac || extra !== undefined) throw invalid();
    const expected = Buffer.from(this.mac(payload));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
    let fields: { i?: unknown; o?: unknown; k?: unknown; v?: unknown };
    try {
      fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof fields;
    } catch {
      throw invalid();
    }
    const { i, o, k, v } = fields;
    if (typeof i !== 'string' || typeof o !== 'string' || typeof k !== 'string' || (v !== 'live' && v !== 'test')) throw invalid();
    return { instanceId: i, caller: { organizationId: o, keyId: k, env: v } };
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.secret()).update(`${VERSION}.${payload}`).digest('base64url');
  }

  private secret(): Buffer {
    if (this.secretBytes) return this.secretBytes;
    const path = join(this.dataDir, SECRET_FILE);
    try {
      this.secretBytes = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      mkdirSync(this.dataDir, { recursive: true });
      const fresh = randomBytes(SECRET_BYTES);
      // 'wx': of two services starting at once on one data directory, one writes it.
      try {
        writeFileSync(path, fresh.toString('base64'), { mode: 0o600, flag: 'wx' });
        this.secretBytes = fresh;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        this.secretBytes = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
      }
    }
    if (this.secretBytes.length < SECRET_BYTES) throw new Error(`${path} holds a secret shorter than ${SECRET_BYTES} bytes`);
    return this.secretBytes;
  }
}
