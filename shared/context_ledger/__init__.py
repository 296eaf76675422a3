"""Context Ledger: ranked, budgeted, permission-trimmed context with an evidence chain."""
