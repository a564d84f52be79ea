// The toolstack's commands: list SRs, VDIs, VMs and tasks, wait for a task, snapshot / clone / copy /
// destroy a VDI. Each logs in to the XenAPI (JSON-RPC at --url) as any client does, and logs out after.
import { z } from "zod";
import { formatSize, ProgressMeter, progressBar, progressLine } from "./progress.ts";
import { DEFAULT_URL, resolveRef, withClient } from "./connection.ts";
import { parseCommandLine, UsageError } from "./usage.ts";
import { isFinished, type TaskRecord, taskResult, XenApiClient, zInt64, zTaskRecord } from "../xenapi/client.ts";


interface Command {
  summary: string;
  help: string;
  run(argv: string[]): Promise<number>;
}

const CONNECTION_OPTIONS = {
  url: { type: "string" },
  user: { type: "string" },
  json: { type: "boolean" },
} as const;

const CONNECTION_HELP = `Connection and output:
  --url URL    the toolstack (default: $HANGAR_URL or ${DEFAULT_URL})
  --user NAME  user to log in as (default root); the password is $HANGAR_PASSWORD, else asked on a terminal
  --json       print JSON instead of text
`;



function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Columns padded to their widest cell, two spaces apart. */
function printTable(headers: readonly string[], rows: readonly string[][]): void {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: readonly string[]) => cells.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd();
  process.stdout.write(`${[line(headers), ...rows.map(line)].join("\n")}\n`);
}


const zRef = z.string();
const zRefs = z.array(z.string());
// Records are checked for the fields shown (loose: --json prints them whole).


const zSr = z.looseObject({
  uuid: z.string(),
  name_label: z.string(),
  type: z.string(),
  physical_size: zInt64,
  physical_utilisation: zInt64,
  VDIs: zRefs,
  health: z.array(z.string()).optional(),
});

const zVdi = z.looseObject({
  uuid: z.string(),
  name_label: z.string(),
  SR: z.string(),
  virtual_size: zInt64,
  physical_utilisation: zInt64,
  type: z.string(),
  read_only: z.boolean(),
  is_a_snapshot: z.boolean(),
});

const zVm = z.looseObject({
  uuid: z.string(),
  name_label: z.string(),
  power_state: z.string(),
  VCPUs_max: zInt64,
  memory_static_max: zInt64,
  VBDs: zRefs,
});

/** Records as --json prints them: a list, each with its ref. */
const withRefs = <T extends object>(records: Record<string, T>) => Object.entries(records).map(([ref, record]) => ({ ref, ...record }));

interface ListCommand {
  summary: string;
  usage: string;
  describe: string;
  /** Options beyond the connection's (all take a value). */
  options?: Record<string, { type: "string" }>;
  list(client: XenApiClient, values: Record<string, string | boolean | undefined>): Promise<void>;
}

function listCommand({ summary, usage, describe, options = {}, list }: ListCommand): Command {
  return {
    summary,
    help: `Usage: hangar ${usage}\n\n${describe}\n\n${CONNECTION_HELP}`,
    async run(argv) {
      const { values, positionals } = parseCommandLine(argv, { ...CONNECTION_OPTIONS, ...options });
      if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
      await withClient(values, (client) => list(client, values));
      return 0;
    },
  };
}

const srList = listCommand({
  summary: "list the SRs (storage repositories)",
  usage: "sr-list [--json]",
  describe: "Lists every SR: uuid, name, type, size, space used, number of VDIs and health.",
  async list(client, values) {
    const srs = await client.records("SR", zSr);
    if (values.json) return printJson(withRefs(srs));
    printTable(
      ["UUID", "NAME", "TYPE", "SIZE", "USED", "VDIS", "HEALTH"],
      Object.values(srs).map((sr) => [sr.uuid, sr.name_label, sr.type, formatSize(sr.physical_size, true), formatSize(sr.physical_utilisation, true), String(sr.VDIs.length), sr.health?.[0] ?? ""]),
    );
  },
});

