"""Print a retrieve answer (JSON on stdin) as a table: used by scripts/demo.sh. The table is the
client package's, the one `context-ledger search` prints."""

import json
import sys

from context_ledger_client import RetrieveResult, retrieval_table

body = json.load(sys.stdin)
if "error" in body:
    sys.exit(f"error: {body['error']}")
print(retrieval_table(RetrieveResult.from_json(body)))
