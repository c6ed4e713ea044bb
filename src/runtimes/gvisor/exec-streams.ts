// Reading what a started `runsc exec` prints: all of it at once, or a header line and
// then the rest as a stream, and a cap on how many bytes a stream lets through. Every
// reader has a deadline after which the exec is killed, and ending a stream early
// kills the exec that feeds it.
import { PassThrough, Readable, Transform } from 'node:stream';
import type { ExecChild } from './commands.ts';

export interface Collected {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** Feeds `input` to a started exec and gathers what it prints; killed after `timeoutMs`. */
export function collect(child: ExecChild, timeoutMs: number, input?: Buffer): Promise<Collected> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdin.on('error', () => {}); // the program may exit before reading all of it
    child.stdin.end(input);
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4000)));
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(chunks), stderr });
    });
  });
}

/**
 * Waits for the first line an exec prints (e.g. a file read's info about the file),
 * then hands back the rest of its output as the body stream. Destroying the body kills
 * the exec. When it ends before that line, the promise rejects with what `failed`
 * makes of its exit code and (trimmed) stderr.
 */
export function headerThenBody(
  child: ExecChild,
  timeoutMs: number,
  failed: (code: number | null, stderr: string) => Error,
): Promise<{ header: string; body: Readable }> {
  return new Promise((resolve, reject) => {
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4000)));
    let pending = Buffer.alloc(0);
    let resolved = false;
    const onData = (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const newline = pending.indexOf(10);
      if (newline < 0) {
        if (pending.length > 4096) child.kill('SIGKILL');
        return;
      }
      resolved = true;
      child.stdout.off('data', onData);
      child.stdout.pause();
      const body = new PassThrough();
      body.write(pending.subarray(newline + 1));
      child.stdout.pipe(body);
      body.on('close', () => {
        clearTimeout(timer);
        if (child.exitCode === null) child.kill('SIGKILL');
      });
      resolve({ header: pending.toString('utf8', 0, newline), body });
    };
    child.stdout.on('data', onData);
    child.on('error', (err) => {
      clearTimeout(timer);
      if (!resolved) reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (resolved) return;
      reject(failed(code, stderr.trim()));
    });
  });
}

/** At most `limit` bytes of `source`; the source is destroyed (its read killed) once they are through. */
export function capStream(source: Readable, limit: number): Readable {
  if (limit === 0) {
    source.destroy();
    return Readable.from([]);
  }
  let left = limit;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (left <= 0) return done();
      const part = chunk.length > left ? chunk.subarray(0, left) : chunk;
      left -= part.length;
      done(null, part);
      if (left <= 0) {
        this.push(null);
        source.destroy();
      }
    },
  });
  source.on('error', (err) => out.destroy(err));
  source.pipe(out);
  out.on('close', () => source.destroy());
  return out;
}
