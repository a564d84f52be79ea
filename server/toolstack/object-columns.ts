// What the object store keeps beside each record, computed from the record on every write (and by the
// migrations that added them, for the rows already there): the columns lookups go by without reading records.
import { taskExpiry } from "./task-expiry.ts";
import type { XenRecord } from "../xenapi/values.ts";

/** The classes whose objects expire, and when (ms). */
const EXPIRY: Readonly<Record<string, (record: XenRecord) => number | null>> = { task: taskExpiry };

/** When housekeeping may remove the object (ms); null: never. */
export const expiryOf = (cls: string, record: XenRecord): number | null => EXPIRY[cls]?.(record) ?? null;

/** The classes whose status pages go by (task.hangar_get_page), and a counter is kept for. */
const STATUSED: ReadonlySet<string> = new Set(["task"]);

/** The object's status (a task's pending, success…); null for the classes that have none. */
export const statusOf = (cls: string, record: XenRecord): string | null => (STATUSED.has(cls) ? String(record.status ?? "") : null);

export const descriptionOf = (record: XenRecord): string => String(record.name_description ?? "");

/** The counter of a class's objects ('objects:<class>'), or of those with one status ('objects:<class>:<status>'). */
export const counterOf = (cls: string, status?: string): string => (status === undefined ? `objects:${cls}` : `objects:${cls}:${status}`);
