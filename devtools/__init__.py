"""Development tools (a private ActiveMQ broker, `nettel serve` subprocesses); not in the wheel."""
