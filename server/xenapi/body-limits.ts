// How much an API request body may hold, checked by a linear scan of its text before any structure is built:
// bytes, XenAPI values (JSON values, object keys aside; XML-RPC <value> elements, and XML elements of any kind
// at most 4 per value) and nesting depth. Two classes: calls before a session (login, system.*, any call not
// naming a live session first) get small limits; a call naming a live session gets the large ones.

/** Structure a text may hold. */
export interface ShapeLimits {
  maxValues: number;
  maxDepth: number;
  /** Said after a refusal (what the limits apply to). */
  scope?: string;
}

export interface BodyLimits extends ShapeLimits {
  maxBytes: number;
}

/** What a scan measured: values, the deepest nesting and (XML) elements. */
export interface BodyShape {
  values: number;
  depth: number;
  elements?: number;
}

/** XML elements a value may take (a struct member's <member>, <name>, <value> and type), and a call's own. */
const ELEMENTS_PER_VALUE = 4;
const CALL_ELEMENTS = 4;

/**
 * Before a session: a login is some 200 bytes, 4 to 9 values (the JSON request's own members count), 2 (JSON)
 * or 5 (XML) deep; these leave room for any login or system.* call, and most calls naming a session fit too
 * (they are then served without a session check before parsing).
 */
export const BEFORE_SESSION: BodyLimits = {
  maxBytes: 64 * 1024,
  maxValues: 1000,
  maxDepth: 16,
  scope: "without a live session as the first parameter (login and system.* calls get no more)",
};

/**
 * With a live session. xapi takes at most 300 KiB per call (http_limit_max_rpc_size): some 20,000 values as
 * Python's client writes XML-RPC. The call's own checks after parsing grow with values (zod on a map of 25,000
 * entries: ~13 ms, of 100,000: ~100 ms), so this many keep each such step short.
 */
export function withSession(maxBytes: number): BodyLimits {
  return { maxBytes, maxValues: 25_000, maxDepth: 64 };
}

/** The words of the first limit a shape exceeds (`depthUnit` names what nests), else undefined. */
export function exceededLimit(shape: BodyShape, limits: ShapeLimits, depthUnit: string): string | undefined {
  const scope = limits.scope === undefined ? "" : ` ${limits.scope}`;
  if (shape.depth > limits.maxDepth) return `nesting deeper than ${limits.maxDepth} ${depthUnit}${scope}`;
  if (shape.values > limits.maxValues) return `more than ${limits.maxValues} values${scope}`;
  const maxElements = limits.maxValues * ELEMENTS_PER_VALUE + CALL_ELEMENTS;
  if (shape.elements !== undefined && shape.elements > maxElements) return `more than ${maxElements} elements (${ELEMENTS_PER_VALUE} for each value)${scope}`;
  return undefined;
}
