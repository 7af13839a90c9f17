import { MongoServerError, type Db, type IndexDescription } from 'mongodb';
import { StartupError } from './startup.js';

/**
 * One declared index. Every index has a name: a change to its keys or options is a change to a named index
 * (docs/mongodb.md, "Index changes").
 */
export interface DeclaredIndex extends IndexDescription {
  name: string;
  /**
   * When an index of this name already exists with other keys or options, drop it and build this one at start.
   * Only for indexes whose brief absence costs time but not correctness (never a unique index: while it is gone,
   * duplicates could get in and the rebuild would then fail).
   */
  migratable?: boolean;
}

/** MongoDB's answers when an index of the same name or keys exists with other options (85) or keys (86). */
const INDEX_OPTIONS_CONFLICT = 85;
const INDEX_KEY_SPECS_CONFLICT = 86;
const INDEX_NOT_FOUND = 27;

function isIndexConflict(error: unknown): error is MongoServerError {
  return (
    error instanceof MongoServerError &&
    (error.code === INDEX_OPTIONS_CONFLICT || error.code === INDEX_KEY_SPECS_CONFLICT)
  );
}

/** An existing index stands in the way of a declared one that may not be rebuilt on its own: start must stop. */
export class IndexMigrationRequired extends StartupError {}

/**
 * Creates the collection's declared indexes; idempotent, and safe when several processes run it at once. An index of
 * the same name that exists with other keys or options is dropped and rebuilt when declared `migratable`; otherwise
 * (and when the clash is with an index of another name) it throws IndexMigrationRequired naming the index and what to
 * do. Returns the names of the indexes it rebuilt.
 */
export async function ensureCollectionIndexes(
  db: Db,
  collectionName: string,
  declared: readonly DeclaredIndex[],
): Promise<string[]> {
  const collection = db.collection(collectionName);
  const specOf = ({ migratable: _migratable, ...spec }: DeclaredIndex): IndexDescription => spec;
  try {
    await collection.createIndexes(declared.map(specOf));
    return [];
  } catch (error) {
    if (!isIndexConflict(error)) throw error;
  }
  // Some declared index clashes with an existing one: find which, one at a time (the server judges the clash).
  const rebuilt: string[] = [];
  for (const index of declared) {
    try {
      await collection.createIndexes([specOf(index)]);
      continue;
    } catch (error) {
      if (!isIndexConflict(error)) throw error;
      const existing = (await collection.listIndexes().toArray()) as Array<{ name: string }>;
      const sameName = existing.some((other) => other.name === index.name);
      if (!index.migratable || !sameName) throw migrationRequired(collectionName, index, sameName, error);
    }
    await collection.dropIndex(index.name).catch((error: unknown) => {
      // Another process starting at the same time dropped it first.
      if (!(error instanceof MongoServerError && error.code === INDEX_NOT_FOUND)) throw error;
    });
    await collection.createIndexes([specOf(index)]);
    rebuilt.push(`${collectionName}.${index.name}`);
  }
  return rebuilt;
}

function migrationRequired(
  collectionName: string,
  index: DeclaredIndex,
  sameName: boolean,
  error: MongoServerError,
): IndexMigrationRequired {
  const what = sameName
    ? `index ${collectionName}.${index.name} exists with other keys or options than declared`
    : `index ${collectionName}.${index.name} clashes with an existing index of another name`;
  const todo = sameName
    ? `drop it (db.${collectionName}.dropIndex("${index.name}")) and start again, or declare a new name for the changed index`
    : 'drop the other index or declare this one under its name';
  return new IndexMigrationRequired(
    `${what} (MongoDB ${error.code} ${error.codeName ?? ''}): ${todo}; see docs/mongodb.md "Index changes"`,
  );
}
