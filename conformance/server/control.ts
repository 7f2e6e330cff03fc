// Client of the Conformance Control API (spec/control/main.tsp) that an implementation under test exposes.
import createClient from "openapi-fetch";
import { Agent, fetch as undiciFetch } from "undici";
import type { components, paths } from "../../generated/types/control.js";
import type { EventName } from "@partner-platform/sdk";

export type Clock = components["schemas"]["Clock"];
export type TriggeredEvent = components["schemas"]["TriggeredEvent"];

export interface Control {
  trigger(event: EventName, businessID: string, data?: Record<string, unknown>): Promise<TriggeredEvent>;
  clock(): Promise<Clock>;
  /** Moves a virtual clock; resolves once every attempt due by then was made. */
  advance(seconds: number): Promise<Clock>;
}

function fail(what: string, status: number, error: unknown): never {
  throw new Error(`control API: ${what} answered HTTP ${status}: ${JSON.stringify(error)}`);
}

/** How long the suite waits for each answer of the Control API (D24): an advance over many attempts may take minutes, not Node's 300 s default. */
export const CONTROL_ANSWER_SECONDS = 600;

export function createControl(controlUrl: string, answerSeconds = CONTROL_ANSWER_SECONDS): Control {
  const dispatcher = new Agent({ headersTimeout: answerSeconds * 1000, bodyTimeout: answerSeconds * 1000 });
  const client = createClient<paths>({
    baseUrl: controlUrl,
    async fetch(request) {
      try {
        // undici's own fetch: Node's takes no dispatcher of this undici version.
        const body = request.body ? await request.text() : undefined;
        return (await undiciFetch(request.url, { method: request.method, headers: Object.fromEntries(request.headers), body, dispatcher })) as unknown as Response;
      } catch (error) {
        const code = ((error as { cause?: { code?: string } }).cause?.code ?? "") as string;
        const what = `${request.method} ${new URL(request.url).pathname}`;
        if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") throw new Error(`control API: ${what} did not answer within ${answerSeconds} s (D24)`);
        throw error;
      }
    },
  });
  return {
    async trigger(event, businessID, data) {
      const { data: body, error, response } = await client.POST("/conformance/events", {
        body: { event, businessID, ...(data ? { data } : {}) },
      });
      return body ?? fail(`trigger ${event}`, response.status, error);
    },
    async clock() {
      const { data, error, response } = await client.GET("/conformance/clock");
      return data ?? fail("read clock", response.status, error);
    },
    async advance(seconds) {
      const { data, error, response } = await client.POST("/conformance/clock/advance", { body: { seconds } });
      return data ?? fail(`advance ${seconds} s`, response.status, error);
    },
  };
}
