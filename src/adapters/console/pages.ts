// The console's pages and their assets: the files the console's build wrote (console/
// at the repository's root, built by scripts/setup into console/dist/), served from
// memory. Every path under /console that is neither an asset nor the session is the one
// page, whose script routes by the path; every answer carries a CSP that lets the page
// load and connect to this server only, run no inline script, and be framed by no one.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { AppError } from '../../errors.ts';
import type { App } from '../../http/types.ts';

/** Where the console's build writes. */
export const CONSOLE_DIST = fileURLToPath(new URL('../../../console/dist/', import.meta.url));
export const CONSOLE_PATH = '/console';
const ASSETS_PATH = `${CONSOLE_PATH}/assets`;

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
};

/**
 * The page's policy. Styles may be inline because xterm.js writes its own <style>
 * elements for the terminal's sizes and colours; scripts may not.
 */
export function contentSecurityPolicy(host: string): string {
  // The Host header is the client's to write: one that is not a plain host[:port] adds
  // nothing to the policy (the page's WebSocket then falls to 'self').
  const sockets = /^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?$/.test(host) ? ` ws://${host} wss://${host}` : '';
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src 'self'${sockets}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "object-src 'none'",
  ].join('; ');
}

function guard(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('Content-Security-Policy', contentSecurityPolicy(request.host));
  reply.header('X-Frame-Options', 'DENY');
  reply.header('Referrer-Policy', 'same-origin');
}

/** The built files, read once; missing when the console was not built. */
function loadBuild(dir: string): Map<string, Buffer> | undefined {
  if (!existsSync(join(dir, 'index.html'))) return undefined;
  const files = new Map<string, Buffer>();
  for (const name of readdirSync(dir)) files.set(name, readFileSync(join(dir, name)));
  return files;
}

const notBuilt = () =>
  new AppError('not_found', 'the web console is not built on this server: run scripts/setup (it builds console/ into console/dist/)');

/** Mounts the pages; answers whether the console was built (without it, /console says how to build it). */
export function pageRoutes(app: App, dir = CONSOLE_DIST): boolean {
  const build = loadBuild(dir);
  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    guard(request, reply);
    const html = build?.get('index.html');
    if (!html) throw notBuilt();
    // A page is small and names its assets without a version: always asked again.
    return reply.header('Cache-Control', 'no-cache').type(TYPES['.html'] as string).send(html);
  };
  app.get(CONSOLE_PATH, { schema: { hide: true } }, page);
  app.get(`${CONSOLE_PATH}/*`, { schema: { hide: true } }, page);
  app.get(
    `${ASSETS_PATH}/:name`,
    { schema: { hide: true, params: Type.Object({ name: Type.String({ maxLength: 128 }) }) } },
    async (request, reply) => {
      guard(request, reply);
      const name = request.params.name;
      const body = name === 'index.html' ? undefined : build?.get(name);
      if (!body) throw build ? new AppError('not_found', `the console has no asset ${JSON.stringify(name)}`) : notBuilt();
      return reply
        .header('Cache-Control', 'no-cache')
        .type(TYPES[extname(name)] ?? 'application/octet-stream')
        .send(body);
    },
  );
  return build !== undefined;
}
