// Wire-level behaviour of the stand-in that the driver never exercises on its
// own: checksums, moreToCome, kind-1 sequences sent by hand, legacy OP_QUERY,
// broken framing, plus cursor idle expiry.

import net from 'node:net';
import { BSON, type Document } from 'bson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cursors } from '../../src/dev/mongo-standin/cursors.js';
import { CommandError } from '../../src/dev/mongo-standin/errors.js';
import { startMongoStandin } from '../../src/dev/mongo-standin/index.js';

let port: number;
let close: () => Promise<void>;

beforeAll(async () => {
  const s = await startMongoStandin({ quiet: true });
  port = s.port;
  close = () => s.close();
});
afterAll(() => close());

let requestId = 100;

function header(length: number, opCode: number, id: number): Buffer {
  const h = Buffer.alloc(16);
  h.writeInt32LE(length, 0);
  h.writeInt32LE(id, 4);
  h.writeInt32LE(0, 8);
  h.writeInt32LE(opCode, 12);
  return h;
}

function crc32c(buf: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of buf) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

function opMsg(body: Document, opts: { flags?: number; sequence?: [string, Document[]]; id?: number } = {}): Buffer {
  const parts: Buffer[] = [Buffer.from([0]), Buffer.from(BSON.serialize(body))];
  if (opts.sequence) {
    const [ident, docs] = opts.sequence;
    const payload = Buffer.concat([Buffer.from(ident + '\0'), ...docs.map((d) => Buffer.from(BSON.serialize(d)))]);
    const size = Buffer.alloc(4);
    size.writeInt32LE(payload.length + 4);
    parts.push(Buffer.from([1]), size, payload);
  }
  const flags = Buffer.alloc(4);
  flags.writeUInt32LE(opts.flags ?? 0);
  const checksum = (opts.flags ?? 0) & 1 ? 4 : 0;
  const bodyLen = 4 + parts.reduce((n, p) => n + p.length, 0);
  const msg = Buffer.concat([header(16 + bodyLen + checksum, 2013, opts.id ?? ++requestId), flags, ...parts]);
  if (!checksum) return msg;
  const crc = Buffer.alloc(4);
  crc.writeUInt32LE(crc32c(msg));
  return Buffer.concat([msg, crc]);
}

function opQuery(collection: string, query: Document): Buffer {
  const rest = Buffer.concat([
    Buffer.alloc(4), // flags
    Buffer.from(collection + '\0'),
    Buffer.from([0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]), // skip 0, return -1
    Buffer.from(BSON.serialize(query)),
  ]);
  return Buffer.concat([header(16 + rest.length, 2004, ++requestId), rest]);
}

/** A raw connection that yields whole reply frames. */
async function connect() {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise((r) => sock.once('connect', r));
  let buf = Buffer.alloc(0);
  const waiters: Array<() => void> = [];
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    waiters.splice(0).forEach((w) => w());
  });
  const closed = new Promise<void>((r) => sock.once('close', () => r()));
  async function next(): Promise<{ opCode: number; responseTo: number; doc: Document }> {
    while (buf.length < 4 || buf.length < buf.readInt32LE(0)) {
      await new Promise<void>((r) => waiters.push(r));
    }
    const len = buf.readInt32LE(0);
    const frame = buf.subarray(0, len);
    buf = buf.subarray(len);
    const opCode = frame.readInt32LE(12);
    const responseTo = frame.readInt32LE(8);
    const docStart = opCode === 2013 ? 21 : 36;
    return { opCode, responseTo, doc: BSON.deserialize(frame.subarray(docStart)) };
  }
  return { sock, next, closed };
}

