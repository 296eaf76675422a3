#!/usr/bin/env bash
# `make demo`: start the local runtime on its own home, walk through the README's steps with curl,
# then keep serving until Ctrl-C (DEMO_EXIT=1 stops right after the walk-through).
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTEXT_LEDGER_HOME="${CONTEXT_LEDGER_HOME:-.context-ledger-demo}"
PORT="${PORT:-3000}"
API="http://127.0.0.1:$PORT"
CL=.venv/bin/context-ledger
mkdir -p "$CONTEXT_LEDGER_HOME"

"$CL" dev --port "$PORT" >"$CONTEXT_LEDGER_HOME/dev.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 150); do
  curl -s -o /dev/null "$API/api/v1/context/spaces" && break
  kill -0 "$server" 2>/dev/null || { cat "$CONTEXT_LEDGER_HOME/dev.log"; exit 1; }
  sleep 0.2
done

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
json() { .venv/bin/python -c "import json,sys; print(json.load(sys.stdin)$1)"; }
call() { curl -sS -w '\n(HTTP %{http_code})\n' "$@"; }

step "Create an organisation (prints ORG_ID, ORG_SPACE_ID, ADMIN_TOKEN)"
eval "$("$CL" org create "Acme Demo")"
echo "ORG_ID=$ORG_ID"

step "Create a team space as the organisation admin"
TEAM_ID=$(curl -sS -X POST "$API/api/v1/context/spaces" -H "Authorization: Bearer $ADMIN_TOKEN" \
  -H 'Content-Type: application/json' -d '{"name":"Payments","level":"team"}' | json '["id"]')
echo "TEAM_ID=$TEAM_ID"

step "Create a project under it"
call -X POST "$API/api/v1/context/spaces" -H "Authorization: Bearer $ADMIN_TOKEN" \
  -H 'Content-Type: application/json' \
  -d "{\"name\":\"Billing service\",\"level\":\"project\",\"parentId\":\"$TEAM_ID\"}"

step "Let alice search the team (and so the project below it)"
call -X PUT "$API/api/v1/context/spaces/$TEAM_ID/grants" -H "Authorization: Bearer $ADMIN_TOKEN" \
  -H 'Content-Type: application/json' \
  -d '{"subject":"user:alice","permissions":["context:space:search"]}'

step "Alice's token, and the spaces she can see (her personal space is created on first use)"
ALICE_TOKEN=$("$CL" token --org "$ORG_ID" --user alice)
call "$API/api/v1/context/spaces" -H "Authorization: Bearer $ALICE_TOKEN"

step "A bad token is a 401 with a clear error"
call "$API/api/v1/context/spaces" -H "Authorization: Bearer not-a-token"

if [ "${DEMO_EXIT:-0}" = 1 ]; then exit 0; fi
step "Serving on $API (home $CONTEXT_LEDGER_HOME); Ctrl-C stops"
wait "$server"
