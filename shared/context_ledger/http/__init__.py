"""HTTP edge: FastAPI routers per endpoint group, request models, errors, the Lambda adapter."""
