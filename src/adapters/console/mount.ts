// The web console (docs/api.md, "Console"): the pages a person signs in to and works
// from, and the session that lets those pages call the REST API with a cookie instead of
// a key. The pages are a browser application calling the REST API like any client; the
// server side is only these routes, and the cookie's place in the shell's auth hook.
import type { Services } from '../../services.ts';
import type { AuthThrottle } from '../../http/auth-throttle.ts';
import type { App } from '../../http/types.ts';
import { pageRoutes } from './pages.ts';
import { sessionRoutes } from './session-routes.ts';

export function mountConsole(app: App, services: Services, options: { dir?: string; authThrottle?: AuthThrottle } = {}): void {
  sessionRoutes(app, services, options.authThrottle);
  if (!pageRoutes(app, options.dir)) services.log.warn('the web console is not built: /console answers 404 until scripts/setup builds it');
}
