// The in-sandbox protocol at a sandbox's own host name, as E2B's SDK addresses a sandbox
// when E2B_SANDBOX_URL is not set: `49983-{sandbox id}.{domain}`, with the domain
// roomkit's preview domain (E2B_DOMAIN=ROOMKIT_PREVIEW_DOMAIN, DNS and TLS in front of
// roomkit as for preview host names), and so is the code interpreter's,
// `49999-{sandbox id}.{domain}` (its paths do not overlap envd's). Such a request is
// served as one to /e2b/envd naming the sandbox in E2b-Sandbox-Id, which is also what
// makes the SDK's signed file URLs, built at that host's root, reach the adapter.
import type { IncomingMessage } from 'node:http';
import { ENVD_PREFIX } from './auth.ts';
import { ENVD_PORT, INTERPRETER_PORT } from './sandboxes.ts';

const ENVD_HOST = new RegExp(`^(?:${ENVD_PORT}|${INTERPRETER_PORT})-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\\.(.+)$`);

/** For the app's rewriteUrl: the adapter's URL for a request to a sandbox's envd host name, else undefined. */
export function envdHostRewriter(previewDomain: string | undefined): (req: IncomingMessage, url: string) => string | undefined {
  const withoutPort = (host: string) => host.replace(/:\d+$/, '');
  return (req, url) => {
    if (previewDomain === undefined || req.headers.host === undefined) return undefined;
    const match = ENVD_HOST.exec(req.headers.host.toLowerCase());
    if (!match || withoutPort(match[2] ?? '') !== withoutPort(previewDomain)) return undefined;
    // The host names the sandbox; a header that names another is refused by the access token's check.
    req.headers['e2b-sandbox-id'] ??= match[1];
    return `${ENVD_PREFIX}${url.startsWith('/') ? url : `/${url}`}`;
  };
}
