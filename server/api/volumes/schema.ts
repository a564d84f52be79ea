// Inputs and outputs of the volumes router. Sizes are bytes; the UI converts from GiB / MiB.
import { z } from "zod";

const ZRef = z.string().trim().min(1, "Choose an SR.").max(200);
const ZUuid = z.string().trim().min(1, "Which volume?").max(200);
const ZKey = z.string().min(1, "Which volume?").max(255);

/** A size in bytes: a whole, positive number a JavaScript number holds exactly. */
export const ZSize = z
  .number({ error: "The size must be a number." })
  .refine((n) => Number.isFinite(n), "The size must be a number.")
  .refine((n) => n > 0, "The size must be more than zero.")
  .refine((n) => Number.isInteger(n), "The size must be a whole number of bytes.")
  .refine((n) => n <= Number.MAX_SAFE_INTEGER, "The size is too large.");

export const ZListVolumesSchema = z.object({ srRef: ZRef });

export const ZVolumeRow = z.object({
  key: z.string(),
  uuid: z.string(),
  name: z.string(),
  description: z.string(),
  virtualSize: z.number(),
  physicalUtilisation: z.number(),
  readWrite: z.boolean(),
  sharable: z.boolean(),
  /** Every metadata pair on the volume, as the plugin lists it. */
  keys: z.record(z.string(), z.string()),
  /** The XenAPI other_config kept in those keys: what the key/value editor edits. */
  otherConfig: z.record(z.string(), z.string()),
  cbtEnabled: z.boolean(),
  /** Data, CBT_Metadata (data destroyed) or Data_and_CBT_Metadata; null when the plugin does not say. */
  volumeType: z.string().nullable(),
  isSnapshot: z.boolean(),
  /** The original of a snapshot; null for a volume that is no snapshot, or whose original is gone. */
  snapshotOf: z.object({ key: z.string(), uuid: z.string(), name: z.string() }).nullable(),
  /** RFC 3339 or xapi's form, as kept on the volume; null when unknown. */
  snapshotTime: z.string().nullable(),
});
export type TVolumeRow = z.infer<typeof ZVolumeRow>;

export const ZListVolumesResponse = z.object({
  sr: z.object({ ref: z.string(), uuid: z.string(), name: z.string(), type: z.string() }),
  /** The plugin's features, for the UI to offer only what the SR can do (VDI_REVERT, VDI_CONFIG_CBT…). */
  features: z.array(z.string()),
  volumes: z.array(ZVolumeRow),
});
export type TListVolumesResponse = z.infer<typeof ZListVolumesResponse>;

export const ZStatVolumeSchema = z.object({ srRef: ZRef, key: ZKey });

export const ZCompareVolumesSchema = z
  .object({ srRef: ZRef, a: ZKey, b: ZKey })
  .refine((input) => input.a !== input.b, { message: "Choose two different volumes.", path: ["b"] });

export const ZCompareVolumesResponse = z.object({
  /** Bytes per block. */
  blocksize: z.number(),
  /** Blocks of the first volume (its virtual size in blocks). */
  totalBlocks: z.number(),
  /** Blocks that differ, counted. */
  changedBlocks: z.number(),
  /** [first block, count] runs of differing blocks, in order. */
  ranges: z.array(z.tuple([z.number(), z.number()])),
});
export type TCompareVolumesResponse = z.infer<typeof ZCompareVolumesResponse>;

export const ZCreateVolumeSchema = z.object({
  srRef: ZRef,
  name: z.string().trim().min(1, "Give the volume a name.").max(255, "The name is too long (255 characters at most)."),
  description: z.string().max(1024, "The description is too long (1024 characters at most).").default(""),
  size: ZSize,
});

export const ZVolumeSchema = z.object({ srRef: ZRef, uuid: ZUuid });

/** A clone may be named at once (it starts with its original's name). */
export const ZCloneVolumeSchema = ZVolumeSchema.extend({
  name: z.string().trim().min(1, "Give the clone a name.").max(255, "The name is too long (255 characters at most).").optional(),
});

export const ZResizeVolumeSchema = ZVolumeSchema.extend({ size: ZSize });

export const ZCopyVolumeSchema = ZVolumeSchema.extend({ destSrRef: ZRef });

export const ZRenameVolumeSchema = ZVolumeSchema.extend({
  name: z.string().trim().min(1, "Give the volume a name.").max(255, "The name is too long (255 characters at most)."),
  description: z.string().max(1024, "The description is too long (1024 characters at most)."),
});

export const ZAddVolumeKeySchema = ZVolumeSchema.extend({
  key: z.string().trim().min(1, "Give the key a name.").max(255, "The key is too long (255 characters at most)."),
  value: z.string().max(4096, "The value is too long (4096 characters at most)."),
});

export const ZRemoveVolumeKeySchema = ZVolumeSchema.extend({ key: z.string().min(1).max(255) });

export const ZSetCbtSchema = ZVolumeSchema.extend({ enabled: z.boolean() });

/** A change done: the volume it made or changed, when there is one. */
export const ZVolumeChangeResponse = z.object({ uuid: z.string().nullable(), task: z.string() });
export type TVolumeChangeResponse = z.infer<typeof ZVolumeChangeResponse>;

/** A change left running (a copy): the task to follow on the task page. */
export const ZTaskStartedResponse = z.object({ task: z.string() });

export const ZCopyTargetsResponse = z.array(
  z.object({ ref: z.string(), name: z.string(), type: z.string(), freeSpace: z.number().nullable(), isDefault: z.boolean() }),
);
export type TCopyTargetsResponse = z.infer<typeof ZCopyTargetsResponse>;
