// Legacy packages, appliance version 0.1 (vm-import-export.md "Legacy package layout", compat-notes §2): a
// directory holding ova.xml (`<appliance>`) and, per disk, a directory of gzipped chunks of 1e9 bytes. openXva
// reads them as it reads an XVA: the appliance is turned into the objects an XVA's ova.xml holds, so the
// importer knows one model. packLegacyDirectory sends such a directory as the tar stream PUT /import takes.
import { createReadStream } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { XMLParser } from "fast-xml-parser";
import { pack as tarPack } from "tar-stream";
import { z } from "zod";
import type { XenRecord } from "../xenapi/values.ts";
import { entityDecoder } from "../xenapi/xml-rpc.ts";
import { OvaXmlError, type OvaObject, type OvaXml } from "./ova-xml.ts";

/** Gunzipped, every chunk of a disk is exactly a decimal gigabyte, except the disk's last. */
export const LEGACY_CHUNK_BYTES = 1_000_000_000;

/** A disk of the package: its synthesized VDI id, the `<vdi>` name, size in bytes, and its chunks' directory. */
export type LegacyDisk = { ref: string; name: string; size: number; dir: string };
export type LegacyPackage = { metadata: OvaXml; disks: LegacyDisk[] };

export class LegacyPackageError extends Error {}

