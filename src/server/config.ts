// The config file of `partner-platform serve --config`: validated against src/server/config.schema.json,
// whose scopes are the spec's.
import { readFileSync } from "node:fs";
import path from "node:path";
import { packageRoot } from "../paths.js";
import { describeSchemaErrors } from "@partner-platform/sdk";
import { allScopes, createAjv, specTokenLifetimeSeconds } from "./contract.js";

export interface ClientConfig {
  clientId: string;
  clientSecret: string;
  scopes: string[];
  contactEmail: string;
  /** The businesses this client acts for (D27): webhooks may be registered for these only. */
  businessIDs: string[];
}

/** A validated config file (src/server/config.schema.json). */
export interface ServerConfig {
  clients: ClientConfig[];
  tokenLifetimeSeconds: number;
  smtpUrl?: string;
  allowPrivateWebhooks?: boolean;
}

const configSchema = JSON.parse(readFileSync(path.join(packageRoot, "src/server/config.schema.json"), "utf8")) as {
  properties: { clients: { items: { properties: { scopes: { items: Record<string, unknown> } } } } };
};
// The scopes a client may have are the spec's, not a list of their own.
configSchema.properties.clients.items.properties.scopes.items = { enum: allScopes };
/** The businesses of the seed data: a client may own only these. */
const seedBusinessIDs = new Set(
  (JSON.parse(readFileSync(path.join(packageRoot, "src/server/seed/businesses.json"), "utf8")) as { businesses: { businessID: string }[] }).businesses.map(
    (b) => b.businessID,
  ),
);

const validateConfig = createAjv({ allErrors: true }).compile(configSchema);

/** Reads and validates a config file (src/server/config.schema.json); without a file, the default config. */
export function loadConfig(file?: string, env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const source = file ?? path.join(packageRoot, "src/server/default-config.json");
  let config: unknown;
  try {
    config = JSON.parse(readFileSync(source, "utf8"));
  } catch (error) {
    throw new Error(`config ${source}: ${error instanceof SyntaxError ? "not JSON: " : ""}${(error as Error).message}`);
  }
  if (!validateConfig(config)) throw new Error(`config ${source}: ${describeSchemaErrors(validateConfig.errors).join("; ")}`);
  const valid = config as Omit<ServerConfig, "tokenLifetimeSeconds" | "clients"> & {
    tokenLifetimeSeconds?: number;
    clients: (Omit<ClientConfig, "clientSecret"> & { clientSecret?: string; clientSecretEnv?: string })[];
  };
  // A secret in the file or in the environment (D34), exactly one.
  const clients: ClientConfig[] = valid.clients.map(({ clientSecretEnv, ...c }, i) => {
    if ((c.clientSecret === undefined) === (clientSecretEnv === undefined)) {
      throw new Error(`config ${source}: /clients/${i}: give exactly one of clientSecret and clientSecretEnv`);
    }
    const secret = c.clientSecret ?? env[clientSecretEnv!];
    if (!secret) throw new Error(`config ${source}: /clients/${i}/clientSecretEnv: the environment variable ${clientSecretEnv} is not set or empty`);
    return { ...c, clientSecret: secret };
  });
  const ids = valid.clients.map((c) => c.clientId);
  const repeated = ids.find((id, i) => ids.indexOf(id) !== i);
  if (repeated) throw new Error(`config ${source}: /clients: the clientId ${repeated} appears twice`);
  // One owner per business (D27): two partners owning a business would each see the other's customers.
  const owner = new Map<string, number>();
  for (const [i, c] of valid.clients.entries()) {
    for (const [j, id] of c.businessIDs.entries()) {
      if (!seedBusinessIDs.has(id)) throw new Error(`config ${source}: /clients/${i}/businessIDs/${j}: no business has the identifier ${id}`);
      if (owner.has(id)) throw new Error(`config ${source}: /clients/${i}/businessIDs/${j}: business ${id} already belongs to /clients/${owner.get(id)}`);
      owner.set(id, i);
    }
  }
  return { ...valid, clients, tokenLifetimeSeconds: valid.tokenLifetimeSeconds ?? specTokenLifetimeSeconds };
}

