"""Where the embeddings endpoint sits: ``in_deployment``, ``external`` or ``none``.

The spec: an endpoint is external unless its host is loopback or listed in
``KEYSTONE_CONTEXT_EMBEDDINGS_INTERNAL_HOSTS``, or ``KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL=false``
says otherwise. We read the explicit setting both ways: ``false`` makes any host internal, and
``true`` makes even a loopback host external, because a loopback proxy in front of a hosted API
sends text out of the deployment all the same. Unset, the host decides.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from context_ledger.settings import Settings

Locality = Literal["in_deployment", "external", "none"]


def locality(settings: Settings) -> Locality:
    """The configured endpoint's locality, as ``GET /api/v1/context/status`` reports it."""
    if not settings.embeddings_url:
        return "none"
    if settings.embeddings_external is not None:
        return "external" if settings.embeddings_external else "in_deployment"
    host = urlsplit(settings.embeddings_url).hostname
    return "in_deployment" if host and settings.is_internal_host(host) else "external"
