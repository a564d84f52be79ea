// The daemon of one volume (`node daemon.ts <volume URI>`, started by plugin calls through ensureDaemon):
// holds the volume's data open, serves it over NBD on a unix socket while the volume is attached, takes
// fds for Datapath.import_activate, and runs the volume's Data.copy and Data.mirror operations. It stops
// when asked, or by itself once it is neither attached nor running a copy.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { hostUuid } from "../../../config.ts";
import { type FdReceiver, startFdReceiver } from "../../../nbd/fd-receiver.ts";
import type { NbdClient } from "../../../nbd/client.ts";
import { NbdServer } from "../../../nbd/server.ts";
import * as filesr from "../../filesr/index.ts";
import { serveControl, type ControlHandlers } from "../../runtime/control-server.ts";
import { parseVolumeUri } from "../../uris.ts";
import { type Command, type CommandBody, type CommandResult, commands, FILESR_ERROR, STOPPING } from "./control-protocol.ts";
import { byteRanges, copyRanges, totalBytes } from "./copy.ts";
import { Mirror } from "./mirror.ts";
import { type OperationRecord, redactRemote, writeOperation } from "./operations.ts";
import { daemonName, exportSocket, importSocket } from "./paths.ts";
import { connectRemote } from "./remote.ts";
import { flushTarget } from "./transfer.ts";
import { type Mode, VolumeExport } from "./volume-export.ts";
import { thisWorker } from "./worker.ts";

/** Progress is written to the operation record at most this often. */
const CHECKPOINT_MS = 500;
/** A daemon nobody attached and that runs nothing leaves after this long (e.g. its caller died). */
const IDLE_EXIT_MS = 10_000;
/** How often a mirror looks whether its remote is still there (it writes to it only when the VM writes). */
const REMOTE_WATCH_MS = 500;

/** Why a copy or mirror failed: when its connection to the remote ended under it, that, naming the remote. */
function remoteFailure(error: unknown, target: NbdClient, remote: string): unknown {
  const ended = target.failure;
  if (ended === null) return error;
  return new Error(`the connection to the remote ${redactRemote(remote)} ended: ${ended.message}`, { cause: error });
}

interface Running {
  kind: OperationRecord["kind"];
  /** Asks the operation to end as failed; it may take a moment. */
  cancel(reason: string): void;
  /** Ends the operation because the daemon stops; resolves once its final state is written. */
  stop(): Promise<void>;
}

