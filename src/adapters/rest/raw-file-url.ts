// The URL of a file's raw bytes: the REST API's unauthenticated raw endpoint
// (GET /vm/{instance_id}/file/{path}, routes/files.ts), where a changed file's
// public_url points. Core lists files by instance and path; this is the one place that
// knows the endpoint's shape (registered with core's FileLinks when the API is mounted).
import { fromApiPath, urlSegment } from '../../lib/guest-names.ts';

/** For a path as roomkit holds it, or as the API shows it when `pathEncoding` is given. */
export function rawFileUrl(instanceId: string, path: string, pathEncoding?: 'percent'): string {
  if (pathEncoding === 'percent') path = fromApiPath(path) ?? path;
  const encoded = path.replace(/^\/+/, '').split('/').map(urlSegment).join('/');
  return `/vm/${instanceId}/file/${encoded}`;
}
