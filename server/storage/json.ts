// JSON as ocaml-rpc speaks it: integers must survive exactly, so the parser keeps the source text of every
// number token. JSON.parse alone would silently round 2^53+1 and could not tell `1` from `1.0`.

// JSON.rawJSON (Node 21+) is not in TypeScript's lib yet.
const rawJSON = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;

/** A number token written with a fraction or exponent whose value is integral (`1.0`, `1e3`). */
export class IntegralFloat {
  readonly value: number;
  readonly source: string;
  constructor(value: number, source: string) {
    this.value = value;
    this.source = source;
  }

  /** Written back exactly as received, e.g. when an error's params or a request id are echoed. */
  toJSON(): unknown {
    return rawJSON(this.source);
  }
}

/** An integer token too large for a double to hold exactly. */
export class InexactInteger {
  readonly source: string;
  constructor(source: string) {
    this.source = source;
  }

  toJSON(): unknown {
    return rawJSON(this.source);
  }
}

const INTEGER_LITERAL = /^-?\d+$/;

function reviveNumber(value: number, source: string): unknown {
  if (INTEGER_LITERAL.test(source)) return Number.isSafeInteger(value) ? value : new InexactInteger(source);
  return Number.isInteger(value) ? new IntegralFloat(value, source) : value;
}

/**
 * A number token that JSON.parse alone might not give back exactly: one with a fraction or an exponent, or
 * of 16 digits or more. Tokens follow `:`, `[` or `,` (or open the text); a string that merely looks like
 * this only costs the slow path.
 */
const INEXACT_NUMBER = /(?:^|[:[,])\s*-?\d(?:\d{15,}|\d*[.eE])/;

/** Parses JSON text; integer and float tokens are distinguishable by the schemas in wire.ts. */
export function parseWireJson(text: string): unknown {
  // The reviver costs a call per value (SR.ls of 10,000 volumes: 50 ms of 60); it is only needed when a
  // number could come back other than written.
  if (!INEXACT_NUMBER.test(text)) return JSON.parse(text);
  return JSON.parse(text, (_key, value: unknown, context?: { source?: string }) =>
    typeof value === "number" && context?.source !== undefined ? reviveNumber(value, context.source) : value,
  );
}

/** Compact one-line JSON; `undefined` members vanish, which is how options are encoded (never null). */
export function stringifyWireJson(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value);
}
