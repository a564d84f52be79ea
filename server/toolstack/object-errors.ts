// XenAPI errors of the storage and VM classes, spelt and parameterised as xapi reports them (the core's own
// are in xenapi/errors.ts).
import { XenApiError } from "../xenapi/errors.ts";

export const objectErrors = {
  srOperationNotSupported: (sr: string) => new XenApiError("SR_OPERATION_NOT_SUPPORTED", [sr]),
  srHasPbd: (sr: string) => new XenApiError("SR_HAS_PBD", [sr]),
  pbdExists: (sr: string, host: string, pbd: string) => new XenApiError("PBD_EXISTS", [sr, host, pbd]),
  vdiLocationMissing: (sr: string, location: string) => new XenApiError("VDI_LOCATION_MISSING", [sr, location]),
  vdiCopyFailed: (reason: string) => new XenApiError("VDI_COPY_FAILED", [reason]),
  mirrorFailed: (vdi: string, reason: string) => new XenApiError("MIRROR_FAILED", [vdi, reason]),
  otherOperationInProgress: (cls: string, ref: string, operation: string) =>
    new XenApiError("OTHER_OPERATION_IN_PROGRESS", [cls, ref, operation]),
  mapDuplicateKey: (cls: string, field: string, ref: string, key: string) => new XenApiError("MAP_DUPLICATE_KEY", [cls, field, ref, key]),
  deviceAlreadyExists: (device: string) => new XenApiError("DEVICE_ALREADY_EXISTS", [device]),
  macInvalid: (mac: string) => new XenApiError("MAC_INVALID", [mac]),
  networkContainsVif: (vifs: readonly string[]) => new XenApiError("NETWORK_CONTAINS_VIF", vifs),
  memoryConstraintViolation: (constraint: string) => new XenApiError("MEMORY_CONSTRAINT_VIOLATION", [constraint]),
  valueNotSupported: (field: string, value: string, reason: string) => new XenApiError("VALUE_NOT_SUPPORTED", [field, value, reason]),
  taskInterrupted: (task: string, reason: string) => new XenApiError("TASK_INTERRUPTED", [task, reason]),
};
