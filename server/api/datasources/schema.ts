// What the datasources router accepts and returns. Samples travel as columns (one time axis, one array per
// datasource): an hour of nine datasources is a few tens of kB every 5 s, not a few hundred.
import { z } from "zod";

/** The chart ranges the console offers: 5 min, 15 min, 1 h. */
export const SERIES_RANGES = [300, 900, 3600] as const;

export const ZSeriesSchema = z.object({
  srRef: z.string().trim().min(1, "Name an SR").max(255),
  rangeSeconds: z.union(SERIES_RANGES.map((range) => z.literal(range))),
});

export const ZDatasourceInfo = z.object({
  name: z.string(),
  description: z.string(),
  /** Units of the sampled values: "B", "B/s", "requests/s", "ms". */
  units: z.string(),
  kind: z.enum(["gauge", "rate"]),
});

export const ZSeriesResponse = z.object({
  srRef: z.string(),
  rangeSeconds: z.number(),
  intervalSeconds: z.number(),
  /** Time of each sample, in ms since the epoch, oldest first. */
  t: z.array(z.number()),
  /** Per datasource, one value per sample (null: none, e.g. a rate's first reading). */
  values: z.record(z.string(), z.array(z.number().nullable())),
  datasources: z.array(ZDatasourceInfo),
  /** The last sampling failure in words while it lasts; the samples before it are still there. */
  error: z.string().nullable(),
});

export type TSeriesSchema = z.infer<typeof ZSeriesSchema>;
export type TSeriesResponse = z.infer<typeof ZSeriesResponse>;
export type TDatasourceInfo = z.infer<typeof ZDatasourceInfo>;
