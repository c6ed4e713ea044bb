// envd's HTTP file endpoints: GET /files downloads one file (gzip when the client accepts
// it), POST /files uploads one or several (a multipart form, each part's file name its
// path; or the bytes of one file as application/octet-stream, gzip-encoded or not),
// parents created; both over core's files, as the user the query names (`username`: the
// instance's own by default, or root, whose new files are root's). Answers are what the
// SDK reads: the written files' entries, or the file's bytes.
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { createGzip, gunzipSync } from 'node:zlib';
import Type from 'typebox';
import { AppError } from '../../errors.ts';
import { callerOf } from '../../http/auth.ts';
import type { App } from '../../http/types.ts';
import type { Services } from '../../services.ts';
import { sandboxIdOf } from './auth.ts';
import { fileCallerOf, resolveFor } from './filesystem-service.ts';

const FilesQuery = Type.Object({
  path: Type.Optional(Type.String({ maxLength: 4096 })),
  username: Type.Optional(Type.String({ maxLength: 64 })),
  signature: Type.Optional(Type.String()),
  signature_expiration: Type.Optional(Type.String()),
});

export function fileTransferRoutes(app: App, services: Services, options: { bodyLimit: number }): void {
  const target = (request: Parameters<typeof callerOf>[0] & { query: { username?: string | undefined } }) => {
    const address = { organizationId: callerOf(request).organizationId, instanceId: sandboxIdOf(request) };
    const user = request.query.username === '' ? undefined : request.query.username;
    const resolve = (path: string) => resolveFor(services, address, user, path);
    return { address, resolve, caller: fileCallerOf(user) };
  };

  app.get('/files', { schema: { hide: true, querystring: FilesQuery } }, async (request, reply) => {
    const { address, resolve, caller } = target(request);
    if (request.query.path === undefined) throw new AppError('validation_error', 'path names the file to download');
    const file = await services.files.downloadAt(address, await resolve(request.query.path), undefined, caller);
    const body = Readable.from((async function* () {
      yield file.head;
      for await (const chunk of file.rest) yield chunk as Buffer;
    })());
    reply.header('Content-Type', 'application/octet-stream');
    if (/\bgzip\b/.test(request.headers['accept-encoding'] ?? '')) {
      reply.header('Content-Encoding', 'gzip');
      const gzip = createGzip();
      void pipeline(body, gzip).catch((err: unknown) => request.log.warn({ err }, 'download ended early'));
      return reply.send(gzip);
    }
    reply.header('Content-Length', String(file.info.size));
    return reply.send(body);
  });

  app.post('/files', { schema: { hide: true, querystring: FilesQuery }, bodyLimit: options.bodyLimit, config: { auditAction: 'file.write' } }, async (request) => {
    const { address, resolve, caller } = target(request);
    const contentType = request.headers['content-type'] ?? '';
    const raw = request.body;
    if (!Buffer.isBuffer(raw)) throw new AppError('unsupported_media_type', 'send the files as multipart/form-data or one file as application/octet-stream');
    const files: { path: string; data: Buffer }[] = [];
    if (contentType.startsWith('multipart/form-data')) {
      const form = await new Response(raw, { headers: { 'content-type': contentType } }).formData();
      for (const value of form.getAll('file')) {
        if (typeof value === 'string') continue;
        const path = value.name !== '' && value.name !== 'blob' ? value.name : request.query.path;
        if (path === undefined) throw new AppError('validation_error', 'each file part names its path (its file name), or the query names one');
        files.push({ path, data: Buffer.from(await value.arrayBuffer()) });
      }
    } else {
      if (request.query.path === undefined) throw new AppError('validation_error', 'path names the file to write');
      const gzipped = /\bgzip\b/.test(String(request.headers['content-encoding'] ?? ''));
      files.push({ path: request.query.path, data: gzipped ? gunzipSync(raw) : raw });
    }
    if (files.length === 0) throw new AppError('validation_error', 'the upload holds no file');
    const written = [];
    for (const file of files) {
      const path = await resolve(file.path);
      await services.files.writeAt(address, path, file.data, caller);
      written.push({ name: path.slice(path.lastIndexOf('/') + 1), type: 'file', path });
    }
    return written;
  });
}