const vdiList = listCommand({
  summary: "list the VDIs (virtual disks), of every SR or of one",
  usage: "vdi-list [--sr UUID|NAME] [--json]",
  describe: "Lists VDIs: uuid, name, SR, virtual size, space used, type, and whether it is a snapshot or read-only.\n\nOptions:\n  --sr SR   only the VDIs of this SR (uuid or name)",
  options: { sr: { type: "string" } },
  async list(client, values) {
    const only = typeof values.sr === "string" ? await resolveRef(client, "SR", values.sr, true) : undefined;
    const [vdis, srs] = await Promise.all([client.records("VDI", zVdi), client.records("SR", zSr)]);
    const shown = Object.fromEntries(Object.entries(vdis).filter(([, vdi]) => only === undefined || vdi.SR === only));
    if (values.json) return printJson(withRefs(shown));
    const flags = (vdi: z.infer<typeof zVdi>) => [vdi.is_a_snapshot ? "snapshot" : "", vdi.read_only ? "read-only" : ""].filter(Boolean).join(",");
    printTable(
      ["UUID", "NAME", "SR", "SIZE", "USED", "TYPE", "FLAGS"],
      Object.values(shown).map((vdi) => [vdi.uuid, vdi.name_label, srs[vdi.SR]?.name_label ?? vdi.SR, formatSize(vdi.virtual_size, true), formatSize(vdi.physical_utilisation, true), vdi.type, flags(vdi)]),
    );
  },
});

const vmList = listCommand({
  summary: "list the VMs",
  usage: "vm-list [--json]",
  describe: "Lists every VM: uuid, name, power state, VCPUs, memory and number of disks (VBDs).",
  async list(client, values) {
    const vms = await client.records("VM", zVm);
    if (values.json) return printJson(withRefs(vms));
    printTable(
      ["UUID", "NAME", "POWER", "VCPUS", "MEMORY", "VBDS"],
      Object.values(vms).map((vm) => [vm.uuid, vm.name_label, vm.power_state, String(vm.VCPUs_max), formatSize(vm.memory_static_max, true), String(vm.VBDs.length)]),
    );
  },
});

const taskList = listCommand({
  summary: "list the tasks (running, and finished within 24 hours)",
  usage: "task-list [--json]",
  describe: "Lists tasks oldest first: uuid, name, status, progress, created, and the error of a failed one.",
  async list(client, values) {
    const tasks = Object.entries(await client.records("task", zTaskRecord)).sort(([, a], [, b]) => a.created.localeCompare(b.created));
    if (values.json) return printJson(tasks.map(([ref, task]) => ({ ref, ...task })));
    printTable(
      ["UUID", "NAME", "STATUS", "PROGRESS", "CREATED", "ERROR"],
      tasks.map(([, task]) => [task.uuid, task.name_label, task.status, `${Math.floor(task.progress * 100)}%`, task.created, task.error_info.join(" ")]),
    );
  },
});

/**
 * Follows a task to its end: a bar redrawn on a terminal, a line per percent otherwise (stderr); then the
 * outcome. Answers the exit code: 0 for success, 1 for failure or cancel (error_info on stderr).
 */
async function followTask(client: XenApiClient, ref: string, json: boolean, printResult: (task: TaskRecord) => Promise<void>): Promise<number> {
  const meter = new ProgressMeter();
  const terminal = process.stderr.isTTY && !json;
  let shown = -1;
  const task = await client.waitTask(ref, (update) => {
    if (json || isFinished(update)) return;
    const estimate = meter.sample(update.progress);
    const percent = Math.floor(update.progress * 100);
    if (terminal) process.stderr.write(`\r${progressBar(estimate)}\u001b[K`);
    else if (percent !== shown) process.stderr.write(`${progressLine(estimate)}\n`);
    shown = percent;
  });
  if (terminal && shown >= 0) process.stderr.write("\r\u001b[K"); // the bar goes; the outcome stays
  if (task.status === "success") {
    await printResult(task);
    return 0;
  }
  if (json) printJson({ ref, ...task });
  process.stderr.write(`task ${task.status}: ${task.error_info.join(" ")}\n`);
  return 1;
}

