// The reference server's HTTP side: the four operations of the spec, the Conformance Control API when
// enabled, and problem+json for every client error (spec/DECISIONS.md D11–D18).
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { packageRoot } from "../paths.js";
import { eventExample, eventSchemaName, type EventName } from "../spec.js";
import type { Clock } from "./clock.js";
import type { ClientConfig } from "./config.js";
import {
  bodyLimitBytes,
  controlProblem,
  controlValidator,
  fieldErrors,
  maxSearchResults,
  problemTypes,
  queryErrors,
  schemaErrors,
  scopeOf,
  type FieldError,
} from "./contract.js";
import type { DeliveryEngine } from "./delivery/index.js";
import type { AddressPolicy } from "./ssrf.js";
import type { Db } from "./store.js";
import { nextId } from "./store.js";

export interface AppOptions {
  db: Db;
  clock: Clock;
  engine: DeliveryEngine;
  clients: ClientConfig[];
  tokenLifetimeSeconds: number;
  leadExpirySeconds: number;
  addressPolicy: AddressPolicy;
  conformance: boolean;
  registration?: RegistrationOverride;
}

/** The checks of a webhook registration (D16): the seam through which conformance/broken drops one. */
export interface RegistrationChecks {
  /** Schema violations of the body, each with its pointer. */
  errors(body: unknown): FieldError[];
  /** Whether the business exists (404 otherwise). */
  businessExists(businessID: string): boolean;
}

export type RegistrationOverride = (base: RegistrationChecks) => Partial<RegistrationChecks>;

interface Seed {
  categories: { categoryID: string; name: string }[];
  /** The town of every zip code a business serves: the job location of lead.created. */
  zipCodes: Record<string, { city: string; state: string }>;
  businesses: {
    businessID: string;
    name: string;
    categoryIDs: string[];
    location: { city: string; state: string; zip: string };
    rating?: number;
    reviewCount: number;
    serviceZipCodes: string[];
  }[];
}

export const seed = JSON.parse(readFileSync(path.join(packageRoot, "src/server/seed/businesses.json"), "utf8")) as Seed;

class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly errors?: FieldError[],
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
  }
}

function problemBody(status: number, detail: string, instance: string, errors?: FieldError[]) {
  const type = problemTypes.get(status) ?? "about:blank";
  const slug = type.split(":").pop()!;
  const title = slug.charAt(0).toUpperCase() + slug.slice(1).replace(/-/g, " ");
  return { type, title, status, detail, instance, ...(errors?.length ? { errors } : {}) };
}

// Opaque random tokens (D23), stored as their SHA-256 only: a copy of the database holds no usable token.
const tokenHash = (token: string) => createHash("sha256").update(token).digest("hex");

const oauthError = (reply: FastifyReply, status: 400 | 401, error: string, description: string) =>
  reply.code(status).header("cache-control", "no-store").send({ error, error_description: description });

