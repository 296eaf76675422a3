"""Data loss prevention: classification policy, redaction, and the gate in front of embeddings."""
