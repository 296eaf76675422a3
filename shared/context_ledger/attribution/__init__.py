"""Attribution: the event a retrieval publishes, the writer that records it, the lookup rows."""
