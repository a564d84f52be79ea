// Failed logins, counted per user name and per client address: past a few in a row, that key waits before its
// next try, twice as long after each further failure (up to a cap), and a success clears it. In memory, per
// process: the toolstack limits its callers (the console among them), the console its browsers.

export interface LoginLimits {
  /** Failures in a row after which a user name waits. */
  perUser: number;
  /** Failures in a row after which a client address waits (a console fronts many users: higher). */
  perClient: number;
  /** The first wait, doubled after each further failure. */
  firstWaitMs: number;
  maxWaitMs: number;
}

export const TOOLSTACK_LOGIN_LIMITS: LoginLimits = { perUser: 5, perClient: 20, firstWaitMs: 30_000, maxWaitMs: 15 * 60_000 };
export const CONSOLE_LOGIN_LIMITS: LoginLimits = { perUser: 5, perClient: 10, firstWaitMs: 30_000, maxWaitMs: 15 * 60_000 };

/** Keys remembered at most (the oldest forgotten first): a flood of names cannot grow the process. */
const MAX_KEYS = 10_000;
/** A key with no failure for this long is forgotten. */
const FORGET_MS = 60 * 60_000;

interface Failures {
  count: number;
  last: number;
  until: number;
}

export class LoginLimiter {
  readonly #limits: LoginLimits;
  readonly #keys = new Map<string, Failures>();
  readonly #now: () => number;

  constructor(limits: LoginLimits, now: () => number = Date.now) {
    this.#limits = limits;
    this.#now = now;
  }

  /** How many seconds `user` from `client` must wait before trying again (0: now). */
  waitSeconds(user: string, client: string): number {
    const now = this.#now();
    const until = Math.max(this.#get(`user:${user}`, now)?.until ?? 0, this.#get(`client:${client}`, now)?.until ?? 0);
    return until > now ? Math.ceil((until - now) / 1000) : 0;
  }

  failed(user: string, client: string): void {
    this.#fail(`user:${user}`, this.#limits.perUser);
    this.#fail(`client:${client}`, this.#limits.perClient);
  }

  succeeded(user: string, client: string): void {
    this.#keys.delete(`user:${user}`);
    this.#keys.delete(`client:${client}`);
  }

  #get(key: string, now: number): Failures | undefined {
    const entry = this.#keys.get(key);
    if (entry !== undefined && now - entry.last > FORGET_MS) {
      this.#keys.delete(key);
      return undefined;
    }
    return entry;
  }

  #fail(key: string, allowed: number): void {
    const now = this.#now();
    const entry = this.#get(key, now) ?? { count: 0, last: now, until: 0 };
    entry.count++;
    entry.last = now;
    const over = entry.count - allowed;
    if (over >= 0) entry.until = now + Math.min(this.#limits.maxWaitMs, this.#limits.firstWaitMs * 2 ** Math.min(over, 30));
    // Re-inserted last: the map's order is the order of last failure, so the first key is the one to forget.
    this.#keys.delete(key);
    this.#keys.set(key, entry);
    if (this.#keys.size > MAX_KEYS) this.#keys.delete(this.#keys.keys().next().value!);
  }
}

/** The words for a caller who must wait. */
export function tooManyFailures(seconds: number): string {
  return `Too many failed logins: try again in ${seconds} s.`;
}
