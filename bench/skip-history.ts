// Preload of the history scenario's comparison process only (`--import`, never in the product): the web
// process as it was before the record history, i.e. a sequencer that writes no history rows. The module is
// the same instance the server imports (same compiled file), so the server's sequencer gets the no-op.
import { HistoryRepository } from '../src/history/repository.js';

HistoryRepository.prototype.record = async () => {};
