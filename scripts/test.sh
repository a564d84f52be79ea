#!/usr/bin/env bash
# `npm test`: everything CI checks, on a fresh clone, in order: system packages, npm packages, typecheck,
# lint, unit and integration tests, production build, browser tests. Prints the counts of each runner.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests drive for real (browser, NBD peers, python3 for fixture plugins and SCM_RIGHTS,
# PostgreSQL for the pool's database, an OpenLDAP directory for external authentication).
declare -A wanted=([chromium]=chromium [qemu-img]=qemu-utils [qemu-nbd]=qemu-utils [nbdkit]=nbdkit \
  [nbdinfo]=libnbd-bin [nbdcopy]=libnbd-bin [python3]=python3 [xxhsum]=xxhash \
  [xva-img]=xva-img [pigz]=pigz [zstd]=zstd [slapd]=slapd [ldapadd]=ldap-utils)
missing=()
for tool in "${!wanted[@]}"; do command -v "$tool" >/dev/null || missing+=("${wanted[$tool]}"); done
# PostgreSQL's server (the database tests start a throwaway cluster): Debian keeps it off the PATH.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
# libvhdi's Python binding: the VHD writer's tests read a differencing VHD through its parent with it.
/usr/bin/python3 -c 'import pyvhdi' 2>/dev/null || missing+=(python3-libvhdi)
if ((${#missing[@]})); then
  packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  if [ "$(id -u)" = 0 ]; then
    echo "== installing Debian packages: $packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null
  else
    echo "missing Debian packages: $packages (run as root to install them, or install them yourself)" >&2
    exit 1
  fi
fi

if [ ! -x node_modules/.bin/node ] || [ ! -x node_modules/.bin/next ]; then
  # npm install, not npm ci: this machine's npm writes lockfiles without other platforms' optional
  # packages, which npm ci then rejects as out of sync. The lockfile still pins every version used here.
  echo "== npm install"
  npm install --no-audit --no-fund
fi
export PATH="$PWD/node_modules/.bin:$PATH"
# No telemetry: this machine has no network beyond the package registries.
export NEXT_TELEMETRY_DISABLED=1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

echo "== bundle plugins"; node server/plugins/runtime/bundle.ts
echo "== typecheck"; tsc --noEmit -p .
echo "== lint"; eslint --max-warnings 0 .

echo "== unit and integration tests"
# The fuzz targets (*.fuzz.ts) run their short deterministic slice here; `npm run fuzz` runs them in full.
# Every test and hook ends within 10 minutes (an after-hook has no time-out of its own: one that hung after a
# failure held CI until it was killed), and the whole run within 45 (a file its handles keep alive is stopped,
# and the run fails saying so). Not --test-force-exit: it ends a file before its results are all reported (121
# tests of codec.test.ts became 106).
status=0
timeout --kill-after=30s 45m node --conditions=react-server --test --test-concurrency=2 --test-timeout=600000 --test-reporter=spec "server/**/*.test.ts" "server/**/*.fuzz.ts" "components/**/*.test.ts" "lib/**/*.test.ts" 2>&1 | tee "$logs/unit" || status=${PIPESTATUS[0]}
if [ "$status" = 124 ] || [ "$status" = 137 ]; then echo "the unit and integration tests did not finish within 45 minutes" >&2; fi
if [ "$status" != 0 ]; then exit "$status"; fi

echo "== production build"; next build
echo "== browser tests (Chromium)"
playwright test 2>&1 | tee "$logs/e2e"

unit_pass=$(grep -E '^ℹ pass [0-9]+' "$logs/unit" | awk '{print $3}')
unit_fail=$(grep -E '^ℹ fail [0-9]+' "$logs/unit" | awk '{print $3}')
e2e_pass=$(grep -oE '[0-9]+ passed' "$logs/e2e" | tail -1 | awk '{print $1}')
echo
echo "unit/integration: ${unit_pass:-0} passed, ${unit_fail:-0} failed; browser: ${e2e_pass:-0} passed"
echo "$(( ${unit_pass:-0} + ${e2e_pass:-0} )) passed, ${unit_fail:-0} failed"
