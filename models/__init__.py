"""The shipped model bundle (`models/bundle`): data only; `service.model` reads it."""
