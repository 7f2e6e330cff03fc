// A stop whose database fails (gone during the stop) still closes the port, the connections and the
// store, and then says what failed: a listener left open kept answering and ignored every later signal.
import { connect } from "node:net";
import { expect, it } from "vitest";
import { startServer } from "../../src/server/index.js";
import { migrate, openEmbedded, type Db } from "../../src/server/store.js";

it("closes the port even when the database fails during the stop, and rejects with that failure", async () => {
  const real = await openEmbedded();
  let gone = false;
  const db: Db = { ...real, query: (sql, params) => (gone ? Promise.reject(new Error("connect ECONNREFUSED (the database is gone)")) : real.query(sql, params)) };
  await migrate(db);
  const server = await startServer({ db, clock: { mode: "virtual" }, log: () => undefined });
  const port = Number(new URL(server.url).port);
  gone = true;
  await expect(server.close()).rejects.toThrow("the database is gone");
  const refused = await new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => (socket.destroy(), resolve(false)));
    socket.once("error", () => resolve(true));
  });
  expect(refused, "the port still accepts connections").toBe(true);
  await real.close();
});
