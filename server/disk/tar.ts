// xapi's one-disk tar (format=tar of /import_raw_vdi and /export_raw_vdi): an XVA's disk members without ova.xml.
// 1 MiB members `<prefix>/NNNNNNNN` in counter order, each optionally followed by its `.xxhash` or `.checksum`
// member, verified before the block is handed on; counter gaps are zero blocks; the block holding the disk's last
// byte always comes. The tar says no size: the disk is the VDI it goes into. Hangar's delta (export with `base`)
// names its members `delta/NNNNNNNN`: only the blocks that differ from the base, gaps left as the target holds them.
import { TarMembers } from "../xva/tar-members.ts";
import { XvaReadError } from "../xva/read-errors.ts";
import { XvaBlocks } from "../xva/xva-blocks.ts";
import type { ByteReader } from "./byte-reader.ts";
import type { DiskImage, DiskRun } from "./image.ts";

/** The member prefix of a whole disk's tar (what xapi's import looks for) and of a delta's. */
export const TAR_PREFIX = { whole: "vdi", delta: "delta" } as const;

/** Opens a one-disk tar arriving on `reader`, for a disk of `virtualSize` bytes. */
export async function openDiskTar(reader: ByteReader, virtualSize: number): Promise<DiskImage> {
  const first = (await reader.peek(100)).toString("latin1").replace(/\0.*$/s, "");
  if (first === "ova.xml") throw new XvaReadError("the tar begins with ova.xml: it is a VM export (XVA); import it with PUT /import");
  const delta = first.startsWith(`${TAR_PREFIX.delta}/`);
  return { format: "tar", virtualSize, differencing: delta, runs: runs(reader, virtualSize, delta) };
}

async function* runs(reader: ByteReader, virtualSize: number, delta: boolean): AsyncGenerator<DiskRun> {
  const members = new TarMembers(reader.rest());
  let disk: string | undefined;
  const sizeOf = (ref: string, member: string) => {
    disk ??= ref;
    if (ref !== disk) throw new XvaReadError(`${member}: a second disk (${ref}, after ${disk}) in a one-disk tar`);
    return virtualSize;
  };
  let end = 0;
  try {
    for await (const { block } of new XvaBlocks(members, sizeOf, { force: false, blockBuffers: { take: (size) => Buffer.allocUnsafe(size) }, delta }).read()) {
      if (block.offset > end && !delta) yield { offset: end, zeros: block.offset - end };
      yield { offset: block.offset, data: block.data };
      end = block.offset + block.data.length;
    }
    if (disk === undefined) throw new XvaReadError("the tar holds no disk block");
  } finally {
    members.close();
  }
}
