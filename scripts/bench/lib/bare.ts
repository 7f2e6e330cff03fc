// The bare arm, in a process of its own: keep-alive HTTPS POSTs of a delivery-sized body with a fixed
// number in flight, through undici (the engine's client, same pool size) or node:https.
import https from "node:https";
import { Agent, request } from "undici";
import { serveCalls, timedInParallel } from "./procs.js";

let undiciAgent: Agent | undefined;
let httpsAgent: https.Agent | undefined;
const body = Buffer.alloc(420, 120);

async function undiciPost(url: string): Promise<void> {
  const r = await request(url, { method: "POST", body, headers: { "content-type": "application/json", "x-signature": "t=1,v1=00" }, dispatcher: undiciAgent });
  await r.body.dump();
}

function httpsPost(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: "POST", agent: httpsAgent, headers: { "content-type": "application/json", "content-length": body.length } }, (res) => {
      res.resume();
      res.on("end", resolve);
    });
    req.on("error", reject);
    req.end(body);
  });
}

serveCalls({
  setup({ ca, connections }: { ca: string; connections: number }) {
    undiciAgent = new Agent({ connections, connect: { ca } });
    httpsAgent = new https.Agent({ keepAlive: true, maxSockets: connections, ca });
    return true;
  },
  /** Makes `n` POSTs with `concurrency` in flight, to `url` or spread evenly over `urls`; returns the real ms it took. */
  async run({ url, urls = [url!], n, concurrency, client }: { url?: string; urls?: string[]; n: number; concurrency: number; client: "undici" | "https" }) {
    const post = client === "undici" ? undiciPost : httpsPost;
    let next = 0;
    return timedInParallel(n, concurrency, () => post(urls[next++ % urls.length]!));
  },
});
