// The config file of `partner-platform serve --config`: validated against src/server/config.schema.json,
// whose scopes are the spec's.
import { readFileSync } from "node:fs";
import path from "node:path";
import { packageRoot } from "../paths.js";
import { describeSchemaErrors } from "../spec.js";
import { allScopes, createAjv, specTokenLifetimeSeconds } from "./contract.js";

export interface ClientConfig {
  clientId: string;
  clientSecret: string;
  scopes: string[];
  contactEmail: string;
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
const validateConfig = createAjv({ allErrors: true }).compile(configSchema);

/** Reads and validates a config file (src/server/config.schema.json); without a file, the default config. */
export function loadConfig(file?: string): ServerConfig {
  const source = file ?? path.join(packageRoot, "src/server/default-config.json");
  let config: unknown;
  try {
    config = JSON.parse(readFileSync(source, "utf8"));
  } catch (error) {
    throw new Error(`config ${source}: ${error instanceof SyntaxError ? "not JSON: " : ""}${(error as Error).message}`);
  }
  if (!validateConfig(config)) throw new Error(`config ${source}: ${describeSchemaErrors(validateConfig.errors).join("; ")}`);
  const valid = config as Omit<ServerConfig, "tokenLifetimeSeconds"> & { tokenLifetimeSeconds?: number };
  const ids = valid.clients.map((c) => c.clientId);
  const repeated = ids.find((id, i) => ids.indexOf(id) !== i);
  if (repeated) throw new Error(`config ${source}: /clients: the clientId ${repeated} appears twice`);
  return { ...valid, tokenLifetimeSeconds: valid.tokenLifetimeSeconds ?? specTokenLifetimeSeconds };
}

