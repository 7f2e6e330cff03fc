// The reference server's HTTP side: the four operations of the spec, the Conformance Control API when
// enabled, and problem+json for every client error (spec/DECISIONS.md D11–D18).
import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { parse as parseYaml } from "yaml";
import { packageRoot, specPaths } from "../paths.js";
import { eventExample, eventNames, eventSchemaName, validatorFor, type EventName } from "../spec.js";
import type { Clock } from "./clock.js";
import { refuseUrl, type DeliveryEngine, type ServerFault } from "./delivery.js";
import type { Db } from "./store.js";
import { nextId } from "./store.js";

export interface ClientConfig {
  clientId: string;
  clientSecret: string;
  scopes: string[];
  contactEmail: string;
}

export interface AppOptions {
  db: Db;
  clock: Clock;
  engine: DeliveryEngine;
  clients: ClientConfig[];
  tokenLifetimeSeconds: number;
  leadExpirySeconds: number;
  allowPrivateWebhooks: boolean;
  conformance: boolean;
  faults?: ReadonlySet<ServerFault>;
}

interface Seed {
  categories: { categoryID: string; name: string }[];
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

type Json = Record<string, any>;
const openapi = parseYaml(readFileSync(specPaths.openapi, "utf8")) as Json;

/** Problem type and title by status, from the per-status problem schemas of the spec. */
const problemTypes = new Map<number, string>(
  Object.values(openapi.components.schemas as Json)
    .filter((s) => (s as Json).properties?.type?.enum && (s as Json).properties?.status?.enum)
    .map((s) => [(s as Json).properties.status.enum[0] as number, (s as Json).properties.type.enum[0] as string]),
);

/** The scope each operation requires, from its security requirement in the spec. */
function scopeOf(route: string, method: string): string {
  const security = openapi.paths[route][method].security as Record<string, string[]>[];
  return Object.values(security[0]!)[0]![0]!;
}

const BODY_LIMIT = 64 * 1024;

class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly errors?: { pointer: string; detail: string }[],
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
  }
}

function problemBody(status: number, detail: string, instance: string, errors?: { pointer: string; detail: string }[]) {
  const type = problemTypes.get(status) ?? "about:blank";
  const slug = type.split(":").pop()!;
  const title = slug.charAt(0).toUpperCase() + slug.slice(1).replace(/-/g, " ");
  return { type, title, status, detail, instance, ...(errors?.length ? { errors } : {}) };
}

function schemaErrors(schemaName: string, value: unknown): { pointer: string; detail: string }[] {
  const validate = validatorFor(schemaName);
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => ({
    // RFC 6901: "" is the whole document.
    pointer: e.keyword === "required" ? `${e.instancePath}/${(e.params as { missingProperty: string }).missingProperty}` : e.instancePath,
    detail: e.message ?? e.keyword,
  }));
}

const oauthError = (reply: FastifyReply, status: 400 | 401, error: string, description: string) =>
  reply.code(status).header("cache-control", "no-store").send({ error, error_description: description });

