// Command dispatch: name lookup, transaction rejection, error shaping.

import { asCommandError, fail, notImplemented, TXN_ERROR_MSG } from '../errors.js';
import * as admin from './admin.js';
import * as ddl from './ddl.js';
import * as read from './read.js';
import * as write from './write.js';
import type { Doc } from '../values.js';
import type { Handler, Request } from './common.js';

const HANDLERS: Record<string, Handler> = {
  hello: admin.hello,
  isMaster: admin.hello,
  ismaster: admin.hello,
  ping: admin.ping,
  buildInfo: admin.buildInfo,
  buildinfo: admin.buildInfo,
  getParameter: admin.getParameter,
  setParameter: admin.setParameter,
  endSessions: admin.sessionsNoop,
  killSessions: admin.sessionsNoop,
  killAllSessions: admin.sessionsNoop,
  refreshSessions: admin.sessionsNoop,
  serverStatus: admin.serverStatus,
  connectionStatus: admin.connectionStatus,
  whatsmyuri: admin.whatsmyuri,
  listDatabases: admin.listDatabases,
  dropDatabase: admin.dropDatabase,
  dbStats: admin.dbStats,
  collStats: admin.collStats,
  renameCollection: admin.renameCollection,
  commitTransaction: admin.rejectTransactionCommand,
  abortTransaction: admin.rejectTransactionCommand,
  explain: admin.explain,
  find: read.find,
  getMore: read.getMore,
  killCursors: read.killCursors,
  count: read.count,
  distinct: read.distinct,
  aggregate: read.aggregate,
  insert: write.insert,
  update: write.update,
  delete: write.del,
  findAndModify: write.findAndModify,
  findandmodify: write.findAndModify,
  create: ddl.create,
  drop: ddl.drop,
  collMod: ddl.collMod,
  listCollections: ddl.listCollections,
  createIndexes: ddl.createIndexes,
  listIndexes: ddl.listIndexes,
  dropIndexes: ddl.dropIndexes,
  deleteIndexes: ddl.dropIndexes,
};

/** Runs one command and always answers a reply document (errors become ok: 0); only a waiting command answers later. */
export function runCommand(req: Omit<Request, 'db'>): Doc | Promise<Doc> {
  try {
    const name = Object.keys(req.body)[0];
    if (name === undefined) fail('FailedToParse', 'Empty command object');
    const db = req.body.$db;
    if (typeof db !== 'string' || !db) fail('FailedToParse', "Missing or invalid required field '$db'");
    // Standalone servers have no transactions: fail loudly rather than run the
    // statements outside a transaction.
    if (
      req.body.txnNumber !== undefined ||
      req.body.startTransaction !== undefined ||
      req.body.autocommit !== undefined
    ) {
      fail('IllegalOperation', TXN_ERROR_MSG);
    }
    const rc = req.body.readConcern;
    if (rc && typeof rc === 'object' && (rc.level === 'snapshot' || rc.atClusterTime !== undefined)) {
      notImplemented("readConcern level 'snapshot'");
    }
    const handler = Object.hasOwn(HANDLERS, name) ? HANDLERS[name] : undefined;
    if (!handler) fail('CommandNotFound', `no such command: '${name}'`);
    const reply = handler({ ...req, db });
    return reply instanceof Promise ? reply.catch((e: unknown) => asCommandError(e).toReply()) : reply;
  } catch (e) {
    return asCommandError(e).toReply();
  }
}
