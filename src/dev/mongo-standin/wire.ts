// MongoDB wire protocol framing: message header, OP_MSG (kind 0 body and
// kind 1 document sequences, checksum, moreToCome), the legacy OP_QUERY used
// for the initial handshake, and OP_MSG / OP_REPLY encoding.

import { BSON } from 'bson';
import { must } from '../../shared/must.js';
import type { Doc } from './values.js';

export const OP_REPLY = 1;
export const OP_QUERY = 2004;
export const OP_COMPRESSED = 2012;
export const OP_MSG = 2013;

export const MAX_MESSAGE_BYTES = 48_000_000;
const HEADER_BYTES = 16;

const FLAG_CHECKSUM = 1 << 0;
const FLAG_MORE_TO_COME = 1 << 1;
/** Bits 0-15 are "required": a receiver must reject unknown ones. */
const KNOWN_REQUIRED = FLAG_CHECKSUM | FLAG_MORE_TO_COME;

/** Broken framing: the connection cannot be trusted any more and is closed. */
export class FramingError extends Error {}

export interface Header {
  length: number;
  requestId: number;
  responseTo: number;
  opCode: number;
}

export type Incoming =
  | { kind: 'msg'; header: Header; body: Doc; moreToCome: boolean }
  | { kind: 'query'; header: Header; collection: string; query: Doc };

const DESERIALIZE = { promoteLongs: true, promoteValues: true, promoteBuffers: false, bsonRegExp: false };

/** Accumulates socket chunks and yields complete frames. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private size = 0;

  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.size += chunk.length;
    const frames: Buffer[] = [];
    for (;;) {
      if (this.size < 4) break;
      const first = must(this.chunks[0], 'a chunk while size >= 4');
      const head = first.length >= 4 ? first : this.flatten();
      const length = head.readInt32LE(0);
      if (length < HEADER_BYTES || length > MAX_MESSAGE_BYTES) {
        throw new FramingError(`invalid message length ${length}`);
      }
      if (this.size < length) break;
      const all = this.flatten();
      frames.push(all.subarray(0, length));
      const rest = all.subarray(length);
      this.chunks = rest.length ? [rest] : [];
      this.size = rest.length;
    }
    return frames;
  }

  // Concatenate only when needed, so a big message arriving in many chunks is copied once.
  private flatten(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.size)];
    return must(this.chunks[0], 'a chunk to flatten');
  }
}

export function readHeader(frame: Buffer): Header {
  return {
    length: frame.readInt32LE(0),
    requestId: frame.readInt32LE(4),
    responseTo: frame.readInt32LE(8),
    opCode: frame.readInt32LE(12),
  };
}

export function opMsgFlags(frame: Buffer): number {
  return frame.length >= 20 ? frame.readUInt32LE(16) : 0;
}

export function decodeMessage(frame: Buffer): Incoming {
  const header = readHeader(frame);
  if (header.opCode === OP_MSG) return decodeOpMsg(frame, header);
  if (header.opCode === OP_QUERY) return decodeOpQuery(frame, header);
  throw new FramingError(`unsupported opCode ${header.opCode}`);
}

function decodeOpMsg(frame: Buffer, header: Header): Incoming {
  if (frame.length < 21) throw new FramingError('OP_MSG too short');
  const flags = frame.readUInt32LE(16);
  if ((flags & 0xffff & ~KNOWN_REQUIRED) !== 0) throw new FramingError(`unknown required OP_MSG flag bits ${flags}`);
  // The CRC-32C checksum is trailing; TCP already protects us, so it is skipped, not verified.
  const end = frame.length - (flags & FLAG_CHECKSUM ? 4 : 0);
  let pos = 20;
  let body: Doc | undefined;
  const sequences: Array<[string, Doc[]]> = [];
  while (pos < end) {
    const kind = frame[pos++];
    if (pos + 4 > end) throw new FramingError('truncated OP_MSG section');
    const size = frame.readInt32LE(pos);
    if (size < 5 || pos + size > end) throw new FramingError('invalid OP_MSG section size');
    if (kind === 0) {
      if (body) throw new FramingError('OP_MSG with more than one body section');
      body = BSON.deserialize(frame.subarray(pos, pos + size), DESERIALIZE);
    } else if (kind === 1) {
      const nul = frame.indexOf(0, pos + 4);
      if (nul < 0 || nul >= pos + size) throw new FramingError('invalid document sequence identifier');
      const ident = frame.toString('utf8', pos + 4, nul);
      const docs: Doc[] = [];
      for (let p = nul + 1; p < pos + size;) {
        const docSize = frame.readInt32LE(p);
        if (docSize < 5 || p + docSize > pos + size) throw new FramingError('invalid document in sequence');
        docs.push(BSON.deserialize(frame.subarray(p, p + docSize), DESERIALIZE));
        p += docSize;
      }
      sequences.push([ident, docs]);
    } else {
      throw new FramingError(`unknown OP_MSG section kind ${kind}`);
    }
    pos += size;
  }
  if (!body) throw new FramingError('OP_MSG without a body section');
  for (const [ident, docs] of sequences) {
    // Document sequences are just another way of sending an array field of the body.
    if (ident in body) throw new Error(`Duplicate field ${ident} in OP_MSG body and document sequence`);
    body[ident] = docs;
  }
  return { kind: 'msg', header, body, moreToCome: (flags & FLAG_MORE_TO_COME) !== 0 };
}

function decodeOpQuery(frame: Buffer, header: Header): Incoming {
  // flags(4) fullCollectionName(cstring) numberToSkip(4) numberToReturn(4) query [fieldSelector]
  const nul = frame.indexOf(0, 20);
  if (nul < 0) throw new FramingError('invalid OP_QUERY collection name');
  const collection = frame.toString('utf8', 20, nul);
  const qpos = nul + 1 + 8;
  if (qpos + 5 > frame.length) throw new FramingError('truncated OP_QUERY');
  const qsize = frame.readInt32LE(qpos);
  if (qsize < 5 || qpos + qsize > frame.length) throw new FramingError('invalid OP_QUERY document size');
  const query = BSON.deserialize(frame.subarray(qpos, qpos + qsize), DESERIALIZE);
  return { kind: 'query', header, collection, query };
}

let nextRequestId = 1;

function header(buf: Buffer, responseTo: number, opCode: number): void {
  buf.writeInt32LE(buf.length, 0);
  buf.writeInt32LE(nextRequestId, 4);
  nextRequestId = (nextRequestId + 1) & 0x7fffffff;
  buf.writeInt32LE(responseTo, 8);
  buf.writeInt32LE(opCode, 12);
}

export function encodeOpMsg(responseTo: number, doc: Doc): Buffer {
  const body = BSON.serialize(doc);
  const buf = Buffer.allocUnsafe(HEADER_BYTES + 5 + body.length);
  header(buf, responseTo, OP_MSG);
  buf.writeUInt32LE(0, 16); // flags: no checksum, no moreToCome (we never stream replies)
  buf[20] = 0; // section kind 0
  buf.set(body, 21);
  return buf;
}

export function encodeOpReply(responseTo: number, doc: Doc): Buffer {
  const body = BSON.serialize(doc);
  const buf = Buffer.alloc(HEADER_BYTES + 20 + body.length);
  header(buf, responseTo, OP_REPLY);
  buf.writeInt32LE(0, 16); // responseFlags
  // cursorId (8 bytes) and startingFrom (4 bytes) stay zero
  buf.writeInt32LE(1, 32); // numberReturned
  buf.set(body, 36);
  return buf;
}
