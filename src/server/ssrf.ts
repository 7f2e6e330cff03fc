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

function isPrivate(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return privateRanges.check(mapped[1]!, "ipv4");
  return privateRanges.check(address, isIP(address) === 6 ? "ipv6" : "ipv4");
}

const hostOf = (url: string) => new URL(url).hostname.replace(/^\[|\]$/g, "");
const refusal = (host: string, address: string) => `the host ${host} resolves to a private or loopback address (${address})`;

/** Why a URL whose host is an IP address may not be called; undefined for names and public addresses. */
export function refuseAddressUrl(url: string): string | undefined {
  const host = hostOf(url);
  return isIP(host) && isPrivate(host) ? refusal(host, host) : undefined;
}

/** Registration: why a webhook URL may not be called, or undefined when it may. */
export async function refuseUrl(url: string): Promise<string | undefined> {
  const host = hostOf(url);
  if (isIP(host)) return refuseAddressUrl(url);
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
  const blocked = addresses.find((a) => isPrivate(a.address));
  return blocked ? refusal(host, blocked.address) : undefined;
}

/** Delivery: a DNS look-up for outgoing connections that fails when a name resolves to a private address. */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, "", 0);
    const blocked = addresses.find((a) => isPrivate(a.address));
    if (blocked) return callback(Object.assign(new Error(refusal(hostname, blocked.address)), { code: "EPRIVATEADDRESS" }), "", 0);
    if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
    return callback(null, addresses[0]!.address, addresses[0]!.family);
  });
};
