// The XenAPI classes beyond the core (sessions, tasks, events, system), each a Feature: its calls, event
// classes and start-up work. The order is the start-up order.
import type { Feature } from "./toolstack.ts";

export const TOOLSTACK_FEATURES: Feature[] = [];