export function createApp(options: AppOptions): FastifyInstance {
  const { db, clock, engine } = options;
  const app = Fastify({ bodyLimit: bodyLimitBytes });
  const categories = new Map(seed.categories.map((c) => [c.categoryID, c.name]));
  const baseChecks: RegistrationChecks = {
    errors: (body) => schemaErrors("WebhookRegistration", body),
    businessExists: (id) => seed.businesses.some((b) => b.businessID === id),
  };
  const registration = { ...baseChecks, ...options.registration?.(baseChecks) };

  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_req, body, done) => {
    try {
      done(null, body === "" ? undefined : JSON.parse(body as string));
    } catch (error) {
      done(new ProblemError(400, `The body is not valid JSON: ${(error as Error).message}`), undefined);
    }
  });
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
  // Any other type is read as bytes so that the route can answer 415 (or, for the token endpoint, invalid_request).
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, req, reply) => {
    const status =
      error instanceof ProblemError
        ? error.status
        : error.code === "FST_ERR_CTP_BODY_TOO_LARGE"
          ? 413
          : error.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE"
            ? 415
            : error.statusCode && error.statusCode >= 400 && error.statusCode < 500
              ? 400
              : 500;
    if (status === 500) req.log.error(error);
    const detail =
      status === 413 ? `The body exceeds ${bodyLimitBytes} bytes.` : status === 500 ? "Internal error." : error.message;
    const errors = error instanceof ProblemError ? error.errors : undefined;
    const headers = error instanceof ProblemError ? error.headers : {};
    return reply
      .code(status)
      .headers(headers)
      .type("application/problem+json")
      .send(problemBody(status, detail, req.url.split("?")[0]!, errors));
  });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).type("application/problem+json").send(problemBody(404, `No operation at ${req.method} ${req.url.split("?")[0]}.`, req.url.split("?")[0]!)),
  );

  async function authenticate(req: FastifyRequest, scope: string): Promise<string> {
    const header = req.headers.authorization ?? "";
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (!match) throw new ProblemError(401, "The Authorization header is missing or not a Bearer token.", undefined, { "www-authenticate": "Bearer" });
    const { rows } = await db.query<{ client_id: string; scopes: string; expires_at: string }>(
      "SELECT client_id, scopes, expires_at FROM tokens WHERE token_hash = $1",
      [tokenHash(match[1]!)],
    );
    const token = rows[0];
    if (!token || Number(token.expires_at) <= clock.now()) {
      const why = token ? "The access token expired." : "The access token is not valid.";
      throw new ProblemError(401, why, undefined, { "www-authenticate": `Bearer error="invalid_token", error_description="${why.slice(0, -1)}"` });
    }
    if (!token.scopes.split(" ").includes(scope)) {
      throw new ProblemError(403, `This operation requires the scope ${scope}.`, undefined, {
        "www-authenticate": `Bearer error="insufficient_scope", scope="${scope}"`,
      });
    }
    return token.client_id;
  }

  function requireJson(req: FastifyRequest): void {
    const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/json") {
      throw new ProblemError(415, `Content-Type ${type || "(none)"} is not supported; send application/json.`);
    }
  }

  function validateBody(body: unknown, errorsOf: (body: unknown) => FieldError[]): void {
    if (body === undefined) throw new ProblemError(400, "The body is empty; send a JSON object.");
    const errors = errorsOf(body);
    if (errors.length) throw new ProblemError(422, `The body violates the schema in ${errors.length} place(s).`, errors);
  }

  app.post("/oauth2/token", async (req, reply) => {
    const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/x-www-form-urlencoded" || typeof req.body !== "object" || Buffer.isBuffer(req.body)) {
      return oauthError(reply, 400, "invalid_request", "Send the parameters form-encoded (application/x-www-form-urlencoded).");
    }
    const body = req.body as Record<string, string>;
    if (body.grant_type !== undefined && body.grant_type !== "client_credentials") {
      return oauthError(reply, 400, "unsupported_grant_type", "Only grant_type=client_credentials is supported.");
    }
    const errors = schemaErrors("TokenRequest", body);
    if (errors.length) return oauthError(reply, 400, "invalid_request", errors.map((e) => `${e.pointer}: ${e.detail}`).join("; "));
    const client = options.clients.find((c) => c.clientId === body.client_id);
    const secretOk =
      client !== undefined &&
      Buffer.byteLength(client.clientSecret) === Buffer.byteLength(body.client_secret!) &&
      timingSafeEqual(Buffer.from(client.clientSecret), Buffer.from(body.client_secret!));
    if (!client || !secretOk) return oauthError(reply, 401, "invalid_client", "Client authentication failed.");
    const requested = body.scope ? body.scope.split(" ").filter(Boolean) : client.scopes;
    const refused = requested.filter((s) => !client.scopes.includes(s));
    if (refused.length) return oauthError(reply, 400, "invalid_scope", `Scope not allowed for this client: ${refused.join(" ")}`);
    const token = randomBytes(32).toString("base64url");
    const now = clock.now();
    await db.transaction(async (tx) => {
      await tx.query("DELETE FROM tokens WHERE client_id = $1 AND expires_at <= $2", [client.clientId, now]);
      await tx.query("INSERT INTO tokens (token_hash, client_id, scopes, expires_at) VALUES ($1, $2, $3, $4)", [
        tokenHash(token),
        client.clientId,
        requested.join(" "),
        now + options.tokenLifetimeSeconds * 1000,
      ]);
    });
    return reply
      .code(200)
      .header("cache-control", "no-store")
      .send({ access_token: token, token_type: "Bearer", expires_in: options.tokenLifetimeSeconds, scope: requested.join(" ") });
  });

  app.get("/api/v2/businesses/search", async (req) => {
    await authenticate(req, scopeOf("/api/v2/businesses/search", "get"));
    const query = req.query as Record<string, unknown>;
    const errors = queryErrors("/api/v2/businesses/search", "get", query);
    if (errors.length) throw new ProblemError(400, "Invalid query parameters.", errors);
    const businesses = seed.businesses
      .filter((b) => b.categoryIDs.includes(query.category_id as string) && b.serviceZipCodes.includes(query.zip as string))
      .sort((a, b) => (b.rating ?? 0) - (a.rating ?? 0))
      .slice(0, maxSearchResults)
      .map((b) => ({
        businessID: b.businessID,
        name: b.name,
        categories: b.categoryIDs.map((id) => ({ categoryID: id, name: categories.get(id)! })),
        location: b.location,
        ...(b.rating !== undefined ? { rating: b.rating } : {}),
        reviewCount: b.reviewCount,
      }));
    return { businesses };
  });

  app.post("/api/v4/requests", async (req, reply) => {
    const clientId = await authenticate(req, scopeOf("/api/v4/requests", "post"));
    requireJson(req);
    validateBody(req.body, (body) => schemaErrors("ServiceRequestInput", body));
    const input = req.body as { categoryID: string; zipCode: string; customer: { name: string; email: string; phone: string } };
    const category = categories.get(input.categoryID);
    if (!category) throw new ProblemError(404, `No category has the identifier ${input.categoryID}.`, [{ pointer: "/categoryID", detail: "unknown category" }]);
    const matched = seed.businesses.filter((b) => b.categoryIDs.includes(input.categoryID) && b.serviceZipCodes.includes(input.zipCode));
    const now = clock.now();
    // The request, its leads and their lead.created events are stored together, or not at all.
    const { requestID, leads } = await engine.transaction(async (tx, emit) => {
      const requestID = await nextId(tx);
      await tx.query("INSERT INTO requests (id, client_id, body, created_at) VALUES ($1, $2, $3, $4)", [requestID, clientId, JSON.stringify(input), now]);
      const leads: { leadID: string; businessID: string }[] = [];
      for (const b of matched) {
        const leadID = await nextId(tx);
        await tx.query("INSERT INTO leads (id, request_id, business_id, status, created_at, expires_at) VALUES ($1, $2, $3, 'new', $4, $5)", [
          leadID,
          requestID,
          b.businessID,
          now,
          now + options.leadExpirySeconds * 1000,
        ]);
        await emit("lead.created", b.businessID, {
          leadID,
          businessID: b.businessID,
          // Matched businesses serve the zip code, so the seed knows its town.
          request: { category, location: { ...seed.zipCodes[input.zipCode]!, zip: input.zipCode } },
          customer: { name: input.customer.name, phone: input.customer.phone },
        }, now);
        leads.push({ leadID, businessID: b.businessID });
      }
      return { requestID, leads };
    });
    return reply
      .code(201)
      .header("location", `/api/v4/requests/${requestID}`)
      .send({
        requestID,
        status: leads.length ? "matched" : "unmatched",
        categoryID: input.categoryID,
        zipCode: input.zipCode,
        customer: input.customer,
        leads,
        createdAt: new Date(now).toISOString(),
      });
  });

  app.post("/api/v2/webhooks", async (req, reply) => {
    const clientId = await authenticate(req, scopeOf("/api/v2/webhooks", "post"));
    requireJson(req);
    validateBody(req.body, registration.errors);
    const input = req.body as { url: string; events: EventName[]; businessID: string; secret: string };
    if (!registration.businessExists(input.businessID)) {
      throw new ProblemError(404, `No business has the identifier ${input.businessID}.`, [{ pointer: "/businessID", detail: "unknown business" }]);
    }
    const refused = await options.addressPolicy.refuseUrl(input.url);
    if (refused) throw new ProblemError(422, `The webhook URL cannot be called: ${refused}.`, [{ pointer: "/url", detail: refused }]);
    const now = clock.now();
    const webhookID = await nextId(db);
    await db.query(
      "INSERT INTO webhooks (id, client_id, url, events, business_id, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
      [webhookID, clientId, input.url, JSON.stringify(input.events), input.businessID, input.secret, now],
    );
    return reply
      .code(201)
      .header("location", `/api/v2/webhooks/${webhookID}`)
      .send({ webhookID, url: input.url, events: input.events, businessID: input.businessID, status: "enabled", createdAt: new Date(now).toISOString() });
  });

  if (options.conformance) registerControl(app, options);
  return app;
}

