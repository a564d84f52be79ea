// The part of Xen Orchestra's `xen-api` client (a devDependency without types) that the toolstack's client
// tests use.
declare module "xen-api" {
  export interface XapiOptions {
    url: string;
    auth: { user: string; password: string };
    /** "auto" tries JSON-RPC, then XML-RPC. */
    transport?: "auto" | "json-rpc" | "xml-rpc";
    allowUnauthorized?: boolean;
    /** false: no event.from loop (and no watchTask). */
    watchEvents?: boolean | string[];
  }

  /** A record as the client caches it: the XenAPI fields, its ref and class. */
  export interface XapiObject {
    readonly $ref: string;
    readonly $type: string;
    readonly [field: string]: unknown;
  }

  /** A XenAPI failure: the code and its params. */
  export interface XapiError extends Error {
    code: string;
    params: string[];
  }

  export class Xapi {
    readonly pool: XapiObject;
    readonly objectsFetched: Promise<void>;
    readonly sessionId: string;
    connect(): Promise<void>;
    disconnect(): Promise<void>;
    call<T = unknown>(method: string, ...args: unknown[]): Promise<T>;
    /** Runs Async.<method>, follows the task through events, answers its decoded result. */
    callAsync<T = unknown>(method: string, ...args: unknown[]): Promise<T>;
    getAllRecords(type: string): Promise<XapiObject[]>;
    getRecord(type: string, ref: string): Promise<XapiObject>;
    watchTask<T = unknown>(ref: string): Promise<T>;
    getObjectByRef(ref: string, defaultValue?: unknown): XapiObject | undefined;
  }

  export function createClient(options: XapiOptions): Xapi;
}
