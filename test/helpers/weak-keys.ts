/**
 * Ed25519 public keys that must never identify anyone: the 8 points of small order in every
 * spelling, and non-canonical encodings (y >= p). Derived here from the curve equation, not copied
 * from the implementation's list, so a test using them checks that list against the math.
 */

/** The field prime of edwards25519 (RFC 8032 §5.1). */
export const P = 2n ** 255n - 19n;
/** The curve constant d = -121665 / 121666 (RFC 8032 §5.1). */
const D = mod(-121665n * inverse(121666n));
const SQRT_M1 = power(2n, (P - 1n) / 4n);

export function mod(a: bigint): bigint {
  const r = a % P;
  return r < 0n ? r + P : r;
}

export function power(base: bigint, exponent: bigint): bigint {
  let result = 1n;
  let b = mod(base);
  let e = exponent;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return result;
}

function inverse(a: bigint): bigint {
  return power(a, P - 2n);
}

/** A square root mod p, or undefined (RFC 8032 §5.1.3 step 3). */
function sqrt(a: bigint): bigint | undefined {
  const candidate = power(a, (P + 3n) / 8n);
  if (mod(candidate * candidate - a) === 0n) return candidate;
  const other = mod(candidate * SQRT_M1);
  if (mod(other * other - a) === 0n) return other;
  return undefined;
}

/** 32 little-endian bytes of `y` (which may be >= p), with the sign bit of x on top, as JWK `x`. */
export function encodePoint(y: bigint, signBit: 0 | 1): string {
  const bytes = Buffer.alloc(32);
  let v = y;
  for (let i = 0; i < 32; i++) {
    bytes[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  if (signBit) bytes[31] = (bytes[31] as number) | 0x80;
  return bytes.toString('base64url');
}

export interface Point {
  readonly x: bigint;
  readonly y: bigint;
}

/** RFC 8032 §5.1.3 decoding, but lenient about y >= p and x = 0 with the sign bit set. */
export function decodeLenient(encoded: string): Point | undefined {
  const bytes = Buffer.from(encoded, 'base64url');
  const sign = (bytes[31] as number) >> 7;
  bytes[31] = (bytes[31] as number) & 0x7f;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(bytes[i] as number);
  y = mod(y);
  const x2 = mod((y * y - 1n) * inverse(mod(D * y * y + 1n)));
  const x = sqrt(x2);
  if (x === undefined) return undefined;
  return { x: (x & 1n) === BigInt(sign) ? x : mod(-x), y };
}

/** Affine addition on -x^2 + y^2 = 1 + d x^2 y^2 (complete for edwards25519). */
export function add(a: Point, b: Point): Point {
  const t = mod(D * a.x * b.x * a.y * b.y);
  return {
    x: mod((a.x * b.y + a.y * b.x) * inverse(mod(1n + t))),
    y: mod((a.y * b.y + a.x * b.x) * inverse(mod(1n - t))),
  };
}

/** [8]P is the identity (0, 1): the point's order divides 8. */
export function hasSmallOrder(point: Point): boolean {
  let q = point;
  for (let i = 0; i < 3; i++) q = add(q, q);
  return q.x === 0n && q.y === 1n;
}

/** y of the order-8 points: [2]P has y = 0, i.e. x^2 = -y^2, so d y^4 + 2 y^2 - 1 = 0. */
function order8Y(): bigint {
  const root = sqrt(mod(1n + D)) as bigint;
  for (const y2 of [mod((-1n + root) * inverse(D)), mod((-1n - root) * inverse(D))]) {
    const y = sqrt(y2);
    if (y !== undefined) return y;
  }
  throw new Error('no order-8 point: the curve constants are wrong');
}

const Y8 = order8Y();

/** [description, JWK x] for every encoding of a small-order point this test suite refuses. */
export const SMALL_ORDER_KEYS: readonly (readonly [string, string])[] = [
  ['the identity (y = 1, order 1)', encodePoint(1n, 0)],
  ['the identity with the sign bit set', encodePoint(1n, 1)],
  ['y = p - 1 (order 2)', encodePoint(P - 1n, 0)],
  ['y = p - 1 with the sign bit set', encodePoint(P - 1n, 1)],
  ['y = 0 (order 4)', encodePoint(0n, 0)],
  ['y = 0, the other x (order 4)', encodePoint(0n, 1)],
  ['y = y8 (order 8)', encodePoint(Y8, 0)],
  ['y = y8, the other x (order 8)', encodePoint(Y8, 1)],
  ['y = p - y8 (order 8)', encodePoint(P - Y8, 0)],
  ['y = p - y8, the other x (order 8)', encodePoint(P - Y8, 1)],
  ['y = p, a second spelling of y = 0', encodePoint(P, 0)],
  ['y = p + 1, a second spelling of the identity', encodePoint(P + 1n, 0)],
  ['y = p + 1 with the sign bit set', encodePoint(P + 1n, 1)],
];

/** [description, JWK x] for non-canonical encodings (y >= p) of points that are not small-order. */
export const NON_CANONICAL_KEYS: readonly (readonly [string, string])[] = [
  ['y = p + 2', encodePoint(P + 2n, 0)],
  ['y = p + 3 with the sign bit set', encodePoint(P + 3n, 1)],
  ['y = 2^255 - 1', encodePoint(2n ** 255n - 1n, 0)],
];

/** The identity point (y = 1) as JWK `x`: every (R = B, S = 1) signature verifies for every message. */
export const IDENTITY_X = encodePoint(1n, 0);
/** The base point B (RFC 8032 §5.1) as R, and S = 1: [S]B = R + [k]·identity for any k. */
export const UNIVERSAL_SIGNATURE = Buffer.concat([
  Buffer.from('5866666666666666666666666666666666666666666666666666666666666666', 'hex'),
  Buffer.from('01'.padEnd(64, '0'), 'hex'),
]);
