// The in-sandbox protocol's routes (E2B_SANDBOX_URL): the Connect services (processes,
// file system) served by the Connect libraries for Node, one Fastify route per method,
// plus envd's health check and file transfer. Every call names its sandbox in
// E2b-Sandbox-Id (checked against its access token by auth.ts); one whose sandbox is not
// running answers 502 before any service runs, as E2B's proxy does, which the SDK reads
// as the sandbox being gone.
import type { JsonValue } from '@bufbuild/protobuf';
import { createConnectRouter, createContextValues } from '@connectrpc/connect';
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from '@connectrpc/connect-node';
import type { FastifyRequest } from 'fastify';
import type { AuditAction } from '../../core/audit-schema.ts';
import { callerOf } from '../../http/auth.ts';
import type { App } from '../../http/types.ts';
import type { Services } from '../../services.ts';
import { sandboxIdOf } from './auth.ts';
import { sandboxGone } from './errors.ts';
import { fileTransferRoutes } from './file-transfer.ts';
import { filesystemService } from './filesystem-service.ts';
import { Filesystem } from './generated/filesystem/filesystem_pb.js';
import { Process } from './generated/process/process_pb.js';
import { processService, SANDBOX_CALL, type SandboxCall } from './process-service.ts';

/** What each state-changing method is recorded as in the audit trail, when core names nothing (a refusal). */
const AUDIT_ACTIONS: Record<string, AuditAction> = {
  '/process.Process/Start': 'command.run',
  '/process.Process/SendInput': 'command.stdin',
  '/process.Process/StreamInput': 'command.stdin',
  '/process.Process/CloseStdin': 'command.stdin',
  '/process.Process/SendSignal': 'command.kill',
  '/process.Process/Update': 'other',
  '/filesystem.Filesystem/MakeDir': 'file.write',
  '/filesystem.Filesystem/Move': 'file.write',
  '/filesystem.Filesystem/Remove': 'file.delete',
};

/** The user a call asks to run as: the SDK's Basic Authorization header, `user:` with no password. */
function userOf(request: FastifyRequest): string | undefined {
  const match = /^Basic\s+(\S+)$/i.exec(request.headers.authorization ?? '');
  if (!match?.[1]) return undefined;
  const user = Buffer.from(match[1], 'base64').toString('utf8').split(':')[0];
  return user === '' ? undefined : user;
}

export function envdRoutes(app: App, services: Services, options: { bodyLimit: number }): void {
  const router = createConnectRouter();
  router.service(Process, processService(services));
  router.service(Filesystem, filesystemService(services));

  /** The sandbox a call is for, once it is known to be running. */
  const runningSandbox = async (request: FastifyRequest): Promise<SandboxCall> => {
    const caller = callerOf(request);
    const address = { organizationId: caller.organizationId, instanceId: sandboxIdOf(request) };
    // The access token (or a signed URL's signature) was made for this organization's
    // instance, so its state by id is all that is left to read: one look-up per call.
    if (!(await services.instances.isReady(address.instanceId))) throw sandboxGone(address.instanceId, 'it is paused, stopped or gone');
    return { address, keyId: caller.keyId, user: userOf(request) };
  };

  // Connect's streaming requests, and unary ones in binary, are read by the Connect
  // library itself, from the request; unary JSON is parsed as any JSON body is.
  app.addContentTypeParser(/^application\/(?:connect\+|proto\b)/, (_request, _payload, done) => done(null, undefined));
  app.addContentTypeParser(['application/octet-stream', 'multipart/form-data'], { parseAs: 'buffer', bodyLimit: options.bodyLimit }, (_request, body, done) =>
    done(null, body),
  );

  for (const handler of router.handlers) {
    const auditAction = AUDIT_ACTIONS[handler.requestPath] ?? null;
    app.post(handler.requestPath, { schema: { hide: true }, config: { auditAction } }, async (request, reply) => {
      const call = await runningSandbox(request);
      reply.hijack();
      const universal = universalRequestFromNodeRequest(
        request.raw,
        reply.raw,
        request.body === undefined ? undefined : (request.body as JsonValue),
        createContextValues().set(SANDBOX_CALL, call),
      );
      try {
        await universalResponseToNodeResponse(await handler(universal), reply.raw);
      } catch (err) {
        // The client went away mid-stream: nothing is left to answer.
        request.log.debug({ err }, 'in-sandbox stream ended early');
        if (!reply.raw.destroyed) reply.raw.destroy();
      }
    });
  }

  // envd answers 204 while it runs; 502 (from runningSandbox) says the sandbox is gone.
  app.get('/health', { schema: { hide: true } }, async (request, reply) => {
    await runningSandbox(request);
    return reply.code(204).send();
  });

  fileTransferRoutes(app, services, options);
}
