"""The model gateway: an OpenAI-compatible proxy that joins a model call to its retrieval.

``headers`` checks the ``X-Keystone-*`` request headers before anything is sent; ``provider``
forwards the call; ``usage`` reads the token usage the provider reported; ``linking`` resolves
the named retrieval and appends the link to its chain; ``calls`` is the model call log;
``service`` runs a call from request to log line.
"""
