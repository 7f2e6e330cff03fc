// The proxies whose X-Forwarded-For names the client (`serve --trust-proxy`, D30), checked as fastify
// will read them (@fastify/proxy-addr), before anything opens.
import proxyAddr from "@fastify/proxy-addr";
import ipaddr from "ipaddr.js";

const named = ["loopback", "linklocal", "uniquelocal"];

/** Why a list of trusted proxies cannot be used, or undefined. */
export function trustedProxiesProblem(entries: readonly string[]): string | undefined {
  for (const entry of entries) {
    const address = entry.split("/")[0]!;
    // proxy-addr reads "10" as 0.0.0.10 and "0x0a000001" as 10.0.0.1, where a hop count may have been meant.
    if (!named.includes(entry) && ipaddr.IPv4.isValid(address) && !ipaddr.IPv4.isValidFourPartDecimal(address)) {
      return `"${entry}" is not an address in four decimal parts (a number of hops is not taken: name the proxies)`;
    }
    try {
      proxyAddr.compile(entry);
    } catch (error) {
      return `"${entry}" is not an IP address, a CIDR range, or one of ${named.join(", ")} (${(error as Error).message})`;
    }
  }
  return undefined;
}

/**
 * The client's address for the per-address throttle: what the trusted proxies forwarded when it is an
 * address (a port some proxies append is dropped), else the connection's peer. "unknown" or a port per
 * connection would otherwise make one bucket for everyone, or one per connection.
 */
export function clientAddress(forwarded: string, peer: string | undefined): string {
  const unbracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(forwarded)?.[1] ?? forwarded.replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, "$1");
  return ipaddr.isValid(unbracketed) ? ipaddr.process(unbracketed).toString() : (peer ?? forwarded);
}
