"""Context Ledger: ranked, budgeted, permission-trimmed context with an evidence chain."""

#: read by setuptools for the distribution, and by the code where no distribution is installed
#: (the Lambda layer is the package folder): the MCP server names itself with it
__version__ = "0.1.0"
