"""Rate limits and quotas: per organisation, per API key, and the memory API's per credential.

``buckets`` says what a request is counted against (pure), ``store`` counts it in PostgreSQL in
one statement (GCRA), and ``http/ratelimit.py`` applies both to every route of every API function.
"""
