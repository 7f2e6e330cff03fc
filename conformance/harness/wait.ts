import type { EventEmitter } from "node:events";

/** Resolves when `predicate()` holds, re-checked each time `emitter` emits `event`; rejects after `timeoutMs`. */
export function waitUntil(
  emitter: EventEmitter,
  event: string,
  predicate: () => boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  if (predicate()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!predicate()) return;
      clearTimeout(timer);
      emitter.off(event, check);
      resolve();
    };
    const timer = setTimeout(() => {
      emitter.off(event, check);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
    }, timeoutMs);
    emitter.on(event, check);
  });
}