export function createApp(options: AppOptions): FastifyInstance {
  const { db, clock, engine } = options;
  const app = Fastify({ bodyLimit: BODY_LIMIT });
  const categories = new Map(seed.categories.map((c) => [c.categoryID, c.name]));

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
      status === 413 ? `The body exceeds ${BODY_LIMIT} bytes.` : status === 500 ? "Internal error." : error.message;
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
      "SELECT client_id, scopes, expires_at FROM tokens WHERE token = $1",
      [match[1]],
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

  function validateBody(schemaName: string, body: unknown): void {
    if (body === undefined) throw new ProblemError(400, "The body is empty; send a JSON object.");
    const errors = schemaErrors(schemaName, body);
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
    await db.query("INSERT INTO tokens (token, client_id, scopes, expires_at) VALUES ($1, $2, $3, $4)", [
      token,
      client.clientId,
      requested.join(" "),
      clock.now() + options.tokenLifetimeSeconds * 1000,
    ]);
    return reply
      .code(200)
      .header("cache-control", "no-store")
      .send({ access_token: token, token_type: "Bearer", expires_in: options.tokenLifetimeSeconds, scope: requested.join(" ") });
  });

  app.get("/api/v2/businesses/search", async (req) => {
    await authenticate(req, scopeOf("/api/v2/businesses/search", "get"));
    const query = req.query as Record<string, unknown>;
    const errors = [
      ["category_id", "CategoryId"],
      ["zip", "ZipCode"],
    ].flatMap(([name, schema]) => {
      const value = query[name!];
      if (value === undefined) return [{ pointer: `/query/${name}`, detail: "is required" }];
      return schemaErrors(schema!, value).map((e) => ({ pointer: `/query/${name}`, detail: e.detail }));
    });
    if (errors.length) throw new ProblemError(400, "Invalid query parameters.", errors);
    const businesses = seed.businesses
      .filter((b) => b.categoryIDs.includes(query.category_id as string) && b.serviceZipCodes.includes(query.zip as string))
      .sort((a, b) => (b.rating ?? 0) - (a.rating ?? 0))
      .slice(0, 50)
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
    validateBody("ServiceRequestInput", req.body);
    const input = req.body as { categoryID: string; zipCode: string; customer: { name: string; email: string; phone: string } };
    const category = categories.get(input.categoryID);
    if (!category) throw new ProblemError(404, `No category has the identifier ${input.categoryID}.`, [{ pointer: "/categoryID", detail: "unknown category" }]);
    const matched = seed.businesses.filter((b) => b.categoryIDs.includes(input.categoryID) && b.serviceZipCodes.includes(input.zipCode));
    const now = clock.now();
    const { requestID, leads } = await db.transaction(async (tx) => {
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
        leads.push({ leadID, businessID: b.businessID });
      }
      return { requestID, leads };
    });
    const jobLocation = matched.find((b) => b.location.zip === input.zipCode)?.location ?? {
      ...(matched[0]?.location ?? { city: "Unknown", state: "NY" }),
      zip: input.zipCode,
    };
    for (const lead of leads) {
      await engine.emit("lead.created", lead.businessID, {
        leadID: lead.leadID,
        businessID: lead.businessID,
        request: { category, location: { city: jobLocation.city, state: jobLocation.state, zip: input.zipCode } },
        customer: { name: input.customer.name, phone: input.customer.phone },
      });
    }
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
    const input = req.body as { url: string; events: EventName[]; businessID: string; secret: string };
    // The broken variant that accepts http:// skips the pattern of the URL, and only that.
    const plainHttp = options.faults?.has("accepts-plain-http-url") && typeof input?.url === "string" && input.url.startsWith("http://");
    validateBody("WebhookRegistration", plainHttp ? { ...input, url: input.url.replace(/^http:/, "https:") } : req.body);
    if (!seed.businesses.some((b) => b.businessID === input.businessID)) {
      throw new ProblemError(404, `No business has the identifier ${input.businessID}.`, [{ pointer: "/businessID", detail: "unknown business" }]);
    }
    const refused = await refuseUrl(input.url, options.allowPrivateWebhooks);
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

/** The Conformance Control API (spec/control/main.tsp): only with --conformance. */
function registerControl(app: FastifyInstance, { clock, engine }: AppOptions): void {
  app.get("/conformance/clock", async () => clockBody(clock));
  app.post("/conformance/clock/advance", async (req, reply) => {
    const seconds = (req.body as { seconds?: unknown } | undefined)?.seconds;
    if (!Number.isInteger(seconds) || (seconds as number) < 0) {
      throw new ProblemError(422, "seconds must be a whole number of at least 0.", [{ pointer: "/seconds", detail: "must be an integer >= 0" }]);
    }
    if (clock.mode !== "virtual") {
      return reply.code(409).type("application/problem+json").send({
        type: "urn:partner-platform:problem:clock-not-virtual",
        title: "Clock is not virtual",
        status: 409,
        detail: `The clock runs in ${clock.mode} mode; only a virtual clock can be advanced.`,
      });
    }
    await engine.advance(seconds as number);
    return clockBody(clock);
  });
  app.post("/conformance/events", async (req, reply) => {
    const body = (req.body ?? {}) as { event?: string; businessID?: string; data?: unknown };
    if (!eventNames.includes(body.event as EventName)) {
      throw new ProblemError(422, `event must be one of ${eventNames.join(", ")}.`, [{ pointer: "/event", detail: "unknown event" }]);
    }
    const businessErrors = schemaErrors("BusinessId", body.businessID);
    if (body.businessID === undefined || businessErrors.length) {
      throw new ProblemError(422, "businessID must be a numeric identifier.", [{ pointer: "/businessID", detail: "must be a numeric string" }]);
    }
    const event = body.event as EventName;
    const data = { ...((body.data as Record<string, unknown> | undefined) ?? eventExample(event).data), businessID: body.businessID };
    const errors = schemaErrors(eventSchemaName(event), { id: "evt_00000000000000000000000000", event, timestamp: "2026-01-01T00:00:00Z", data });
    if (errors.length) throw new ProblemError(422, `data does not validate against the ${event} schema.`, errors);
    const { id, queuedFor } = await engine.emit(event, body.businessID, data);
    return reply.code(201).send({ id, event, queuedFor });
  });
}
