// XVA archive layout (compat-notes §2), shared by the reader and the writer.
import { createHash } from "node:crypto";
import { xxh64 } from "@node-rs/xxhash";

/** Disk data travels in 1 MiB members; only a disk's last block may be shorter. */
export const XVA_BLOCK_SIZE = 1024 * 1024;

/** xapi names data members with an 8-digit counter: 10^8 blocks of 1 MiB is about 95 TiB. */
export const MAX_BLOCK_INDEX = 99_999_999;

export type XvaChecksumKind = "xxhash" | "sha1";

/** The suffix of the checksum member that follows a data member. */
export const CHECKSUM_SUFFIX: Record<XvaChecksumKind, string> = { xxhash: ".xxhash", sha1: ".checksum" };

const ZERO_BLOCK = Buffer.alloc(XVA_BLOCK_SIZE);

/** Whether up to a block's worth of bytes are all zero (writers leave such blocks out, importers leave holes). */
export function isZeroBlock(data: Uint8Array): boolean {
  return data.byteLength <= XVA_BLOCK_SIZE && Buffer.compare(data, ZERO_BLOCK.subarray(0, data.byteLength)) === 0;
}

/** A checksum member's content: XXH64 (seed 0) as 16 uppercase hex, SHA-1 as 40 lowercase hex; no newline. */
export function blockChecksum(kind: XvaChecksumKind, data: Uint8Array): string {
  if (kind === "xxhash") return xxh64(data, 0n).toString(16).toUpperCase().padStart(16, "0");
  return createHash("sha1").update(data).digest("hex");
}

/** `Ref:3/00000042`, the data member of block 42 of disk Ref:3. */
export function blockMemberName(disk: string, index: number): string {
  return `${disk}/${String(index).padStart(8, "0")}`;
}
