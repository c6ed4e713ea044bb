// The request's own log line: one per request, when it has been answered (Fastify writes
// two, "incoming request" and "request completed"), with the method, the URL, the status
// and the time taken. The URL is shown as sent with the secrets some URLs carry taken
// out (a signed preview URL's token in its path, a terminal's single-use ticket and a
// preview host's token in the query), so that logs can be shared without handing out
// access.
import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

const SECRET_QUERY = /([?&](?:ticket|roomkit_token)=)[^&#]*/g;

export function loggedUrl(url: string): string {
  return url.replace(/^\/p\/[^/?#]+/, '/p/…').replace(SECRET_QUERY, '$1…');
}

export class RequestLog extends LogController {
  constructor() {
    super({ requestIdLogLabel: 'requestId' });
  }

  override incomingRequest(): void {
    // Said once, with the answer, by requestCompleted().
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const line = { method: request.method, url: loggedUrl(request.url), statusCode: reply.statusCode, responseTimeMs: Math.round(reply.elapsedTime), remoteAddress: request.ip };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request');
  }
}
