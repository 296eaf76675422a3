"""Text as budgets count it: cl100k_base tokens and fitting ranked items into a token budget.

A bottom floor: chunking, DLP delivery, retrieval and memory all count tokens, and none of them
may import another for it.
"""
