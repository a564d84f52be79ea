// The tar layer of an archive read: its file members in order, read or skipped, with tar-stream's failures told
// apart: an input that stopped early is a truncated archive, whether inside a header, inside a member or
// between two members.
import { Readable } from "node:stream";
import { extract as tarExtract, type Extract } from "tar-stream";
import { XvaReadError } from "./read-errors.ts";

type Entry = Extract extends AsyncIterable<infer T> ? T : never;
/** A file member, its name made safe; `start` is where its data begins in the archive (when tar-stream says). */
export type Member = { entry: Entry; name: string; start: number | undefined };

/** tar-stream's message when its input ends inside a header or a member. */
const TAR_END_OF_DATA = "Unexpected end of data";

/** A member's name, refused when it could escape a directory it were extracted to; `./` (tar run in a directory) is dropped. */
function memberName(raw: string): string {
  if (raw.startsWith("/")) throw new XvaReadError(`member ${JSON.stringify(raw)}: absolute path`);
  if (raw.split("/").includes("..")) throw new XvaReadError(`member ${JSON.stringify(raw)}: path with ..`);
  return raw.replace(/^(?:\.\/)+/, "");
}

/**
 * A failure of the tar layer as an XvaReadError: an input that stopped early is a truncated archive. The
 * source's own failure (a stalled or cancelled upload) is not the archive's: it passes as it is.
 */
function tarFailure(error: unknown, where: string, sourceError: unknown): unknown {
  if (error instanceof XvaReadError || (error !== undefined && error === sourceError)) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (message === TAR_END_OF_DATA) return new XvaReadError(`archive truncated: the stream ended ${where}`);
  return new XvaReadError(`not a readable tar stream: ${message}`);
}

export class TarMembers {
  readonly #input: Readable;
  readonly #extract: Extract;
  readonly #entries: AsyncIterator<Entry>;
  // Bytes in, against where the last member ends: what lies between is the end-of-archive blocks (tar-stream
  // reads zero blocks as "no header" and fails on anything else). A client may end the stream rather than fail
  // it when its connection drops, so a stream that stops at a member boundary is told from a whole archive so.
  #received = 0;
  #membersEnd = 0;
  #lastName = "ova.xml";
  #sourceError: unknown;

  constructor(source: AsyncIterable<Uint8Array> | Readable) {
    // Debian's xva-img writes V7 headers without the ustar magic.
    // (tar-stream's own types leave the option out.)
    this.#extract = tarExtract({ allowUnknownFormat: true } as Parameters<typeof tarExtract>[0]);
    this.#input = source instanceof Readable ? source : Readable.from(source);
    this.#input.on("data", (chunk: Uint8Array) => (this.#received += chunk.byteLength));
    this.#input.on("error", (error) => {
      this.#sourceError = error;
      this.#extract.destroy(error);
    });
    this.#input.pipe(this.#extract);
    this.#entries = this.#extract[Symbol.asyncIterator]();
  }

  /** Stops reading (the source is released). */
  close(): void {
    this.#input.destroy();
    this.#extract.destroy();
  }

  /** The next file member, directories passed by (GNU tar adds them when given a directory); null at the end. */
  async next(): Promise<Member | null> {
    for (;;) {
      let step: IteratorResult<Entry>;
      try {
        step = await this.#entries.next();
      } catch (error) {
        throw tarFailure(error, `inside the tar header after member ${this.#lastName}`, this.#sourceError);
      }
      if (step.done) return null;
      const entry = step.value;
      // A directory carries no data whatever its size field says: GNU tar reads none (its skip_member passes
      // DIRTYPE by), and neither does tar-stream, whose stream of a directory declaring a size would never end.
      const directory = entry.header.type === "directory";
      // byteOffset (where the member's data starts) is tar-stream's, absent from its types.
      const start = (entry.header as { byteOffset?: number }).byteOffset;
      if (typeof start === "number") this.#membersEnd = start + (directory ? 0 : Math.ceil(entry.header.size / 512) * 512);
      const name = memberName(entry.header.name);
      this.#lastName = name;
      if (directory) continue;
      // An unknown type flag (tar-stream's null) is a regular file, as GNU tar extracts it; links, devices and
      // fifos are refused.
      const file = entry.header.type === "file" || entry.header.type === "contiguous-file" || entry.header.type === null;
      if (!file) throw new XvaReadError(`member ${JSON.stringify(name)}: a ${entry.header.type}, not a file`);
      return { entry, name, start };
    }
  }

  /** The member's `size` bytes, in a new buffer. */
  async readAll(member: Member, size: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of member.entry as AsyncIterable<Buffer>) chunks.push(chunk);
    } catch (error) {
      throw await this.failure(error, member.name);
    }
    const data = Buffer.concat(chunks);
    if (data.byteLength !== size) throw new XvaReadError(`member ${member.name}: truncated`);
    return data;
  }

  /** The member's bytes, filling `target` exactly. */
  async readInto(member: Member, target: Buffer): Promise<Buffer> {
    let filled = 0;
    try {
      for await (const chunk of member.entry as AsyncIterable<Buffer>) {
        if (filled + chunk.byteLength > target.byteLength) throw new XvaReadError(`member ${member.name}: longer than its header says`);
        chunk.copy(target, filled);
        filled += chunk.byteLength;
      }
    } catch (error) {
      throw await this.failure(error, member.name);
    }
    if (filled !== target.byteLength) throw new XvaReadError(`member ${member.name}: truncated`);
    return target;
  }

  async skip(member: Member): Promise<void> {
    try {
      for await (const chunk of member.entry) void chunk;
    } catch (error) {
      throw await this.failure(error, member.name);
    }
  }

  /**
   * A member's read failing: tar-stream fails the member with a generic "destroyed" when the tar stream below
   * it fails, so the tar stream's own error is asked for (the iterator gives it) to tell a truncation.
   */
  async failure(error: unknown, name: string): Promise<unknown> {
    if (error instanceof XvaReadError) return error;
    const cause = await this.#entries.next().then(
      () => error,
      (tarError: unknown) => tarError,
    );
    return tarFailure(cause, `inside member ${name}`, this.#sourceError);
  }

  /** After next() gave null: whether the stream stopped at a member's end, without the tar end-of-archive blocks. */
  get cut(): boolean {
    return this.#received <= this.#membersEnd;
  }

  /** After next() gave null: the tar end-of-archive blocks must have come, or the stream was cut. */
  assertEndOfArchive(): void {
    if (this.cut) throw new XvaReadError(`archive truncated: the stream ended after member ${this.#lastName}, without the tar end-of-archive blocks`);
  }
}