describe('wire protocol', () => {
  it('answers OP_MSG with a checksum and reads kind-1 document sequences', async () => {
    const c = await connect();
    c.sock.write(
      opMsg(
        { insert: 'seq', $db: 'wire', ordered: true },
        { flags: 1, sequence: ['documents', [{ _id: 1 }, { _id: 2 }]] },
      ),
    );
    const ins = await c.next();
    expect(ins.opCode).toBe(2013);
    expect(ins.doc).toEqual({ n: 2, ok: 1 });
    c.sock.write(opMsg({ find: 'seq', filter: {}, $db: 'wire' }));
    const found = await c.next();
    expect(found.doc.cursor.firstBatch).toEqual([{ _id: 1 }, { _id: 2 }]);
    expect(found.doc.cursor.ns).toBe('wire.seq');
    c.sock.destroy();
  });

  it('sends no reply for moreToCome', async () => {
    const c = await connect();
    c.sock.write(
      opMsg(
        { insert: 'fire', $db: 'wire', writeConcern: { w: 0 } },
        { flags: 2, sequence: ['documents', [{ _id: 'x' }]] },
      ),
    );
    c.sock.write(opMsg({ ping: 1, $db: 'admin' }, { id: 4242 }));
    const reply = await c.next();
    expect(reply.responseTo).toBe(4242);
    c.sock.write(opMsg({ count: 'fire', $db: 'wire' }));
    expect((await c.next()).doc).toEqual({ n: 1, ok: 1 });
    c.sock.destroy();
  });

  it('accepts the legacy OP_QUERY handshake only', async () => {
    const c = await connect();
    c.sock.write(opQuery('admin.$cmd', { isMaster: 1, helloOk: true }));
    const hello = await c.next();
    expect(hello.opCode).toBe(1);
    expect(hello.doc).toMatchObject({ ismaster: true, helloOk: true, maxWireVersion: 21, ok: 1 });
    expect(hello.doc.localTime).toBeInstanceOf(Date);
    c.sock.write(opQuery('admin.$cmd', { $query: { hello: 1 } }));
    expect((await c.next()).doc).toMatchObject({ isWritablePrimary: true });
    c.sock.write(opQuery('wire.$cmd', { find: 'x' }));
    expect((await c.next()).doc).toMatchObject({ ok: 0, code: 352 });
    c.sock.destroy();
  });

  it('shapes errors like MongoDB and survives bad BSON', async () => {
    const c = await connect();
    c.sock.write(opMsg({ frobnicate: 1, $db: 'admin' }));
    expect((await c.next()).doc).toEqual({
      ok: 0,
      errmsg: "no such command: 'frobnicate'",
      code: 59,
      codeName: 'CommandNotFound',
    });
    const bad = opMsg({ ping: 1, $db: 'admin' });
    bad[25] = 0x99; // unknown BSON element type inside a well-framed message
    c.sock.write(bad);
    expect((await c.next()).doc).toMatchObject({ ok: 0, code: 2 });
    c.sock.write(opMsg({ ping: 1, $db: 'admin' }));
    expect((await c.next()).doc).toEqual({ ok: 1 });
    c.sock.destroy();
  });

  it('closes the connection on unparsable framing', async () => {
    const c = await connect();
    c.sock.write(Buffer.from([5, 0, 0, 0, 1, 2, 3, 4]));
    await c.closed;
    const d = await connect();
    d.sock.write(opMsg({ ping: 1, $db: 'admin' }, { flags: 1 << 5 })); // unknown required flag bit
    await d.closed;
  });
});

describe('cursor expiry', () => {
  it('forgets cursors idle for more than 10 minutes', () => {
    const cursors = new Cursors();
    const docs = Array.from({ length: 10 }, (_, i) => ({ i }));
    const first = cursors.start('db.c', docs, 2);
    const id = first.cursor.id.toString();
    expect(cursors.getMore(id, 'db.c', 2).cursor.nextBatch).toEqual([{ i: 2 }, { i: 3 }]);
    cursors.expireIdle(Date.now() + 11 * 60 * 1000);
    expect(() => cursors.getMore(id, 'db.c')).toThrow(CommandError);
    expect(cursors.size).toBe(0);
  });
});
