"""The retrieve use case: chain → search → rank → related → budget → attribution event."""
