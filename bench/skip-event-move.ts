// Preload of the durable-events scenario's second comparison process only (`--import`, never in the
// product): the web process with its after-response move reduced to the outbox clear, i.e. nothing
// recorded in `events` (skip-event-record.ts) and nothing queued. What remains of the move is one
// clearing write per 25 ms. The module is the same instance the server imports (same compiled file).
import './skip-event-record.js';
import { QueueEventPublisher } from '../src/events/queue-publisher.js';

QueueEventPublisher.prototype.enqueue = async () => true;
