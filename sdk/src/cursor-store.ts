import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Where the feed tailer keeps its position between runs: a file, a database row, a key in Redis. */
export interface CursorStore {
  load(): Promise<string | undefined> | string | undefined;
  save(cursor: string): Promise<void> | void;
}

/** A cursor kept in memory (tests, or a process that starts from `after` each time). */
export function memoryCursorStore(initial?: string): CursorStore & { cursor: string | undefined } {
  return {
    cursor: initial,
    load() {
      return this.cursor;
    },
    save(cursor) {
      this.cursor = cursor;
    },
  };
}

/** A cursor kept in a file, replaced atomically (written beside it, then renamed over it). */
export function fileCursorStore(path: string): CursorStore {
  return {
    async load() {
      try {
        return (await readFile(path, 'utf8')).trim() || undefined;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw error;
      }
    },
    async save(cursor) {
      await mkdir(dirname(path), { recursive: true });
      const temporary = `${path}.${process.pid}.tmp`;
      await writeFile(temporary, `${cursor}\n`);
      await rename(temporary, path);
    },
  };
}
