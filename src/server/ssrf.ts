// SSRF protection (spec/DECISIONS.md D22): webhook URLs may not reach loopback, private, link-local,
// CGNAT or unique-local addresses. Checked at registration, and at delivery by the connection's own
// DNS look-up, so a name cannot resolve to a public address at the check and a private one at connect.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { lookup } from "node:dns/promises";
import { BlockList, isIP, type LookupFunction } from "node:net";

const privateRanges = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
] as const) {
  privateRanges.addSubnet(net, bits, "ipv4");
}
for (const [net, bits] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
] as const) {
  privateRanges.addSubnet(net, bits, "ipv6");
}

const loopback = new BlockList();
loopback.addSubnet("127.0.0.0", 8, "ipv4");
loopback.addAddress("::1", "ipv6");

/** The IPv4 address inside an IPv4-mapped IPv6 address, or the address itself. */
const unmapped = (address: string) => /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] ?? address;
const family = (address: string) => (isIP(address) === 6 ? "ipv6" : "ipv4");

const hostOf = (url: string) => new URL(url).hostname.replace(/^\[|\]$/g, "");
const refusal = (host: string, address: string, allowLoopback: boolean) =>
  `the host ${host} resolves to a private or loopback address (${address}); ` +
  (allowLoopback
    ? "the reference server accepts private networks only with --allow-private-webhooks"
    : "the reference server accepts loopback addresses with --conformance (certification) and private networks with --allow-private-webhooks");

/** Which webhook addresses may be called (D22): never private ones; loopback too only while certifying. */
export interface AddressPolicy {
  /** Why a URL whose host is an IP address may not be called; undefined for names and allowed addresses. */
  refuseAddressUrl(url: string): string | undefined;
  /** Registration: why a webhook URL may not be called, or undefined when it may. */
  refuseUrl(url: string): Promise<string | undefined>;
  /** Delivery: a DNS look-up for outgoing connections that fails when a name resolves to a refused address. */
  lookup: LookupFunction;
}

/**
 * The policy of a server: `allowLoopback` while the Conformance Control API is on (the suite's receiver
 * listens on 127.0.0.1, D22); `allowPrivate` (local testing) turns the check off.
 */
export function addressPolicy(options: { allowLoopback?: boolean; allowPrivate?: boolean } = {}): AddressPolicy {
  const allowLoopback = options.allowLoopback ?? false;
  const refused = (address: string): boolean => {
    if (options.allowPrivate) return false;
    const plain = unmapped(address);
    if (allowLoopback && loopback.check(plain, family(plain))) return false;
    return privateRanges.check(plain, family(plain));
  };
  const refuseAddressUrl = (url: string) => {
    const host = hostOf(url);
    return isIP(host) && refused(host) ? refusal(host, host, allowLoopback) : undefined;
  };
  return {
    refuseAddressUrl,
    async refuseUrl(url) {
      const host = hostOf(url);
      if (isIP(host) || options.allowPrivate) return refuseAddressUrl(url);
      let addresses: LookupAddress[];
      let timer: NodeJS.Timeout | undefined;
      try {
        // A stalled resolver must not hold a registration: 2 s, then treat the name as unresolved.
        addresses = await Promise.race([
          lookup(host, { all: true }),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error("DNS timeout")), 2000);
          }),
        ]);
      } catch {
        // Not resolvable now: nothing private to protect; its attempts fail until it resolves (D22).
        return undefined;
      } finally {
        clearTimeout(timer);
      }
      const blocked = addresses.find((a) => refused(a.address));
      return blocked ? refusal(host, blocked.address, allowLoopback) : undefined;
    },
    lookup: (hostname, lookupOptions, callback) => {
      dnsLookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
        if (error) return callback(error, "", 0);
        const blocked = addresses.find((a) => refused(a.address));
        if (blocked) return callback(Object.assign(new Error(refusal(hostname, blocked.address, allowLoopback)), { code: "EPRIVATEADDRESS" }), "", 0);
        if (lookupOptions.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
        return callback(null, addresses[0]!.address, addresses[0]!.family);
      });
    },
  };
}

const strict = addressPolicy();

/** The strict policy's registration check (no loopback, no private networks). */
export const refuseUrl = strict.refuseUrl;
