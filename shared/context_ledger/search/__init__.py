"""Search backends (exact cosine in SQL, pgvector HNSW), full-text and hybrid fusion."""
