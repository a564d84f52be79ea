// Cross-site requests that would change something are refused (CSRF): a browser sends Origin with every POST,
// PATCH and DELETE, and Sec-Fetch-Site with every request; one naming another site is not the console's own
// page. A client that is no browser (the CLI, scripts) sends neither and carries no cookie a site could ride.

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Why a request is refused as cross-site, or undefined when it may go on. */
export function crossSiteRefusal(method: string, headers: Headers): string | undefined {
  if (SAFE_METHODS.has(method.toUpperCase())) return undefined;
  const origin = headers.get("origin");
  if (origin !== null) {
    const host = headers.get("x-forwarded-host") ?? headers.get("host");
    let from: string;
    try {
      from = new URL(origin).host;
    } catch {
      return `Origin ${origin} is not an origin: refused.`;
    }
    if (host === null || from !== host) return `A request from ${origin} may not change anything here: use the console's own pages.`;
    return undefined;
  }
  const site = headers.get("sec-fetch-site");
  if (site !== null && site !== "same-origin" && site !== "none") return "A request from another site may not change anything here: use the console's own pages.";
  return undefined;
}
