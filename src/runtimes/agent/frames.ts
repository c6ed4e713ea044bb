// The wire format of roomkit's in-guest agent (protocol.ts; images/guest/agent/
// protocol.go is the agent's side): frames of one type byte, a 4-byte big-endian
// payload length and the payload, both ways over one TCP connection per operation.
import { AGENT_PROTOCOL, type FrameName } from './protocol.ts';

type Frames = (typeof AGENT_PROTOCOL)['frames'];
/** Each frame's type byte, by name. */
export const FRAME = Object.fromEntries(Object.entries(AGENT_PROTOCOL.frames).map(([name, frame]) => [name, frame.code])) as {
  readonly [Name in FrameName]: Frames[Name]['code'];
};
export type FrameType = (typeof FRAME)[FrameName];

export interface Frame {
  type: string;
  payload: Buffer;
}

/** Frames larger than this from the guest end the connection: the guest is not trusted. */
export const MAX_FRAME_BYTES = AGENT_PROTOCOL.constants.maxFrameBytes;
const HEADER_BYTES = 5;

export function encodeFrame(type: FrameType, payload: Buffer | string | object = Buffer.alloc(0)): Buffer {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload));
  const header = Buffer.alloc(HEADER_BYTES);
  header.write(type, 0, 'latin1');
  header.writeUInt32BE(body.length, 1);
  return Buffer.concat([header, body]);
}

/** Cuts a byte stream into frames; throws on a frame larger than MAX_FRAME_BYTES. */
export class FrameDecoder {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  push(chunk: Buffer): Frame[] {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    const frames: Frame[] = [];
    while (this.pendingBytes >= HEADER_BYTES) {
      const buffer = this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending);
      this.pending = [buffer];
      const length = buffer.readUInt32BE(1);
      if (length > MAX_FRAME_BYTES) throw new Error(`the agent sent a frame of ${length} bytes, more than ${MAX_FRAME_BYTES}`);
      if (buffer.length < HEADER_BYTES + length) break;
      frames.push({ type: String.fromCharCode(buffer[0] ?? 0), payload: buffer.subarray(HEADER_BYTES, HEADER_BYTES + length) });
      const rest = buffer.subarray(HEADER_BYTES + length);
      this.pending = rest.length > 0 ? [rest] : [];
      this.pendingBytes = rest.length;
    }
    return frames;
  }
}
