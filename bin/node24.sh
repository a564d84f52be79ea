# Sourced by launchers after they set HANGAR_ROOT: sets NODE24 to a Node >= 24, the project's pinned one first.
NODE24=node
for candidate in "$HANGAR_NODE" "$HANGAR_ROOT/node_modules/node/bin/node"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then NODE24=$candidate; break; fi
done
# Node caches compiled (and type-stripped) modules here: a plugin call then starts in tens of ms, not hundreds.
# Beside the code it is compiled from, not in the data dir: Node makes the directory as it starts, so a call
# made after a test removed its data dir (a task's clean-up running on) brought <data dir>/run back.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$HANGAR_ROOT/node_modules/.cache/compile-cache}"
# V8's young generation kept small and the old one allowed to double, for the long-running servers
# (`hangar serve`, the console): their transfers arrive through Node's HTTP server in a new 64 KiB buffer per
# socket read, and with V8's defaults each few MiB of them set off a full collection of the whole heap (75
# per GiB in the console). With these the buffers die in cheap young collections. Measured: the console's CPU
# per GiB uploaded 8–14 -> 2.3–2.9 s; the toolstack's own per GiB imported 2.6–3.0 -> 1.5–1.7 s; the XVA
# suite 532 -> 654 MB/s export, 246 -> 264 MB/s import (uncompressed), peak RSS 330 -> 305 MiB (4 GiB disk).
HANGAR_V8_FLAGS="--max-semi-space-size=1 --heap-growing-percent=100"
