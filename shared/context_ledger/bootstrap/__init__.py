"""The first organisation of a deployed stack and its administrator's API key (docs/deploy.md).

A deployed database sits in private subnets, out of reach of ``context-ledger org create``; the
operator invokes ``MigrateFunction`` with ``{"action": "bootstrap", ...}`` instead, which only a
principal allowed ``lambda:InvokeFunction`` on it can do (docs/decisions.md, "The first
organisation of a deployed stack").
"""
