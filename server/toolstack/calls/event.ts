// event.from (classes, token, timeout) and event.inject, as xapi's clients use them to wait on tasks and
// keep caches; event.get_current_id for older clients.
import { method } from "../methods.ts";
import { zFloat, zRef, zString, zStringList } from "../../xenapi/params.ts";
import { xenErrors } from "../../xenapi/errors.ts";

/** Longest event.from wait honoured, whatever the client asks (its HTTP request stays open that long). */
const MAX_TIMEOUT_S = 60;

export const eventCalls = [
  method("event.from", [["classes", zStringList], ["token", zString], ["timeout", zFloat]], async ({ ts }, classes, token, timeout) => {
    const batch = await ts.events.from(classes, token, Math.min(timeout, MAX_TIMEOUT_S));
    return { events: batch.events, valid_ref_counts: batch.valid_ref_counts, token: batch.token };
  }, { async: false }),
  method("event.inject", [["class", zString], ["ref", zRef]], async ({ ts }, name, ref) => {
    const cls = ts.events.canonicalClass(name);
    if (cls === undefined) throw xenErrors.invalidValue("class", name);
    const stored = await ts.objects.find(cls, ref);
    // The token just before the injected event, as xapi answers: the next event.from holds it (a barrier).
    return String((await ts.events.record(cls, ref, "mod", stored?.record ?? null)) - 1);
  }, { async: false }),
  method("event.get_current_id", [], ({ ts }) => ts.events.currentToken(), { async: false }),
];
