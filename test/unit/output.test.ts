// The two output buffers a command's output goes through: the head-and-tail budget of a
// CommandResult and the log that streams and background reads are served from. Memory
// must stay within budget whatever a command prints, and offsets and characters must
// come out exact.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { completeUtf8Length, OutputLog } from '../../src/core/output-log.ts';
import { HeadTailBuffer } from '../../src/host/output.ts';

/** Chunks as a pipe hands them out: fresh 64 KiB buffers of a repeating pattern. */
function* pipeChunks(totalBytes: number, chunkBytes = 65536): Generator<Buffer> {
  for (let sent = 0; sent < totalBytes; sent += chunkBytes) {
    const chunk = Buffer.alloc(Math.min(chunkBytes, totalBytes - sent));
    for (let i = 0; i < chunk.length; i++) chunk[i] = 97 + ((sent + i) % 26);
    yield chunk;
  }
}

describe('HeadTailBuffer', () => {
  it('holds its budget whether a command prints 10 MB or 200 MB', () => {
    const peak = (bytes: number) => {
      const buffer = new HeadTailBuffer(1024 * 1024);
      let most = 0;
      for (const chunk of pipeChunks(bytes)) {
        buffer.push(chunk);
        most = Math.max(most, buffer.retainedBytes);
      }
      assert.equal(buffer.total, bytes);
      return most;
    };
    const small = peak(10_000_000);
    const large = peak(200_000_000);
    assert.ok(small <= 1024 * 1024 + 2 * 65536, `10 MB of output held ${small} bytes`);
    assert.ok(large <= 1024 * 1024 + 2 * 65536, `200 MB of output held ${large} bytes`);
  });

  it('keeps the exact first and last halves and says how much it dropped', () => {
    const buffer = new HeadTailBuffer(10);
    for (const part of ['abc', 'defgh', 'ijklmnop', 'qrstuvwxyz']) buffer.push(Buffer.from(part));
    assert.equal(buffer.truncated, true);
    assert.equal(buffer.text(), 'abcde\n[... 16 bytes of output omitted ...]\nvwxyz');
  });

  it('keeps everything below the budget', () => {
    const buffer = new HeadTailBuffer(100);
    buffer.push(Buffer.from('hello '));
    buffer.push(Buffer.from('world'));
    assert.equal(buffer.truncated, false);
    assert.equal(buffer.text(), 'hello world');
  });
});

describe('OutputLog', () => {
  it('holds at most its budget (plus one chunk) however much is appended', () => {
    const log = new OutputLog(1024 * 1024);
    let most = 0;
    for (const chunk of pipeChunks(100_000_000)) {
      log.append(chunk);
      most = Math.max(most, log.retainedBytes);
    }
    assert.equal(log.total, 100_000_000);
    assert.ok(most <= 1024 * 1024 + 65536, `held ${most} bytes`);
  });

  it('reads from an offset, and from the oldest kept byte when older output was dropped', () => {
    const log = new OutputLog(10);
    log.append(Buffer.from('0123456789'));
    log.append(Buffer.from('abcdef'));
    assert.deepEqual(log.read(12, 100), { data: 'cdef', offset: 12, end: 16 });
    assert.deepEqual(log.read(0, 100), { data: '6789abcdef', offset: 6, end: 16 });
    assert.deepEqual(log.read(8, 3), { data: '89a', offset: 8, end: 11 });
    assert.deepEqual(log.read(16, 100), { data: '', offset: 16, end: 16 });
    assert.deepEqual(log.read(99, 100), { data: '', offset: 16, end: 16 });
  });

  it('hands listeners whole characters with exact byte offsets, even when a chunk splits one', () => {
    const log = new OutputLog(1024);
    const pieces: { data: string; offset: number; end: number }[] = [];
    log.subscribe((p) => pieces.push(p));
    const text = Buffer.from('héllo → wörld 😀!');
    // Cut between every byte: the worst a pipe can do.
    for (let i = 0; i < text.length; i++) log.append(text.subarray(i, i + 1));
    log.flush();
    assert.equal(pieces.map((p) => p.data).join(''), text.toString());
    for (const piece of pieces) assert.equal(Buffer.byteLength(piece.data), piece.end - piece.offset);
    for (let i = 1; i < pieces.length; i++) assert.equal(pieces[i]!.offset, pieces[i - 1]!.end);
    assert.equal(pieces.at(-1)!.end, text.length);
  });

  it('stops a limited read before a character the limit would cut', () => {
    const log = new OutputLog(1024);
    log.append(Buffer.from('ab€cd'));
    assert.deepEqual(log.read(0, 3), { data: 'ab', offset: 0, end: 2 });
    assert.deepEqual(log.read(2, 3), { data: '€', offset: 2, end: 5 });
  });

  it('flushes an unfinished character at the end as a replacement, not silence', () => {
    const log = new OutputLog(1024);
    const pieces: string[] = [];
    log.subscribe((p) => pieces.push(p.data));
    log.append(Buffer.from([0x61, 0xe2, 0x82]));
    assert.deepEqual(pieces, ['a']);
    log.flush();
    assert.equal(pieces.length, 2);
    assert.match(pieces[1]!, /\uFFFD/);
  });
});

describe('completeUtf8Length', () => {
  it('cuts before a trailing sequence that is not finished, and only then', () => {
    const euro = Buffer.from('€'); // e2 82 ac
    assert.equal(completeUtf8Length(Buffer.from('abc')), 3);
    assert.equal(completeUtf8Length(Buffer.concat([Buffer.from('a'), euro])), 4);
    assert.equal(completeUtf8Length(Buffer.concat([Buffer.from('a'), euro.subarray(0, 2)])), 1);
    assert.equal(completeUtf8Length(Buffer.concat([Buffer.from('a'), euro.subarray(0, 1)])), 1);
    assert.equal(completeUtf8Length(Buffer.from([0x61, 0xff])), 2);
    assert.equal(completeUtf8Length(Buffer.from([0x80, 0x80, 0x80, 0x80])), 4);
  });
});
