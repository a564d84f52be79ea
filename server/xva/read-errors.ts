// What reading an archive fails with (reader.ts exports them): here so that each step of the read can throw them.
import type { XvaChecksumKind } from "./format.ts";

export class XvaReadError extends Error {}

/** A block whose checksum member does not match; `member` names the data member. */
export class XvaChecksumError extends XvaReadError {
  readonly member: string;
  constructor(member: string, kind: XvaChecksumKind) {
    super(`${member}: ${kind} checksum mismatch`);
    this.member = member;
  }
}
