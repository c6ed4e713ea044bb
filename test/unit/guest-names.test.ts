import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiPath, decodeName, decodeUrlPath, encodeName, fromApiPath, shellArg, urlSegment } from '../../src/lib/guest-names.ts';
import { rewriteFileUrl } from '../../src/adapters/rest/routes/files.ts';

const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));

describe('names that are not UTF-8', () => {
  it('keeps distinct byte names distinct and gives the same bytes back', () => {
    const names = [bytes('bad', [0xff]), bytes('bad', [0xfe]), bytes('bad', [0xfd]), bytes([0xc3]), bytes([0xed, 0xa0, 0x80]), bytes([0xc0, 0xaf]), bytes('é€😀', [0x80], 'x')];
    const decoded = names.map((n) => decodeName(n));
    assert.equal(new Set(decoded).size, names.length);
    for (const [i, name] of names.entries()) assert.deepEqual(encodeName(decoded[i]!), name);
  });

  it('leaves valid UTF-8 as it is, astral characters included', () => {
    assert.equal(decodeName(Buffer.from('héllo/😀 €')), 'héllo/😀 €');
    assert.deepEqual(apiPath('/home/user/100% €.txt'), { path: '/home/user/100% €.txt', percentEncoded: false });
    assert.equal(urlSegment('a b?é'), encodeURIComponent('a b?é'));
  });

  it('shows an odd name percent-escaped, % included, and reads it back', () => {
    const name = decodeName(bytes('/tmp/50%', [0xff], 'é'));
    const shown = apiPath(name);
    assert.deepEqual(shown, { path: '/tmp/50%25%FFé', percentEncoded: true });
    assert.equal(fromApiPath(shown.path), name);
    assert.equal(urlSegment(decodeName(bytes('a', [0xff], 'é'))), 'a%FF%C3%A9');
    assert.equal(decodeUrlPath('a%FF%C3%A9'), decodeName(bytes('a', [0xff], 'é')));
    assert.equal(decodeUrlPath('a%F'), null);
    assert.equal(decodeUrlPath('%zz'), null);
  });

  it('escapes names for printf %b only when they need it', () => {
    assert.equal(shellArg('/home/user/plain name'), '/home/user/plain name');
    assert.equal(shellArg('a\\b'), 'a\\\\b');
    assert.equal(shellArg(decodeName(bytes('bad', [0xff], '1'))), 'bad\\03771');
  });

  it('rewrites only file URLs whose escapes are not UTF-8, so they route', () => {
    const id = '0b7e8a52-8a3e-4d6c-9f0e-4f5d2a1c3b7e';
    assert.equal(rewriteFileUrl(`/vm/${id}/file/tmp/bad%FF?x=1`), `/vm/${id}/file/tmp/bad%25FF?x=1`);
    assert.equal(rewriteFileUrl(`/api/profile/p/room/r/file/bad%FE`), `/api/profile/p/room/r/file/bad%25FE`);
    assert.equal(rewriteFileUrl(`/vm/${id}/file/ok%C3%A9`), `/vm/${id}/file/ok%C3%A9`);
    assert.equal(rewriteFileUrl('/api/keys%FF'), '/api/keys%FF');
    assert.equal(rewriteFileUrl(`/vm/${id}/file/broken%G1`), `/vm/${id}/file/broken%G1`);
  });
});
