import { Counter } from 'prom-client';
import { metricsRegistry } from './metrics.js';
import type { CommandStartedEvent, MongoClient } from 'mongodb';

/** One command a client sent to MongoDB: one network round trip (a bulk write of many documents is one). */
export interface SentCommand {
  /** insert, update, find, findAndModify, delete, aggregate, getMore... */
  name: string;
  /** The collection it addressed, or '' for commands on none (ping, endSessions...). */
  collection: string;
}

/**
 * Calls `listener` for every command `client` sends. The client must have been created with
 * `monitorCommands: true` (connectMongo's option): the driver emits the events only then.
 * Returns the function that stops listening.
 */
export function onMongoCommand(client: MongoClient, listener: (command: SentCommand) => void): () => void {
  const handle = (event: CommandStartedEvent) => {
    const target: unknown = event.command[event.commandName];
    listener({ name: event.commandName, collection: typeof target === 'string' ? target : '' });
  };
  client.on('commandStarted', handle);
  return () => client.off('commandStarted', handle);
}

/**
 * `mongodb_commands_total` (MONGO_COMMAND_METRICS): the round trips this process makes to MongoDB,
 * by command and collection. Off by default: monitoring costs a little CPU on every command.
 */
export function countMongoCommands(client: MongoClient): () => void {
  const counter =
    (metricsRegistry.getSingleMetric('mongodb_commands_total') as Counter<'command' | 'collection'> | undefined) ??
    new Counter({
      name: 'mongodb_commands_total',
      help: 'Commands (network round trips) sent to MongoDB, by command and collection',
      labelNames: ['command', 'collection'] as const,
      registers: [metricsRegistry],
    });
  return onMongoCommand(client, ({ name, collection }) => counter.inc({ command: name, collection }));
}
