// A VM or a disk imported from an OVA, an OVF with its disk files, or a bare disk image, through XenAPI alone
// (as Xen Orchestra does it, so it works against any toolstack): the package is read once, forwards, as it
// arrives; the descriptor makes the VM and its empty VDIs (vm-builder.ts); each disk member goes, as its bytes
// pass, into `PUT /import_raw_vdi` of its VDI, which converts it (VMDK, qcow2, VHD, VHDX, raw) on the way in. A
// member that comes before the descriptor is read again from the source once the descriptor is known (a spool
// or a file can; a pipe cannot, and says so). Every member is hashed as it passes, and the manifest's digests
// checked once both are known. Whatever fails, what the import made is removed.
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { SNIFF_BYTES, sniffFormat } from "../../lib/file-kind.ts";
import type { XenApiClient } from "../xenapi/client.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { outcomeOf, probePut, putResource, reasonOf, ResourceRefused, ResourceTask, resourceUrl } from "../xenapi/resource.ts";
import { TarMembers } from "../xva/tar-members.ts";
import { XvaReadError } from "../xva/read-errors.ts";
import { type OvfDisk, OvfError, type OvfPackage, OVF_LIMITS, readOvf } from "./descriptor.ts";
import { type DigestAlgorithm, Digests, type ManifestEntry, ManifestError, MAX_MANIFEST_BYTES, parseManifest } from "./manifest.ts";
import { osConfig, undoEarlier, VmBuilder } from "./vm-builder.ts";

/** Why an import cannot go on, in words that name the file. */
export class PackageError extends Error {}

export interface PackageSource {
  /** The file's name, for messages (and a bare disk's VM and VDI). */
  name: string;
  /** Its length in bytes, when known (progress; a raw disk's size). */
  length: number | undefined;
  /** Its bytes from `start` on, `length` of them (all the rest when undefined), as they arrive. */
  open(start: number, length?: number): Readable;
  /** Whether open() may start past 0 (a file or a spool; not a pipe). */
  rereadable: boolean;
}

export interface ImportTarget {
  xapi: XenApiClient;
  /** The toolstack's base URL, for its HTTP resources. */
  toolstack: string;
  /** The SR the disks go to (a ref). */
  sr: string;
  /** Marks what this import makes (the same for each attempt of one upload: an attempt undoes the last's). */
  mark: string;
  /** Digests that do not match the manifest are noted instead of failing the import. */
  force: boolean;
  signal: AbortSignal;
  /** The task the import runs in: each disk's transfer runs in a task marked as its part. */
  task?: string;
  /** Bytes of the package read so far. */
  progress?(bytes: number): void;
}

export interface ImportResult {
  vm: string | null;
  vdis: string[];
  /** What the package asked that was not done, or what was noticed on the way, in words. */
  notes: string[];
}

const zRef = z.string();
/** The other_config key that makes a disk's task part of the import's (a task list shows it as that one). */
export const PART_OF_KEY = "hangar:part_of";
/** How long a disk's task may take to finish once its body has been sent. */
const DISK_TASK_MS = 5 * 60_000;
/** How long a disk's cancelled transfer may take to let go of its VDI. */
const DISK_UNDO_MS = 30_000;

/** Reading a member's bytes failed (the tar below it, or the source): not an error of what was done with them. */
class MemberReadError extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

/** The bytes of a member as they pass, hashed, counted and (for a disk) sniffed from its first SNIFF_BYTES. */
class MemberBytes {
  readonly #chunks: AsyncIterator<Buffer>;
  readonly #digests: Digests;
  readonly #counted: (bytes: number) => void;
  #head: Buffer[] = [];

  constructor(source: AsyncIterable<Buffer>, digests: Digests, counted: (bytes: number) => void) {
    this.#chunks = source[Symbol.asyncIterator]();
    this.#digests = digests;
    this.#counted = counted;
  }

