import { writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { buildApp } from '../app.js';
import { loadConfig } from '../shared/config.js';

// Writes the OpenAPI document without any server running: the clients are created but never connect.
const config = loadConfig({ ...process.env, LOG_LEVEL: 'silent' });
const client = new MongoClient('mongodb://127.0.0.1:1');
const redis = new Redis({ lazyConnect: true });
const app = await buildApp({ config, db: client.db('openapi'), redis });
const document = (await app.inject({ method: 'GET', url: '/v1/ext/openapi.json' })).body;
const target = process.argv[2];
if (target) writeFileSync(target, document);
else process.stdout.write(`${document}\n`);
// The never-connected clients cannot close cleanly; nothing is left to flush.
process.exit(0);
