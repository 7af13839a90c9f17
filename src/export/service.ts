import { Readable } from 'node:stream';
import { toItemResponse } from '../contracts/items.js';
import { toTaskResponse } from '../contracts/tasks.js';
import type { AuthContext } from '../contracts/auth-context.js';
import type { ItemDoc } from '../contracts/items.js';
import type { PipelineDoc } from '../contracts/pipelines.js';
import type { TaskDoc } from '../contracts/tasks.js';

/** Records the driver fetches per round trip: at most this many are held in memory at once. */
const BATCH = 200;
/**
 * Lines are written as Buffers of about this size, the stream's own buffer size. Large strings would stay in
 * the heap until a full GC, so the web process's memory would grow with the size of the export; Buffers of
 * this size leave it flat whatever the export's size, and cost less to write.
 */
const CHUNK_BYTES = 16 * 1024;

/** An export: the feed position taken before the read, and the NDJSON body, read from MongoDB as the client takes it. */
export interface Export {
  nextCursor: string;
  body: Readable;
}

type Closable<T> = AsyncIterable<T> & { close(): Promise<void> };

/** What an export reads, each from the feature that owns it: live records by cursor, pipelines, the feed position. */
export interface ExportServiceDeps {
  items: { exportCursor(companyId: string, batchSize: number): Closable<ItemDoc> };
  tasks: { exportCursor(companyId: string, batchSize: number): Closable<TaskDoc> };
  pipelines: { findCached(companyId: string, pipelineId: string): Promise<PipelineDoc | null> };
  feed: { currentPosition(auth: AuthContext): Promise<string> };
}

/**
 * Exports (docs/export.md): every live record of the company as NDJSON, one API-shaped record a line, streamed from
 * a MongoDB cursor. The body is a pull stream: the next batch is fetched only when the socket has taken what came
 * before (backpressure), so memory stays flat whatever the size; a client that goes away destroys the stream, which
 * closes the cursor. The feed position is taken before the read, so every change before it is in the export.
 */
export class ExportService {
  /** Exports streaming now (their cursors open): for the metrics and the disconnect test. */
  active = 0;

  constructor(private readonly deps: ExportServiceDeps) {}

  async items(auth: AuthContext): Promise<Export> {
    const nextCursor = await this.deps.feed.currentPosition(auth);
    const pipelines = new Map<string, Promise<PipelineDoc | null>>();
    const pipelineOf = (doc: ItemDoc) => {
      let pipeline = pipelines.get(doc.pipeline_id);
      if (!pipeline)
        pipelines.set(doc.pipeline_id, (pipeline = this.deps.pipelines.findCached(auth.companyId, doc.pipeline_id)));
      return pipeline;
    };
    return {
      nextCursor,
      body: this.stream(
        () => this.deps.items.exportCursor(auth.companyId, BATCH),
        async (doc: ItemDoc) => {
          const pipeline = await pipelineOf(doc);
          // A stored item always has its pipeline; pipelines are never deleted.
          if (!pipeline) throw new Error(`pipeline ${doc.pipeline_id} of an item is missing`);
          return toItemResponse(doc, pipeline);
        },
      ),
    };
  }

  async tasks(auth: AuthContext): Promise<Export> {
    const nextCursor = await this.deps.feed.currentPosition(auth);
    return {
      nextCursor,
      body: this.stream(
        () => this.deps.tasks.exportCursor(auth.companyId, BATCH),
        (doc: TaskDoc) => toTaskResponse(doc),
      ),
    };
  }

  /**
   * The cursor is opened at the first read, inside the generator: a body destroyed before it is read ends the
   * generator without running it, so a cursor opened beforehand would never be closed.
   */
  private stream<T>(open: () => Closable<T>, toLine: (doc: T) => object | Promise<object>): Readable {
    const track = (delta: number) => (this.active += delta);
    async function* lines(): AsyncGenerator<Buffer> {
      const cursor = open();
      track(1);
      try {
        let chunk = '';
        for await (const doc of cursor) {
          chunk += `${JSON.stringify(await toLine(doc))}\n`;
          if (chunk.length >= CHUNK_BYTES) {
            yield Buffer.from(chunk);
            chunk = '';
          }
        }
        if (chunk) yield Buffer.from(chunk);
      } finally {
        track(-1);
        await cursor.close();
      }
    }
    // Bytes, not objects: the stream's buffer is counted in bytes (16 KiB), so it holds about one chunk.
    return Readable.from(lines(), { objectMode: false });
  }
}
