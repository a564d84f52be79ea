// Checks an upload before any byte is accepted: a file name an import can take, a known size, and an SR that
// exists, is attached (on a host that is live) and has room for it.
import { z } from "zod";
import { formatBytes } from "../../../lib/format.ts";
import { hostLabel, ZHostRecord } from "../../xenapi/hosts.ts";
import { zInt64, type XenApiClient } from "../../xenapi/client.ts";
import { XenApiError } from "../../xenapi/errors.ts";

/** A refusal with the HTTP status and the words the browser shows. */
export class UploadRefusal extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/**
 * XVA (plain, gzip, zstd) and legacy package tars; OVAs (an OVF dropped with its disks reaches the console packed
 * as one); disk images. The name only admits the upload: what the file is, is read from its bytes.
 */
export const IMPORTABLE_NAME = /\.(xva|xva\.gz|xva\.zst|xva\.zstd|tar|tar\.gz|tgz|tar\.zst|ova|vmdk|vhd|vhdx|qcow2|qcow|raw|img)$/i;

const zPbd = z.looseObject({ host: z.string().default(""), currently_attached: z.boolean() });

const zSr = z.looseObject({
  uuid: z.string(),
  name_label: z.string(),
  content_type: z.string(),
  physical_size: zInt64,
  physical_utilisation: zInt64,
  PBDs: z.array(z.string()),
});

export interface UploadTarget {
  ref: string;
  name: string;
}

export async function checkUpload(xapi: XenApiClient, input: { fileName: string | undefined; sr: string | undefined; size: number | undefined }): Promise<UploadTarget> {
  const fileName = input.fileName?.trim() ?? "";
  if (fileName === "") throw new UploadRefusal(400, "The upload has no file name.");
  if (!IMPORTABLE_NAME.test(fileName)) throw new UploadRefusal(415, `${fileName} is not a file the console imports: choose an .xva (plain, .gz or .zst), an .ova, an .ovf with its disks, a disk image (.vmdk, .vhd, .vhdx, .qcow2, .raw, .img) or a legacy package .tar.`);
  if (input.size === undefined) throw new UploadRefusal(400, "The upload must declare its size (Upload-Length).");
  if (input.size === 0) throw new UploadRefusal(400, `${fileName} is empty.`);
  if (input.sr === undefined || input.sr === "") throw new UploadRefusal(400, "Choose the SR to import into.");
  let ref = input.sr;
  let record: z.infer<typeof zSr>;
  try {
    if (!ref.startsWith("OpaqueRef:")) ref = await xapi.call(z.string(), "SR.get_by_uuid", ref);
    record = await xapi.call(zSr, "SR.get_record", ref);
  } catch (error) {
    if (error instanceof XenApiError && (error.code === "HANDLE_INVALID" || error.code === "UUID_INVALID")) throw new UploadRefusal(404, "That SR no longer exists: choose another.");
    if (error instanceof XenApiError && error.code === "SESSION_INVALID") throw new UploadRefusal(401, "Your session has ended: log in again.");
    throw error;
  }
  if (record.content_type === "iso") throw new UploadRefusal(400, `${record.name_label} is an ISO library: choose an SR for VM disks.`);
  const pbds = await Promise.all(record.PBDs.map((pbd) => xapi.call(zPbd, "PBD.get_record", pbd).catch(() => undefined)));
  const attached = pbds.filter((pbd) => pbd?.currently_attached === true);
  if (attached.length === 0) throw new UploadRefusal(409, `${record.name_label} is not attached: attach it or choose another SR.`);
  // In a pool: the host it is attached on takes the import, and an offline one cannot.
  const hosts = await Promise.all(attached.map((pbd) => xapi.call(ZHostRecord, "host.get_record", pbd!.host).catch(() => undefined)));
  const offline = hosts.find((host) => host?.live === false);
  if (offline !== undefined && hosts.every((host) => host?.live === false)) {
    throw new UploadRefusal(409, `${record.name_label} is on the host ${hostLabel({ name: offline.name_label, address: offline.address })}, which is offline: choose another SR, or wait for the host to be back.`);
  }
  const free = record.physical_size - record.physical_utilisation;
  if (record.physical_size > 0 && input.size > free) {
    throw new UploadRefusal(413, `${fileName} (${formatBytes(input.size)}) is larger than the free space of ${record.name_label} (${formatBytes(Math.max(0, free))}).`);
  }
  return { ref, name: record.name_label };
}
