// The few things the SDK would otherwise take from Node's own modules (timers, Buffer,
// process.env, AbortSignal.any), written with what every runtime it supports has:
// Node 18 and later, browsers, and other runtimes with fetch. Nothing here may import
// a `node:` module or name a Node-only type, so a browser bundle of the SDK loads.

/** Waits `ms` milliseconds; rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A signal that aborts when any of the given ones does (AbortSignal.any, which Node 18
 * lacks), and `dispose` to stop listening to them once the request it guards is over,
 * so a long-lived signal of the caller's does not collect listeners.
 */
export function anySignal(signals: AbortSignal[]): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const dispose = () => {
    for (const signal of signals) signal.removeEventListener('abort', onAbort);
  };
  function onAbort(this: AbortSignal) {
    dispose();
    controller.abort(this.reason);
  }
  for (const signal of signals) {
    if (signal.aborted) {
      controller.abort(signal.reason);
      return { signal: controller.signal, dispose: () => {} };
    }
  }
  for (const signal of signals) signal.addEventListener('abort', onAbort);
  return { signal: controller.signal, dispose };
}

const BASE64_CHUNK = 0x8000;

/** Bytes as standard base64. */
export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  // In chunks: String.fromCharCode takes its characters as arguments, and a few
  // megabytes of them would overflow the call stack.
  for (let i = 0; i < bytes.length; i += BASE64_CHUNK) {
    binary += String.fromCharCode(...bytes.subarray(i, i + BASE64_CHUNK));
  }
  return btoa(binary);
}

/** The bytes of standard base64 text. */
export function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** An environment variable where the runtime has them (Node, Deno, Bun); undefined in a browser. */
export function environmentVariable(name: string): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.[name];
}

/** The same bytes over a plain ArrayBuffer, which is what fetch and WebSocket take (copied only when they are over another kind of buffer). */
export function plainBytes(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return bytes.buffer instanceof ArrayBuffer ? (bytes as Uint8Array<ArrayBuffer>) : new Uint8Array(bytes);
}

/**
 * A random UUID (version 4): from Web Crypto where the runtime has it (browsers, Node
 * 19+), else from Math.random, which is enough for a key that only has to differ from
 * the caller's other keys.
 */
export function randomKey(): string {
  const webCrypto = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (typeof webCrypto?.randomUUID === 'function') return webCrypto.randomUUID();
  const hex = Array.from({ length: 32 }, () => Math.floor(Math.random() * 16).toString(16));
  hex[12] = '4';
  hex[16] = ((parseInt(hex[16] ?? '0', 16) & 0x3) | 0x8).toString(16);
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
