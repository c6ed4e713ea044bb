// A GET with a Host header of the test's choosing, which fetch does not let one set: for
// preview host names, which the service tells apart by that header alone.
import { type IncomingMessage, request as httpRequest } from 'node:http';

export function rawGet(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; headers: IncomingMessage['headers']; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const req = httpRequest({ host: url.hostname, port: url.port, path, headers, setHost: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
