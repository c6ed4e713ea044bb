// Readers of single settings: each takes a setting's value from its flag or, failing
// that, its ROOMKIT_* variable (env-names.ts), checks it against its kind (a bounded
// whole number, one of a list, a CIDR range, a path, a URL, a database URL, a token, addresses, a
// domain, ports) and throws a ConfigError naming where the value came from. An empty
// variable counts as unset.
import { isIP } from 'node:net';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import type { Config, ConfigOverrides } from './settings.ts';
import { parseCidr } from '../lib/cidr.ts';
import { ConfigError } from './config-error.ts';
import { ENV_NAMES } from './env-names.ts';

type Key = keyof Config;

export class SettingReaders {
  private readonly overrides: ConfigOverrides;
  private readonly env: NodeJS.ProcessEnv;

  constructor(overrides: ConfigOverrides, env: NodeJS.ProcessEnv) {
    this.overrides = overrides;
    this.env = env;
  }

  /** The setting's text as given (a flag wins over the environment); undefined when unset. */
  raw(key: Key): string | undefined {
    const fromFlag = this.overrides[key];
    if (fromFlag !== undefined) return String(fromFlag);
    const fromEnv = this.env[ENV_NAMES[key]];
    return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
  }

  /** Where the setting came from, for an error: the option or the variable. */
  private where(key: Key): string {
    return this.overrides[key] !== undefined ? `option ${key}` : `environment variable ${ENV_NAMES[key]}`;
  }

  int(key: Key, fallback: number, min: number, max: number): number {
    const value = this.raw(key);
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new ConfigError(`${this.where(key)} must be a whole number from ${min} to ${max}, got "${value}"`);
    }
    return n;
  }

  oneOf<T extends string>(key: Key, choices: readonly T[], fallback: T): T {
    const value = this.raw(key);
    if (value === undefined) return fallback;
    if (!(choices as readonly string[]).includes(value)) {
      throw new ConfigError(`${this.where(key)} must be one of ${choices.join(', ')}, got "${value}"`);
    }
    return value as T;
  }

  cidr(key: Key, fallback: string): string {
    const value = this.raw(key) ?? fallback;
    try {
      const { prefixLength } = parseCidr(value);
      if (prefixLength > 28) throw new Error('it must be a /28 or larger');
    } catch (err) {
      throw new ConfigError(`${this.where(key)} must be an IPv4 range such as 10.213.0.0/16: ${(err as Error).message}`);
    }
    return value;
  }

  /** An absolute path; a leading `~` is the home directory. */
  path(key: Key): string | undefined {
    const value = this.raw(key);
    return value === undefined ? undefined : resolve(value.replace(/^~(?=\/|$)/, homedir()));
  }

  /** An http(s) URL without credentials, query or fragment, as an origin and path without a trailing slash. */
  origin(key: Key): string | undefined {
    const value = this.raw(key);
    if (value === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new ConfigError(`${this.where(key)} must be a URL such as https://roomkit.example.com, got "${value}"`);
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '' || url.username !== '') {
      throw new ConfigError(`${this.where(key)} must be an http(s) URL without credentials, query or fragment, got "${value}"`);
    }
    return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
  }

  /**
   * A PostgreSQL connection URL (postgres:// or postgresql://) with a host. Its password
   * is never repeated in an error.
   */
  databaseUrl(key: Key): string | undefined {
    const value = this.raw(key);
    if (value === undefined) return undefined;
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
    if (url === undefined || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') || url.hostname === '') {
      const shown = url === undefined ? 'a value that is not a URL' : `"${url.protocol}//${url.host}${url.pathname}"`;
      throw new ConfigError(`${this.where(key)} must be a PostgreSQL URL such as postgres://roomkit:PASSWORD@db.example.com:5432/roomkit, got ${shown}`);
    }
    return value;
  }

  token(key: Key): string | undefined {
    const value = this.raw(key);
    if (value === undefined) return undefined;
    if (!/^[\x21-\x7e]{32,256}$/.test(value)) {
      throw new ConfigError(`${this.where(key)} must be 32 to 256 printable characters without spaces (e.g. from \`openssl rand -hex 32\`)`);
    }
    return value;
  }

  /** Addresses or CIDR ranges (IPv4 or IPv6), separated by commas. */
  addresses(key: Key): string[] {
    const value = this.raw(key);
    if (value === undefined) return [];
    return value.split(',').map((entry) => {
      const item = entry.trim();
      const [address = '', prefix, extra] = item.split('/');
      const family = isIP(address);
      const bits = family === 4 ? 32 : 128;
      const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
      if (family === 0 || !prefixOk || extra !== undefined) {
        throw new ConfigError(`${this.where(key)} must be addresses or CIDR ranges separated by commas (e.g. 127.0.0.1,10.0.0.0/8), got "${item}"`);
      }
      return item;
    });
  }

  /** A secret, or `off`. */
  secret(key: Key): string | undefined {
    const value = this.raw(key);
    if (value === undefined || value === 'off') return value;
    if (!/^[\x21-\x7e]{16,256}$/.test(value)) {
      throw new ConfigError(`${this.where(key)} must be 16 to 256 printable characters without spaces, or "off"`);
    }
    return value;
  }

  /** A domain name, with `:port` when it has one; lower-cased. */
  domain(key: Key): string | undefined {
    const value = this.raw(key)?.toLowerCase();
    if (value === undefined) return undefined;
    const match = /^((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?::(\d{1,5}))?$/.exec(value);
    if (!match || (match[2] !== undefined && (Number(match[2]) < 1 || Number(match[2]) > 65535))) {
      throw new ConfigError(`${this.where(key)} must be a domain name, with :port when it has one (e.g. preview.example.com), without a scheme or a leading "*.", got "${value}"`);
    }
    return value;
  }

  /** Ports and ranges of ports, separated by commas: each port once, in order. */
  ports(key: Key): number[] {
    const value = this.raw(key);
    if (value === undefined) return [];
    const found = new Set<number>();
    for (const entry of value.split(',')) {
      const match = /^\s*(\d{1,5})(?:-(\d{1,5}))?\s*$/.exec(entry);
      const from = Number(match?.[1]);
      const to = match?.[2] === undefined ? from : Number(match[2]);
      if (!match || from < 1 || to > 65535 || to < from || to - from > 65535) {
        throw new ConfigError(`${this.where(key)} must be ports or ranges separated by commas (e.g. 22,6000-6010), got "${entry.trim()}"`);
      }
      for (let p = from; p <= to; p++) found.add(p);
    }
    return [...found].sort((a, b) => a - b);
  }
}
