// Client of the Conformance Control API (spec/control/main.tsp) that an implementation under test exposes.
import createClient from "openapi-fetch";
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

export function createControl(controlUrl: string): Control {
  const client = createClient<paths>({ baseUrl: controlUrl });
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
