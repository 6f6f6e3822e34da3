"""Network alarms: rules over link state and analysis, raised with hysteresis, kept in a book."""
