"""One module per measurement; each has NAME and `run(ctx) -> MeasurementResult`."""
