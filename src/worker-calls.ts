import type { Worker } from "node:worker_threads";

/**
 * Requests to a worker thread, each answered by a reply with its id. The thread keeps the process
 * alive only while a request waits for its reply; once it fails or exits, every waiting request is
 * rejected with the reason, and so is every later one.
 */
export function callsTo<Request extends object, Reply extends { id: number }>(worker: Worker, what: string) {
  const pending = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>();
  let nextId = 1;
  let ended: Error | undefined;
  const failAll = (error: Error) => {
    ended ??= error;
    for (const p of pending.values()) p.reject(error);
    pending.clear();
  };
  worker.on("message", (reply: Reply) => {
    const p = pending.get(reply.id);
    if (!p) return;
    pending.delete(reply.id);
    if (pending.size === 0) worker.unref();
    p.resolve(reply);
  });
  worker.on("error", failAll);
  worker.on("exit", (code) => failAll(new Error(`${what} ended (exit code ${code})`)));
  worker.unref();
  return {
    call: (request: Request) =>
      new Promise<Reply>((resolve, reject) => {
        if (ended) return reject(ended);
        const id = nextId++;
        if (pending.size === 0) worker.ref();
        pending.set(id, { resolve, reject });
        worker.postMessage({ ...request, id });
      }),
    /** Why the thread takes no more requests, once it does not. */
    ended: () => ended,
  };
}
