// TCP server: one FrameReader per connection, each message decoded and its
// command executed synchronously before the next one is looked at.

import net from 'node:net';
import { Double } from 'bson';
import { runCommand } from './commands/index.js';
import type { ServerState } from './commands/common.js';
import { Cursors } from './cursors.js';
import { asCommandError, CommandError } from './errors.js';
import { Store } from './storage.js';
import type { Doc } from './values.js';
import {
  decodeMessage, encodeOpMsg, encodeOpReply, FrameReader, FramingError, type Incoming, OP_MSG, OP_QUERY, opMsgFlags, readHeader,
} from './wire.js';

const LEGACY_HELLO = new Set(['hello', 'isMaster', 'ismaster']);

export class StandinServer {
  readonly state: ServerState = { store: new Store(), cursors: new Cursors(), startedAt: new Date() };
  private readonly server = net.createServer((socket) => this.accept(socket));
  private readonly sockets = new Set<net.Socket>();
  private nextConnectionId = 1;
  private readonly sweeper = setInterval(() => this.state.cursors.expireIdle(), 60_000);

  constructor() {
    this.sweeper.unref();
  }

  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    this.state.cursors.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    const connectionId = this.nextConnectionId++;
    const remote = `${socket.remoteAddress}:${socket.remotePort}`;
    const reader = new FrameReader();
    this.sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => {
      let frames: Buffer[];
      try {
        frames = reader.push(chunk);
      } catch {
        socket.destroy(); // unparsable framing: nothing after this point can be trusted
        return;
      }
      for (const frame of frames) {
        if (socket.destroyed) return;
        let reply: Buffer | null | 'close';
        try {
          reply = this.handle(frame, connectionId, remote);
        } catch (e) {
          // Last resort (e.g. a reply that cannot be encoded): answer an error, never crash.
          reply = this.internalError(frame, e);
        }
        if (reply === 'close') {
          socket.destroy();
          return;
        }
        if (reply) socket.write(reply);
      }
    });
  }

  /** Returns the encoded reply, null for moreToCome messages, or 'close'. */
  private handle(frame: Buffer, connectionId: number, remote: string): Buffer | null | 'close' {
    const header = readHeader(frame);
    let msg: Incoming;
    try {
      msg = decodeMessage(frame);
    } catch (e) {
      if (e instanceof FramingError) return 'close';
      // Well-framed message with an undecodable body: answer with an error.
      const reply = finish(new CommandError('BadValue', `invalid message: ${asCommandError(e).message}`).toReply());
      if (header.opCode === OP_MSG) return opMsgFlags(frame) & 2 ? null : encodeOpMsg(header.requestId, reply);
      if (header.opCode === OP_QUERY) return encodeOpReply(header.requestId, reply);
      return 'close';
    }
    if (msg.kind === 'msg') {
      const reply = runCommand({ state: this.state, body: msg.body, connectionId, remote });
      // moreToCome: the client expects no reply (unacknowledged write).
      return msg.moreToCome ? null : encodeOpMsg(header.requestId, finish(reply));
    }
    return encodeOpReply(header.requestId, finish(this.legacyQuery(msg, connectionId, remote)));
  }

  private internalError(frame: Buffer, e: unknown): Buffer | null | 'close' {
    try {
      const header = readHeader(frame);
      if (header.opCode === OP_MSG && opMsgFlags(frame) & 2) return null;
      const reply = finish(new CommandError('InternalError', `mongo-standin: ${asCommandError(e).message}`).toReply());
      return header.opCode === OP_QUERY ? encodeOpReply(header.requestId, reply) : encodeOpMsg(header.requestId, reply);
    } catch {
      return 'close';
    }
  }

  /** OP_QUERY is only accepted for the initial hello/isMaster handshake, like MongoDB 6+. */
  private legacyQuery(msg: Extract<Incoming, { kind: 'query' }>, connectionId: number, remote: string): Doc {
    const query = msg.query.$query && typeof msg.query.$query === 'object' ? msg.query.$query : msg.query;
    const name = Object.keys(query)[0];
    if (!msg.collection.endsWith('.$cmd') || !LEGACY_HELLO.has(name)) {
      return new CommandError(
        'UnsupportedOpQueryCommand',
        `Unsupported OP_QUERY command: ${name}. The client driver may require an upgrade.`,
      ).toReply();
    }
    const db = msg.collection.slice(0, -'.$cmd'.length);
    return runCommand({ state: this.state, body: { ...query, $db: db }, connectionId, remote });
  }
}

/** MongoDB sends `ok` as a double. */
function finish(reply: Doc): Doc {
  return { ...reply, ok: new Double(Number(reply.ok ?? 0)) };
}
