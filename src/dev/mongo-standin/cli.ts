// `npm run mongo:standin -- --port N`: runs the stand-in until SIGTERM/SIGINT
// and prints `ready mongodb://127.0.0.1:N` once it accepts connections.

import { startMongoStandin } from './index.js';

function parsePort(argv: string[]): number {
  const i = argv.findIndex((a) => a === '--port' || a.startsWith('--port='));
  if (i < 0) return 27017;
  const flag = argv[i] ?? '';
  const raw = flag.includes('=') ? flag.slice(flag.indexOf('=') + 1) : argv[i + 1];
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`invalid --port ${raw}\n`);
    process.exit(2);
  }
  return port;
}

const standin = await startMongoStandin({ port: parsePort(process.argv.slice(2)), host: '127.0.0.1' });
process.stdout.write(`ready ${standin.uri}\n`);

// `on`, not `once`: wrappers such as tsx relay the signal the process group
// already received, and a second signal must not kill us mid-shutdown.
let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  standin.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
