"""Sources, index versions, chunking, full-text preparation and the code graph."""