  async #next(): Promise<Buffer | undefined> {
    let step: IteratorResult<Buffer>;
    try {
      step = await this.#chunks.next();
    } catch (error) {
      throw new MemberReadError(error);
    }
    if (step.done) return undefined;
    this.#digests.update(step.value);
    this.#counted(step.value.length);
    return step.value;
  }

  /** The first bytes (up to SNIFF_BYTES, fewer for a shorter member), kept to be given again by rest(). */
  async head(): Promise<Buffer> {
    let length = this.#head.reduce((sum, chunk) => sum + chunk.length, 0);
    while (length < SNIFF_BYTES) {
      const chunk = await this.#next();
      if (chunk === undefined) break;
      this.#head.push(chunk);
      length += chunk.length;
    }
    return Buffer.concat(this.#head).subarray(0, SNIFF_BYTES);
  }

  async *rest(): AsyncGenerator<Buffer> {
    const head = this.#head;
    this.#head = [];
    yield* head;
    for (let chunk = await this.#next(); chunk !== undefined; chunk = await this.#next()) yield chunk;
  }

  async all(limit: number, what: string): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let length = 0;
    for await (const chunk of this.rest()) {
      length += chunk.length;
      if (length > limit) throw new PackageError(`${what} is more than ${limit} bytes`);
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  }

  async drain(): Promise<void> {
    for await (const chunk of this.rest()) void chunk;
  }
}

/** A disk's format by its first bytes; a body with no magic is raw, or a fixed VHD (its footer comes last). */
function diskFormat(head: Buffer, size: number, name: string, hint: { capacity?: number; format?: string }): string {
  const format = sniffFormat(head);
  if (format === "tar" || format === "gzip" || format === "zstd") throw new PackageError(`${name} is a ${format} archive, not a disk image`);
  if (format !== undefined) return format;
  const text = head.toString("latin1");
  if (/^\s*# Disk DescriptorFile/.test(text)) {
    const type = /createType\s*=\s*"?([\w-]+)/.exec(text)?.[1] ?? "unknown";
    const extent = /^\s*(?:RW|RDONLY|NOACCESS)\s+\d+\s+(\w+)/m.exec(text)?.[1];
    throw new PackageError(`${name} is a VMDK descriptor (createType ${type}${extent === undefined ? "" : `, extents of type ${extent}`}) whose data lies in other files, which this import does not read: convert the disk to a streamOptimized or monolithicSparse VMDK (qemu-img convert -O vmdk -o subformat=streamOptimized)`);
  }
  const saysVhd = /vhd/i.test(hint.format ?? "") || /\.vhd$/i.test(name);
  return saysVhd && (hint.capacity === undefined || size === hint.capacity + 512) ? "vhd" : "raw";
}

const FORMAT_WORDS: Array<[RegExp, string]> = [
  [/vmdk/i, "vmdk"],
  [/qcow/i, "qcow2"],
  [/vhdx/i, "vhdx"],
  [/vhd/i, "vhd"],
  [/\.(raw|img)$/i, "raw"],
];

/** The format a name or an `ovf:format` URI claims, if it claims one. */
function claimedFormat(text: string): string | undefined {
  return FORMAT_WORDS.find(([pattern]) => pattern.test(text))?.[1];
}

/**
 * A disk's PUT refused: the file's fault (4xx) in words naming it, or the toolstack's (a session ended, a host
 * in trouble: 5xx), which another attempt may get past.
 */
function refusal(name: string, status: number, reason: string): Error {
  if (status === 401 || reason.startsWith("SESSION_INVALID")) return new XenApiError("SESSION_INVALID", [reason]);
  if (status >= 500 || (status >= 300 && status < 400)) return new Error(`${name}: the toolstack answered HTTP ${status}: ${reason}`);
  return new PackageError(`${name}: the toolstack refused it (HTTP ${status}): ${reason}`);
}

/** A disk's bytes PUT into `/import_raw_vdi` of `vdi` (or of a new VDI on the SR when `vdi` is undefined); the VDI. */
async function putDisk(target: ImportTarget, bytes: MemberBytes, size: number, format: string, name: string, vdi: string | undefined): Promise<string> {
  const { xapi, signal } = target;
  const query = vdi === undefined ? { sr_id: target.sr, format } : { vdi, format };
  let url: URL;
  try {
    url = await probePut(resourceUrl(target.toolstack, xapi.session, "import_raw_vdi", query), { signal, what: name });
  } catch (error) {
    if (error instanceof ResourceRefused) throw refusal(name, error.status, error.message);
    throw error;
  }
  const task = new ResourceTask(xapi, await xapi.call(zRef, "task.create", `Disk import: ${name}`, `${format} into ${vdi === undefined ? "a new VDI" : "its VDI"}`));
  if (target.task !== undefined) await xapi.call(z.unknown(), "task.add_to_other_config", task.ref, PART_OF_KEY, target.task).catch(() => undefined);
  url.searchParams.set("task_id", task.ref);
  const put = putResource(url, (request) => pipeline(Readable.from(bytes.rest(), { objectMode: false }), request, { signal }), { length: size, signal });
  // A connection cut mid-body (the toolstack restarting, the network) ends the PUT at once: the body's source may
  // be waiting for bytes of an upload that is paused, and would hold the pipeline's end until they came.
  const cut = new Promise<never>((_resolve, reject) => put.request.once("close", () => reject(new Error(`${name}: the connection to the toolstack closed while the disk was sent`))));
  cut.catch(() => undefined);
  // The package's own failure (a truncated tar, the upload cancelled) is the story, not the PUT it broke.
  const sending = put.sent.then((error) => {
    if (error !== undefined) throw error;
  });
  sending.catch(() => undefined);
  try {
    const response = await Promise.race([put.response, cut, sending.then(() => new Promise<never>(() => undefined))]);
    if ((response.statusCode ?? 0) >= 300) throw refusal(name, response.statusCode ?? 0, await reasonOf(response));
    response.resume();
    await Promise.race([sending, cut]);
    const record = await task.finished(AbortSignal.any([signal, AbortSignal.timeout(DISK_TASK_MS)]), { everyMs: 200 });
    if (record === undefined) throw signal.aborted ? (signal.reason as Error) : new PackageError(`${name}: its import's task did not finish`);
    const result = outcomeOf(record);
    return vdi ?? String(result);
  } catch (error) {
    // The toolstack lets go of the VDI once the task has ended: only then can the import's undo remove it.
    await task.cancel();
    await task.finished(AbortSignal.timeout(DISK_UNDO_MS), { everyMs: 200 });
    if (error instanceof XenApiError && error.code !== "SESSION_INVALID") throw new PackageError(`${name}: ${error.code === "IMPORT_ERROR" ? "" : `${error.code} `}${error.params.join(" ")}`);
    throw error;
  } finally {
    await xapi.call(z.unknown(), "task.destroy", task.ref).catch(() => undefined);
  }
}

const SKIPPED = /^(?:PaxHeader\/|\._|pad$)|\/\._/;

/** One import of a package (an OVA's members, or an OVF and its files): see the file's header. */
class PackageImport {
  readonly #target: ImportTarget;
  readonly #source: PackageSource;
  readonly #builder: VmBuilder;
  readonly notes: string[] = [];
  #ovf: OvfPackage | undefined;
  /** The VDI of each disk file (by member name) once the VM is made. */
  readonly #disks = new Map<string, { disk: OvfDisk; vdi: string; imported: boolean }>();
  readonly #digests = new Map<string, Digests>();
  #manifest: { name: string; entries: ManifestEntry[] } | undefined;
  /** Members met before the descriptor, to read again once it is known. */
  readonly #early: Array<{ name: string; start: number | undefined; size: number }> = [];
  #read = 0;

  constructor(target: ImportTarget, source: PackageSource) {
    this.#target = target;
    this.#source = source;
    this.#builder = new VmBuilder(target.xapi, target.mark);
  }

  get builder(): VmBuilder {
    return this.#builder;
  }

  #counted = (bytes: number) => {
    this.#read += bytes;
    this.#target.progress?.(this.#read);
  };

  /** The algorithms to hash a member in: the manifest's for it once the manifest is known, else SHA-1 and SHA-256. */
  #algorithms(name: string): DigestAlgorithm[] {
    if (this.#manifest === undefined) return ["sha1", "sha256"];
    return this.#manifest.entries.filter((entry) => entry.file === name).map((entry) => entry.algorithm);
  }

  #bytes(name: string, chunks: AsyncIterable<Buffer>): MemberBytes {
    const digests = new Digests(this.#algorithms(name));
    this.#digests.set(name, digests);
    return new MemberBytes(chunks, digests, this.#counted);
  }

  /** One member (file) of the package, in the order they come; `start` is where its bytes are in the source. */
  async member(name: string, size: number, chunks: AsyncIterable<Buffer>, start: number | undefined): Promise<void> {
    this.#target.signal.throwIfAborted();
    const lower = name.toLowerCase();
    if (SKIPPED.test(name)) return this.#bytes(name, chunks).drain();
    if (this.#digests.has(name)) throw new PackageError(`the package has two files named ${name}`);
    if (lower.endsWith(".ovf")) {
      if (this.#ovf !== undefined) throw new PackageError(`the package has a second descriptor, ${name}`);
      if (size > OVF_LIMITS.maxBytes) throw new PackageError(`${name}: a descriptor of ${size} bytes, more than the ${OVF_LIMITS.maxBytes} one may have`);
      const text = await this.#bytes(name, chunks).all(OVF_LIMITS.maxBytes, name);
      await this.descriptor(name, text);
      return;
    }
    if (lower.endsWith(".mf")) {
      if (size > MAX_MANIFEST_BYTES) throw new PackageError(`${name}: a manifest of ${size} bytes, more than ${MAX_MANIFEST_BYTES}`);
      const text = await this.#bytes(name, chunks).all(MAX_MANIFEST_BYTES, name);
      try {
        this.#manifest = { name, entries: parseManifest(text) };
      } catch (error) {
        if (error instanceof ManifestError) throw new PackageError(`${name}: ${error.message}`);
        throw error;
      }
      return;
    }
    if (lower.endsWith(".cert")) {
      this.notes.push(`${name}: the package's signature is not checked`);
      return this.#bytes(name, chunks).drain();
    }
    const disk = this.#disks.get(name);
    if (disk !== undefined) return this.#disk(name, size, this.#bytes(name, chunks), disk);
    if (this.#ovf === undefined) {
      if (!this.#source.rereadable && this.#early.length === 0) this.notes.push(`${name} came before the descriptor`);
      this.#early.push({ name, start, size });
    } else this.notes.push(`${name}: not a disk of the VM, not imported`);
    return this.#bytes(name, chunks).drain();
  }

  /** The descriptor: the VM and its VDIs are made; members that came before it are read again. */
  async descriptor(name: string, text: Buffer): Promise<void> {
    try {
      this.#ovf = await readOvf(text, this.#target.signal);
    } catch (error) {
      if (error instanceof OvfError) throw new PackageError(`${name}: ${error.message}`);
      throw error;
    }
    await this.#build(this.#ovf, name);
    for (const early of this.#early.splice(0)) {
      const disk = this.#disks.get(early.name);
      if (disk === undefined) {
        this.notes.push(`${early.name}: not a disk of the VM, not imported`);
        continue;
      }
      if (!this.#source.rereadable || early.start === undefined) throw new PackageError(`${early.name} comes before the descriptor ${name}, and this source cannot be read twice: put the .ovf first in the OVA (as the OVF standard asks), or import the file from disk or through the console`);
      // Read again from the source: its digest is the one computed the first time round.
      const digests = this.#digests.get(early.name)!;
      await this.#disk(early.name, early.size, new MemberBytes(this.#source.open(early.start, early.size), new Digests([]), () => undefined), disk);
      this.#digests.set(early.name, digests);
    }
  }

  async #build(ovf: OvfPackage, name: string): Promise<void> {
    const builder = this.#builder;
    const network = ovf.nics.length === 0 ? undefined : await builder.defaultNetwork();
    await builder.createVm(ovf, osConfig(ovf));
    let bootable = true;
    for (const [index, drive] of ovf.drives.entries()) {
      if (drive.kind === "cd") {
        await builder.attachCd(index);
        continue;
      }
      const { disk } = drive;
      const vdi = await builder.createVdi(this.#target.sr, disk.capacity, `${ovf.name} ${drive.name}`.slice(0, 255), disk.file?.href ?? "blank disk");
      await builder.attachDisk(vdi, index, bootable);
      bootable = false;
      if (disk.file !== null) {
        if (this.#disks.has(disk.file.href)) throw new PackageError(`${name}: two disks are read from the one file ${disk.file.href}`);
        this.#disks.set(disk.file.href, { disk, vdi, imported: false });
      }
    }
    for (const [device, nic] of ovf.nics.entries()) {
      if (network === undefined) {
        this.notes.push(`${nic.name}: no network to put it on`);
        continue;
      }
      await builder.attachNic(network, device, nic.mac);
    }
    this.notes.push(...ovf.unsupported);
  }

  async #disk(name: string, size: number, bytes: MemberBytes, entry: { disk: OvfDisk; vdi: string; imported: boolean }): Promise<void> {
    if (size === 0) throw new PackageError(`${name} is empty (0 bytes): a disk image has at least a header`);
    const head = await bytes.head();
    const format = diskFormat(head, size, name, entry.disk);
    const claimed = claimedFormat(entry.disk.format) ?? claimedFormat(name);
    if (claimed !== undefined && claimed !== format) this.notes.push(`${name} is a ${format} image, though its ${claimedFormat(entry.disk.format) === undefined ? "name" : "descriptor"} says ${claimed}: read as ${format}`);
    await putDisk(this.#target, bytes, size, format, name, entry.vdi);
    entry.imported = true;
  }

  /** The package has ended: every disk must have come, and the manifest's digests match. */
  async end(): Promise<ImportResult> {
    if (this.#ovf === undefined) throw new PackageError(this.#digests.size === 0 ? "the package is empty" : "the package has no OVF descriptor (.ovf)");
    const missing = [...this.#disks].filter(([, disk]) => !disk.imported).map(([name]) => name);
    if (missing.length > 0) throw new PackageError(`the descriptor names ${missing.join(", ")}, which the package lacks`);
    this.#checkManifest();
    await this.#builder.finish();
    return { vm: this.#builder.vm ?? null, vdis: this.#builder.vdis, notes: this.notes };
  }

  #checkManifest(): void {
    if (this.#manifest === undefined) return;
    const mismatches: string[] = [];
    const listed = new Set<string>();
    for (const { file, algorithm, digest } of this.#manifest.entries) {
      listed.add(file);
      const digests = this.#digests.get(file);
      const actual = digests?.result(algorithm);
      if (digests === undefined) this.notes.push(`the manifest lists ${file}, which the package does not have`);
      else if (actual === undefined) this.notes.push(`${file}: its ${algorithm.toUpperCase()} digest was not checked (the manifest came after it)`);
      else if (actual !== digest) mismatches.push(`${file}: its ${algorithm.toUpperCase()} digest is ${actual}, the manifest says ${digest}`);
    }
    for (const name of this.#digests.keys()) {
      if (!listed.has(name) && name !== this.#manifest.name && !/\.cert$/i.test(name) && !SKIPPED.test(name)) this.notes.push(`${name} is not in the manifest: not checked`);
    }
    if (mismatches.length === 0) return;
    if (!this.#target.force) throw new PackageError(`the package does not match its manifest ${this.#manifest.name} (${mismatches.join("; ")}): nothing was imported. If the files are known good, import again ignoring checksum errors.`);
    this.notes.push(`checksum errors ignored: ${mismatches.join("; ")}`);
  }
}

/** Runs `work`, undoing what it made when it fails; what an earlier attempt of the same import left goes first. */
async function undone<T>(target: ImportTarget, work: (builder: (b: VmBuilder) => void) => Promise<T>): Promise<T> {
  await undoEarlier(target.xapi, target.mark);
  let made: VmBuilder | undefined;
  try {
    return await work((builder) => (made = builder));
  } catch (error) {
    await made?.undo();
    if (error instanceof XvaReadError) throw new PackageError(error.message);
    throw error instanceof MemberReadError ? error.cause : error;
  }
}

/** An OVA: its tar members in order (see the file's header). */
export function importOva(target: ImportTarget, source: PackageSource): Promise<ImportResult> {
  return undone(target, async (made) => {
    const work = new PackageImport(target, source);
    made(work.builder);
    const tar = new TarMembers(source.open(0));
    try {
      for (let member = await tar.next(); member !== null; member = await tar.next()) {
        const size = member.entry.header.size ?? 0;
        try {
          await work.member(member.name, size, member.entry as AsyncIterable<Buffer>, member.start);
        } catch (error) {
          // A member that could not be read: the tar's own failure says why (a truncation, the source's error).
          throw error instanceof MemberReadError && !target.signal.aborted ? await tar.failure(error.cause, member.name) : error;
        }
      }
    } finally {
      tar.close();
    }
    return work.end();
  });
}

/** An OVF descriptor and its files, each its own source (dropped together, or beside it in a directory). */
export function importOvfFiles(target: ImportTarget, descriptor: PackageSource, files: ReadonlyMap<string, PackageSource>): Promise<ImportResult> {
  return undone(target, async (made) => {
    const work = new PackageImport(target, descriptor);
    made(work.builder);
    await work.member(descriptor.name, descriptor.length ?? 0, descriptor.open(0), 0);
    for (const [name, file] of files) await work.member(name, file.length ?? 0, file.open(0), undefined);
    return work.end();
  });
}

export interface DiskImport {
  /** Make a VM of it (name from the file); else the disk alone. */
  vm: boolean;
  /** The format the caller was told (a name's extension), only to say a mismatch. */
  claimed?: string;
}

/** The name a bare disk's VM and VDI take: the file's, without its extension. */
export function baseName(fileName: string): string {
  return fileName.replace(/^.*[/\\]/, "").replace(/\.(vmdk|vhdx?|qcow2?|raw|img)$/i, "") || "Imported disk";
}

/** A bare disk image: a new VDI on the SR, and with `vm` a VM that boots it (one vCPU, 1 GiB, a CD drive, a NIC). */
export function importDiskImage(target: ImportTarget, source: PackageSource, options: DiskImport): Promise<ImportResult> {
  return undone(target, async (made) => {
    const builder = new VmBuilder(target.xapi, target.mark);
    made(builder);
    const notes: string[] = [];
    const name = baseName(source.name);
    const digests = new Digests([]);
    let read = 0;
    const bytes = new MemberBytes(source.open(0), digests, (n) => target.progress?.((read += n)));
    const size = source.length;
    if (size === 0) throw new PackageError(`${source.name} is empty (0 bytes)`);
    const head = await bytes.head();
    const format = diskFormat(head, size ?? 0, source.name, {});
    if (format === "raw" && size === undefined) throw new PackageError(`${source.name} has no format header and no known length: a raw disk's size is its length`);
    const claimed = options.claimed ?? claimedFormat(source.name);
    if (claimed !== undefined && claimed !== format) notes.push(`${source.name} is a ${format} image, though its name says ${claimed}: read as ${format}`);
    const vdi = await putDisk(target, bytes, size ?? 0, format, source.name, undefined);
    await builder.adoptVdi(vdi);
    await target.xapi.call(z.unknown(), "VDI.set_name_label", vdi, name);
    await target.xapi.call(z.unknown(), "VDI.set_name_description", vdi, `Imported from ${source.name}`);
    if (!options.vm) {
      await builder.finish();
      return { vm: null, vdis: [vdi], notes };
    }
    await builder.createVm({ name, description: `Imported from ${source.name}`, memory: 1024 ** 3, vcpus: 1, firmware: "bios", secureBoot: false }, {});
    await builder.attachDisk(vdi, 0, true);
    await builder.attachCd(1);
    const network = await builder.defaultNetwork();
    if (network !== undefined) await builder.attachNic(network, 0, null);
    notes.push("the VM has 1 vCPU, 1 GiB of memory and BIOS firmware: a disk image does not say what it needs; change them before starting it if the guest needs more or boots with UEFI");
    await builder.finish();
    return { vm: builder.vm ?? null, vdis: [vdi], notes };
  });
}
