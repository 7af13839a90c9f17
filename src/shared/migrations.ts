import type { Db } from 'mongodb';

interface MigrationDoc {
  _id: string;
  done_at: Date;
}

/**
 * Runs a start-up data migration once per database: it is marked done in `migrations` only after it finished, so
 * one interrupted runs again at the next start, and processes starting together may both run it (each migration
 * is idempotent).
 */
export async function runOnce(db: Db, name: string, migrate: () => Promise<void>): Promise<void> {
  const migrations = db.collection<MigrationDoc>('migrations');
  if (await migrations.findOne({ _id: name })) return;
  await migrate();
  await migrations.updateOne({ _id: name }, { $set: { done_at: new Date() } }, { upsert: true });
}
