// Preload of the durable-events scenario's second comparison process only (`--import`, never in the
// product): the web process with its after-response move reduced to the outbox clear, i.e. nothing
// recorded in `events` and nothing queued. What remains of the move is one clearing write per 25 ms.
// Modules are the same instances the server imports (same compiled files), so its publisher gets the no-ops.
import { QueueEventPublisher } from '../src/events/queue-publisher.js';
import { EventsRepository } from '../src/events/repository.js';

EventsRepository.prototype.record = async () => {};
QueueEventPublisher.prototype.enqueue = async () => true;
