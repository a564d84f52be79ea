// This host's datasource files (rrdd protocol v2, written by its plugins into its metrics dir) served to the
// pool and the console: GET /metrics/<uid>, the file SR.stat names `xeno+shm:///<uid>`. The same credentials
// as /plugins: the pool's secret or a session.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { metricsDir } from "../config.ts";
import { isDatasourceUid } from "../storage/rrdd.ts";
import { type Route, send } from "./http.ts";
import { admitted } from "./plugin-service.ts";

export const metricsRoute: Route = async (ts, request, response, url) => {
  request.resume();
  if (!(await admitted(ts, request, url))) return send(response, 401, "text/plain", "the datasources of a pool host need the pool's secret or a session (session_id)\n");
  const [, , uid, ...rest] = url.pathname.split("/");
  const name = decodeURIComponent(uid ?? "");
  if (request.method !== "GET" || rest.length > 0 || !isDatasourceUid(name)) {
    return send(response, 404, "text/plain", "GET /metrics/<uid> answers the datasource file xeno+shm:///<uid>\n");
  }
  let bytes: Buffer;
  try {
    bytes = await readFile(join(metricsDir(), name));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    return send(response, 404, "text/plain", `no datasource file ${name} on this host\n`);
  }
  response.writeHead(200, { "content-type": "application/octet-stream", "content-length": bytes.length, "cache-control": "no-store" });
  response.end(bytes);
};