function clockBody(clock: Clock) {
  return { now: new Date(clock.now()).toISOString(), mode: clock.mode, scale: clock.scale };
}

/** A control API body, validated against its schema in generated/control/openapi.yaml. */
function controlBody<T>(schemaName: string, body: unknown): T {
  const errors = fieldErrors(controlValidator(schemaName), body ?? {});
  if (errors.length) throw new ProblemError(422, `The body violates the ${schemaName} schema.`, errors);
  return body as T;
}

/** The Conformance Control API (spec/control/main.tsp): only with --conformance. */
function registerControl(app: FastifyInstance, { clock, engine }: AppOptions): void {
  app.get("/conformance/clock", async () => clockBody(clock));
  app.post("/conformance/clock/advance", async (req, reply) => {
    const { seconds } = controlBody<{ seconds: number }>("AdvanceClockRequest", req.body);
    if (clock.mode !== "virtual") {
      const { type, status } = controlProblem("ClockNotVirtualProblem");
      const detail = `The clock runs in ${clock.mode} mode; only a virtual clock can be advanced.`;
      return reply.code(status).type("application/problem+json").send({ type, title: "Clock is not virtual", status, detail });
    }
    await engine.advance(seconds);
    return clockBody(clock);
  });
  app.post("/conformance/events", async (req, reply) => {
    const body = controlBody<{ event: EventName; businessID: string; data?: Record<string, unknown> }>("TriggerEventRequest", req.body);
    const { event, businessID } = body;
    const data: Record<string, unknown> = { ...(body.data ?? eventExample(event).data), businessID };
    const errors = schemaErrors(eventSchemaName(event), { ...eventExample(event), data });
    if (errors.length) throw new ProblemError(422, `data does not validate against the ${event} schema.`, errors);
    const { id, queuedFor } = await engine.transaction(async (tx, emit) => {
      // A lead.updated "as if it had occurred" changes a stored lead: a hired lead no longer expires (D19).
      if (event === "lead.updated") {
        await tx.query("UPDATE leads SET status = $1 WHERE id = $2 AND business_id = $3 AND status IN ('new', 'responded')", [data.status, data.leadID, businessID]);
      }
      return emit(event, businessID, data);
    });
    return reply.code(201).send({ id, event, queuedFor });
  });
}
