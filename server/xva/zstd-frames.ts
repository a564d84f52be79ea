// Where zstd frames end in a byte stream, for the decompressor (compression-worker.ts): Node's zstd decoder drops
// whatever follows a frame's end in the same write (unless the frame's output happened to end on its output
// buffer), so its input is written in pieces that never run past a frame's end.

const ZSTD_MAGIC = 0xfd2fb528;
const ZSTD_SKIPPABLE_MASK = 0xfffffff0;
const ZSTD_SKIPPABLE_MAGIC = 0x184d2a50;

/**
 * Walks the frame layout of RFC 8878 §3.1 across chunks: magic, header, then block headers whose sizes say how
 * far to skip, and the optional checksum; skippable frames are skipped by their size. Reads only headers: the
 * content is skipped, never copied.
 */
export class ZstdFrameCutter {
  // What the bytes at the cursor are: a header of `need` bytes gathered into `header`, or `skip` bytes of content.
  private step: "magic" | "descriptor" | "skippableSize" | "blockHeader" = "magic";
  private need = 4;
  private readonly header = Buffer.alloc(4);
  private have = 0;
  private skip = 0;
  private checksum = false;
  private frameEndsAfterSkip = false;
  private offset = 0; // bytes of the stream seen, for messages

  /** The offsets in `chunk` just after each frame that ends in it, in order. Throws on bytes that are not zstd frames. */
  cut(chunk: Uint8Array): number[] {
    const ends: number[] = [];
    let at = 0;
    while (at < chunk.byteLength) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.byteLength - at);
        this.skip -= n;
        at += n;
        if (this.skip === 0 && this.frameEndsAfterSkip) this.frameEnded(ends, at);
        continue;
      }
      this.header[this.have++] = chunk[at++]!;
      if (this.have < this.need) continue;
      this.have = 0;
      this.parseHeader(this.offset + at);
      // A frame that ends right here (empty skippable frame, empty last block and no checksum).
      if (this.skip === 0 && this.frameEndsAfterSkip) this.frameEnded(ends, at);
    }
    this.offset += chunk.byteLength;
    return ends;
  }

  /** Throws unless the stream ended between frames. */
  end(): void {
    if (this.step !== "magic" || this.have !== 0 || this.skip !== 0) throw new Error(`unexpected end of file in a frame at byte ${this.offset}`);
  }

  private frameEnded(ends: number[], at: number) {
    this.frameEndsAfterSkip = false;
    ends.push(at);
    [this.step, this.need] = ["magic", 4];
  }

  /** The header just gathered, which ends at stream byte `where`. */
  private parseHeader(where: number) {
    const header = this.header;
    if (this.step === "magic") {
      const magic = header.readUInt32LE(0);
      if (magic === ZSTD_MAGIC) [this.step, this.need] = ["descriptor", 1];
      else if ((magic & ZSTD_SKIPPABLE_MASK) >>> 0 === ZSTD_SKIPPABLE_MAGIC) [this.step, this.need] = ["skippableSize", 4];
      else throw new Error(`unknown frame magic ${header.toString("hex")} at byte ${where - 4}`);
    } else if (this.step === "skippableSize") {
      this.skip = header.readUInt32LE(0);
      this.frameEndsAfterSkip = true;
    } else if (this.step === "descriptor") {
      const descriptor = header[0]!;
      if (descriptor & 0x08) throw new Error(`reserved bit set in the frame header at byte ${where - 1}`);
      const singleSegment = (descriptor & 0x20) !== 0;
      this.checksum = (descriptor & 0x04) !== 0;
      const contentSizeBytes = [singleSegment ? 1 : 0, 2, 4, 8][descriptor >> 6]!;
      const dictionaryBytes = [0, 1, 2, 4][descriptor & 0x03]!;
      this.skip = (singleSegment ? 0 : 1) + dictionaryBytes + contentSizeBytes;
      [this.step, this.need] = ["blockHeader", 3];
    } else {
      const block = header[0]! | (header[1]! << 8) | (header[2]! << 16);
      const type = (block >> 1) & 0x03;
      if (type === 3) throw new Error(`reserved block type at byte ${where - 3}`);
      this.skip = type === 1 ? 1 : block >>> 3;
      if (block & 0x01) {
        this.skip += this.checksum ? 4 : 0;
        this.frameEndsAfterSkip = true;
      }
    }
  }
}
