"""Agent memories (the memory API): entries with revisions in a project space, and /relevant."""
