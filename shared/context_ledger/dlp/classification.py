"""How sensitive a source is: what its DLP action (``dlp/policy.py``) is chosen by.

Owned by DLP, not by sources: the policy, the embeddings gate and delivery decide by it, and a
source only records the one it was given.
"""

from __future__ import annotations

from enum import StrEnum


class Classification(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"
    REGULATED = "regulated"
