import { Redis } from 'ioredis';
import { QueueEventPublisher } from '../src/events/queue-publisher.js';
import { relayPendingEvents } from '../src/events/relay.js';
import type { RoleStarter } from './start.js';

const IDLE_POLL_MS = 250;
const ERROR_BACKOFF_MS = 1_000;

/** The relay role: moves events recorded in MongoDB onto the queues, whatever the API could not publish. */
export const startRelay: RoleStarter = async ({ config, db, logger }) => {
  const connection = new Redis(config.REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  connection.on('error', () => {});
  const publisher = new QueueEventPublisher(db, { connection, prefix: config.QUEUE_PREFIX }, logger);
  let stopped = false;
  let wake: (() => void) | undefined;

  const loop = (async () => {
    let failing = false;
    while (!stopped) {
      let delay = IDLE_POLL_MS;
      try {
        await relayPendingEvents(db, publisher, logger);
        if (failing) logger.info('relay publishing again');
        failing = false;
      } catch (error) {
        if (!failing) logger.warn({ err: error }, 'relay cannot publish yet; events stay in MongoDB');
        failing = true;
        delay = ERROR_BACKOFF_MS;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, delay);
      });
    }
  })();

  return {
    async close() {
      stopped = true;
      wake?.();
      await loop;
      await publisher.close();
      connection.disconnect();
    },
  };
};
