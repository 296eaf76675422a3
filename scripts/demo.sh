#!/usr/bin/env bash
# `make demo`: the newcomer's first command. Starts the local stack on its own home (hybrid search
# with the stack's own MiniLM embeddings; EMBEDDINGS=none for full-text only), creates a demo
# organisation with a small space hierarchy and grants, ingests part of this repository's code and
# its docs, runs three retrievals and prints what they returned, then keeps serving with a
# ready-to-paste curl line (DEMO_EXIT=1 stops right after the walk-through).
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTEXT_LEDGER_HOME="${CONTEXT_LEDGER_HOME:-.context-ledger-demo}"
PORT="${PORT:-3000}"
API="http://127.0.0.1:$PORT"
export CONTEXT_LEDGER_URL="$API"
CL=.venv/bin/context-ledger
PY=.venv/bin/python
mkdir -p "$CONTEXT_LEDGER_HOME"
LOG="$CONTEXT_LEDGER_HOME/dev.log"

# The server started here, and only it: a port in use is its one-line error (it starts nothing
# then), and the walk-through waits for the line it prints once it listens, never for whatever
# answers on the port. Whatever ends this script (the end, an error, Ctrl-C, a kill) stops it and
# waits for it, so its database stops too.
: >"$LOG"  # before the server starts: its background redirection may open the file after grep reads
"$CL" dev --port "$PORT" --embeddings "${EMBEDDINGS:-minilm}" >"$LOG" 2>&1 &
server=$!
stop_server() { kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true; }
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
until grep -q '^context-ledger: serving on ' "$LOG"; do
  if ! kill -0 "$server" 2>/dev/null; then
    wait "$server" || status=$?
    # A refused start (the port, the configuration) is one line; anything else, the whole log.
    if [ "$(wc -l <"$LOG")" -le 1 ]; then cat "$LOG" >&2; else tail -n 40 "$LOG" >&2; fi
    exit "${status:-1}"
  fi
  sleep 0.2
done

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
post() { curl -sS -X POST "$API$1" -H "Authorization: Bearer $ADMIN_TOKEN" \
  -H 'Content-Type: application/json' -d "$2"; }
field() { "$PY" -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

# A second run on the same home takes up its organisation, spaces and sources again, so its
# ingest is a new build of the same sources: chunks whose text did not change keep their vectors
# (the indexer reuses them by content hash), and only what changed is embedded.
STATE="$CONTEXT_LEDGER_HOME/demo.env"
CODE_DIRS="shared/context_ledger/retrieval shared/context_ledger/spaces shared/context_ledger/evidence shared/context_ledger/search shared/context_ledger/sources/chunking"
reusable() {
  [ -s "$STATE" ] || return 1
  # shellcheck disable=SC1090
  . "$STATE"
  [ "${DEMO_CODE_DIRS:-}" = "$CODE_DIRS" ] || return 1
  ADMIN_TOKEN=$("$CL" token --org "$ORG_ID" --user admin --scope context:admin) || return 1
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$API/api/v1/context/sources/$CODE_ID" \
    -H "Authorization: Bearer $ADMIN_TOKEN")" = 200 ]
}

if reusable; then
  step "Organisation 'Acme Demo', its spaces and sources from the last run ($STATE)"
  echo "ORG_ID=$ORG_ID; department $DEPT_ID, team $TEAM_ID, project $PROJECT_ID"
