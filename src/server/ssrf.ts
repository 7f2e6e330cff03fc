// Webhook URL rules (spec/DECISIONS.md D22, D28): a webhook may only call a globally routable unicast
// address (an allowlist, classified by ipaddr.js rather than a hand-kept range list), and its URL must
// be one the server can call as written. Checked at registration, and at delivery by the connection's
// own DNS look-up, so a name cannot resolve to a public address at the check and a private one at connect.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";
import { withDeadline } from "./deadline.js";

/** The global unicast block of IPv6 (RFC 4291): everything outside it is local, special or unassigned. */
const globalUnicast6 = ipaddr.parseCIDR("2000::/3");

/** What an address is, as ipaddr.js names its ranges: "unicast" (global), "loopback", "private", ... */
function classify(address: string): string {
  if (!ipaddr.isValid(address)) return "invalid";
  let parsed = ipaddr.parse(address);
  // An IPv4-mapped IPv6 address reaches its IPv4 address.
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  const range = parsed.range();
  if (parsed.kind() === "ipv6" && range === "unicast" && !parsed.match(globalUnicast6)) return "not global unicast";
  return range;
}

/** RFC 6761: these names are loopback, whatever a resolver says. */
const isLoopbackName = (host: string) => host === "localhost" || host.endsWith(".localhost") || host === "localhost.localdomain";

/** A URL's host as an address or name: an IPv6 address without its brackets. */
export const hostOf = (url: string) => new URL(url).hostname.replace(/^\[|\]$/g, "");

const flagsHint = (allowLoopback: boolean) =>
  allowLoopback
    ? "the reference server accepts private networks only with --allow-private-webhooks"
    : "the reference server accepts loopback addresses with --conformance (certification) and private networks with --allow-private-webhooks";

const refusal = (host: string, address: string, range: string, allowLoopback: boolean) =>
  `the host ${host} ${host === address ? "is" : `resolves to ${address}, which is`} not a public address (${range}); ${flagsHint(allowLoopback)}`;

/**
 * Why a webhook URL cannot be called as written (D28), before any look-up; undefined when it can.
 * The schema's `uri` format lets through URLs that the WHATWG parser refuses or silently repairs.
 */
export function urlFormProblem(raw: string): string | undefined {
  if (!URL.canParse(raw)) return "not a URL that can be called (its host, port or an escape cannot be parsed)";
  // The parser repairs "https:///hook" into https://hook/ and reads backslashes as slashes: refuse both.
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#\\]*)/i.exec(raw)?.[1];
  if (!authority) return "the URL has no host";
  const url = new URL(raw);
  if (authority.includes("@") || url.username || url.password) {
    return "the URL must not contain a user name or password: they would be stored and shown; the webhook secret authenticates deliveries";
  }
  if (url.port === "0") return "port 0 cannot be called";
  // The schema's `uri` is ASCII: an internationalized host is refused with the form to send instead.
  if (/[^\x00-\x7f]/.test(authority)) return `an internationalized host must be sent in its ASCII form: ${url.hostname}`;
  if (url.hostname.endsWith(".")) return `the host ends with a dot: write it as ${url.hostname.replace(/\.+$/, "")}`;
  return undefined;
}

/** Which webhook addresses may be called (D22): only public ones; loopback too while certifying. */
export interface AddressPolicy {
  /** Why a URL may not be called by its form (D28) or its IP address; undefined for names and allowed addresses. */
  refuseAddressUrl(url: string): string | undefined;
  /** Registration: why a webhook URL may not be called, or undefined when it may. */
  refuseUrl(url: string): Promise<string | undefined>;
  /** Delivery: a DNS look-up for outgoing connections that fails when a name resolves to a refused address. */
  lookup: LookupFunction;
}

type Resolve = (hostname: string, callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;
const systemResolve: Resolve = (hostname, callback) => dnsLookup(hostname, { all: true }, callback);

/**
 * The policy of a server: `allowLoopback` while the Conformance Control API is on (the suite's receiver
 * listens on 127.0.0.1, D22); `allowPrivate` (local testing) accepts every address.
 *
 * `resolve` (the system's resolver by default) is called once for a host name however many connections
 * to it wait for it: a look-up is a thread of libuv's pool of 4 (getaddrinfo), so a partner's host name
 * whose DNS does not answer held every thread, and the webhooks of other hosts failed behind it (D40).
 */
export function addressPolicy(options: { allowLoopback?: boolean; allowPrivate?: boolean; resolve?: Resolve } = {}): AddressPolicy {
  const allowLoopback = options.allowLoopback ?? false;
  const resolve = options.resolve ?? systemResolve;
  const underWay = new Map<string, Promise<LookupAddress[]>>();
  const resolveOnce = (hostname: string): Promise<LookupAddress[]> => {
    let found = underWay.get(hostname);
    if (!found) {
      found = new Promise<LookupAddress[]>((ok, fail) => resolve(hostname, (error, addresses) => (error ? fail(error) : ok(addresses)))).finally(() =>
        underWay.delete(hostname),
      );
      underWay.set(hostname, found);
    }
    return found;
  };
  /** The range that makes an address refused, or undefined when it may be called. */
  const refusedRange = (address: string): string | undefined => {
    if (options.allowPrivate) return undefined;
    const range = classify(address);
    if (range === "unicast" || (allowLoopback && range === "loopback")) return undefined;
    return range;
  };
  const refuseAddressUrl = (url: string) => {
    const form = urlFormProblem(url);
    if (form) return form;
    const host = hostOf(url);
    if (!options.allowPrivate && !allowLoopback && isLoopbackName(host)) return refusal(host, host, "a loopback name, RFC 6761", allowLoopback);
    if (!ipaddr.isValid(host)) return undefined;
    const range = refusedRange(host);
    return range ? refusal(host, host, range, allowLoopback) : undefined;
  };
  return {
    refuseAddressUrl,
    async refuseUrl(url) {
      const refused = refuseAddressUrl(url);
      const host = refused ? "" : hostOf(url);
      if (refused || ipaddr.isValid(host) || options.allowPrivate) return refused;
      let addresses: LookupAddress[];
      try {
        // A stalled resolver must not hold a registration: 2 s, then treat the name as unresolved.
        addresses = await withDeadline(resolveOnce(host), 2000, "DNS look-up");
      } catch {
        // Not resolvable now: nothing private to protect; its attempts fail until it resolves (D22).
        return undefined;
      }
      for (const a of addresses) {
        const range = refusedRange(a.address);
        if (range) return refusal(host, a.address, range, allowLoopback);
      }
      return undefined;
    },
    lookup: (hostname, lookupOptions, callback) => {
      resolveOnce(hostname).then(
        (all) => {
          // The connection's own family, when it asks for one (the answer is shared by every family).
          const addresses = lookupOptions.family === 4 || lookupOptions.family === 6 ? all.filter((a) => a.family === lookupOptions.family) : all;
          if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no IPv${lookupOptions.family} address`), { code: "ENOTFOUND" }), "", 0);
          for (const a of addresses) {
            const range = refusedRange(a.address);
            if (range) return callback(Object.assign(new Error(refusal(hostname, a.address, range, allowLoopback)), { code: "EPRIVATEADDRESS" }), "", 0);
          }
          if (lookupOptions.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
          return callback(null, addresses[0]!.address, addresses[0]!.family);
        },
        (error: NodeJS.ErrnoException) => callback(error, "", 0),
      );
    },
  };
}

const strict = addressPolicy();

/** The strict policy's registration check (no loopback, no private networks). */
export const refuseUrl = strict.refuseUrl;
