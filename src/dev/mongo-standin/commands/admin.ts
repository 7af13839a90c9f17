// Handshake, server info, sessions and database-level admin commands.

import { BSON } from 'bson';
import { fail, notImplemented } from '../errors.js';
import { compileFilter } from '../query.js';
import { checkFields, type Handler, type Request } from './common.js';
import type { Collection } from '../storage.js';
import type { Doc } from '../values.js';

export const VERSION = '7.0.0-standin';
export const MAX_WIRE_VERSION = 21; // MongoDB 7.0

/**
 * hello / isMaster. Standalone topology: no setName, no `msg: 'isdbgrid'`,
 * and no topologyVersion, so the driver polls instead of using the
 * streaming (exhaust) monitoring protocol.
 */
export const hello: Handler = (req) => {
  const cmd = Object.keys(req.body)[0];
  return {
    helloOk: true,
    [cmd === 'hello' ? 'isWritablePrimary' : 'ismaster']: true,
    maxBsonObjectSize: 16 * 1024 * 1024,
    maxMessageSizeBytes: 48_000_000,
    maxWriteBatchSize: 100_000,
    localTime: new Date(),
    logicalSessionTimeoutMinutes: 30,
    connectionId: req.connectionId,
    minWireVersion: 0,
    maxWireVersion: MAX_WIRE_VERSION,
    readOnly: false,
    ok: 1,
  };
};

export const ping: Handler = () => ({ ok: 1 });

export const buildInfo: Handler = () => ({
  version: VERSION,
  gitVersion: 'mongo-standin',
  modules: [],
  allocator: 'system',
  javascriptEngine: 'none',
  sysInfo: 'deprecated',
  versionArray: [7, 0, 0, 0],
  openssl: { running: 'disabled', compiled: 'disabled' },
  buildEnvironment: {},
  bits: 64,
  debug: false,
  maxBsonObjectSize: 16 * 1024 * 1024,
  storageEngines: ['inMemory'],
  ok: 1,
});

const STATIC_PARAMETERS: Doc = {
  featureCompatibilityVersion: { version: '7.0' },
  authenticationMechanisms: [],
};

export const getParameter: Handler = ({ state, body }) => {
  const parameters: Doc = { ...STATIC_PARAMETERS, ...state.parameters };
  const all = body.getParameter === '*' || (typeof body.getParameter === 'object' && body.getParameter?.allParameters);
  const reply: Doc = {};
  for (const k of Object.keys(body).slice(1)) {
    if (k.startsWith('$') || k === 'lsid' || k === 'comment') continue;
    if (!(k in parameters)) fail('InvalidOptions', 'no option found to get');
    reply[k] = parameters[k];
  }
  return { ...(all ? parameters : reply), ok: 1 };
};

/** setParameter: only ttlMonitorSleepSecs (what tests on a real server set too, to see TTL deletions sooner). */
export const setParameter: Handler = (req) => {
  requireAdmin(req);
  const { state, body } = req;
  const names = Object.keys(body).filter((k) => k !== 'setParameter' && !k.startsWith('$') && k !== 'lsid');
  if (names.length === 0) fail('NoSuchKey', 'no option found to set, use help:true to see options ');
  const reply: Doc = {};
  for (const name of names) {
    if (name !== 'ttlMonitorSleepSecs') notImplemented(`setParameter ${name}`);
    const secs = Number(body[name]);
    if (!Number.isInteger(secs) || secs < 1) fail('BadValue', `ttlMonitorSleepSecs must be a positive integer`);
    reply.was = state.parameters.ttlMonitorSleepSecs;
    state.parameters.ttlMonitorSleepSecs = secs;
    state.onTtlMonitorChange?.();
  }
  return { ...reply, ok: 1 };
};

/** Sessions are not tracked: lsid is ignored everywhere, so these are no-ops. */
export const sessionsNoop: Handler = () => ({ ok: 1 });

export const serverStatus: Handler = ({ state }) => ({
  host: 'mongo-standin',
  version: VERSION,
  process: 'mongod',
  pid: process.pid,
  uptime: Math.floor((Date.now() - state.startedAt.getTime()) / 1000),
  localTime: new Date(),
  storageEngine: { name: 'inMemory' },
  ok: 1,
});

