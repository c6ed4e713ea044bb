// Where clients reach the service, for answers that carry whole public URLs (tool
// results over REST and MCP): a concern of the server, shared by the adapters it mounts.
import type { FastifyRequest } from 'fastify';

/** ROOMKIT_PUBLIC_URL, else the request's own address. */
export function originOf(request: FastifyRequest, publicUrl: string | undefined): string {
  return publicUrl ?? `${request.protocol}://${request.host}`;
}
