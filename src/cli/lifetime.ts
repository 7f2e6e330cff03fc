// How a long-running command (mock, serve) learns it should stop: SIGINT or SIGTERM, or, when npm or
// npx started it, the end of that npm process. `npm start & kill $!` signals npm, which does not pass
// the signal on: the command would go on listening with no parent, a port held until someone finds it.

// Read when the CLI loads, not when the command is ready: npm may be killed during a slow start.
const parent = process.ppid;

/** Calls `stop` on SIGINT/SIGTERM, and when the npm (or npx) process that started this one is gone. */
export function onStop(stop: () => void): void {
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  // Only under npm: a process started directly (`nohup partner-platform serve &`) may outlive its shell.
  if (process.env.npm_command === undefined) return;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    stop();
  }, 250);
  watch.unref();
}

/** Resolves when the command should stop (see onStop). */
export function untilStopped(): Promise<void> {
  return new Promise((resolve) => onStop(resolve));
}