async function runVolumeDaemon(uri: string): Promise<void> {
  const { srPath, key } = parseVolumeUri(uri, "nbd");
  const name = daemonName(uri);
  const host = hostUuid();
  const log = (message: string): void => void process.stderr.write(`${new Date().toISOString()} ${name}: ${message}\n`);
  const { read_write: volumeWritable } = await filesr.statVolume(srPath, key);
  const openData = (how: "read" | "write" | "overlay") =>
    filesr.openVolumeData(srPath, key, { host, readOnly: how === "read", overlay: how === "overlay" });

  const volume = new VolumeExport(await openData("read"));
  /** persistent=false: the handle is an overlay whose writes vanish with it, so it lives until the daemon stops. */
  let overlay = false;
  let attached = false;
  let leaving = false;
  let server: NbdServer | null = null;
  let receiver: Promise<FdReceiver> | null = null;
  const running = new Map<string, Running>();

  const leaveIfIdle = () => {
    if (attached || overlay || running.size > 0 || leaving) return;
    leaving = true;
    log("neither attached nor running a copy: stopping");
    // The control server's SIGTERM handler runs the same orderly stop as the `stop` command.
    process.kill(process.pid, "SIGTERM");
  };
  setTimeout(leaveIfIdle, IDLE_EXIT_MS).unref();

  const applyMode = async (mode: Mode) => {
    if (mode === volume.mode) return;
    if (overlay) {
      volume.mode = mode;
      return;
    }
    // Writes are refused from now on when leaving rw; the new handle also sees what other hosts wrote.
    if (mode !== "rw") volume.mode = mode;
    const write = mode === "rw" && volumeWritable;
    await volume.replaceHandle(
      () => openData(write ? "write" : "read"),
      () => openData("read"),
    );
    volume.mode = mode;
  };

  const stopReceiver = async () => {
    const stopping = receiver;
    receiver = null;
    if (stopping !== null) await (await stopping).stop();
  };

  /** The operation's final state, written once: a later verdict (e.g. of a cancelled copy's chunks) is ignored. */
  const finish = (record: OperationRecord, state: "succeeded" | "failed", error?: unknown) => {
    if (record.state !== "running") return;
    record.state = state;
    if (error !== undefined) record.error = error instanceof Error ? error.message : String(error);
    writeOperation(record, { durable: true });
    log(`${record.kind} ${record.id} ${state}${record.error === undefined ? "" : `: ${record.error}`}`);
  };

  const newRecord = (id: string, kind: OperationRecord["kind"], remote: string): OperationRecord => {
    const now = new Date().toISOString();
    return { id, kind, uri, remote: redactRemote(remote), daemon: name, worker: thisWorker(), state: "running", started: now, updated: now };
  };

  const startCopy = async ({ id, remote, blocklist }: CommandBody<"copy">) => {
    const ranges = byteRanges(blocklist, volume.size);
    const target = await connectRemote(remote, ranges.at(-1)?.[1] ?? 0);
    const record = { ...newRecord(id, "copy", remote), done: 0, total: totalBytes(ranges) };
    writeOperation(record, { durable: true });
    const abort = new AbortController();
    let checkpoint = Date.now();
    const settled = (async () => {
      try {
        await copyRanges(volume, target, ranges, {
          signal: abort.signal,
          onProgress: (done) => {
            record.done = done;
            if (Date.now() - checkpoint < CHECKPOINT_MS || record.state !== "running") return;
            checkpoint = Date.now();
            writeOperation(record);
          },
        });
        await flushTarget(target);
        finish(record, "succeeded");
      } catch (error) {
        finish(record, "failed", remoteFailure(error, target, remote));
      } finally {
        await target.close().catch(() => undefined);
        running.delete(id);
      }
    })().catch((error: unknown) => log(`copy ${id}: ${(error as Error).message}`));
    // The verdict is given at once; the chunks in flight finish meanwhile, holding their range locks so
    // that none of their (older) data can land on the remote after a mirrored write.
    const cancel = (reason: string) => {
      abort.abort(new Error(reason));
      finish(record, "failed", abort.signal.reason);
    };
    running.set(id, {
      kind: "copy",
      cancel,
      stop: async () => {
        cancel("the volume daemon stopped before the copy finished");
        await settled;
      },
    });
    void settled.then(leaveIfIdle);
  };

  const startMirror = async ({ id, remote }: CommandBody<"mirror">) => {
    if (!attached) throw new Error("only writes through an attached datapath can be mirrored: call Datapath.attach first");
    const target = await connectRemote(remote, volume.size);
    const record = newRecord(id, "mirror", remote);
    writeOperation(record, { durable: true });
    let closed: Promise<void> | undefined;
    // A remote that goes away ends the mirror when it goes, not at the VM's next write: until then an idle VM's
    // mirror would say it runs while it mirrors to nothing.
    const watch = setInterval(() => {
      if (target.failure !== null) void end("failed", remoteFailure(target.failure, target, remote));
    }, REMOTE_WATCH_MS);
    watch.unref();
    const end = (state: "succeeded" | "failed", error?: unknown): Promise<void> => {
      if (closed !== undefined) return closed;
      clearInterval(watch);
      volume.removeSink(mirror);
      if (state === "failed") mirror.drop();
      finish(record, state, error);
      closed = target
        .close()
        .catch(() => undefined)
        .finally(() => running.delete(id));
      return closed;
    };
    const mirror = new Mirror(target, (error) => void end("failed", remoteFailure(error, target, remote)));
    volume.addSink(mirror);
    // A mirror ends well when the datapath stops serving: every write the volume took reached the remote.
    running.set(id, { kind: "mirror", cancel: (reason) => void end("failed", new Error(reason)), stop: () => end("succeeded") });
  };

  /** Copies stop as failed, mirrors as succeeded (see `stop` of each). */
  const stopOperations = (kind?: Running["kind"]) =>
    Promise.all([...running.values()].filter((op) => kind === undefined || op.kind === kind).map((op) => op.stop()));

  const release = async (): Promise<CommandResult<"release">> => {
    attached = false;
    await stopReceiver();
    const closing = server;
    server = null;
    await closing?.close();
    // Mirrors end with the datapath; copies carry on.
    await stopOperations("mirror");
    await applyMode("none");
    return { stop: !overlay && running.size === 0 };
  };

  const handlers: { [C in Command]: (body: CommandBody<C>) => Promise<CommandResult<C>> } = {
    async attach({ persistent, mode }) {
      if (persistent && overlay) throw new Error("the volume is open non-persistent here: Datapath.close it first");
      if (!persistent && !overlay) {
        await volume.replaceHandle(
          () => openData("overlay"),
          () => openData("read"),
        );
        overlay = true;
      }
      await applyMode(mode);
      if (server === null) {
        mkdirSync(dirname(exportSocket(uri)), { recursive: true });
        const fresh = new NbdServer();
        fresh.addExport(key, volume);
        await fresh.listen({ socketPath: exportSocket(uri) });
        server = fresh;
      }
      attached = true;
      return { socket: exportSocket(uri) };
    },
    async mode({ mode }) {
      await applyMode(mode);
      if (mode === "none") await stopReceiver();
      return null;
    },
    async import() {
      const exportServer = server;
      if (!attached || exportServer === null) throw new Error("the volume is not attached: call Datapath.attach first");
      if (volume.mode === "none") throw new Error("the volume is not activated: call Datapath.activate first");
      receiver ??= startFdReceiver(importSocket(uri), exportServer);
      return { socket: (await receiver).listenPath };
    },
    release,
    async copy(body) {
      await startCopy(body);
      return null;
    },
    async mirror(body) {
      await startMirror(body);
      return null;
    },
    async running({ id }) {
      return { running: running.has(id) };
    },
    async cancel({ id }) {
      running.get(id)?.cancel("cancelled by Data.cancel");
      return null;
    },
  };

  const control: ControlHandlers = {};
  for (const command of Object.keys(handlers) as Command[]) {
    control[command] = async (raw: unknown) => {
      if (leaving) throw new Error(STOPPING);
      const body = commands[command].body.parse(raw);
      try {
        return await (handlers[command] as (body: unknown) => Promise<unknown>)(body);
      } catch (error) {
        log(`${command} failed: ${(error as Error).message}`);
        if (error instanceof filesr.FileSrError) {
          const { kind, code, message, params } = error;
          throw new Error(`${FILESR_ERROR}${JSON.stringify({ kind, code, message, params })}`);
        }
        throw error;
      }
    };
  }

  await serveControl(name, control, async () => {
    leaving = true;
    await stopOperations();
    await stopReceiver();
    await server?.close();
    await volume.close();
    log("stopped");
  });
  log(`serving ${uri} (pid ${process.pid})`);
}

/** The daemon's command line (`daemon.ts <volume URI>`), run from the sources or from the plugin's bundle. */
export async function daemonMain(args: readonly string[]): Promise<void> {
  const uri = args[0];
  if (uri === undefined) throw new Error("usage: daemon.ts <volume URI>");
  await runVolumeDaemon(uri);
}

if (import.meta.main) await daemonMain(process.argv.slice(2));
