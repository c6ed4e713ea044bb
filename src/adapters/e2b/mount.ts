// Mounts the E2B adapter: E2B's control API at /e2b and its in-sandbox protocol at
// /e2b/envd (envd's, and the code interpreter's of port 49999 beside it), in a scope of their own whose failures answer E2B's conventions
// (errors.ts) rather than roomkit's Error body. The app attaches authentication
// (auth.ts) and the API rate limits to each route as it registers.
import type { Services } from '../../services.ts';
import type { App } from '../../http/types.ts';
import type { AccessTokens } from './access-tokens.ts';
import { E2B_PREFIX, ENVD_PREFIX } from './auth.ts';
import { controlRoutes } from './control-routes.ts';
import { envdRoutes } from './envd-routes.ts';
import { interpreterRoutes } from './interpreter-routes.ts';
import { E2bHttpError, sendE2bError } from './errors.ts';
import { metricsRoute } from './metrics-route.ts';
import { snapshotRoutes } from './snapshot-routes.ts';

export async function mountE2b(app: App, services: Services, tokens: AccessTokens): Promise<void> {
  // Uploads take as much as the REST API's file writes do, in form encoding's overhead.
  const bodyLimit = Math.ceil(services.config.maxUploadBytes * 1.4) + 64 * 1024;
  const scoped = (register: (scope: App) => void) => async (scope: App) => {
    scope.setErrorHandler((err, _request, reply) => sendE2bError(reply, err));
    // The audit trail says which calls came through E2B's API.
    scope.addHook('onRoute', (route) => {
      route.config = { ...route.config, auditVia: 'e2b' };
    });
    // What E2B's API has and this adapter does not (templates, volumes, secrets…)
    // answers 501, which the SDK raises as an error saying so, rather than a 404 it would
    // read as a missing sandbox.
    scope.setNotFoundHandler((request, reply) =>
      sendE2bError(reply, new E2bHttpError(501, `${request.method} ${request.url.split('?')[0]} is not served by roomkit's E2B adapter (see the compatibility table in docs/e2b.md)`)),
    );
    register(scope);
  };
  await app.register(
    scoped((scope) => {
      envdRoutes(scope, services, { bodyLimit });
      // A scope of its own: its JSON parser takes the empty bodies the code interpreter SDK sends.
      void scope.register(async (interpreter) => interpreterRoutes(interpreter, services));
    }),
    { prefix: ENVD_PREFIX },
  );
  await app.register(
    scoped((scope) => {
      controlRoutes(scope, services, tokens);
      snapshotRoutes(scope, services, tokens);
      metricsRoute(scope, services);
    }),
    { prefix: E2B_PREFIX },
  );
}
