// Settings shared by the console's upload and download spools.

const DAY_S = 24 * 3600;

/** How long an ended transfer's spool is kept after its last use: HANGAR_TRANSFER_RETENTION_S (0: at once), default 1 day. */
export function transferRetentionMs(): number {
  const text = process.env.HANGAR_TRANSFER_RETENTION_S;
  const seconds = Number(text);
  return (text !== undefined && text !== "" && Number.isFinite(seconds) && seconds >= 0 ? seconds : DAY_S) * 1000;
}

/** Free space the spools leave on the console's disk: HANGAR_TRANSFER_MIN_FREE_MB, default 1024 (1 GiB). */
export function transferMinFreeBytes(): number {
  const text = process.env.HANGAR_TRANSFER_MIN_FREE_MB;
  const mb = Number(text);
  return (text !== undefined && text !== "" && Number.isFinite(mb) && mb >= 0 ? mb : 1024) * 1024 * 1024;
}
