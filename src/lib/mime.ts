// MIME types of files served from instances: by extension for the types whose content
// cannot be told apart reliably (CSS, JavaScript, JSON, SVG...), else by the content.
import { posix } from 'node:path';

const BY_EXTENSION: Record<string, string> = {
  txt: 'text/plain', log: 'text/plain', md: 'text/markdown', csv: 'text/csv', tsv: 'text/tab-separated-values',
  html: 'text/html', htm: 'text/html', css: 'text/css', xml: 'application/xml', svg: 'image/svg+xml',
  js: 'text/javascript', mjs: 'text/javascript', cjs: 'text/javascript', ts: 'text/x-typescript', tsx: 'text/x-typescript',
  jsx: 'text/javascript', json: 'application/json', jsonl: 'application/jsonl', yaml: 'application/yaml', yml: 'application/yaml',
  toml: 'application/toml', ini: 'text/plain', cfg: 'text/plain', conf: 'text/plain',
  py: 'text/x-python', sh: 'text/x-shellscript', bash: 'text/x-shellscript', rb: 'text/x-ruby', go: 'text/x-go',
  rs: 'text/x-rust', c: 'text/x-c', h: 'text/x-c', cpp: 'text/x-c++', hpp: 'text/x-c++', java: 'text/x-java',
  sql: 'application/sql', ipynb: 'application/x-ipynb+json',
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', bmp: 'image/bmp',
  ico: 'image/vnd.microsoft.icon', tif: 'image/tiff', tiff: 'image/tiff', avif: 'image/avif',
  pdf: 'application/pdf', zip: 'application/zip', gz: 'application/gzip', tgz: 'application/gzip', tar: 'application/x-tar',
  xz: 'application/x-xz', bz2: 'application/x-bzip2', '7z': 'application/x-7z-compressed',
  wasm: 'application/wasm', mp3: 'audio/mpeg', wav: 'audio/wav', ogg: 'audio/ogg', mp4: 'video/mp4', webm: 'video/webm',
  woff: 'font/woff', woff2: 'font/woff2', ttf: 'font/ttf', otf: 'font/otf',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
};

/** The MIME type a file's extension names, or undefined when it names none we know. */
export function mimeTypeByExtension(path: string): string | undefined {
  const ext = posix.extname(path).slice(1).toLowerCase();
  return ext ? BY_EXTENSION[ext] : undefined;
}

const SIGNATURES: [number[], string][] = [
  [[0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'image/png'],
  [[0xff, 0xd8, 0xff], 'image/jpeg'],
  [[0x47, 0x49, 0x46, 0x38], 'image/gif'],
  [[0x25, 0x50, 0x44, 0x46, 0x2d], 'application/pdf'],
  [[0x50, 0x4b, 0x03, 0x04], 'application/zip'],
  [[0x1f, 0x8b], 'application/gzip'],
  [[0x00, 0x61, 0x73, 0x6d], 'application/wasm'],
  [[0x7f, 0x45, 0x4c, 0x46], 'application/x-executable'],
];

/** Whether bytes are text: valid UTF-8 without NUL (the rule the JSON file endpoint uses too). */
export function isText(bytes: Buffer): boolean {
  if (bytes.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/**
 * The MIME type of content starting with `head` (its first bytes). A cut in the middle
 * of a multi-byte character at the end of `head` does not make text binary.
 */
export function sniffMimeType(head: Buffer, complete: boolean): string {
  for (const [signature, type] of SIGNATURES) {
    if (head.length >= signature.length && signature.every((b, i) => head[i] === b)) return type;
  }
  if (head.length >= 12 && head.toString('latin1', 0, 4) === 'RIFF' && head.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  const sample = complete ? head : head.subarray(0, Math.max(0, head.length - 3));
  return isText(sample) ? 'text/plain' : 'application/octet-stream';
}

/** The MIME type to serve a file with: its extension's when known, else sniffed from its first bytes. */
export function mimeTypeOf(path: string, head: Buffer, complete: boolean): string {
  return mimeTypeByExtension(path) ?? sniffMimeType(head, complete);
}
