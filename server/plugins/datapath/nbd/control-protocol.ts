// The commands plugin calls send to a volume daemon (runtime/daemon.ts `control`), checked on both sides.
import * as z from "zod/mini";

const ZMode = z.enum(["none", "ro", "rw"]);

export const commands = {
  /** Serve the volume over NBD; `persistent: false` puts writes into a throw-away overlay. */
  attach: { body: z.object({ persistent: z.boolean(), mode: ZMode }), result: z.object({ socket: z.string() }) },
  /** How the volume is activated on this host now. */
  mode: { body: z.object({ mode: ZMode }), result: z.null() },
  /** Datapath.import_activate: start taking fds; answers where to send them. */
  import: { body: z.object({}), result: z.object({ socket: z.string() }) },
  /** The last domain detached: stop serving. `stop`: nothing runs any more, the daemon may be stopped. */
  release: { body: z.object({}), result: z.object({ stop: z.boolean() }) },
  copy: {
    body: z.object({
      id: z.string(),
      remote: z.string(),
      blocklist: z.object({ blocksize: z.number(), ranges: z.array(z.tuple([z.number(), z.number()])) }),
    }),
    result: z.null(),
  },
  mirror: { body: z.object({ id: z.string(), remote: z.string() }), result: z.null() },
  /** Whether this daemon is running the operation right now. */
  running: { body: z.object({ id: z.string() }), result: z.object({ running: z.boolean() }) },
  cancel: { body: z.object({ id: z.string() }), result: z.null() },
} as const;

export type Command = keyof typeof commands;
export type CommandBody<C extends Command> = z.infer<(typeof commands)[C]["body"]>;
export type CommandResult<C extends Command> = z.infer<(typeof commands)[C]["result"]>;

/** The daemon's answer to any command once it has begun to stop: the caller starts a new daemon. */
export const STOPPING = "volume daemon is stopping";

/** Prefix of an error message that carries a FileSrError as JSON ({kind, code, message, params}). */
export const FILESR_ERROR = "filesr-error:";
