// Preload of the durable-events scenario's comparison process only (`--import`, never in the product):
// the web process as it would be without the durable-events work, i.e. a move out of the outbox that
// publishes and clears but records nothing in `events`. The module is the same instance the server
// imports (same compiled file), so the server's publisher gets the no-op.
import { EventsRepository } from '../src/events/repository.js';

EventsRepository.prototype.record = async () => {};
