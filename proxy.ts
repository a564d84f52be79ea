// Sends anonymous visitors of console pages to the login page (and back afterwards). API routes and uploads
// are not matched: they refuse anonymous callers themselves, and the proxy would buffer their bodies.
import { type NextRequest, NextResponse } from "next/server";
import { PATH_HEADER } from "@/server/auth/current.ts";
import { SESSION_COOKIE, sessionFromCookie } from "@/server/auth/session.ts";

export function proxy(request: NextRequest): NextResponse {
  const { pathname, search } = request.nextUrl;
  const here = `${pathname}${search}`;
  if (sessionFromCookie(request.cookies.get(SESSION_COOKIE)?.value) === undefined) {
    const login = new URL("/login", request.url);
    if (pathname !== "/") login.searchParams.set("next", here);
    return NextResponse.redirect(login);
  }
  const forwarded = new Headers(request.headers);
  forwarded.set(PATH_HEADER, here);
  return NextResponse.next({ request: { headers: forwarded } });
}

export const config = {
  matcher: ["/((?!api/|_next/|login|icon\\.svg|favicon\\.ico).*)"],
};
