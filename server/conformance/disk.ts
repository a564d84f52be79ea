// Block I/O on a volume through what Datapath.attach handed out: File and BlockDevice paths are opened
// directly, Nbd URIs with our NBD client. HvDisk is for a hypervisor's ring, which a test cannot drive.
import { open, type FileHandle } from "node:fs/promises";
import { NbdClient } from "../nbd/client.ts";
import { FLAG_SEND_FLUSH } from "../nbd/protocol.ts";
import type { Implementation } from "../storage/types.ts";

export type ImplementationKind = Implementation[0];

export interface Disk {
  readonly kind: ImplementationKind;
  /** Where the bytes are reached (path or NBD URI), for messages. */
  readonly location: string;
  read(offset: number, length: number): Promise<Buffer>;
  write(offset: number, data: Buffer): Promise<void>;
  flush(): Promise<void>;
  close(): Promise<void>;
}

const USABLE: readonly ImplementationKind[] = ["File", "BlockDevice", "Nbd"];

/** The first implementation, in the plugin's order, that the suite can do I/O on; `prefer` kinds first. */
export function chooseImplementation(implementations: readonly Implementation[], prefer: readonly ImplementationKind[] = []): Implementation | undefined {
  for (const kind of prefer) {
    const found = implementations.find((impl) => impl[0] === kind);
    if (found !== undefined) return found;
  }
  return implementations.find((impl) => USABLE.includes(impl[0]));
}

export async function openDisk(implementation: Implementation, options: { readOnly?: boolean } = {}): Promise<Disk> {
  switch (implementation[0]) {
    case "File":
    case "BlockDevice":
      return openPath(implementation[0], implementation[1].path, options.readOnly ?? false);
    case "Nbd":
      return openNbd(implementation[1].uri);
    case "HvDisk":
      throw new Error("an HvDisk implementation is for a hypervisor ring and cannot be read here");
  }
}

async function openPath(kind: ImplementationKind, path: string, readOnly: boolean): Promise<Disk> {
  const handle: FileHandle = await open(path, readOnly ? "r" : "r+");
  return {
    kind,
    location: path,
    async read(offset, length) {
      const target = Buffer.alloc(length);
      for (let done = 0; done < length; ) {
        const { bytesRead } = await handle.read(target, done, length - done, offset + done);
        if (bytesRead === 0) throw new Error(`${path} ends before byte ${offset + length}`);
        done += bytesRead;
      }
      return target;
    },
    async write(offset, data) {
      for (let done = 0; done < data.length; ) {
        const { bytesWritten } = await handle.write(data, done, data.length - done, offset + done);
        done += bytesWritten;
      }
    },
    flush: () => handle.datasync(),
    close: () => handle.close(),
  };
}

async function openNbd(uri: string): Promise<Disk> {
  const client = await NbdClient.connect(uri);
  return {
    kind: "Nbd",
    location: uri,
    read: (offset, length) => client.read(offset, length),
    write: (offset, data) => client.write(offset, data),
    // A server that does not offer flush writes through; asking anyway would be a protocol error.
    flush: async () => ((client.flags & FLAG_SEND_FLUSH) !== 0 ? client.flush() : undefined),
    close: () => client.close(),
  };
}
