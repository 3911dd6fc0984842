export type MallocTuning = { applied: true; bytes: number; trimBytes: number } | { applied: false; reason: string };

/** glibc's own starting mmap threshold (128 KiB), kept fixed. */
export declare const DEFAULT_THRESHOLD_BYTES: number;

/** What a heap may keep free at its top (1 MiB). */
export declare const DEFAULT_TRIM_BYTES: number;

/** Fixes glibc's malloc mmap and trim thresholds in this process (see index.js). */
export declare function limitMallocRetention(options: { env: NodeJS.ProcessEnv; bytes?: number; trimBytes?: number }): MallocTuning;

/** What `limitMallocRetention` did in this process. */
export declare function mallocTuning(): MallocTuning;
