"""The local runtime: the SAM template on one machine, without Docker or cloud."""
