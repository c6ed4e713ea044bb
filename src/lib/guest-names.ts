// File names in an instance are bytes that the guest chooses; most are UTF-8, some are
// not (`printf 'bad\377'`). Inside roomkit a name is a JavaScript string in which every
// byte that is not part of a valid UTF-8 sequence stands as a lone surrogate
// U+DC80..U+DCFF (the byte plus 0xDC00), so that distinct names stay distinct and the
// exact bytes can be given back to the guest. Valid UTF-8 never decodes to a lone
// surrogate, so the mapping is unambiguous. At the edges:
//  - the API shows such a name percent-escaped (`%` as `%25`, each odd byte as `%XX`)
//    with `path_encoding: "percent"`; names that are valid UTF-8 are shown as they are;
//  - URLs carry the bytes percent-encoded, and the file endpoints decode them as bytes;
//  - guest scripts receive them escaped for `printf %b` (see shellArg).

import { isUtf8 } from 'node:buffer';

const LONE_BYTE = /[\uDC80-\uDCFF]/u;

/** Decodes bytes of a name as UTF-8, keeping each byte of an invalid sequence as U+DC00+byte. */
export function decodeName(bytes: Buffer, start = 0, end = bytes.length): string {
  const slice = bytes.subarray(start, end);
  if (isUtf8(slice)) return slice.toString('utf8');
  let out = '';
  let i = 0;
  while (i < slice.length) {
    const length = validSequenceLength(slice, i);
    if (length > 0) {
      out += slice.toString('utf8', i, i + length);
      i += length;
    } else {
      out += String.fromCharCode(0xdc00 + slice[i]!);
      i += 1;
    }
  }
  return out;
}

/** The bytes of a name: the inverse of decodeName. */
export function encodeName(name: string): Buffer {
  if (!LONE_BYTE.test(name)) return Buffer.from(name, 'utf8');
  const parts: Buffer[] = [];
  let run = '';
  for (const char of name) {
    const code = char.charCodeAt(0);
    if (char.length === 1 && code >= 0xdc80 && code <= 0xdcff) {
      if (run) parts.push(Buffer.from(run, 'utf8'));
      run = '';
      parts.push(Buffer.from([code - 0xdc00]));
    } else {
      run += char;
    }
  }
  if (run) parts.push(Buffer.from(run, 'utf8'));
  return Buffer.concat(parts);
}

/** Whether a name holds bytes that are not UTF-8. */
export function hasRawBytes(name: string): boolean {
  return LONE_BYTE.test(name);
}

/**
 * A path as the API shows it: as it is when it is valid UTF-8, else percent-escaped
 * (`%` becomes `%25`, each byte that is not UTF-8 `%XX`, upper-case hex) with the flag.
 */
export function apiPath(path: string): { path: string; percentEncoded: boolean } {
  if (!hasRawBytes(path)) return { path, percentEncoded: false };
  let out = '';
  for (const char of path) {
    const code = char.charCodeAt(0);
    if (char.length === 1 && code >= 0xdc80 && code <= 0xdcff) out += `%${hex(code - 0xdc00)}`;
    else out += char === '%' ? '%25' : char;
  }
  return { path: out, percentEncoded: true };
}

/** The inverse of apiPath for an escaped path; null when an escape is malformed. */
export function fromApiPath(escaped: string): string | null {
  return percentDecode(escaped);
}

/** A path segment for a URL: every byte but the unreserved ones as %XX (encodeURIComponent for UTF-8 names). */
export function urlSegment(name: string): string {
  if (!hasRawBytes(name)) return encodeURIComponent(name);
  let out = '';
  for (const byte of encodeName(name)) out += UNRESERVED.has(byte) ? String.fromCharCode(byte) : `%${hex(byte)}`;
  return out;
}

/**
 * A name from the percent-encoded part of a URL, decoded to bytes (so `%FF` is the
 * byte 0xFF, not an error); null when an escape is malformed.
 */
export function decodeUrlPath(encoded: string): string | null {
  return percentDecode(encoded);
}

/**
 * A name as an argument for a guest script that decodes it with `printf %b` when it
 * holds a backslash: names without bytes that are not UTF-8 and without backslashes
 * pass as they are; others have each backslash doubled and each odd byte as `\0ooo`.
 * (Process arguments reach the guest as UTF-8 text, so raw bytes cannot pass as they are.)
 */
export function shellArg(name: string): string {
  if (!name.includes('\\') && !hasRawBytes(name)) return name;
  let out = '';
  for (const char of name) {
    const code = char.charCodeAt(0);
    if (char.length === 1 && code >= 0xdc80 && code <= 0xdcff) out += `\\0${(code - 0xdc00).toString(8).padStart(3, '0')}`;
    else out += char === '\\' ? '\\\\' : char;
  }
  return out;
}

/** Shell lines that decode `$var` made by shellArg in place (keeping trailing newlines). */
export function shellDecode(variable: string): string {
  return `case $${variable} in *\\\\*) ${variable}=$(printf '%b/' "$${variable}"); ${variable}=\${${variable}%/} ;; esac`;
}

const UNRESERVED = new Set([...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*\'()'].map((c) => c.charCodeAt(0)));

function hex(byte: number): string {
  return byte.toString(16).toUpperCase().padStart(2, '0');
}

function percentDecode(encoded: string): string | null {
  if (!encoded.includes('%')) return encoded;
  const bytes: number[] = [];
  const pending: string[] = [];
  const flush = () => {
    if (pending.length > 0) bytes.push(...Buffer.from(pending.join(''), 'utf8'));
    pending.length = 0;
  };
  for (let i = 0; i < encoded.length; i++) {
    const char = encoded[i]!;
    if (char !== '%') {
      pending.push(char);
      continue;
    }
    const pair = encoded.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(pair)) return null;
    flush();
    bytes.push(Number.parseInt(pair, 16));
    i += 2;
  }
  flush();
  return decodeName(Buffer.from(bytes));
}

/** Length of the valid UTF-8 sequence starting at `i` (no overlongs, surrogates or values past U+10FFFF), or 0. */
function validSequenceLength(b: Buffer, i: number): number {
  const first = b[i]!;
  if (first < 0x80) return 1;
  const cont = (k: number, lo = 0x80, hi = 0xbf) => i + k < b.length && b[i + k]! >= lo && b[i + k]! <= hi;
  if (first >= 0xc2 && first <= 0xdf) return cont(1) ? 2 : 0;
  if (first === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((first >= 0xe1 && first <= 0xec) || first === 0xee || first === 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (first === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (first === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (first >= 0xf1 && first <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (first === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}
