import type { PayloadToSend } from '../storage/outbox-store.js';

/** Bytes of payloads read in one turn of the event loop, unless one payload alone is more. */
const BYTES_PER_TURN = 1024 * 1024;

interface Read {
  bytes: number;
  start: () => void;
}

/**
 * Reads claimed deliveries' payloads just before their sends, in the order asked, a turn of the event loop's
 * worth at a time: up to BYTES_PER_TURN, or one payload of more. On SQLite a read runs on the loop itself: a
 * claim's rows read back to back, each payload of megabytes, would hold it as long as one statement reading them
 * all; a turn at a time, other users' requests go between them, while a claim of ordinary payloads is read in
 * one turn as before. On Postgres the reads of a turn overlap (each is started, not awaited).
 *
 * @example
 * const reads = new PayloadReads((id) => store.deliveries.payloadOf(id));
 * const read = await reads.of(row.id, row.payload_bytes); // { payload, status, url }; undefined: the delivery is gone
 */
export class PayloadReads {
  private readonly queue: Read[] = [];
  private scheduled = false;

  constructor(private readonly read: (id: string) => Promise<PayloadToSend | undefined>) {}

  /** The payload of delivery `id`, of `bytes` (as its claim said; unknown: a turn of its own), read in its turn. */
  of(id: string, bytes = BYTES_PER_TURN): Promise<PayloadToSend | undefined> {
    return new Promise((resolve, reject) => {
      const start = () => {
        try {
          this.read(id).then(resolve, reject);
        } catch (err) {
          reject(err);
        }
      };
      this.queue.push({ bytes, start });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0) return;
    this.scheduled = true;
    // Scheduled from within a check phase, the next turn's reads run after that turn's I/O.
    setImmediate(() => {
      this.scheduled = false;
      let bytes = 0;
      do {
        const next = this.queue.shift()!;
        bytes += next.bytes;
        next.start();
      } while (this.queue.length > 0 && bytes + this.queue[0]!.bytes <= BYTES_PER_TURN);
      this.schedule();
    });
  }
}
