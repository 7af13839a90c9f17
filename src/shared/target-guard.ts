import { lookup as dnsLookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

/** Thrown by the delivery connector when a target resolves to an address it may not connect to. */
export class ForbiddenTargetError extends Error {
  readonly code = 'ERR_FORBIDDEN_TARGET';
}

/** Resolves a host name to every address it has; injectable so tests can play DNS. */
export type Resolver = (hostname: string) => Promise<string[]>;

export const systemResolver: Resolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address);

/**
 * The IPv4 address an IPv6 address carries, when it is a form that reaches that IPv4 host: IPv4-mapped
 * (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`, deprecated but still routed by some stacks), NAT64
 * (`64:ff9b::a.b.c.d`, RFC 6052) and 6to4 (`2002:AABB:CCDD::/16`, RFC 3056).
 */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const [p0 = 0, p1 = 0, p2 = 0, p3 = 0, p4 = 0, p5 = 0, p6 = 0, p7 = 0] = address.parts;
  const v4 = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  if (address.isIPv4MappedAddress()) return address.toIPv4Address();
  const zeroMiddle = p2 === 0 && p3 === 0 && p4 === 0 && p5 === 0;
  // :: and ::1 are judged as themselves (unspecified, loopback); anything else in ::/96 is ::a.b.c.d.
  if (p0 === 0 && p1 === 0 && zeroMiddle && (p6 !== 0 || p7 > 1)) return v4(p6, p7);
  if (p0 === 0x64 && p1 === 0xff9b && zeroMiddle) return v4(p6, p7);
  if (p0 === 0x2002) return v4(p1, p2);
  return undefined;
}

/** True when connecting to this address could reach something internal (loopback, private, metadata, ...). */
export function isForbiddenAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return true;
  const parsed = ipaddr.parse(address);
  // ::ffff:127.0.0.1, ::127.0.0.1, 64:ff9b::127.0.0.1 and 2002:7f00:1:: all reach 127.0.0.1: judge the IPv4 inside.
  if (parsed.kind() === 'ipv6') {
    const inside = embeddedIPv4(parsed as ipaddr.IPv6);
    if (inside) return inside.range() !== 'unicast';
  }
  // ipaddr.js names every special-purpose range (loopback, private, linkLocal incl. 169.254.169.254,
  // uniqueLocal, carrierGradeNat, multicast, unspecified, reserved, teredo, local-use NAT64 ...); only
  // plain unicast is public.
  return parsed.range() !== 'unicast';
}

/**
 * Names that are internal by definition, refused whether or not they resolve from here: localhost
 * (RFC 6761), the private-use `.internal` (cloud metadata: metadata.google.internal), mDNS `.local`,
 * `.localdomain`, `.home.arpa`, and single-label names (resolved through a search domain, inside).
 */
const INTERNAL_NAME = /(^|\.)(localhost|internal|local|localdomain|home\.arpa)\.?$|^[^.]+\.?$/i;

export function isInternalHostname(hostname: string): boolean {
  return !ipaddr.isValid(hostname) && INTERNAL_NAME.test(hostname);
}

/**
 * The SSRF guard for webhook targets: at subscribe time on every address the name resolves to, and
 * at delivery time on the address actually connected to (see delivery's connector).
 */
export class TargetGuard {
  constructor(
    private readonly allowPrivate: boolean,
    private readonly resolve: Resolver = systemResolver,
  ) {}

  get allowsPrivateTargets(): boolean {
    return this.allowPrivate;
  }

  /** Why a URL may not be a webhook target, or undefined when it may. */
  async problemWithUrl(raw: string): Promise<string | undefined> {
    let url: URL;
    try {
      // WHATWG parsing also normalises decimal and octal IPv4 spellings (http://2130706433/ is 127.0.0.1).
      url = new URL(raw);
    } catch {
      return 'is not a valid URL';
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http or https URL';
    if (url.username || url.password) return 'must not contain credentials';
    if (this.allowPrivate) return undefined;
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const internal = 'resolves to a private, loopback or otherwise internal address';
    if (isInternalHostname(host)) return internal;
    let addresses: string[];
    try {
      addresses = ipaddr.isValid(host) ? [host] : await this.resolve(host);
    } catch {
      // A name that does not resolve yet (or DNS that is briefly down) is no SSRF: nothing can be
      // reached through it now, and every delivery checks the address it actually connects to.
      return undefined;
    }
    if (addresses.some(isForbiddenAddress)) return internal;
    return undefined;
  }

  /** For the connector: may a connection to this resolved address be opened? */
  mayConnectTo(address: string): boolean {
    return this.allowPrivate || !isForbiddenAddress(address);
  }

  /**
   * For the delivery connector: resolves the host (again, at connect time) and returns the address
   * to connect to, so the check and the connection use the same address and DNS that changed since
   * subscribe time cannot steer a delivery inside. Throws ForbiddenTargetError when any address is forbidden.
   */
  async addressToConnect(hostname: string): Promise<string> {
    const host = hostname.replace(/^\[|\]$/g, '');
    const addresses = ipaddr.isValid(host) ? [host] : await this.resolve(host);
    const address = addresses[0];
    if (address === undefined) throw new Error(`${host} does not resolve`);
    const forbidden = addresses.find((candidate) => !this.mayConnectTo(candidate));
    if (forbidden !== undefined)
      throw new ForbiddenTargetError(
        `${host} resolves to ${forbidden}, a private, loopback or otherwise internal address`,
      );
    return address;
  }
}
