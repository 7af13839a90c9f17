import type { ErasureKind } from './repository.js';

/** What a step of an erasure works on: one record of one company, and the ids of the events about it. */
export interface ErasureTarget {
  companyId: string;
  kind: ErasureKind;
  recordId: string;
  /** Every event about the record (read before the events lose their values: ids only). */
  eventIds: string[];
}

type RecordEraser = { erase(companyId: string, recordId: string): Promise<void> };

/**
 * What erasure needs of each feature's repository, the erase operations they offer (the container hands it
 * the repositories themselves).
 */
export interface ErasureStores {
  events: {
    idsAbout(companyId: string, recordId: string): Promise<string[]>;
    eraseAbout(companyId: string, recordId: string): Promise<void>;
    jobIdsAbout(companyId: string, recordId: string): Promise<string[]>;
    unsequencedAbout(companyId: string, recordId: string): Promise<boolean>;
  };
  deliveries: {
    jobIdsOf(companyId: string, eventIds: string[]): Promise<string[]>;
    eraseEvents(companyId: string, eventIds: string[]): Promise<void>;
  };
  history: { eraseRecord(companyId: string, recordId: string): Promise<number> };
  apiKeys: { list(companyId: string): Promise<Array<{ _id: string }>> };
  idempotency: { eraseMentioning(keyIds: string[], recordId: string): Promise<void> };
  items: RecordEraser;
  tasks: RecordEraser;
}

type Erase = (repos: ErasureStores, target: ErasureTarget) => Promise<void>;

/** A collection's entry: how erasure takes a record's values out of it, or why it never holds any. */
export type CollectionEntry = { erase: Erase } | { holdsNoRecordValues: string };

/**
 * EVERY MongoDB collection of the product, in one place (docs/erasure.md): those that can hold a record's values
 * with the step that erases them, in the order the job runs them, and the others with why they hold none. A new
 * collection must be added here: test/erasure/erasure.test.ts fails for a collection it finds that is not listed,
 * and its scan fails for a record value left anywhere after an erasure.
 */
export const COLLECTIONS: Record<string, CollectionEntry> = {
  // The events first: their ids are what the delivery records are found by, and an event erased before its history
  // row is written gets none (history/rows.ts).
  events: { erase: (repos, target) => repos.events.eraseAbout(target.companyId, target.recordId) },
  deliveries: { erase: (repos, target) => repos.deliveries.eraseEvents(target.companyId, target.eventIds) },
  record_history: {
    erase: async (repos, target) => void (await repos.history.eraseRecord(target.companyId, target.recordId)),
  },
  idempotency_keys: {
    erase: async (repos, target) => {
      const keys = await repos.apiKeys.list(target.companyId);
      await repos.idempotency.eraseMentioning(
        keys.map((key) => key._id),
        target.recordId,
      );
    },
  },
  // The record itself (and its outbox) last: until then a rerun can still find what it has to erase.
  items: {
    erase: async (repos, target) => {
      if (target.kind === 'item') await repos.items.erase(target.companyId, target.recordId);
    },
  },
  tasks: {
    erase: async (repos, target) => {
      if (target.kind === 'task') await repos.tasks.erase(target.companyId, target.recordId);
    },
  },
  companies: { holdsNoRecordValues: 'the company: name and subscription' },
  users: { holdsNoRecordValues: 'users of the company' },
  pipelines: { holdsNoRecordValues: 'pipeline blueprints: stages, statuses, field definitions' },
  api_keys: { holdsNoRecordValues: 'key hashes, names, scopes' },
  hooks: { holdsNoRecordValues: 'subscriptions: target, types, filters (configuration, not record values)' },
  webhook_secrets: { holdsNoRecordValues: 'signing secrets' },
  hook_recoveries: { holdsNoRecordValues: 'hook recoveries: period, feed positions, counts, status' },
  automations: { holdsNoRecordValues: 'automation rules (configuration)' },
  automation_runs: { holdsNoRecordValues: 'automation, event id, status, error, timestamps' },
  event_sequences: { holdsNoRecordValues: "each company's feed position" },
  event_sequencer: { holdsNoRecordValues: "the sequencer's lease and its plan: event ids, sequences, job ids" },
  event_reconciliation: { holdsNoRecordValues: "the reconciler's mark" },
  counters: { holdsNoRecordValues: 'short_id counters' },
  app_secrets: { holdsNoRecordValues: 'the cursor signing secret' },
  erasures: { holdsNoRecordValues: 'erasure requests: the record by id only' },
  migrations: { holdsNoRecordValues: 'start-up data migrations done: names and times' },
};

/** The steps of an erasure, in order: the collections that can hold record values. */
export const ERASURE_STEPS = Object.entries(COLLECTIONS).flatMap(([collection, entry]) =>
  'erase' in entry ? [{ collection, erase: entry.erase }] : [],
);