const taskWait: Command = {
  summary: "wait for a task to finish, showing its progress",
  help: `Usage: hangar task-wait TASK [--json]

Follows TASK (uuid or OpaqueRef) until it finishes: on a terminal a progress bar with the rate and the
time left, otherwise a line per percent done (stderr). Exits 0 when the task succeeded (printing its
result, if any), 1 when it failed or was cancelled (printing its error_info). --json prints the task's
final record.

${CONNECTION_HELP}`,
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, CONNECTION_OPTIONS);
    if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "needs TASK" : `unexpected argument "${positionals[1]}"`);
    return withClient(values, async (client) => {
      const ref = await resolveRef(client, "task", positionals[0]!);
      return followTask(client, ref, values.json ?? false, async (task) => {
        const result = taskResult(task);
        if (values.json) printJson({ ref, ...task, result: result ?? null });
        else process.stdout.write(result === undefined ? "" : `${typeof result === "string" ? result : JSON.stringify(result)}\n`);
      });
    });
  },
};

type VdiOperation = "snapshot" | "clone" | "copy" | "destroy";

function vdiCommand(operation: VdiOperation, summary: string, describe: string): Command {
  const copy = operation === "copy";
  const makes = operation !== "destroy";
  return {
    summary,
    help: `Usage: hangar vdi-${operation} VDI${copy ? " --sr SR" : ""} [--no-wait] [--json]

${describe} VDI is a uuid. The call runs as a task (Async.VDI.${operation}), followed as
"hangar task-wait" does; ${makes ? "on success the new VDI's uuid is printed" : "nothing is printed on success"}.

Options:
${copy ? "  --sr SR     the SR to copy to (uuid or name)\n" : ""}  --no-wait   print the task's ref and exit at once

${CONNECTION_HELP}`,
    async run(argv) {
      const { values, positionals } = parseCommandLine(argv, { ...CONNECTION_OPTIONS, "no-wait": { type: "boolean" }, sr: { type: "string" } });
      if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "needs VDI" : `unexpected argument "${positionals[1]}"`);
      const target = values.sr;
      if (copy && target === undefined) throw new UsageError("needs --sr SR");
      if (!copy && target !== undefined) throw new UsageError("--sr is an option of vdi-copy only");
      return withClient(values, async (client) => {
        const vdi = await resolveRef(client, "VDI", positionals[0]!);
        const args = copy ? [await resolveRef(client, "SR", target!, true)] : operation === "destroy" ? [] : [{}];
        const ref = await client.call(zRef, `Async.VDI.${operation}`, vdi, ...args);
        if (values["no-wait"]) {
          if (values.json) printJson({ task: ref });
          else process.stdout.write(`${ref}\n`);
          return 0;
        }
        return followTask(client, ref, values.json ?? false, async (task) => {
          const made = makes ? z.string().parse(taskResult(task)) : undefined;
          const uuid = made === undefined ? undefined : await client.call(z.string(), "VDI.get_uuid", made);
          if (values.json) printJson({ task: { ref, ...task }, ...(made === undefined ? {} : { vdi: { ref: made, uuid } }) });
          else if (uuid !== undefined) process.stdout.write(`${uuid}\n`);
        });
      });
    },
  };
}

export const toolstackCommands: Record<string, Command> = {
  "sr-list": srList,
  "vdi-list": vdiList,
  "vm-list": vmList,
  "task-list": taskList,
  "task-wait": taskWait,
  "vdi-snapshot": vdiCommand("snapshot", "snapshot a VDI (a read-only point-in-time copy)", "Makes a snapshot of VDI."),
  "vdi-clone": vdiCommand("clone", "clone a VDI (a writable copy sharing its data)", "Makes a writable clone of VDI."),
  "vdi-copy": vdiCommand("copy", "copy a VDI to an SR (a full, independent copy)", "Copies VDI, all its data, to a new VDI on SR."),
  "vdi-destroy": vdiCommand("destroy", "destroy a VDI and its data", "Destroys VDI."),
};
