import type { EventEnvelope } from '../contracts/envelope.js';
import type { OutboxCollection } from '../shared/outbox.js';

export type { OutboxCollection };

/**
 * The fast path after a write: try to hand the just-recorded events to the queues at once. It never
 * throws and never delays the response; whatever it cannot publish stays in the outbox for the relay.
 */
export interface EventPublisher {
  publishRecorded(collection: OutboxCollection, documentId: string, events: EventEnvelope[]): void;
  close(): Promise<void>;
}

/** Leaves everything to the relay (used where no queue connection exists). */
export const relayOnlyPublisher: EventPublisher = {
  publishRecorded() {},
  async close() {},
};
