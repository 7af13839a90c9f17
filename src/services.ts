import { ItemsService } from './items/service.js';
import { CursorCodec } from './shared/pagination.js';
import { loadSharedSecret } from './shared/secrets.js';
import { TasksService } from './tasks/service.js';
import type { EventPublisher } from './events/publisher.js';
import type { Repositories } from './repositories.js';
import type { Db } from 'mongodb';

/** The cursor secret is shared through MongoDB and loaded on first use (building an app must not need the database). */
function lazyCursorCodec(db: Db): () => Promise<CursorCodec> {
  let codec: Promise<CursorCodec> | undefined;
  return () => {
    codec ??= loadSharedSecret(db, 'cursor').then((secret) => new CursorCodec(secret));
    codec.catch(() => (codec = undefined));
    return codec;
  };
}

/** The domain services, shared by the web app and the workers (automations act through them too). */
export function createDomainServices(db: Db, repos: Repositories, publisher: EventPublisher) {
  const cursors = lazyCursorCodec(db);
  return {
    cursors,
    items: new ItemsService({ db, items: repos.items, pipelines: repos.pipelines, publisher, cursors }),
    tasks: new TasksService({ tasks: repos.tasks, users: repos.users, items: repos.items, publisher, cursors }),
  };
}
