// The parts of Xen Orchestra's `xen-api` client and `@xen-orchestra/xva` writer (devDependencies without types)
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
    /** PUT of a body to a host path (e.g. "/import/"), in a task it creates; answers the task's result. */
    putResource(body: import("node:stream").Readable | Buffer | string, pathname: string, options?: { query?: Record<string, string>; task?: string | boolean }): Promise<unknown>;
    /** GET of a host path (e.g. "/export/"); answers the response (undici), its body a stream. */
    getResource(pathname: string, options?: { query?: Record<string, string>; task?: string | boolean }): Promise<{ statusCode: number; body: AsyncIterable<Uint8Array> }>;
  }

  export function createClient(options: XapiOptions): Xapi;
}

// Xen Orchestra's XVA writer (a devDependency without types): builds an XVA of a VM and PUTs it to /import.
declare module "@xen-orchestra/xva/importVm.mjs" {
  export interface XoVhd {
    rawContent(): Promise<import("node:stream").Readable>;
    footer: { currentSize: number };
  }
  export interface XoVm {
    name_label: string;
    memory: number;
    nCpus: number;
    firmware: string;
    vdis: Array<{ name_label: string; name_description: string; virtual_size: number }>;
    vhds: XoVhd[];
    networks?: Array<Record<string, unknown>>;
    [field: string]: unknown;
  }
  /** Answers the imported VM's ref. */
  export function importVm(vm: XoVm, xapi: import("xen-api").Xapi, sr: Record<string, unknown> & { $ref: string }, network?: Record<string, unknown> & { $ref: string }): Promise<string>;
}
