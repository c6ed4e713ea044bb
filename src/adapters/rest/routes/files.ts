// Files of a room's instance: the spec's authenticated JSON read and unauthenticated
// raw read, plus write, list and delete.
import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { DirectoryListing, FileContent, FileDeleted, FileWritten } from '../../../core/file-schema.ts';
import type { RawFile } from '../../../core/files.ts';
import { AppError } from '../../../errors.ts';
import { decodeUrlPath, urlSegment } from '../../../lib/guest-names.ts';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';

const FILE_PATH = '/api/profile/:profile_id/room/:room_id/file/*';

const FileParams = Type.Object({
  ...RoomParams.properties,
  '*': Type.String({ description: 'File path: relative to the home directory, or absolute with a leading slash (…/file//etc/hosts)' }),
});

/** URLs of the file endpoints, up to the wildcard; what follows is the file's path. */
const FILE_URL = /^(\/vm\/[^/?]+\/file\/|\/api\/profile\/[^/?]+\/room\/[^/?]+\/file\/)([^?]*)(.*)$/s;

/**
 * For the router, which decodes paths as UTF-8: a file URL whose path holds escapes of
 * bytes that are not UTF-8 (a name the guest chose, `%FF`) is rewritten with its `%`
 * escaped, so it routes; its handler decodes the original URL's bytes (pathOf).
 */
export function rewriteFileUrl(url: string): string {
  const match = url.includes('%') ? FILE_URL.exec(url) : null;
  if (!match) return url;
  const [, prefix = '', path = '', rest = ''] = match;
  try {
    decodeURIComponent(path);
    return url;
  } catch {
    return decodeUrlPath(path) === null ? url : `${prefix}${path.replaceAll('%', '%25')}${rest}`;
  }
}

/**
 * The path a request names: the wildcard (relative to the home, or absolute when it
 * starts with /); for a rewritten URL, its bytes decoded from the original.
 */
function pathOf(request: { url: string; originalUrl: string; params: { '*': string } }): string {
  if (request.originalUrl === request.url) return request.params['*'];
  const match = FILE_URL.exec(request.originalUrl);
  const decoded = match ? decodeUrlPath(match[2] ?? '') : null;
  if (decoded === null) throw new AppError('invalid_url', 'the request URL is not valid (check its percent-encoding)');
  return decoded;
}

export function fileRoutes(app: App, { files, config }: Services): void {
  app.get(
    FILE_PATH,
    {
      schema: {
        operationId: 'readFile',
        summary: 'Read a file',
        description:
          `Reads the file fresh, as the instance's user. Text (valid UTF-8 without NUL) comes as it is, anything else base64-encoded; \`encoding\` says which. At most ${config.maxFileReadBytes} bytes. ` +
          'With `?raw=1` (or `Accept: application/octet-stream`) the answer is the file\'s bytes instead, of any size, with the raw endpoint\'s headers and byte ranges: ' +
          'the authenticated download, whatever the profile\'s raw_files says.',
        tags: ['files'],
        params: FileParams,
        querystring: Type.Object({
          raw: Type.Optional(Type.Enum(['1', 'true', '0', 'false'], { description: '`1`: answer with the file\'s bytes rather than JSON' })),
        }),
        response: { 200: FileContent, ...errorResponses(400, 401, 403, 404, 409, 413, 416) },
      },
    },
    async (request, reply) => {
      const { profile_id, room_id } = request.params;
      const organizationId = callerOf(request).organizationId;
      if (wantsRaw(request.query.raw, request.headers.accept)) {
        const range = typeof request.headers.range === 'string' ? request.headers.range : undefined;
        return sendRawFile(request, reply, await files.download(organizationId, profile_id, room_id, pathOf(request), range));
      }
      return files.read(organizationId, profile_id, room_id, pathOf(request));
    },
  );

  app.get(
    '/api/profile/:profile_id/room/:room_id/files',
    {
      schema: {
        operationId: 'listFiles',
        summary: 'List a directory',
        description: 'Entries of the directory (default: the home directory), sorted by name, at most 10,000.',
        tags: ['files'],
        params: RoomParams,
        querystring: Type.Object(
          { path: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'Absolute, or relative to the home directory' })) },
          { additionalProperties: false },
        ),
        response: {
          200: DirectoryListing,
          ...errorResponses(400, 401, 403, 404, 409),
        },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      return files.list(callerOf(request).organizationId, profile_id, room_id, request.query.path ?? '.');
    },
  );

  app.delete(
    FILE_PATH,
    {
      config: { auditAction: 'file.delete' },
      schema: {
        operationId: 'deleteFile',
        summary: 'Delete a file',
        description: 'Removes a file (or a link) as the instance\'s user; directories are removed with a command.',
        tags: ['files'],
        params: FileParams,
        response: {
          200: FileDeleted,
          ...errorResponses(400, 401, 403, 404, 409),
        },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      return files.delete(callerOf(request).organizationId, profile_id, room_id, pathOf(request));
    },
  );

  // Uploads take any content type as raw bytes, or JSON {content, encoding}; the
  // parser is scoped to this route's context so other routes keep answering 415.
  void app.register(async (scope: App) => {
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.put(
      FILE_PATH,
      {
        config: { auditAction: 'file.write' },
        bodyLimit: Math.ceil(config.maxUploadBytes * 1.4) + 1024,
        schema: {
          operationId: 'writeFile',
          summary: 'Write a file',
          description:
            'Creates or replaces the file as the instance\'s user, with its parent directories. The body is the raw content ' +
            '(any content type but JSON), or JSON `{"content": "...", "encoding": "utf-8" | "base64"}`.',
          tags: ['files'],
          params: FileParams,
          response: { 200: FileWritten, 201: FileWritten, ...errorResponses(400, 401, 403, 404, 409, 413, 507) },
        },
      },
      async (request, reply) => {
        const { profile_id, room_id } = request.params;
        const written = await files.write(callerOf(request).organizationId, profile_id, room_id, pathOf(request), uploadOf(request.body));
        return reply.code(written.status === 'created' ? 201 : 200).send(written);
      },
    );
  });

  app.get(
    '/vm/:instance_id/file/*',
    {
      config: {
        documentedResponses: {
          200: { description: 'The file\'s bytes, with its MIME type', content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } },
          206: {
            description: 'The asked byte range (Range: bytes=start-end), with Content-Range',
            content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
          },
          304: { description: 'Not modified: If-None-Match named the file\'s current ETag' },
        },
      },
      schema: {
        operationId: 'readRawFile',
        summary: 'Raw file content (no authentication)',
        description:
          'The file\'s bytes with a MIME type by extension or content, Content-Length, ETag, Last-Modified and single byte ranges. ' +
          'The instance id is the capability: only ready instances answer. Paths are absolute (without their leading slash). ' +
          'What is served follows the profile\'s raw_files: `all` (default), `changed` (files a command listed), `off`; others answer 403 raw_file_not_served. ' +
          'At most ROOMKIT_MAX_RAW_READS_PER_INSTANCE (4) reads stream from one instance at once; more answer 429 with Retry-After. ' +
          'Requests are rate-limited per client address and per instance (429 rate_limited, with Retry-After).',
        tags: ['files'],
        params: Type.Object({
          instance_id: Type.String({ format: 'uuid', description: 'The instance\'s id, from a CommandResult\'s public_url or the instance' }),
          '*': Type.String({ description: 'Absolute path of the file, without its leading slash' }),
        }),
        response: { ...errorResponses(400, 403, 404, 409, 416, 429) },
      },
    },
    async (request, reply) => {
      const { instance_id } = request.params;
      const range = typeof request.headers.range === 'string' ? request.headers.range : undefined;
      return sendRawFile(request, reply, await files.openRaw(instance_id, `/${pathOf(request)}`, range));
    },
  );
}

