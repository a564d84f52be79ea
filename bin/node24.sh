# Sourced by launchers after they set HANGAR_ROOT: sets NODE24 to a Node >= 24, the project's pinned one first.
NODE24=node
for candidate in "$HANGAR_NODE" "$HANGAR_ROOT/node_modules/node/bin/node"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then NODE24=$candidate; break; fi
done
# Node caches compiled (and type-stripped) modules here, under the run dir as server/config.ts places it: a
# plugin call then starts in tens of ms, not hundreds.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-${HANGAR_RUN_DIR:-${HANGAR_DATA_DIR:-$HANGAR_ROOT/data}/run}/compile-cache}"
