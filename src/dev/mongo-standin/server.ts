// TCP server: one FrameReader per connection, each message decoded and its
// command executed synchronously before the next one is looked at.

import net from 'node:net';
import { Double } from 'bson';
import { runCommand } from './commands/index.js';
import { Cursors } from './cursors.js';
import { asCommandError, CommandError } from './errors.js';
import { Store } from './storage.js';
import {
  decodeMessage,
  encodeOpMsg,
  encodeOpReply,
  FrameReader,
  FramingError,
  type Incoming,
  OP_MSG,
  OP_QUERY,
  opMsgFlags,
  readHeader,
} from './wire.js';
import type { ServerState } from './commands/common.js';
import type { Doc } from './values.js';

const LEGACY_HELLO = new Set(['hello', 'isMaster', 'ismaster']);

export interface StandinServerOptions {
  /** Seconds between passes of the TTL monitor (MongoDB's ttlMonitorSleepSecs, default 60). */
  ttlMonitorSleepSecs?: number;
  /** Yield to other connections between an upsert's failed match and its insert, as MongoDB may. */
  interleaveUpserts?: boolean;
  /** Answer finds, aggregates and single-document writes without a sort in a random order. */
  shuffleUnsorted?: boolean;
}

export class StandinServer {
  readonly state: ServerState;
  private readonly server = net.createServer((socket) => this.accept(socket));
  private readonly sockets = new Set<net.Socket>();
  private nextConnectionId = 1;
  private readonly sweeper = setInterval(() => this.state.cursors.expireIdle(), 60_000);
  private ttlMonitor?: NodeJS.Timeout;

  constructor(options: StandinServerOptions = {}) {
    this.sweeper.unref();
    this.state = {
      store: new Store(),
      cursors: new Cursors(),
      startedAt: new Date(),
      parameters: { ttlMonitorSleepSecs: options.ttlMonitorSleepSecs ?? 60 },
      interleaveUpserts: options.interleaveUpserts ?? false,
      shuffleUnsorted: options.shuffleUnsorted ?? false,
      onTtlMonitorChange: () => this.startTtlMonitor(),
    };
    this.startTtlMonitor();
  }

  /** Like MongoDB's: expired documents go on the monitor's next pass, not at their expiry. */
  private startTtlMonitor(): void {
    clearInterval(this.ttlMonitor);
    const every = this.state.parameters.ttlMonitorSleepSecs * 1000;
    this.ttlMonitor = setInterval(() => this.state.store.sweepExpired(Date.now()), every);
    this.ttlMonitor.unref();
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
    clearInterval(this.ttlMonitor);
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    this.state.cursors.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    const connectionId = this.nextConnectionId++;
    const remote = `${socket.remoteAddress}:${socket.remotePort}`;
    const reader = new FrameReader();
    // Replies leave in request order: frames wait behind a command still waiting (an interleaved upsert).
    let waiting: Promise<void> | undefined;
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
        const answered = waiting
          ? waiting.then(() => this.answer(socket, frame, connectionId, remote))
          : this.answer(socket, frame, connectionId, remote);
        if (answered) {
          const mine = (waiting = answered.then(() => {
            if (waiting === mine) waiting = undefined;
          }));
        }
      }
    });
  }

  /** Handles one frame and writes its reply; a promise only when the command waits. */
  private answer(socket: net.Socket, frame: Buffer, connectionId: number, remote: string): void | Promise<void> {
    if (socket.destroyed) return;
    let reply: ReturnType<StandinServer['handle']>;
    try {
      reply = this.handle(frame, connectionId, remote);
    } catch (e) {
      // Last resort (e.g. a reply that cannot be encoded): answer an error, never crash.
      reply = this.internalError(frame, e);
    }
    const send = (r: Buffer | null | 'close'): void => {
      if (socket.destroyed) return;
      if (r === 'close') socket.destroy();
      else if (r) socket.write(r);
    };
    if (reply instanceof Promise) return reply.then(send, (e: unknown) => send(this.internalError(frame, e)));
    send(reply);
  }

  /** Returns the encoded reply, null for moreToCome messages, or 'close'. */
  private handle(
    frame: Buffer,
    connectionId: number,
    remote: string,
  ): Buffer | null | 'close' | Promise<Buffer | null> {
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
      // moreToCome: the client expects no reply (unacknowledged write).
      const encode = (reply: Doc): Buffer | null =>
        msg.moreToCome ? null : encodeOpMsg(header.requestId, finish(reply));
      const reply = runCommand({ state: this.state, body: msg.body, connectionId, remote, messageBytes: frame.length });
      return reply instanceof Promise ? reply.then(encode) : encode(reply);
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
    if (!msg.collection.endsWith('.$cmd') || !LEGACY_HELLO.has(name ?? '')) {
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