/** The root element is `<appliance`, after an optional BOM, prolog, comments and doctype. */
const APPLIANCE_ROOT = /^\uFEFF?\s*(?:<\?xml[\s\S]*?\?>\s*)?(?:(?:<!--[\s\S]*?-->|<!DOCTYPE[^>[]*>)\s*)*<appliance[\s/>]/;

/** Whether an ova.xml is a legacy package's (`<appliance>`) rather than an XVA's XML-RPC `<value>`. */
export function isLegacyOvaXml(xml: string): boolean {
  return APPLIANCE_ROOT.test(xml);
}

/** Elements that may repeat come as arrays whatever their count, so "missing" and "twice" are both visible. */
const ELEMENTS = new Set(["appliance", "vm", "vdi", "vbd", "label", "shortdesc", "config", "hacks"]);

const parser = new XMLParser({
  ignoreAttributes: false,
  attributesGroupName: "$",
  attributeNamePrefix: "",
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  entityDecoder,
  ignoreDeclaration: true,
  ignorePiTags: true,
  isArray: (name, _path, _leaf, isAttribute) => !isAttribute && ELEMENTS.has(name),
});

/** An element with neither attributes nor content parses as "". */
const element = <T extends z.ZodType>(schema: T) => z.preprocess((value) => (value === "" ? {} : value), schema);
const attributes = <T extends z.ZodType>(schema: T) => z.preprocess((value) => value ?? {}, schema);
/** Text content; an element that also has attributes carries it as #text. */
const text = z.union([z.string(), z.object({ "#text": z.string().optional() }).transform((node) => node["#text"] ?? "")]).transform((value) => value.trim());
const one = <T extends z.ZodType>(schema: T, what: string) =>
  z
    .array(schema, { error: `${what} is missing` })
    .length(1, `${what} appears more than once`)
    .transform((list) => list[0] as z.output<T>);
const whole = (what: string) =>
  z
    .string({ error: `${what} is missing` })
    .trim()
    .regex(/^\d+$/, `${what} is not a whole number of bytes or units`)
    .transform(Number)
    .refine(Number.isSafeInteger, `${what} is too large`);
const attribute = (what: string) => z.string({ error: `${what} is missing` });

const vbdSchema = element(
  z.object({
    $: attributes(z.object({ device: attribute("<vbd> device").min(1, "<vbd> device is empty"), function: z.string().default(""), mode: attribute("<vbd> mode"), vdi: attribute("<vbd> vdi") })),
  }),
);

const vmSchema = element(
  z.object({
    label: one(text, "<label> of the <vm>"),
    shortdesc: one(text, "<shortdesc> of the <vm>"),
    config: one(element(z.object({ $: attributes(z.object({ mem_set: whole("<config> mem_set"), vcpus: whole("<config> vcpus").refine((n) => n > 0, "<config> vcpus is 0") })) })), "<config> of the <vm>"),
    hacks: z
      .array(element(z.object({ $: attributes(z.object({ is_hvm: z.string().optional(), kernel_boot_cmdline: z.string().default("") })) })))
      .max(1, "<hacks> appears more than once")
      .optional(),
    vbd: z.array(vbdSchema).default([]),
  }),
);

const vdiSchema = element(
  z.object({
    $: attributes(z.object({ name: attribute("<vdi> name"), size: whole("<vdi> size"), source: attribute("<vdi> source"), type: attribute("<vdi> type"), variety: z.string().optional() })),
  }),
);

const applianceSchema = z.object({
  vm: z.array(vmSchema, { error: "<appliance> holds no <vm>" }).length(1, "<appliance> holds more than one <vm>"),
  vdi: z.array(vdiSchema).default([]),
});

/** Real parsers know these varieties (and lowercase them); a package from the spec may leave it out: user. */
const VARIETY_TYPES: Record<string, string> = { system: "system", user: "user", ephemeral: "ephemeral", suspend: "suspend", crashdump: "crashdump", metadata: "metadata" };
/** `w` and `ro` are the spec's; real parsers write `rw`/`r` too. */
const MODES: Record<string, "RW" | "RO"> = { w: "RW", rw: "RW", r: "RO", ro: "RO" };

/** Normalised directory of a `file://` source relative to ova.xml; refused when absolute or escaping with `..`. */
export function legacySourceDir(source: string): string {
  if (!source.startsWith("file://")) throw new OvaXmlError(`source ${JSON.stringify(source)} is not a file:// URI`);
  const path = source.slice("file://".length);
  if (path.startsWith("/")) throw new OvaXmlError(`source ${JSON.stringify(source)} is absolute, not relative to ova.xml`);
  const parts = path.split("/").filter((part) => part !== "" && part !== ".");
  if (parts.includes("..")) throw new OvaXmlError(`source ${JSON.stringify(source)} escapes the package with ..`);
  if (parts.length === 0) throw new OvaXmlError(`source ${JSON.stringify(source)} names no directory`);
  return parts.join("/");
}

const CHUNK_FILE = /^chunk-?(\d+)\.gz$/;

/** A chunk member `<dir>/chunk-NNNNNNNNN.gz` or `<dir>/chunkNNNNNNNNN.gz` (both spellings are in the wild). */
export function legacyChunkMember(name: string): { dir: string; index: number } | null {
  const slash = name.lastIndexOf("/");
  const match = CHUNK_FILE.exec(name.slice(slash + 1));
  if (slash < 0 || match === null) return null;
  const dir = name
    .slice(0, slash)
    .split("/")
    .filter((part) => part !== "" && part !== ".")
    .join("/");
  return { dir, index: Number(match[1]) };
}

/** A legacy ova.xml, as the OvaXml an XVA of the same VM would carry plus where each disk's chunks are. */
export function parseLegacyOvaXml(xml: string): LegacyPackage {
  const fail = (message: string) => new OvaXmlError(`ova.xml (legacy package): ${message}`);
  let document: Record<string, unknown>;
  try {
    document = parser.parse(xml, true) as Record<string, unknown>;
  } catch (error) {
    throw fail(`not well-formed XML: ${(error as Error).message}`);
  }
  const roots = document.appliance;
  if (!Array.isArray(roots) || roots.length !== 1 || typeof roots[0] !== "object" || roots[0] === null) throw fail("the root element is not one <appliance>");
  const root = roots[0] as Record<string, unknown>;
  // The version first: a newer layout may not have the elements this one needs.
  const version = (root.$ as Record<string, unknown> | undefined)?.version;
  if (version !== "0.1") throw fail(version === undefined ? "<appliance> has no version" : `version ${JSON.stringify(version)} is not 0.1, the only layout known`);
  const parsed = applianceSchema.safeParse(root);
  if (!parsed.success) throw fail(z.prettifyError(parsed.error));
  const vm = parsed.data.vm[0]!;

  const srId = "Ref:0";
  const vmId = "Ref:1";
  const vdiIds = new Map<string, string>();
  const disks: LegacyDisk[] = [];
  const dirs = new Set<string>();
  for (const [i, { $: vdi }] of parsed.data.vdi.entries()) {
    const where = `vdi ${JSON.stringify(vdi.name)}`;
    if (vdiIds.has(vdi.name)) throw fail(`${where} appears twice`);
    if (vdi.type !== "dir-gzipped-chunks") throw fail(`${where}: type ${JSON.stringify(vdi.type)} is not dir-gzipped-chunks, the only disk format known`);
    if (vdi.variety !== undefined && VARIETY_TYPES[vdi.variety.toLowerCase()] === undefined) throw fail(`${where}: unknown variety ${JSON.stringify(vdi.variety)}`);
    let dir: string;
    try {
      dir = legacySourceDir(vdi.source);
    } catch (error) {
      throw fail(`${where}: ${(error as Error).message}`);
    }
    if (dirs.has(dir)) throw fail(`${where}: another vdi has the same source ${JSON.stringify(vdi.source)}`);
    dirs.add(dir);
    const ref = `Ref:${2 + i}`;
    vdiIds.set(vdi.name, ref);
    disks.push({ ref, name: vdi.name, size: vdi.size, dir });
  }

  const vbds: OvaObject[] = [];
  const devices = new Set<string>();
  for (const [i, { $: vbd }] of vm.vbd.entries()) {
    const where = `vbd ${JSON.stringify(vbd.device)}`;
    if (devices.has(vbd.device)) throw fail(`${where} appears twice`);
    devices.add(vbd.device);
    const vdi = vdiIds.get(vbd.vdi);
    if (vdi === undefined) throw fail(`${where} points to vdi ${JSON.stringify(vbd.vdi)}, which is not a <vdi> of the package`);
    const mode = MODES[vbd.mode.toLowerCase()];
    if (mode === undefined) throw fail(`${where}: mode ${JSON.stringify(vbd.mode)} is none of w, rw, r, ro`);
    const snapshot: XenRecord = { device: vbd.device, userdevice: String(i), bootable: vbd.function.toLowerCase() === "root", mode, type: "Disk", empty: false, VDI: vdi, VM: vmId };
    vbds.push({ class: "VBD", id: `Ref:${2 + disks.length + i}`, snapshot });
  }

  // No <hacks> or no is_hvm means HVM, as the real parser has it.
  const hacks = vm.hacks?.[0]?.$;
  const isHvm = hacks?.is_hvm ?? "true";
  if (!/^(?:true|false)$/i.test(isHvm)) throw fail(`<hacks> is_hvm ${JSON.stringify(isHvm)} is neither true nor false`);
  const hvm = isHvm.toLowerCase() === "true";
  const memory = vm.config.$.mem_set;
  const vcpus = vm.config.$.vcpus;
  const vmSnapshot: XenRecord = {
    name_label: vm.label,
    name_description: vm.shortdesc,
    power_state: "Halted",
    is_a_template: false,
    memory_static_max: memory,
    memory_static_min: memory,
    memory_dynamic_max: memory,
    memory_dynamic_min: memory,
    memory_target: memory,
    VCPUs_max: vcpus,
    VCPUs_at_startup: vcpus,
    HVM_boot_policy: hvm ? "BIOS order" : "",
    HVM_boot_params: hvm ? { order: "cd" } : {},
    PV_bootloader: hvm ? "" : "pygrub",
    PV_args: hvm ? "" : (hacks?.kernel_boot_cmdline ?? ""),
    VBDs: vbds.map((vbd) => vbd.id),
  };

  const vdiObjects: OvaObject[] = parsed.data.vdi.map(({ $: vdi }, i) => {
    const ref = disks[i]!.ref;
    const snapshot: XenRecord = {
      name_label: vdi.name,
      name_description: "",
      virtual_size: vdi.size,
      type: VARIETY_TYPES[(vdi.variety ?? "user").toLowerCase()]!,
      SR: srId,
      read_only: false,
      sharable: false,
      VBDs: vbds.filter((vbd) => vbd.snapshot.VDI === ref).map((vbd) => vbd.id),
    };
    return { class: "VDI", id: ref, snapshot };
  });

  return {
    metadata: {
      // No host wrote this: empty strings, and low xapi numbers that no importer finds too new.
      version: { hostname: "", date: "", product_version: "", product_brand: "", build_number: "", xapi_major: 1, xapi_minor: 0, export_vsn: 0 },
      objects: [
        { class: "SR", id: srId, snapshot: { name_label: "legacy package", name_description: "", content_type: "user", VDIs: disks.map((disk) => disk.ref) } },
        { class: "VM", id: vmId, snapshot: vmSnapshot },
        ...vdiObjects,
        ...vbds,
      ],
    },
    disks,
  };
}

export const MAX_LEGACY_OVA_XML_BYTES = 16 * 1024 * 1024;

/** A disk directory's chunk files in numeric order, refused unless numbered 0, 1, 2 ... without a gap or twice. */
async function chunkFiles(dir: string): Promise<string[]> {
  const chunks: { name: string; index: number }[] = [];
  for (const name of await readdir(dir)) {
    const match = CHUNK_FILE.exec(name);
    if (match !== null) chunks.push({ name, index: Number(match[1]) });
  }
  chunks.sort((a, b) => a.index - b.index);
  for (const [i, chunk] of chunks.entries()) {
    if (chunk.index < i) throw new LegacyPackageError(`${join(dir, chunk.name)}: chunk ${chunk.index} appears twice`);
    if (chunk.index > i) throw new LegacyPackageError(`${dir}: chunk ${i} is missing`);
  }
  return chunks.map((chunk) => chunk.name);
}

/**
 * A legacy package directory as a tar stream: ova.xml, then each vdi's chunks in numeric order, named
 * `<source dir>/<file>`. Files go one at a time and each waits for the tar stream to drain (backpressure).
 */
export function packLegacyDirectory(dir: string): Readable {
  const pack = tarPack();

  const addFile = (name: string, path: string, size: number) =>
    new Promise<void>((resolve, reject) => {
      // tar-stream calls back once the member is in the stream; a file that changed size fails it.
      const sink = pack.entry({ name, size, mode: 0o644, mtime: new Date(0), uid: 0, gid: 0 }, (error) => (error ? reject(error) : resolve()));
      const file = createReadStream(path, { highWaterMark: 1024 * 1024 });
      file.on("error", (error) => {
        sink.destroy(error);
        reject(error);
      });
      file.pipe(sink);
    });

  async function produce() {
    const xmlPath = join(dir, "ova.xml");
    const { size } = await stat(xmlPath);
    if (size > MAX_LEGACY_OVA_XML_BYTES) throw new LegacyPackageError(`${xmlPath} is ${size} bytes, more than ${MAX_LEGACY_OVA_XML_BYTES}`);
    const xml = await readFile(xmlPath);
    const { disks } = parseLegacyOvaXml(xml.toString("utf8"));
    await new Promise<void>((resolve, reject) => pack.entry({ name: "ova.xml", mode: 0o644, mtime: new Date(0), uid: 0, gid: 0 }, xml, (error) => (error ? reject(error) : resolve())));
    for (const disk of disks) {
      const diskDir = join(dir, ...disk.dir.split("/"));
      let files: string[];
      try {
        files = await chunkFiles(diskDir);
      } catch (error) {
        // An empty disk needs no chunks, nor a directory.
        if (disk.size === 0 && (error as NodeJS.ErrnoException).code === "ENOENT") continue;
        throw error;
      }
      if (files.length === 0 && disk.size > 0) throw new LegacyPackageError(`${diskDir}: no chunk files for vdi ${JSON.stringify(disk.name)}`);
      for (const file of files) {
        const path = join(diskDir, file);
        await addFile(`${disk.dir}/${file}`, path, (await stat(path)).size);
      }
    }
    pack.finalize();
  }

  produce().catch((error: unknown) => pack.destroy(error instanceof Error ? error : new Error(String(error))));
  return Readable.from(pack);
}