else
  step "Organisation 'Acme Demo' with an admin token"
  eval "$("$CL" org create "Acme Demo")"
  echo "ORG_ID=$ORG_ID"

  step "Spaces: Engineering (department) > Platform (team) > context-ledger (project)"
  DEPT_ID=$(post /api/v1/context/spaces '{"name":"Engineering","level":"department"}' | field id)
  TEAM_ID=$(post /api/v1/context/spaces "{\"name\":\"Platform\",\"level\":\"team\",\"parentId\":\"$DEPT_ID\"}" | field id)
  PROJECT_ID=$(post /api/v1/context/spaces "{\"name\":\"context-ledger\",\"level\":\"project\",\"parentId\":\"$TEAM_ID\"}" | field id)
  echo "department $DEPT_ID, team $TEAM_ID, project $PROJECT_ID"

  step "alice may search the team (and so the project below it), not the department"
  curl -sS -o /dev/null -w 'grant: HTTP %{http_code}\n' -X PUT "$API/api/v1/context/spaces/$TEAM_ID/grants" \
    -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
    -d '{"subject":"user:alice","permissions":["context:space:search"]}'

  CODE_ID=$(post "/api/v1/context/spaces/$PROJECT_ID/sources" '{"kind":"codebase","name":"context-ledger code"}' | field id)
  DOCS_ID=$(post "/api/v1/context/spaces/$TEAM_ID/sources" '{"kind":"docs","name":"context-ledger docs"}' | field id)
  printf 'ORG_ID=%s\nDEPT_ID=%s\nTEAM_ID=%s\nPROJECT_ID=%s\nCODE_ID=%s\nDOCS_ID=%s\nDEMO_CODE_DIRS="%s"\n' \
    "$ORG_ID" "$DEPT_ID" "$TEAM_ID" "$PROJECT_ID" "$CODE_ID" "$DOCS_ID" "$CODE_DIRS" >"$STATE"
fi
ALICE_TOKEN=$("$CL" token --org "$ORG_ID" --user alice --client demo-cli)

# Part of the code, so the first run embeds in about a minute on two cores (MiniLM embeds ~15
# code chunks a second per core): the packages the three questions are about, copied with their
# repository paths and without bytecode. Code and docs are separate folders: no text is indexed
# twice. docs/ without decisions.md: its measured history is as long as the rest of docs/ twice
# over and none of the questions is about it.
step "Ingest this repository: five packages of shared/context_ledger into the project, docs/ into the team"
SNAPSHOT="$CONTEXT_LEDGER_HOME/demo-code"
DOCS_SNAPSHOT="$CONTEXT_LEDGER_HOME/demo-docs"
rm -rf "$SNAPSHOT" "$DOCS_SNAPSHOT" && mkdir -p "$SNAPSHOT" "$DOCS_SNAPSHOT"
# shellcheck disable=SC2086
tar -c --exclude=__pycache__ -f - $CODE_DIRS | tar -x -f - -C "$SNAPSHOT"
tar -c --exclude=decisions.md -f - -C docs . | tar -x -f - -C "$DOCS_SNAPSHOT"
CONTEXT_LEDGER_TOKEN=$ADMIN_TOKEN "$CL" ingest "$SNAPSHOT" --source "$CODE_ID"
CONTEXT_LEDGER_TOKEN=$ADMIN_TOKEN "$CL" ingest "$DOCS_SNAPSHOT" --source "$DOCS_ID"

show() { "$PY" scripts/show_retrieval.py; }
for query in "how is the evidence chain verified" "who may search a space grant inheritance" "split identifiers for full text search"; do
  step "alice retrieves: \"$query\""
  curl -sS -X POST "$API/api/v1/context/retrieve" -H "Authorization: Bearer $ALICE_TOKEN" \
    -H 'Content-Type: application/json' -H 'X-Keystone-Client: demo/1.0' \
    -d "{\"query\":\"$query\",\"spaceId\":\"$PROJECT_ID\",\"tokenBudget\":3000}" | show
done

if [ "${DEMO_EXIT:-0}" = 1 ]; then exit 0; fi
step "Serving on $API (home $CONTEXT_LEDGER_HOME); Ctrl-C stops. Try:"
cat <<CURL
ALICE_TOKEN='$ALICE_TOKEN'
curl -s -X POST $API/api/v1/context/retrieve -H "Authorization: Bearer \$ALICE_TOKEN" \\
  -H 'Content-Type: application/json' \\
  -d '{"query":"how are API keys verified","spaceId":"$PROJECT_ID","tokenBudget":2000}' | python3 -m json.tool
CURL
wait "$server"