export const connectionStatus: Handler = () => ({
  authInfo: { authenticatedUsers: [], authenticatedUserRoles: [] },
  ok: 1,
});

export const whatsmyuri: Handler = ({ remote }) => ({ you: remote, ok: 1 });

function requireAdmin(req: Request): void {
  const cmd = Object.keys(req.body)[0];
  if (req.db !== 'admin') fail('Unauthorized', `${cmd} may only be run against the admin database.`);
}

function dataSize(colls: Collection[]): { objects: number; bytes: number } {
  let objects = 0;
  let bytes = 0;
  for (const c of colls) {
    objects += c.docs.size;
    for (const d of c.docs.values()) bytes += BSON.calculateObjectSize(d);
  }
  return { objects, bytes };
}

export const listDatabases: Handler = (req) => {
  requireAdmin(req);
  checkFields(req.body, ['nameOnly', 'filter', 'authorizedDatabases']);
  const { store } = req.state;
  const rows = store.databases().map((name) => ({
    name,
    sizeOnDisk: dataSize(store.collections(name)).bytes,
    empty: false,
  }));
  const match = compileFilter(req.body.filter);
  const kept = rows.filter(match);
  const totalSize = kept.reduce((s, r) => s + r.sizeOnDisk, 0);
  if (req.body.nameOnly) return { databases: kept.map((r) => ({ name: r.name })), ok: 1 };
  return { databases: kept, totalSize, totalSizeMb: Math.floor(totalSize / 1024 / 1024), ok: 1 };
};

export const dropDatabase: Handler = (req) => {
  checkFields(req.body, []);
  req.state.store.dropDatabase(req.db);
  return { dropped: req.db, ok: 1 };
};

export const dbStats: Handler = (req) => {
  checkFields(req.body, ['scale', 'freeStorage']);
  const colls = req.state.store.collections(req.db);
  const { objects, bytes } = dataSize(colls);
  const indexes = colls.reduce((s, c) => s + c.indexes.length, 0);
  return {
    db: req.db,
    collections: colls.length,
    views: 0,
    objects,
    avgObjSize: objects ? bytes / objects : 0,
    dataSize: bytes,
    storageSize: bytes,
    indexes,
    indexSize: 0,
    totalSize: bytes,
    scaleFactor: 1,
    fsUsedSize: 0,
    fsTotalSize: 0,
    ok: 1,
  };
};

export const collStats: Handler = (req) => {
  checkFields(req.body, ['scale']);
  const name = String(req.body.collStats);
  const coll = req.state.store.get(req.db, name);
  if (!coll) fail('NamespaceNotFound', `Collection [${req.db}.${name}] not found.`);
  const { objects, bytes } = dataSize([coll]);
  const indexSizes = Object.fromEntries(coll.indexes.map((i) => [i.spec.name, 0]));
  return {
    ns: coll.ns,
    count: objects,
    size: bytes,
    avgObjSize: objects ? bytes / objects : 0,
    storageSize: bytes,
    nindexes: coll.indexes.length,
    totalIndexSize: 0,
    indexSizes,
    ok: 1,
  };
};

export const renameCollection: Handler = (req) => {
  requireAdmin(req);
  checkFields(req.body, ['to', 'dropTarget', 'stayTemp']);
  const { store } = req.state;
  const split = (full: unknown): [string, string] => {
    const s = String(full);
    const dot = s.indexOf('.');
    if (dot <= 0) fail('InvalidNamespace', `Invalid namespace specified '${s}'`);
    return [s.slice(0, dot), s.slice(dot + 1)];
  };
  const [fromDb, fromName] = split(req.body.renameCollection);
  const [toDb, toName] = split(req.body.to);
  const source = store.get(fromDb, fromName);
  if (!source) fail('NamespaceNotFound', `Source collection ${fromDb}.${fromName} does not exist`);
  if (store.get(toDb, toName)) {
    if (!req.body.dropTarget) fail('NamespaceExists', 'target namespace exists');
    store.drop(toDb, toName);
  }
  store.rename(source, toDb, toName);
  return { ok: 1 };
};

export const rejectTransactionCommand: Handler = () =>
  fail('IllegalOperation', 'Transaction numbers are only allowed on a replica set member or mongos');

export const explain: Handler = () => notImplemented('explain');