/** Whether a read asks for the bytes rather than JSON: `?raw=1`, or an Accept that prefers octet-stream to JSON. */
function wantsRaw(raw: string | undefined, accept: string | undefined): boolean {
  if (raw !== undefined) return raw === '1' || raw === 'true';
  if (accept === undefined) return false;
  const types = accept.split(',').map((t) => t.split(';')[0]!.trim().toLowerCase());
  const octet = types.indexOf('application/octet-stream');
  const json = types.findIndex((t) => t === 'application/json' || t === '*/*' || t === 'application/*');
  return octet >= 0 && (json < 0 || octet < json);
}

/** Answers with a file's bytes: type, length, validators, byte ranges, and headers that keep a browser from running it. */
function sendRawFile(request: FastifyRequest, reply: FastifyReply, file: RawFile): FastifyReply {
  const etag = `"${createHash('sha256').update(file.info.version).digest('hex').slice(0, 24)}"`;
  reply.header('Content-Security-Policy', "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; media-src 'self'");
  reply.header('Referrer-Policy', 'no-referrer');
  reply.header('Cache-Control', 'no-cache');
  reply.header('Accept-Ranges', 'bytes');
  reply.header('ETag', etag);
  reply.header('Last-Modified', new Date(file.info.mtimeMs).toUTCString());
  const name = file.info.path.split('/').at(-1) ?? 'file';
  reply.header('Content-Disposition', `inline; filename*=UTF-8''${urlSegment(name)}`);
  reply.type(file.mimeType.startsWith('text/') ? `${file.mimeType}; charset=utf-8` : file.mimeType);
  if (request.headers['if-none-match'] === etag && file.range === undefined) {
    (file.rest as PassThrough).destroy();
    return reply.code(304).send();
  }
  const body = new PassThrough();
  body.write(file.head);
  file.rest.pipe(body);
  body.on('close', () => (file.rest as PassThrough).destroy());
  if (file.range) {
    reply.code(206);
    reply.header('Content-Range', `bytes ${file.range.start}-${file.range.end}/${file.info.size}`);
    reply.header('Content-Length', String(file.range.end - file.range.start + 1));
  } else {
    reply.header('Content-Length', String(file.info.size));
  }
  return reply.send(body);
}

/** The bytes of an upload: the raw body, or the content of a JSON body. */
function uploadOf(body: unknown): Buffer {
  if (Buffer.isBuffer(body)) return body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('validation_error', 'send the file\'s bytes as the body, or JSON {"content": "...", "encoding": "utf-8" | "base64"}');
  }
  const { content, encoding = 'utf-8', ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new AppError('validation_error', `unknown field ${unknown[0]}; a JSON upload has only content and encoding`);
  if (typeof content !== 'string') throw new AppError('validation_error', 'content must be a string (the file\'s text, or base64 with "encoding": "base64")');
  if (encoding === 'utf-8') return Buffer.from(content, 'utf8');
  if (encoding === 'base64') {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(content.replace(/\s+/g, ''))) throw new AppError('validation_error', 'content is not valid base64');
    return Buffer.from(content, 'base64');
  }
  throw new AppError('validation_error', 'encoding must be "utf-8" or "base64"');
}
