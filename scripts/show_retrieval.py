"""Print a retrieve answer (JSON on stdin) as a table: used by scripts/demo.sh."""

import json
import sys

body = json.load(sys.stdin)
if "error" in body:
    sys.exit(f"error: {body['error']}")
print(f"{'path (symbol or heading)':<60} {'level':<8} {'score':>6} {'tokens':>6}  related")
for chunk in body["chunks"]:
    name = chunk["path"] + (f" ({chunk['title']})" if chunk["title"] else "")
    relation = chunk["metadata"].get("relatedRelation", "")
    level, score, tokens = chunk["level"], chunk["score"], chunk["tokens"]
    print(f"{name[:60]:<60} {level:<8} {score:>6.3f} {tokens:>6}  {relation}")
print(
    f"tokensUsed {body['tokensUsed']}  requestId {body['requestId']}  "
    f"attributionId {body['attributionId']}"
)
