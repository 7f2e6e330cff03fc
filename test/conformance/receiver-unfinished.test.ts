// The suite receiver's record of attempts that reached it but never came whole (Receiver.unfinished),
// which no-notice-before-disabling takes as failures a server may have counted (D6).
import { connect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startReceiver, type Receiver } from "../../conformance/harness/receiver.js";

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => receiver.close());

/** A TLS connection to the receiver, trusting its CA, once its handshake is done. */
function connection() {
  const { hostname, port } = new URL(receiver.url(""));
  const socket = connect({ host: hostname, port: Number(port), ca: receiver.pki.caCert });
  return new Promise<typeof socket>((resolve, reject) => socket.once("secureConnect", () => resolve(socket)).once("error", reject));
}

/** Time for the receiver's close handlers to run, before asserting that they recorded nothing (no event marks an absence). */
const settled = () => new Promise((resolve) => setTimeout(resolve, 100));

const head = (endpoint: string, length: number) =>
  `POST /${endpoint} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`;

describe("the suite receiver's unfinished attempts", () => {
  it("records a connection closed before any request, with when it was accepted and closed", async () => {
    const before = receiver.unfinished.length;
    const opened = performance.now();
    (await connection()).end();
    await receiver.waitFor(() => receiver.unfinished.length > before, 5000, "the closed connection");
    const [entry] = receiver.unfinished.slice(before);
    expect(entry).toMatchObject({ how: "a connection closed before any request" });
    expect(entry!.endpoint).toBeUndefined();
    expect(entry!.at).toBeGreaterThanOrEqual(opened);
    expect(entry!.endedAt).toBeGreaterThanOrEqual(entry!.at);
  });

  it("records a request whose body never came whole, at its endpoint, and not its connection too", async () => {
    const before = receiver.unfinished.length;
    const socket = await connection();
    // Written before the close: the receiver reads the head, then the end of the connection.
    socket.end(`${head("cut-short", 64)}{"event":`);
    await receiver.waitFor(() => receiver.unfinished.length > before, 5000, "the request cut short");
    // An absence: the connection's own close, which follows the request's, is given time to be recorded.
    await settled();
    expect(receiver.unfinished.slice(before).map(({ how, endpoint }) => ({ how, endpoint }))).toEqual([
      { how: "a request whose body never came whole", endpoint: "cut-short" },
    ]);
    expect(receiver.at("cut-short")).toEqual([]);
  });

  it("records nothing for a whole request, answered, and its connection closed after", async () => {
    const before = receiver.unfinished.length;
    const socket = await connection();
    const body = '{"event":"x"}';
    const answered = new Promise<string>((resolve) => socket.once("data", (chunk: Buffer) => resolve(chunk.toString("latin1"))));
    socket.write(head("whole", body.length) + body);
    expect(await answered).toMatch(/^HTTP\/1\.1 200 /);
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.end();
    await closed;
    await settled();
    expect(receiver.unfinished.slice(before)).toEqual([]);
    expect(receiver.at("whole")).toHaveLength(1);
  });
});
